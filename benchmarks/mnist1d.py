"""MNIST-1D benchmark: where the small student's gap is real, does an unlabelled pool close it?

The data goes the real path: ArrowCsvExampleGen over the paper's train/test split and an
eval draw (`pipelines/mnist1d_data.py`), StatisticsGen, SchemaGen, IngestionTransform;
the CNN teacher trained by the DistributedTrainer executor with its module's settings;
every student by the Distiller executor, the pool read by a second ExampleGen and given
as `transfer_examples`. Accuracy is the one measuring module's, on all of `test` (the
paper's 1,000 rows), through each model's serving signature.

Students, each with the same student, steps and seed:
- scratch: the Distiller at alpha = 1 (labels only);
- the keras.io recipe (T = 10, alpha = 0.1, nothing else), labelled rows only;
- pseudo-labelling: the teacher's most likely class as the target on every row, pool
  included (`teacher_targets='hard'`, T = 1, no mixup), the usual semi-supervised baseline;
- ours: the Distiller's defaults, with pools of 0, 10k, 50k and 200k rows;
- a reference that is given the 50k pool's true labels (scratch on labelled + pool).
Then: how many extra labelled rows scratch needs to match ours with the 50k pool (scratch
on labelled + the first N pool rows with their labels).

Seeds and pool sizes run two at a time in worker processes: the figures are accuracies,
which the same seed and data give under any load.

Usage:
  python -m benchmarks.mnist1d --json [--seeds 101,...] [--pools 0,10000,50000,200000]
"""

import dataclasses
import json
import os
import statistics
from typing import Dict, List, Optional

from tfx import v1 as tfx
from tfx.types import standard_artifacts

from benchmarks import common
from benchmarks import distillation
from benchmarks import results
from tfx_distillery import components
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.components.distiller import training
from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import mnist1d_data
from tfx_distillery.pipelines import pipeline
from tfx_distillery.pipelines import summary

# Chosen before any run of this benchmark; none was used to choose a default or a model.
SEEDS = (101, 102, 103, 104, 105)
POOLS = (0, 10000, 50000, 200000)
HEADLINE_POOL = 50000
ARCHITECTURES = ('cnn', 'mlp')
# Extra labelled rows given to scratch, to find how many match ours with the headline pool.
EXTRA_LABELLED_ROWS = (4000, 16000, 50000)
PROCESSES = 2
TASK_TIMEOUT_S = 3600
TARGET_GAP_CLOSED = 0.75
PSEUDO_LABEL_MARGIN = 0.01
# The teacher's steps (its epochs, batch and learning rate are its module's), and every
# student's: 6,000 steps of 128 labelled rows (and 128 pool rows with a pool).
BUDGET = {'teacher_steps': 4000, 'student_steps': 6000, 'batch_size': 128, 'epochs': 6,
          'eval_steps': 8, 'student_learning_rate': 3e-3}
PSEUDO_LABELS = {'teacher_targets': 'hard', 'temperature': 1.0, 'mixup': 0.0, 'noise': 0.0}


def student_settings() -> Dict[str, training.DistillationSettings]:
  ours = training.DistillationSettings(train_baseline=False)
  return {'ours': ours, 'scratch': dataclasses.replace(ours, alpha=1.0),
          'recipe': dataclasses.replace(ours, **distillation.RECIPE),
          'pseudo': dataclasses.replace(ours, **PSEUDO_LABELS)}


def pool_examples(pool_root: str, work_dir: str) -> str:
  """ArrowCsvExampleGen over a folder of pool rows, as the pipeline's UnlabelledExampleGen."""
  metadata_path = os.path.join(work_dir, 'metadata.sqlite')
  example_gen = components.ArrowCsvExampleGen(
      input_base=pool_root,
      output_config=tfx.proto.Output(split_config=tfx.proto.SplitConfig(splits=[
          tfx.proto.SplitConfig.Split(name=pipeline.UNLABELLED_SPLIT, hash_buckets=1)]))
  ).with_id('UnlabelledExampleGen')
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name='benchmark-mnist1d-pool', pipeline_root=os.path.join(work_dir, 'root'),
      components=[example_gen], enable_cache=True,
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path)))
  store = summary.open_store(metadata_path)
  return summary.pipeline_artifacts(store, 'benchmark-mnist1d-pool', 'Examples')[-1].uri


def transfer_input(examples_uri: str) -> dict:
  examples = standard_artifacts.Examples()
  examples.uri = examples_uri
  examples.split_names = json.dumps([pipeline.UNLABELLED_SPLIT])
  return {'transfer_examples': [examples]}


def labelled_more_rows(pools, extra_labelled) -> List[int]:
  """Rows of true-labelled pool given to scratch: the extra rows, and the headline pool's."""
  return sorted(set(extra_labelled) | ({HEADLINE_POOL} if HEADLINE_POOL in pools else set()))


def prepare(work_dir: str, pools, extra_labelled) -> dict:
  """Draws the data, writes its folders and runs ExampleGen and Transform on each once."""
  folders = mnist1d_data.write_csv(os.path.join(work_dir, 'data'))
  transformed = common.transform_dataset('mnist1d', os.path.join(work_dir, 'labelled'),
                                         data_root=folders.labelled_root)
  pool_uris = {}
  for rows in pools:
    if rows:
      root = os.path.join(work_dir, f'pool-{rows}')
      signals, _ = mnist1d_data.pool(rows)
      mnist1d_data.write_rows(os.path.join(root, 'data.csv'), signals, None)
      pool_uris[rows] = pool_examples(root, os.path.join(work_dir, f'pool-{rows}-run'))
  # Scratch given true labels: the headline pool's (the reference), and more labelled rows.
  labelled_more = {}
  for rows in labelled_more_rows(pools, extra_labelled):
    more = mnist1d_data.write_csv(os.path.join(work_dir, f'labelled-plus-{rows}'), rows,
                                  labelled_pool=True)
    labelled_more[rows] = common.transform_dataset(
        'mnist1d', os.path.join(work_dir, f'labelled-plus-{rows}-run'),
        data_root=more.labelled_root)
  return {'transformed': transformed, 'pools': pool_uris, 'labelled_more': labelled_more,
          'split_rows': folders.split_rows,
          # The module files and label, for the workers: they write no data of their own.
          'dataset': datasets.resolve('mnist1d', os.path.join(work_dir, 'modules'), pool_rows=0)}


def run_student(work_dir: str, dataset, uris: tuple, teacher_uri: str, seed: int,
                architecture: str, name: str, pool_uri: Optional[str] = None) -> dict:
  """One student trained by the Distiller executor, its accuracy on `test` (a worker's task).

  `name` is `scratch`, `recipe`, `ours@ROWS`, `pseudo@ROWS` or `labelled+ROWS` (scratch on
  `uris`, the labelled rows and ROWS more).
  """
  transformed_uri, graph_uri, raw_uri = uris
  inputs = common.executor_inputs(transformed_uri, graph_uri)
  if pool_uri:
    inputs.update(transfer_input(pool_uri))
  run = distillation.distill(
      inputs, teacher_uri, dataset, BUDGET,
      os.path.join(work_dir, 'students', f'{architecture}-{name}-{seed}'), seed,
      student_settings()[name.split('@')[0].split('+')[0].replace('labelled', 'scratch')],
      {'architecture': architecture})
  test_set = distillation.test_set_for(raw_uri, graph_uri, dataset)
  return {'accuracy': measuring.measure(run['model_dir'], test_set, latency_runs=1)['accuracy'],
          'student_params': run['student_parameters'],
          'teacher_params': run['teacher_parameters'][0]}


def run_teacher(work_dir: str, dataset, uris: tuple, seed: int) -> dict:
  """The seed's teacher, trained by the DistributedTrainer executor, and its test accuracy."""
  transformed_uri, graph_uri, raw_uri = uris
  teacher_uri = distillation.train_teacher(
      common.executor_inputs(transformed_uri, graph_uri), dataset, BUDGET,
      os.path.join(work_dir, f'teacher-{seed}'), seed=seed)
  test_set = distillation.test_set_for(raw_uri, graph_uri, dataset)
  measured = measuring.measure(evaluation.serving_model_path(teacher_uri), test_set,
                               latency_runs=1)
  return {'uri': teacher_uri, 'accuracy': measured['accuracy'],
          'majority': measured['majority_accuracy'], 'test_examples': test_set.size,
          'curve': distillation.teacher_curve(teacher_uri)}


def student_runs(pools, architectures) -> List[tuple]:
  """(architecture, name, pool rows) of every student a seed trains."""
  runs = []
  for architecture in architectures:
    runs += [(architecture, 'scratch', 0), (architecture, 'recipe', 0)]
    runs += [(architecture, f'ours@{rows}', rows) for rows in pools]
    runs += [(architecture, f'pseudo@{rows}', rows) for rows in pools if rows]
  return runs


def run(work_dir: str, seeds, pools, architectures, processes: int,
        extra_labelled=EXTRA_LABELLED_ROWS) -> dict:
  prepared = prepare(work_dir, pools, extra_labelled)
  transformed, dataset = prepared['transformed'], prepared['dataset']
  with common.process_pool(processes) as pool:
    teachers = {seed: pool.submit(run_teacher, work_dir, dataset, transformed, seed)
                for seed in seeds}
    teachers = {seed: future.result(timeout=TASK_TIMEOUT_S) for seed, future in teachers.items()}
    futures = {}
    for seed in seeds:
      for architecture, name, rows in student_runs(pools, architectures):
        futures[(seed, architecture, name)] = pool.submit(
            run_student, work_dir, dataset, transformed, teachers[seed]['uri'], seed,
            architecture, name, prepared['pools'].get(rows))
      for architecture in architectures:
        for rows, uris in prepared['labelled_more'].items():
          futures[(seed, architecture, f'labelled+{rows}')] = pool.submit(
              run_student, work_dir, dataset, uris, teachers[seed]['uri'], seed, architecture,
              f'labelled+{rows}')
    figures = {key: future.result(timeout=TASK_TIMEOUT_S) for key, future in futures.items()}
  per_seed = []
  for seed in seeds:
    students = {}
    for (figure_seed, architecture, name), figure in figures.items():
      if figure_seed == seed:
        students.setdefault(architecture, {})[name] = figure['accuracy']
        students[architecture]['student_params'] = figure['student_params']
        students[architecture]['teacher_params'] = figure['teacher_params']
    per_seed.append({'seed': seed, 'teacher': teachers[seed]['accuracy'],
                     'majority': teachers[seed]['majority'],
                     'teacher_kept_epoch': teachers[seed]['curve']['kept_epoch'],
                     'students': students})
  return {'seeds': list(seeds), 'pools': list(pools), 'architectures': list(architectures),
          'extra_labelled': labelled_more_rows(pools, extra_labelled),
          'split_rows': prepared['split_rows'],
          'test_examples': teachers[seeds[0]]['test_examples'], 'per_seed': per_seed}


def spread(values: List[float]) -> float:
  return statistics.stdev(values) if len(values) > 1 else 0.0


def _accuracy(values: List[float]) -> str:
  return f'{statistics.fmean(values):.4f} ± {spread(values):.4f}'


def rows_to_match(per_seed: List[dict], architecture: str, extra_labelled) -> Optional[int]:
  """The fewest extra labelled rows whose scratch student's mean reaches ours at the headline pool.

  None when even the most rows tried fall short.
  """
  ours = statistics.fmean(run['students'][architecture][f'ours@{HEADLINE_POOL}']
                          for run in per_seed)
  for rows in extra_labelled:
    scratch = statistics.fmean(run['students'][architecture][f'labelled+{rows}']
                               for run in per_seed)
    if scratch >= ours:
      return rows
  return None


def describe(measured: dict) -> dict:
  """Targets, tables and notes for docs/benchmarks.md."""
  per_seed, seeds, pools = measured['per_seed'], measured['seeds'], measured['pools']
  teachers = [run['teacher'] for run in per_seed]
  targets, tables = [], []
  for architecture in measured['architectures']:

    def values(name, architecture=architecture):
      return [run['students'][architecture][name] for run in per_seed]

    first = per_seed[0]['students'][architecture]
    share = first['student_params'] / first['teacher_params']
    label = f'{architecture.upper()} student ({first["student_params"]:,} parameters, {share:.1%})'
    if HEADLINE_POOL in pools:
      closed = [distillation.gap_closed(ours, scratch, teacher) for ours, scratch, teacher in
                zip(values(f'ours@{HEADLINE_POOL}'), values('scratch'), teachers)]
      targets.append(results.over_seeds(
          f'mnist1d: gap_closed, {label}, {HEADLINE_POOL:,}-row pool, seeds',
          [value for value in closed if value is not None],
          [seed for seed, value in zip(seeds, closed) if value is not None],
          TARGET_GAP_CLOSED if share <= 0.02 else None))
    for rows in pools:
      if rows:
        targets.append(results.over_seeds(
            f'mnist1d: ours − pseudo-labelling, {label}, {rows:,}-row pool, seeds',
            [mine - theirs for mine, theirs in zip(values(f'ours@{rows}'),
                                                   values(f'pseudo@{rows}'))],
            seeds, PSEUDO_LABEL_MARGIN))
    targets.append(results.over_seeds(
        f'mnist1d: ours (no pool) − keras.io recipe, {label}, seeds',
        [mine - theirs for mine, theirs in zip(values('ours@0'), values('recipe'))], seeds, 0.0))
    if HEADLINE_POOL in pools and 0 in pools:
      targets.append(results.over_seeds(
          f'mnist1d: ours with the {HEADLINE_POOL:,}-row pool − without, {label}, seeds',
          [mine - theirs for mine, theirs in zip(values(f'ours@{HEADLINE_POOL}'),
                                                 values('ours@0'))], seeds, 0.0))
    rows = [['scratch (labelled rows only)', _accuracy(values('scratch')), None],
            ['keras.io recipe (labelled rows only)', _accuracy(values('recipe')), None]]
    for pool_rows in pools:
      gaps = [distillation.gap_closed(ours, scratch, teacher) for ours, scratch, teacher in
              zip(values(f'ours@{pool_rows}'), values('scratch'), teachers)]
      known = [gap for gap in gaps if gap is not None]
      if pool_rows:
        rows.append([f'pseudo-labelling, {pool_rows:,}-row pool',
                     _accuracy(values(f'pseudo@{pool_rows}')), None])
      rows.append([f'ours, {pool_rows:,}-row pool' if pool_rows else 'ours, no pool',
                   _accuracy(values(f'ours@{pool_rows}')),
                   f'{statistics.fmean(known):.2f} ± {spread(known):.2f}' if known else None])
    for extra in measured['extra_labelled']:
      what = ('reference: the pool\'s true labels' if extra == HEADLINE_POOL else
              'scratch with more labelled rows')
      rows.append([f'{what} (+{extra:,} labelled rows)', _accuracy(values(f'labelled+{extra}')),
                   None])
    title = f'MNIST-1D, {label}: test accuracy (mean ± std over seeds); teacher {_accuracy(teachers)}'
    if HEADLINE_POOL in pools and measured['extra_labelled']:
      matched = rows_to_match(per_seed, architecture, measured['extra_labelled'])
      title += ('; scratch needs ' + (
          f'{matched:,} extra labelled rows' if matched else
          f'more than {max(measured["extra_labelled"]):,} extra labelled rows')
                + f' to match ours with the {HEADLINE_POOL:,}-row pool')
    tables.append(results.table(
        title,
        ['student', 'test accuracy', 'gap_closed (± std over seeds)'], rows))
  notes = [
      f'Data: the paper\'s draw (seed {mnist1d_data.PAPER_SEED}, default arguments: '
      f'{measured["split_rows"]["train"]:,} train, {measured["split_rows"]["test"]:,} test), '
      f'eval a draw of {mnist1d_data.EVAL_ROWS:,} rows with seed {mnist1d_data.EVAL_SEED}, '
      f'and the pool draws of {mnist1d_data.POOL_CHUNK_ROWS:,} rows with seeds '
      f'{mnist1d_data.POOL_FIRST_SEED} and up; a smaller pool is the start of a larger one.',
      'One teacher per seed (the DistributedTrainer executor, early stopping on eval); '
      'gap_closed is (ours − scratch) / (teacher − scratch) per seed, on test.',
      f'Every student: {BUDGET["student_steps"]:,} steps of {BUDGET["batch_size"]} labelled '
      f'rows (and as many pool rows with a pool) at learning rate '
      f'{BUDGET["student_learning_rate"]:g}.',
  ]
  ours = training.DistillationSettings()
  return {
      'title': 'MNIST-1D: distillation with an unlabelled pool, on test',
      'summary': (
          f'Seeds {", ".join(str(seed) for seed in seeds)}, fixed before any run. Ours: the '
          f'Distiller\'s defaults (T = {ours.temperature:g}, alpha = {ours.alpha:g}, mixup '
          f'{ours.mixup:g}, {ours.learning_rate_schedule} learning rate), pool rows through '
          'the soft term only. Pseudo-labelling: the same executor with the teacher\'s most '
          'likely class as the target (T = 1, no mixup). Teachers: '
          + ', '.join(f'{value:.4f}' for value in teachers) + '.'),
      'targets': targets,
      'tables': tables,
      'notes': notes,
  }


def main() -> None:
  parser = common.argument_parser(__doc__, 'distillery-mnist1d-benchmark')
  parser.add_argument('--seeds', default=','.join(str(seed) for seed in SEEDS))
  parser.add_argument('--pools', default=','.join(str(rows) for rows in POOLS))
  parser.add_argument('--architectures', default=','.join(ARCHITECTURES))
  parser.add_argument('--extra-labelled', default=','.join(str(rows) for rows in
                                                           EXTRA_LABELLED_ROWS),
                      help='extra labelled rows given to scratch (empty for none)')
  parser.add_argument('--processes', type=int, default=PROCESSES)
  args = parser.parse_args()
  seeds = [int(seed) for seed in args.seeds.split(',')]
  pools = [int(rows) for rows in args.pools.split(',')]
  architectures = args.architectures.split(',')

  def measure():
    measured = run(args.work_dir, seeds, pools, architectures, args.processes,
                   [int(rows) for rows in args.extra_labelled.split(',') if rows])
    return {**describe(measured), **measured, 'budget': BUDGET}

  common.print_result(measure, args, 'mnist1d')


if __name__ == '__main__':
  main()
