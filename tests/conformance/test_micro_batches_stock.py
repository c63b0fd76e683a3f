"""TFX's taxi and penguin module files, unchanged, in a DistributedTrainer with micro_batches=4,
and penguin's (a chain after its inputs) with strategy='pipeline'.

Each example's front is built as its pipeline file builds it (chain.stock_front: its
ExampleGen, StatisticsGen, SchemaGen, Transform with its module file); the DistributedTrainer
then runs the same module file's run_fn with 4 micro-batches per step.
"""

import os

import pytest
import tensorflow as tf
from tfx import v1 as tfx

from tfx_distillery.components import DistributedTrainer
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.pipelines import datasets
from tests import helpers
from tests.conformance import chain

# Long: two TFX pipelines' fronts (make test-e2e).
pytestmark = pytest.mark.e2e

MICRO_BATCHES = 4


def run_with_micro_batches(name, root, front, module_file, label_column, **strategy):
  """Runs the front and a DistributedTrainer on its module file.

  Returns:
    The progress lines, and the trained model's answers to 3 raw eval examples that, as
    serving requests do, lack `label_column`.
  """
  example_gen, _, schema_gen, transform, _ = front
  trainer = DistributedTrainer(
      module_file=module_file, examples=transform.outputs['transformed_examples'],
      transform_graph=transform.outputs['transform_graph'],
      schema=schema_gen.outputs['schema'],
      train_args=tfx.proto.TrainArgs(num_steps=20), eval_args=tfx.proto.EvalArgs(num_steps=5),
      micro_batches=MICRO_BATCHES, **strategy)
  with helpers.ProgressLines() as lines:
    tfx.orchestration.LocalDagRunner().run(chain.pipeline(name, root, front[:4] + [trainer]))
  model_uri = chain.output_uri(root, name, 'DistributedTrainer', 'Model')
  loaded = tf.saved_model.load(os.path.join(model_uri, 'Format-Serving'))
  raw = evaluation.read_serialized_examples(os.path.join(
      chain.output_uri(root, name, example_gen.id, 'Examples'), 'Split-eval', '*'), limit=3)
  outputs = loaded.signatures['serving_default'](examples=tf.constant(
      [measuring.strip_feature(example, label_column) for example in raw]))
  return lines, outputs


def test_tfx_penguin_module_file_trains_with_micro_batches(tmp_path):
  front = chain.penguin_front(train_steps=20)
  module_file = os.path.join(chain.TFX_ROOT, 'examples', 'penguin', 'penguin_utils_keras.py')
  lines, outputs = run_with_micro_batches('penguin-micro', str(tmp_path), front, module_file,
                                          'species')
  assert any(f'{MICRO_BATCHES} micro-batches per step' in line for line in lines)
  # The stock penguin model answers with three class scores per raw example.
  assert list(outputs.values())[0].shape == (3, 3)


def test_tfx_taxi_module_file_trains_with_micro_batches(tmp_path):
  sample = datasets.sample_csv(datasets.taxi_data_dir(), str(tmp_path / 'data'), rows=2000)
  module_file = os.path.join(chain.TFX_ROOT, 'examples', 'chicago_taxi_pipeline',
                             'taxi_utils_native_keras.py')
  example_gen = tfx.components.CsvExampleGen(input_base=sample)
  front = chain.stock_front(example_gen, module_file, train_steps=20, eval_steps=5)
  lines, outputs = run_with_micro_batches('taxi-micro', str(tmp_path), front, module_file,
                                          'tips')
  assert any(f'{MICRO_BATCHES} micro-batches per step' in line for line in lines)
  assert list(outputs.values())[0].shape[0] == 3


def test_tfx_penguin_module_file_trains_in_pipeline_stages(tmp_path):
  """penguin_utils_keras.py builds MirroredStrategy() itself; its model is a chain after the
  inputs' concatenation, so it runs in 2 stages on 2 logical CPUs, unchanged."""
  front = chain.penguin_front(train_steps=20)
  module_file = os.path.join(chain.TFX_ROOT, 'examples', 'penguin', 'penguin_utils_keras.py')
  lines, outputs = run_with_micro_batches('penguin-stages', str(tmp_path), front, module_file,
                                          'species', strategy='pipeline', stages=2,
                                          logical_devices=True)
  assert any("strategy='pipeline', 2 stages x 4 micro-batches" in line for line in lines)
  assert any('stage 1 on /device:CPU:1' in line for line in lines)
  assert list(outputs.values())[0].shape == (3, 3)
