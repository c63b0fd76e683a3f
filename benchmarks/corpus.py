"""The corpus of stock pipelines (#84): does the built-in student learn what the teacher learnt?

Each case is a TFX pipeline built as TFX's own files build it, with its stock Transform and
Trainer (the teacher), then our chain as the README gives it. The Distiller gets no student
module, so the built-in student is the one measured. Cases (`--config CASE`; each has its
own result, `corpus-<case>`):
- `taxi`: taxi_pipeline_native_keras.py on TFX's taxi CSV, 1,000 Trainer steps;
- `taxi-sparse`: the same with `SchemaGen(infer_feature_shape=False)` (taxi_pipeline_simple.py's
  setting), so every raw feature reaches the module's `preprocessing_fn` sparse;
- `taxi-big-tipper`: the same module on TFX's `big_tipper_label` CSV (its extra `big_tipper`
  column passes through to nobody);
- `penguin`: TFX's penguin example, its Keras module and the data in the wheel
  (ImportExampleGen, as tests/conformance does), 100 Trainer steps as
  penguin_pipeline_local.py trains;
- `penguin-tuner`: the same with a HyperParameters channel as TFX's Tuner gives it; the
  Trainer and our Distillers both take it. TFX's Tuner itself cannot run here: keras_tuner
  1.4.8 builds with Keras 3 and refuses the module's tf_keras model (TF_USE_LEGACY_KERAS=1,
  which tfmot needs). So an Importer brings a `best_hyperparameters.txt` written as the
  Tuner writes it, from penguin's own search space at one of its points
  (`TUNED_VALUES`);
- `imdb`: imdb_pipeline_native_keras.py, its 100 reviews in the wheel, 500 steps;
- `iris`, `wine`, `breast-cancer`: scikit-learn's bundled tables (150, 178 and 569 rows) as
  CSVs, with TFX's penguin module copied and edited as a user would edit it: its feature
  list, its label and its class count (`table_module`).

Per case and seed, one pipeline root that LocalDagRunner runs twice:
1. the stock front, then the README's chain after two Distillers: one given only
   `teacher_model`, `examples`, `transform_graph`, `label_key` and `label_column` (`bare`), and
   one also given `statistics=transform.outputs['post_transform_stats']` (`statistics`);
2. the hand-written peer (`peer_model`): the stock module's own model builder, its last layer
   replaced by the student's logits, at the width whose parameter count is nearest the bare
   student's. Its Distiller has the bare one's settings; the front comes from the cache.

TFX's Trainer draws its own seed, so the teacher differs from seed to seed. The seed seeds our
components. Two runs go at a time, so their seconds are not compared.

Targets (#84), decided on the mean over seeds:
- when the teacher beats the majority class beyond noise on the gate's split on every seed,
  both chains push on every seed;
- the bare student's eval accuracy at most 0.01 below the peer's;
- the statistics student's eval accuracy minus the bare one's, with its spread: within noise
  when the spread covers it;
- no Distiller hands on a student whose training diverged: every divergence the logs name is
  counted, and each handed-on student's accuracy is above chance.

Usage:
  python -m benchmarks.corpus --config taxi|taxi-sparse|...|breast-cancer --json [--seeds 1,2,3]
"""

import argparse
import concurrent.futures
import csv
import dataclasses
import importlib.util
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from typing import Callable, Dict, List, Optional

from benchmarks import common
from benchmarks import pruning
from benchmarks import results
from benchmarks import shipping

# Fixed before any result.
SEEDS = (1, 2, 3)
CASES = ('taxi', 'taxi-sparse', 'taxi-big-tipper', 'penguin', 'penguin-tuner', 'imdb', 'iris',
         'wine', 'breast-cancer')
# scikit-learn's bundled classification tables: the loader, and the label's column name.
TABLES = {'iris': ('load_iris', 'species'), 'wine': ('load_wine', 'cultivar'),
          'breast-cancer': ('load_breast_cancer', 'diagnosis')}
# penguin-tuner's best hyperparameters: a point of penguin's own search space
# (`_get_hyperparameters`: learning_rate 1e-2 or 1e-3, 1 to 3 layers) other than its
# defaults, so that the channel visibly reaches the Trainer.
TUNED_VALUES = {'learning_rate': 1e-2, 'num_layers': 3}
# The README's chain: its budgets, sparsities and steps (README.md, "Use it in your own
# pipeline"); `readme_chain` builds it, and a test compares the two.
README_MAX_ACCURACY_DROP = 0.05
README_SPARSITIES = (0.5, 0.7)
README_PRUNER_STEPS = 100
# #84: the built-in student at most this far below the hand-written peer, on eval.
PEER_MAX_DROP = 0.01
CONCURRENT_RUNS = 2
# A bound on each case's process (both LocalDagRunner runs).
RUN_TIMEOUT_S = 3600
# Marks the end of the child's output: one JSON line with what the parent cannot read from
# the metrics files (the peer's width and the candidates' parameter counts).
CHILD_RESULT = 'CORPUS_CHILD_RESULT '


def tfx_root() -> str:
  import tfx as tfx_package  # pylint: disable=g-import-not-at-top
  return os.path.dirname(tfx_package.__file__)


@dataclasses.dataclass(frozen=True)
class Front:
  """A stock pipeline's front: its components, the nodes our chain reads, and its label."""
  components: list
  example_gen: object
  transform: object
  trainer: object
  module_file: str
  label_key: str
  label_column: str
  # The Tuner's best hyperparameters when the case has a Tuner; our Distillers take them too.
  hyperparameters: object = None


def stock_front(example_gen, module_file: str, train_steps: int, eval_steps: int,
                infer_feature_shape: bool = True, hyperparameters_dir: Optional[str] = None):
  """StatisticsGen, SchemaGen, Transform, Trainer, as TFX's examples wire them.

  With `hyperparameters_dir`, an Importer brings the HyperParameters there (a Tuner's
  `best_hyperparameters` folder) to the Trainer, as `hyperparameters=` wires a Tuner's.

  Returns the components, ExampleGen first and the Trainer last, and the HyperParameters
  channel (None without one).
  """
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs['statistics'],
                                        infer_feature_shape=infer_feature_shape)
  transform = tfx.components.Transform(examples=example_gen.outputs['examples'],
                                       schema=schema_gen.outputs['schema'],
                                       module_file=module_file)
  components = [example_gen, statistics_gen, schema_gen, transform]
  hyperparameters = None
  if hyperparameters_dir:
    importer = tfx.dsl.Importer(
        source_uri=hyperparameters_dir,
        artifact_type=tfx.types.standard_artifacts.HyperParameters).with_id(
            'best_hyperparameters')
    components.append(importer)
    hyperparameters = importer.outputs['result']
  trainer = tfx.components.Trainer(module_file=module_file,
                                   examples=transform.outputs['transformed_examples'],
                                   transform_graph=transform.outputs['transform_graph'],
                                   schema=schema_gen.outputs['schema'],
                                   hyperparameters=hyperparameters,
                                   train_args=tfx.proto.TrainArgs(num_steps=train_steps),
                                   eval_args=tfx.proto.EvalArgs(num_steps=eval_steps))
  return components + [trainer], hyperparameters


def penguin_example_gen():
  """TFX's penguin data in the wheel, as tests/conformance reads it (train and eval)."""
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  return tfx.components.ImportExampleGen(
      input_base=os.path.join(tfx_root(), 'components', 'testdata', 'penguin', 'data'),
      input_config=tfx.proto.Input(splits=[
          tfx.proto.Input.Split(name='train', pattern='Split-train/*'),
          tfx.proto.Input.Split(name='eval', pattern='Split-eval/*')]))


def imdb_example_gen():
  """TFX's imdb reviews in the wheel, as imdb_pipeline_native_keras.py reads them: a 9:1 hash
  split into train and eval."""
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  return tfx.components.CsvExampleGen(
      input_base=os.path.join(tfx_root(), 'examples', 'imdb', 'data'),
      output_config=tfx.proto.Output(split_config=tfx.proto.SplitConfig(splits=[
          tfx.proto.SplitConfig.Split(name='train', hash_buckets=9),
          tfx.proto.SplitConfig.Split(name='eval', hash_buckets=1)])))


def write_best_hyperparameters(module_file: str, work_dir: str) -> str:
  """A Tuner's `best_hyperparameters` folder for penguin's module: its search space's config
  (keras_tuner's `get_config`, as TFX's Tuner writes it) at TUNED_VALUES."""
  hyperparameters = load_module(module_file, 'corpus_penguin_tuner')._get_hyperparameters()  # pylint: disable=protected-access
  hyperparameters.values.update(TUNED_VALUES)
  folder = os.path.join(work_dir, 'best_hyperparameters')
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, 'best_hyperparameters.txt'), 'w') as handle:
    json.dump(hyperparameters.get_config(), handle)
  return folder


def write_table(case: str, output_dir: str) -> str:
  """scikit-learn's bundled table as a CSV, its columns named as a CSV would name them."""
  from sklearn import datasets  # pylint: disable=g-import-not-at-top
  loader, label = TABLES[case]
  bunch = getattr(datasets, loader)()
  columns = [re.sub(r'[^0-9a-z]+', '_', name.lower()).strip('_')
             for name in bunch.feature_names]
  text = io.StringIO(newline='')
  writer = csv.writer(text)
  writer.writerow(columns + [label])
  for row, target in zip(bunch.data, bunch.target):
    writer.writerow([repr(float(value)) for value in row] + [int(target)])
  os.makedirs(output_dir, exist_ok=True)
  path = os.path.join(output_dir, 'data.csv')
  # Written once: CsvExampleGen's fingerprint holds the file's time, and a file written again
  # for the peer's run would make the whole stock front run again, its Trainer too.
  if not os.path.exists(path):
    with open(path, 'w', newline='') as handle:
      handle.write(text.getvalue())
  return output_dir


def table_module(case: str, data_dir: str, output_path: str) -> str:
  """TFX's penguin module (base and Keras parts in one file), edited for the table.

  What a user edits: FEATURE_KEYS, _LABEL_KEY and the output layer's class count. The Keras
  part's import of the base module reads this same file instead.
  """
  penguin = os.path.join(tfx_root(), 'examples', 'penguin')
  with open(os.path.join(data_dir, 'data.csv')) as handle:
    *features, label = next(csv.reader(handle))
    classes = len({row[-1] for row in csv.reader(handle)})
  with open(os.path.join(penguin, 'penguin_utils_base.py')) as handle:
    base = handle.read()
  with open(os.path.join(penguin, 'penguin_utils_keras.py')) as handle:
    keras = handle.read()
  edits = [
      (r"FEATURE_KEYS = \[[^\]]*\]", f'FEATURE_KEYS = {features!r}', 'base'),
      (r"_LABEL_KEY = 'species'", f'_LABEL_KEY = {label!r}', 'base'),
      (r'from tfx\.examples\.penguin import penguin_utils_base as base',
       'base = sys.modules[__name__]', 'keras'),
      (r'keras\.layers\.Dense\(3\)', f'keras.layers.Dense({classes})', 'keras'),
  ]
  texts = {'base': base, 'keras': keras}
  for pattern, replacement, part in edits:
    texts[part], count = re.subn(pattern, lambda match, text=replacement: text, texts[part])
    if count != 1:
      raise ValueError(f'TFX\'s penguin module no longer has one {pattern!r}: update '
                       'benchmarks/corpus.py.')
  with open(output_path, 'w') as handle:
    handle.write(f'"""TFX\'s penguin module, edited for scikit-learn\'s {case} table."""\n'
                 'import sys\n' + texts['base'] + '\n' + texts['keras'])
  return output_path


def build_front(case: str, work_dir: str) -> Front:
  """The case's stock pipeline front, as TFX's example files build it."""
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  taxi = os.path.join(tfx_root(), 'examples', 'chicago_taxi_pipeline')
  hyperparameters = None
  if case.startswith('taxi'):
    module_file = os.path.join(taxi, 'taxi_utils_native_keras.py')
    data = 'big_tipper_label' if case == 'taxi-big-tipper' else 'simple'
    example_gen = tfx.components.CsvExampleGen(input_base=os.path.join(taxi, 'data', data))
    components, _ = stock_front(example_gen, module_file, train_steps=1000, eval_steps=150,
                                infer_feature_shape=case != 'taxi-sparse')
    label_key, label_column = 'tips_xf', 'tips'
  elif case.startswith('penguin'):
    module_file = os.path.join(tfx_root(), 'examples', 'penguin', 'penguin_utils_keras.py')
    example_gen = penguin_example_gen()
    components, hyperparameters = stock_front(
        example_gen, module_file, train_steps=100, eval_steps=5,
        hyperparameters_dir=(write_best_hyperparameters(module_file, work_dir)
                             if case == 'penguin-tuner' else None))
    label_key, label_column = 'species_xf', 'species'
  elif case == 'imdb':
    module_file = os.path.join(tfx_root(), 'examples', 'imdb', 'imdb_utils_native_keras.py')
    components, _ = stock_front(imdb_example_gen(), module_file, train_steps=500,
                                eval_steps=200)
    label_key, label_column = 'label_xf', 'label'
  else:
    data_dir = write_table(case, os.path.join(work_dir, 'data'))
    module_file = table_module(case, data_dir, os.path.join(work_dir, 'table_utils_keras.py'))
    example_gen = tfx.components.CsvExampleGen(input_base=data_dir)
    components, _ = stock_front(example_gen, module_file, train_steps=100, eval_steps=5)
    label_column = TABLES[case][1]
    label_key = f'{label_column}_xf'
  return Front(components, components[0], next(
      component for component in components if component.id == 'Transform'),
               components[-1], module_file, label_key, label_column, hyperparameters)


def readme_chain(front: Front, seed: int, serving_dir: str, suffix: str = '',
                 **distiller_arguments) -> list:
  """The README's Distiller -> Pruner -> Quantizer -> AccuracyGate -> AtomicPusher after the
  stock Trainer, each node named with `suffix`; the Distiller gets only what a stock Trainer
  gets, and `distiller_arguments`."""
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from tfx_distillery import AccuracyGate, AtomicPusher, Distiller, Pruner, Quantizer  # pylint: disable=g-import-not-at-top,g-multiple-import
  label = {'label_key': front.label_key, 'label_column': front.label_column}
  data = {'examples': front.transform.outputs['transformed_examples'],
          'transform_graph': front.transform.outputs['transform_graph']}
  teacher = front.trainer.outputs['model']
  distiller = Distiller(teacher_model=teacher, random_seed=seed,
                        hyperparameters=front.hyperparameters, **distiller_arguments, **data,
                        **label).with_id(f'Distiller{suffix}')
  pruner = Pruner(model=distiller.outputs['model'], baseline_model=teacher,
                  max_accuracy_drop=README_MAX_ACCURACY_DROP, sparsities=README_SPARSITIES,
                  train_args=tfx.proto.TrainArgs(num_steps=README_PRUNER_STEPS),
                  random_seed=seed, **data, **label).with_id(f'Pruner{suffix}')
  quantizer = Quantizer(model=pruner.outputs['pruned_model'], mode='full_integer',
                        raw_examples=front.example_gen.outputs['examples'], random_seed=seed,
                        **data, **label).with_id(f'Quantizer{suffix}')
  gate = AccuracyGate(examples=front.example_gen.outputs['examples'],
                      transform_graph=front.transform.outputs['transform_graph'],
                      baseline_model=teacher,
                      candidate_models=[distiller.outputs['model'],
                                        pruner.outputs['pruned_model'],
                                        quantizer.outputs['quantized_model']],
                      candidate_names=['student', 'pruned', 'int8'],
                      max_accuracy_drop=README_MAX_ACCURACY_DROP, **label
                      ).with_id(f'AccuracyGate{suffix}')
  pusher = AtomicPusher(model=gate.outputs['model'], model_blessing=gate.outputs['blessing'],
                        push_destination=tfx.proto.PushDestination(
                            filesystem=tfx.proto.PushDestination.Filesystem(
                                base_directory=serving_dir))).with_id(f'AtomicPusher{suffix}')
  return [distiller, pruner, quantizer, gate, pusher]


# --- The hand-written peer ---------------------------------------------------------------------

# The peer's widths, smallest first: taxi's deep layer's units (its builder's
# `hidden_units`), imdb's embedding, LSTM and hidden units (its module's constants), and the
# units of one hidden layer on penguin's concatenated inputs (its builder fixes 8 units a
# layer: 139 parameters at least on wine, against a built-in student of 37).
PEER_WIDTHS = {'taxi': (1, 2, 4, 8, 16, 32, 64, 128, 256),
               'penguin': (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64),
               'imdb': (1, 2, 4, 8, 16, 32, 64)}


def family(case: str) -> str:
  """Which stock model builder a case's module has."""
  if case.startswith('taxi'):
    return 'taxi'
  return 'imdb' if case == 'imdb' else 'penguin'


def load_module(path: str, name: str):
  """A module file loaded as TFX loads it: registered under its name before it runs (a
  table's module reads itself from sys.modules)."""
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  spec.loader.exec_module(module)
  return module


def stock_model(case: str, module_file: str, width: int):
  """The stock module's own model, built by its own function (at `width` where it takes one)."""
  module = load_module(module_file, f'corpus_stock_{family(case)}')
  if family(case) == 'taxi':
    return module._build_keras_model(hidden_units=[width])  # pylint: disable=protected-access
  if family(case) == 'imdb':
    module._EMBEDDING_UNITS = module._LSTM_UNITS = module._HIDDEN_UNITS = width  # pylint: disable=protected-access
    return module._build_keras_model()  # pylint: disable=protected-access
  import keras_tuner  # pylint: disable=g-import-not-at-top
  hyperparameters = keras_tuner.HyperParameters()
  hyperparameters.Fixed('num_layers', 1)
  hyperparameters.Fixed('learning_rate', 1e-2)
  return module._make_keras_model(hyperparameters)  # pylint: disable=protected-access


def peer_model(case: str, module_file: str, width: int, units: int):
  """The peer: the stock module's feature handling and model, with `units` logits at the end.

  The Distiller wants logits, one for a binary label: taxi's model ends in a sigmoid and a
  table's copy of penguin's in one logit per class, so the last layer is the peer's own,
  on what the stock model's last Dense layer reads. Penguin's model is cut before its first
  Dense layer (its inputs, concatenated) and gets one hidden layer of `width` units.
  """
  import tf_keras  # pylint: disable=g-import-not-at-top
  model = stock_model(case, module_file, width)
  dense = [layer for layer in model.layers if isinstance(layer, tf_keras.layers.Dense)]
  if family(case) == 'penguin':
    features = tf_keras.layers.Dense(width, activation='relu', name='peer_hidden')(
        dense[0].input)
  else:
    features = dense[-1].input
  logits = tf_keras.layers.Dense(units, name='peer_logits')(features)
  return tf_keras.Model(model.inputs, logits, name=f'peer_{family(case)}_{width}')


def nearest_width(case: str, module_file: str, parameters: int, units: int) -> Dict[str, int]:
  """The peer's width whose parameter count is nearest `parameters` (the smaller on a tie)."""
  counts = {width: int(peer_model(case, module_file, width, units).count_params())
            for width in PEER_WIDTHS[family(case)]}
  width = min(counts, key=lambda width: (abs(counts[width] - parameters), width))
  return {'width': width, 'parameters': counts[width]}


def logit_units(case: str, work_dir: str) -> int:
  """The student's logits: one for a binary label, else one per class."""
  if family(case) in ('taxi', 'imdb'):
    return 1
  if case.startswith('penguin'):
    return 3
  with open(os.path.join(work_dir, 'data', 'data.csv')) as handle:
    next(handle)
    classes = len({line.rstrip().rsplit(',', 1)[1] for line in handle})
  return 1 if classes == 2 else classes


PEER_MODULE = '''"""The corpus's hand-written peer (benchmarks/corpus.py, #84)."""
from benchmarks import corpus


def build_student(tf_transform_output, hyperparameters):
  classes = hyperparameters['num_classes']
  return corpus.peer_model({case!r}, {module_file!r}, {width!r}, 1 if classes == 2 else classes)
'''


# --- One case and seed, in its own process -------------------------------------------------------


def child(case: str, seed: int, root: str,
          distiller_steps: Optional[int] = None) -> Dict[str, object]:
  """Runs the case's pipeline twice under `root` (see the module's docstring).

  `distiller_steps`, when given, is every Distiller's `train_args` (the long suite's run: the
  same chain in fewer steps); the benchmark leaves the Distiller's default.
  """
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from tfx_distillery import Distiller  # pylint: disable=g-import-not-at-top
  os.makedirs(root, exist_ok=True)
  steps = ({'train_args': tfx.proto.TrainArgs(num_steps=distiller_steps)}
           if distiller_steps else {})

  def pipeline(components):
    return tfx.dsl.Pipeline(
        pipeline_name=f'corpus-{case}', pipeline_root=os.path.join(root, 'runs'),
        components=components, enable_cache=True,
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            os.path.join(root, 'metadata.sqlite')))

  front = build_front(case, root)
  bare = readme_chain(front, seed, os.path.join(root, 'serving', 'bare'), **steps)
  with_statistics = readme_chain(front, seed, os.path.join(root, 'serving', 'statistics'),
                                 suffix='_statistics',
                                 statistics=front.transform.outputs['post_transform_stats'],
                                 **steps)
  tfx.orchestration.LocalDagRunner().run(pipeline(front.components + bare + with_statistics))

  distiller = shipping.newest_metrics(root, 'Distiller')
  peer = nearest_width(case, front.module_file, distiller['student_parameters'],
                       logit_units(case, root))
  # In a folder of its own: TFX packs every file beside a module file into the user-code
  # wheel that its cache key hashes, so a peer module beside a table's module made the
  # Transform and the Trainer run again, and the peer distil a teacher of its own.
  peer_module = os.path.join(root, 'peer', 'peer_student.py')
  os.makedirs(os.path.dirname(peer_module), exist_ok=True)
  with open(peer_module, 'w') as handle:
    handle.write(PEER_MODULE.format(case=case, module_file=front.module_file,
                                    width=peer['width']))
  front = build_front(case, root)
  peer_distiller = Distiller(
      teacher_model=front.trainer.outputs['model'], module_file=peer_module, random_seed=seed,
      examples=front.transform.outputs['transformed_examples'],
      transform_graph=front.transform.outputs['transform_graph'],
      label_key=front.label_key, label_column=front.label_column, **steps
  ).with_id('Distiller_peer')
  tfx.orchestration.LocalDagRunner().run(pipeline(front.components + [peer_distiller]))
  return peer


def one_run(case: str, seed: int, work_dir: str,
            distiller_steps: Optional[int] = None) -> Dict[str, object]:
  """One case and seed in a fresh process: what each Distiller and gate wrote
  (`distiller_steps`: as `child`'s)."""
  root = os.path.join(work_dir, f'{case}-{seed}')
  shutil.rmtree(root, ignore_errors=True)
  steps = ['--distiller-steps', str(distiller_steps)] if distiller_steps else []
  outcome = pruning.run_chain(
      [sys.executable, '-m', 'benchmarks.corpus', '--child', case, '--seed', str(seed),
       '--work-dir', root, *steps], os.path.join(work_dir, f'home-{case}-{seed}'),
      cwd=results.REPOSITORY, timeout_s=RUN_TIMEOUT_S)
  child_result = {}
  entry = {'case': case, 'seed': seed, 'exit_status': outcome['exit_status'],
           'wall_s': outcome['wall_s'],
           'stderr_tail': outcome['stderr_tail']}
  log = os.path.join(root, 'child.log')
  if os.path.exists(log):
    with open(log) as handle:
      text = handle.read()
    entry['divergence_lines'] = len(re.findall(r'diverged', text))
    if outcome['exit_status'] != 0:
      entry['stderr_tail'] = text[-3000:]
    found = [line for line in text.splitlines() if line.startswith(CHILD_RESULT)]
    child_result = json.loads(found[-1][len(CHILD_RESULT):]) if found else {}
  for variant, suffix in (('bare', ''), ('statistics', '_statistics')):
    entry[variant] = variant_entry(root, suffix)
  peer = shipping.newest_metrics(root, 'Distiller_peer') or {}
  entry['peer'] = {'eval_accuracy': peer.get('exported_accuracy'),
                   'parameters': peer.get('student_parameters'),
                   'width': child_result.get('width')}
  entry['stderr_tail'] = results.recordable(entry['stderr_tail'], work_dir)
  with open(os.path.join(work_dir, 'runs.jsonl'), 'a') as handle:
    handle.write(json.dumps(entry) + '\n')
  return entry


def variant_entry(root: str, suffix: str) -> Dict[str, object]:
  """What one chain's Distiller and gate wrote."""
  distiller = shipping.newest_metrics(root, f'Distiller{suffix}') or {}
  gate = shipping.newest_metrics(root, f'AccuracyGate{suffix}', 'report') or {}
  candidates = {candidate['name']: candidate for candidate in gate.get('candidates', [])}
  chosen = candidates.get(gate.get('chosen')) if gate.get('blessed') else None
  teacher = gate.get('teacher') or {}
  return {
      'pushed': chosen['name'] if chosen else None,
      'pushed_format': chosen['format'] if chosen else None,
      'pushed_bytes': chosen['size_bytes'] if chosen else None,
      'pushed_accuracy': chosen['accuracy'] if chosen else None,
      'teacher_accuracy': teacher.get('accuracy'),
      'teacher_beats_majority': (None if 'versus_majority' not in teacher
                                 else not teacher['versus_majority']['within_noise']),
      'majority_accuracy': gate.get('majority_accuracy'),
      'split': gate.get('split'),
      'eval_accuracy': distiller.get('exported_accuracy'),
      'teacher_eval_accuracy': (distiller.get('teacher_accuracy') or [None])[0],
      'parameters': distiller.get('student_parameters'),
      'handed_on': distiller.get('exported_student'),
      'statistics_source': ((distiller.get('student') or {}).get('statistics') or {}).get(
          'source'),
      'refusals': '; '.join(f'{candidate["name"]}: {", ".join(candidate["reasons"])}'
                            for candidate in gate.get('candidates', [])
                            if not candidate.get('passed')),
  }


def targets_of(case: str, entries: List[dict]) -> List[dict]:
  """#84's targets for one case's seeds."""
  rows = []
  count = len(entries)
  seeds = [entry['seed'] for entry in entries]
  beats = [entry['bare']['teacher_beats_majority'] for entry in entries]
  completed = [entry for entry in entries if entry['exit_status'] == 0]
  rows.append(results.target(f'{case}: seeds whose run completed (exit status 0)',
                             len(completed), f'= {count} of {count}', len(completed) == count))
  # A failed run excuses no push: only a completed run's weak teacher does.
  learnt = count > 0 and all(entry['bare']['teacher_beats_majority'] for entry in completed)
  rows.append(results.target(
      f'{case}: seeds whose stock teacher beats the majority class beyond noise on the gate\'s '
      'split', sum(1 for value in beats if value), 'recorded', None))
  for variant in ('bare', 'statistics'):
    pushed = [entry for entry in entries
              if entry['exit_status'] == 0 and entry[variant]['pushed']]
    rows.append(results.target(
        f'{case}: seeds whose {variant} chain pushed a model',
        len(pushed), f'= {count} of {count}' if learnt else
        'recorded (the teacher did not beat the majority class on every seed)',
        len(pushed) == count if learnt else None))
  for other, name, floor in (
      ('peer', 'the built-in student\'s eval accuracy minus the hand-written peer\'s',
       -PEER_MAX_DROP),
      ('statistics', 'eval accuracy with statistics minus without', None)):
    paired = [entry for entry in entries if entry['bare']['eval_accuracy'] is not None and
              entry[other]['eval_accuracy'] is not None]
    differences = [(entry[other]['eval_accuracy'] - entry['bare']['eval_accuracy']) *
                   (-1 if other == 'peer' else 1) for entry in paired]
    if paired:
      rows.append(results.over_seeds(f'{case}: {name}', differences,
                                     [entry['seed'] for entry in paired], floor, out_of=count))
    else:
      # No seed ran that far: a target missed, not a figure.
      rows.append(results.target(f'{case}: {name} (no seed gave both)', None,
                                 'recorded' if floor is None else f'>= {floor:g}',
                                 None if floor is None else False))
  divergences = sum(entry.get('divergence_lines', 0) for entry in entries)
  rows.append(results.target(f'{case}: lines naming a diverged training in the logs',
                             divergences, 'recorded', None))
  return rows


def measure(case: str, seeds: List[int], work_dir: str) -> dict:
  """Every seed of one case, CONCURRENT_RUNS at a time."""
  with concurrent.futures.ThreadPoolExecutor(CONCURRENT_RUNS) as pool:
    entries = list(pool.map(lambda seed: one_run(case, seed, work_dir), seeds))
  rows = []
  for entry in entries:
    for variant in ('bare', 'statistics'):
      figures = entry[variant]
      rows.append([entry['seed'], variant, entry['exit_status'], figures['pushed'],
                   figures['pushed_format'], figures['pushed_bytes'], figures['pushed_accuracy'],
                   figures['teacher_accuracy'], figures['majority_accuracy'],
                   figures['eval_accuracy'], figures['teacher_eval_accuracy'],
                   figures['parameters'], figures['handed_on']])
    rows.append([entry['seed'], f'peer (width {entry["peer"]["width"]})', entry['exit_status'],
                 None, None, None, None, None, None, entry['peer']['eval_accuracy'],
                 entry['bare']['teacher_eval_accuracy'], entry['peer']['parameters'], None])
  table = results.table(
      f'{case}: each seed\'s chains (the gate on its split, the Distillers on eval; '
      f'{CONCURRENT_RUNS} runs at a time)',
      ['seed', 'student', 'exit', 'pushed', 'format', 'bytes', 'pushed accuracy', 'teacher',
       'majority', 'student eval accuracy', 'teacher eval accuracy', 'parameters',
       'handed on'], rows)
  refusals = results.table(
      f'{case}: what the gate refused', ['seed', 'student', 'refused'],
      [[entry['seed'], variant, entry[variant]['refusals'] or '-'] for entry in entries
       for variant in ('bare', 'statistics')])
  return {'title': f'The corpus of stock pipelines (#84): {case}, the built-in student after '
                   'the stock teacher',
          'targets': targets_of(case, entries), 'tables': [table, refusals], 'runs': entries,
          'summary': {'case': case, 'seeds': seeds}}


def parse_arguments(argv=None) -> argparse.Namespace:
  parser = common.argument_parser(__doc__, 'distillery-corpus-benchmark')
  parser.add_argument('--seeds', default=','.join(str(seed) for seed in SEEDS))
  parser.add_argument('--config', choices=CASES, help='the case to measure; its result is '
                      'corpus-<case>')
  parser.add_argument('--child', choices=CASES, help=argparse.SUPPRESS)
  parser.add_argument('--seed', type=int, help=argparse.SUPPRESS)
  parser.add_argument('--distiller-steps', type=int, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if not args.config and not args.child:
    parser.error('--config is required')
  if args.config and args.work_dir == parser.get_default('work_dir'):
    args.work_dir = f'{args.work_dir}-{args.config}'
  return args


def main() -> None:
  args = parse_arguments()
  if args.child:
    os.makedirs(args.work_dir, exist_ok=True)
    with open(os.path.join(args.work_dir, 'child.log'), 'w') as log:
      # The child's own output, and every library's, goes to its log: the parent reads it.
      os.dup2(log.fileno(), 1)
      os.dup2(log.fileno(), 2)
      peer = child(args.child, args.seed, args.work_dir, args.distiller_steps)
      print(CHILD_RESULT + json.dumps(peer), flush=True)
    return
  seeds = [int(seed) for seed in args.seeds.split(',')]
  shutil.rmtree(args.work_dir, ignore_errors=True)
  os.makedirs(args.work_dir)
  common.print_result(lambda: measure(args.config, seeds, args.work_dir), args,
                      f'corpus-{args.config}')


if __name__ == '__main__':
  main()
