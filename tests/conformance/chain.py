"""TFX's own example pipelines as their `*_pipeline_*.py` files build them, our chain after.

Each builder takes TFX's components exactly as the example wires them (its
ExampleGen, SchemaGen settings, module file unchanged, Transform and Trainer),
with fewer steps, and appends Distiller (built-in student) -> Pruner ->
Quantizer(full_integer) -> AccuracyGate (raw examples) -> AtomicPusher.
"""

import os
from typing import List, Sequence

import tensorflow as tf
import tfx as tfx_package
from tfx import v1 as tfx

from benchmarks import corpus
from tfx_distillery import AccuracyGate, AtomicPusher, Distiller, Pruner, Quantizer
from tfx_distillery.components import DistributedTrainer
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.pipelines import summary

TFX_ROOT = os.path.dirname(tfx_package.__file__)
PENGUIN_MODULE_FILE = os.path.join(TFX_ROOT, 'examples', 'penguin', 'penguin_utils_keras.py')
CHAIN = ('Distiller', 'Pruner', 'Quantizer', 'AccuracyGate', 'AtomicPusher')


def stock_front(example_gen, module_file: str, train_steps: int, eval_steps: int):
  """StatisticsGen, SchemaGen(infer_feature_shape=True), Transform, Trainer, as TFX wires them
  (the corpus benchmark's builder, benchmarks/corpus.py)."""
  components, _ = corpus.stock_front(example_gen, module_file, train_steps=train_steps,
                                     eval_steps=eval_steps)
  return components


def penguin_front(train_steps: int, eval_steps: int = 5) -> List:
  """TFX's penguin example: ImportExampleGen over its data in the wheel, its Keras module file.

  Returns the stock front (`stock_front`), ImportExampleGen first and the Trainer last.
  """
  return stock_front(corpus.penguin_example_gen(), PENGUIN_MODULE_FILE,
                     train_steps=train_steps, eval_steps=eval_steps)


# Gradient accumulation's micro-batches per step in the DistributedTrainers that run a stock
# module file's run_fn unchanged (#63).
MICRO_BATCHES = 4


def distributed_trainer(transform, schema_gen, module_file: str, node_id: str, **settings):
  """A DistributedTrainer of 20 steps on a stock front's Transform, with `settings` (its
  strategy, workers or micro-batches), added to a run that builds TFX's front anyway."""
  return DistributedTrainer(
      module_file=module_file, examples=transform.outputs['transformed_examples'],
      transform_graph=transform.outputs['transform_graph'],
      schema=schema_gen.outputs['schema'],
      train_args=tfx.proto.TrainArgs(num_steps=20), eval_args=tfx.proto.EvalArgs(num_steps=5),
      **settings).with_id(node_id)


def answers_to_raw_examples(model_uri: str, examples_uri: str, label_column: str):
  """A trained Model artifact's serving answers to 3 raw eval examples that, as serving
  requests do, lack `label_column`."""
  loaded = tf.saved_model.load(os.path.join(model_uri, 'Format-Serving'))
  raw = evaluation.read_serialized_examples(os.path.join(examples_uri, 'Split-eval', '*'),
                                            limit=3)
  return loaded.signatures['serving_default'](examples=tf.constant(
      [measuring.strip_feature(example, label_column) for example in raw]))


def our_chain(example_gen, transform, trainer, label_key: str, label_column: str,
              serving_dir: str, student_steps: int = 200, random_seed=None,
              **distiller_arguments) -> List:
  """Distiller -> Pruner -> Quantizer -> AccuracyGate -> AtomicPusher after a stock Trainer.

  `random_seed` seeds the three that train (None: each draws its own and records it).
  """
  label = {'label_key': label_key, 'label_column': label_column}
  seed = {'random_seed': random_seed}
  data = {'examples': transform.outputs['transformed_examples'],
          'transform_graph': transform.outputs['transform_graph']}
  distiller = Distiller(teacher_model=trainer.outputs['model'],
                        statistics=transform.outputs['post_transform_stats'],
                        train_args=tfx.proto.TrainArgs(num_steps=student_steps),
                        eval_args=tfx.proto.EvalArgs(num_steps=5),
                        **distiller_arguments, **data, **label, **seed)
  pruner = Pruner(model=distiller.outputs['model'], baseline_model=trainer.outputs['model'],
                  max_accuracy_drop=1.0, sparsities=(0.5,),
                  train_args=tfx.proto.TrainArgs(num_steps=20),
                  eval_args=tfx.proto.EvalArgs(num_steps=5), **data, **label, **seed)
  quantizer = Quantizer(model=pruner.outputs['pruned_model'], mode='full_integer',
                        raw_examples=example_gen.outputs['examples'],
                        representative_samples=32, latency_runs=5, **data, **label, **seed)
  gate = AccuracyGate(examples=example_gen.outputs['examples'],
                      transform_graph=transform.outputs['transform_graph'],
                      baseline_model=trainer.outputs['model'],
                      candidate_models=[distiller.outputs['model'],
                                        pruner.outputs['pruned_model'],
                                        quantizer.outputs['quantized_model']],
                      candidate_names=['student', 'pruned', 'int8'],
                      max_accuracy_drop=1.0, latency_runs=5, **label)
  pusher = AtomicPusher(model=gate.outputs['model'], model_blessing=gate.outputs['blessing'],
                        push_destination=tfx.proto.PushDestination(
                            filesystem=tfx.proto.PushDestination.Filesystem(
                                base_directory=serving_dir)))
  return [distiller, pruner, quantizer, gate, pusher]


def pipeline(name: str, root: str, components: Sequence,
             beam_pipeline_args: Sequence[str] = ()) -> tfx.dsl.Pipeline:
  return tfx.dsl.Pipeline(
      pipeline_name=name, pipeline_root=os.path.join(root, 'runs'), components=list(components),
      beam_pipeline_args=list(beam_pipeline_args),
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          os.path.join(root, 'metadata.sqlite')))


def output_uri(root: str, pipeline_name: str, node: str, type_name: str) -> str:
  """The latest artifact of `type_name` that `node` wrote in the pipeline run under `root`."""
  store = summary.open_store(os.path.join(root, 'metadata.sqlite'))
  return [artifact for artifact in summary.pipeline_artifacts(store, pipeline_name, type_name)
          if summary.producer_node(store, artifact) == node][-1].uri
