"""MNIST-1D benchmark: where the small student's gap is real, does an unlabelled pool close it?

One experiment, run under named configurations (`CONFIGURATIONS`); each writes its own
result, `docs/results/mnist1d-<configuration>.json`:

- `small`: the module's teacher, the CNN (480 parameters) and MLP students, the
  Distiller's defaults, 6,000 steps; seeds 101-105, pools of 0, 10k, 50k and 200k rows.
- `large-cnn`: a 128-filter teacher and a 16-filter CNN student (1,050 parameters, 1.0%),
  20,000 steps with a cosine decay; ours at T = 1 and alpha 0.5 or 0, chosen on eval.
- `large-cnn-held-out`: `large-cnn` on seeds 201-205, fixed before any run with them, with
  the students the headline targets need (pools of 0 and 50k rows).
- `large-mlp`, `large-mlp-held-out`: the same teacher with the MLP student (6,538
  parameters, 6.2%); ours at T 1 or 2 and alpha 0.5 or 0, chosen on eval.
- `mlp-mixup-pseudo`: on the ten MLP seeds, ours at the setting each seed's eval chose in
  the saved `large-mlp` results, against pseudo-labelling given ours' mixup.

The data goes the real path: ArrowCsvExampleGen over the paper's train/test split and an
eval draw (`pipelines/mnist1d_data.py`), StatisticsGen, SchemaGen, IngestionTransform;
the teacher trained by the DistributedTrainer executor with its module's settings; every
student by the Distiller executor, the pool read by a second ExampleGen and given as
`transfer_examples`. Accuracy is the one measuring module's, on all of `test` (the
paper's 1,000 rows), through each model's serving signature. Test accuracy decides
nothing: where ours has several settings, eval chooses among them per seed and pool
(`choose_on_eval`): a lead within noise on eval is a tie, and a tie keeps the choice
already made, starting from the Distiller's default setting (else the first).

Students, each with the same student, steps, schedule and seed:
- scratch: the Distiller at alpha = 1 (labels only);
- the keras.io recipe (T = 10, alpha = 0.1, nothing else), labelled rows only;
- pseudo-labelling: the teacher's most likely class as the target on every row, pool
  included (`teacher_targets='hard'`, T = 1, no mixup), the usual semi-supervised baseline;
- ours, with each pool;
- a reference that is given the 50k pool's true labels (scratch on labelled + pool), and
  scratch with more labelled rows: how many it needs to match ours with the 50k pool.

Seeds and students run two at a time in worker processes: the figures are accuracies,
which the same seed and data give under any load.

Usage:
  python -m benchmarks.mnist1d --config small|large-cnn|... --json [--seeds 101,...]
      [--pools 0,10000,50000,200000] [--extra-labelled 4000,16000] [--student-steps N]
"""

import dataclasses
import itertools
import json
import os
import statistics
from typing import Dict, List, Optional, Tuple

import tensorflow_transform as tft
from tfx import v1 as tfx
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs

from benchmarks import common
from benchmarks import distillation
from benchmarks import results
from tfx_distillery import components
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import reading
from tfx_distillery.components.distiller import training
from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import mnist1d_data
from tfx_distillery.pipelines import pipeline
from tfx_distillery.pipelines import summary

# Chosen before any run of this benchmark; none was used to choose a default or a model.
SEEDS = (101, 102, 103, 104, 105)
# Fixed before any run with them: seeds no other configuration uses.
HELD_OUT_SEEDS = (201, 202, 203, 204, 205)
POOLS = (0, 10000, 50000, 200000)
HEADLINE_POOL = 50000
PROCESSES = 2
TASK_TIMEOUT_S = 3600
TARGET_GAP_CLOSED = 0.75
PSEUDO_LABEL_MARGIN = 0.01
# The teacher's steps (its epochs, batch and learning rate are its module's), and every
# student's: 6,000 steps of 128 labelled rows (and 128 pool rows with a pool).
BUDGET = {'teacher_steps': 4000, 'student_steps': 6000, 'batch_size': 128, 'epochs': 6,
          'eval_steps': 8, 'student_learning_rate': 3e-3}
# The larger teacher's probe budget (docs/mnist1d.md): every student 20,000 steps.
LARGE_BUDGET = {**BUDGET, 'student_steps': 20000}
PSEUDO_LABELS = {'teacher_targets': 'hard', 'temperature': 1.0, 'mixup': 0.0, 'noise': 0.0}


@dataclasses.dataclass(frozen=True)
class Configuration:
  """One named setting of the experiment.

  Attributes:
    name: Its name on the command line and in `mnist1d-<name>.json`.
    title: The section title in docs/benchmarks.md.
    seeds: The seeds, one teacher each.
    pools: Unlabelled pool sizes (rows) ours and pseudo-labelling get; 0 is none.
    extra_labelled: True-labelled pool rows given to scratch (the headline pool's is added).
    architectures: The student architectures, each with its hyperparameters beyond
      `architecture` (the student module's).
    budget: Steps, batch and learning rates (`BUDGET`'s keys).
    teacher_hyperparameters: The teacher module's hyperparameters; empty for its defaults.
    ours: (temperature, alpha) settings of ours, chosen per seed and pool on eval; empty for
      the Distiller's defaults.
    schedule: Every student's learning-rate schedule; None for the Distiller's default.
    saved_choices: For `mlp-mixup-pseudo`: the configurations whose saved results hold each
      seed's eval choice for ours. Empty for the students table.
  """
  name: str
  title: str
  seeds: Tuple[int, ...]
  pools: Tuple[int, ...]
  extra_labelled: Tuple[int, ...]
  architectures: Dict[str, dict]
  budget: dict
  teacher_hyperparameters: dict = dataclasses.field(default_factory=dict)
  ours: Tuple[Tuple[float, float], ...] = ()
  schedule: Optional[str] = None
  saved_choices: Tuple[str, ...] = ()

  @property
  def result_name(self) -> str:
    return f'mnist1d-{self.name}'


_LARGE_TEACHER = {'filters': 128}
# mnist1d_large's probe: T = 1 beat 2 and 4 on eval for the 1,050-parameter CNN (docs/mnist1d.md).
_LARGE_CNN_OURS = ((1.0, 0.5), (1.0, 0.0))
_LARGE_MLP_OURS = tuple(itertools.product((1.0, 2.0), (0.5, 0.0)))


def _large(name: str, title: str, seeds, pools, extra_labelled, architecture: str,
           student: dict, ours) -> Configuration:
  return Configuration(name=name, title=title, seeds=seeds, pools=pools,
                       extra_labelled=extra_labelled, architectures={architecture: student},
                       budget=LARGE_BUDGET, teacher_hyperparameters=_LARGE_TEACHER, ours=ours,
                       schedule='cosine')


CONFIGURATIONS: Dict[str, Configuration] = {configuration.name: configuration for configuration in (
    Configuration(
        name='small', title='MNIST-1D: distillation with an unlabelled pool, on test',
        seeds=SEEDS, pools=POOLS, extra_labelled=(4000, 16000, 50000),
        architectures={'cnn': {}, 'mlp': {}}, budget=BUDGET),
    _large('large-cnn', 'MNIST-1D, a 128-filter teacher and a 16-filter CNN student: '
           'distillation with an unlabelled pool, on test', SEEDS, POOLS, (4000, 16000), 'cnn',
           {'filters': 16}, _LARGE_CNN_OURS),
    _large('large-cnn-held-out', 'MNIST-1D with the larger teacher, on held-out seeds: the '
           'headline figures again', HELD_OUT_SEEDS, (0, HEADLINE_POOL), (), 'cnn',
           {'filters': 16}, _LARGE_CNN_OURS),
    _large('large-mlp', 'MNIST-1D, the 128-filter teacher and the MLP student: distillation '
           'with an unlabelled pool, on test', SEEDS, (0, HEADLINE_POOL), (), 'mlp', {},
           _LARGE_MLP_OURS),
    _large('large-mlp-held-out', 'MNIST-1D, the 128-filter teacher and the MLP student, on '
           'held-out seeds: the headline figures again', HELD_OUT_SEEDS, (0, HEADLINE_POOL), (),
           'mlp', {}, _LARGE_MLP_OURS),
    dataclasses.replace(
        _large('mlp-mixup-pseudo', 'MNIST-1D, the MLP student: its margin over '
               'pseudo-labelling given the same mixup, on test', SEEDS + HELD_OUT_SEEDS,
               (HEADLINE_POOL,), (), 'mlp', {}, _LARGE_MLP_OURS),
        saved_choices=('large-mlp', 'large-mlp-held-out')),
)}


def ours_name(temperature: float, alpha: float) -> str:
  return f'ours-T{temperature:g}-alpha{alpha:g}'


def student_settings(configuration: Configuration) -> Dict[str, training.DistillationSettings]:
  """Every student's Distiller settings: scratch, recipe, pseudo and ours (each of its settings)."""
  ours = training.DistillationSettings(train_baseline=False)
  settings = {'scratch': dataclasses.replace(ours, alpha=1.0),
              'recipe': dataclasses.replace(ours, **distillation.RECIPE),
              'pseudo': dataclasses.replace(ours, **PSEUDO_LABELS),
              # Pseudo-labelling given ours' mixup (mlp-mixup-pseudo's baseline).
              'pseudo-mixup': dataclasses.replace(ours, **{**PSEUDO_LABELS,
                                                           'mixup': ours.mixup})}
  if not configuration.ours:
    settings['ours'] = ours
  for temperature, alpha in configuration.ours:
    settings[ours_name(temperature, alpha)] = dataclasses.replace(
        ours, temperature=temperature, alpha=alpha)
  if configuration.schedule:
    # Last, so that every student has it, the recipe too.
    settings = {name: dataclasses.replace(value, learning_rate_schedule=configuration.schedule)
                for name, value in settings.items()}
  return settings


def ours_settings_names(configuration: Configuration) -> List[str]:
  return ([ours_name(temperature, alpha) for temperature, alpha in configuration.ours]
          or ['ours'])


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


def run_teacher(work_dir: str, dataset, uris: tuple, seed: int,
                configuration_name: str) -> dict:
  """The seed's teacher, trained by the DistributedTrainer executor, and its test accuracy.

  A worker's task: it takes the configuration's name, as a spawned worker imports this
  module afresh.
  """
  configuration = CONFIGURATIONS[configuration_name]
  transformed_uri, graph_uri, raw_uri = uris
  output_dir = os.path.join(work_dir, f'teacher-{seed}')
  inputs = common.executor_inputs(transformed_uri, graph_uri)
  if configuration.teacher_hyperparameters:
    inputs[standard_component_specs.HYPERPARAMETERS_KEY] = [
        distillation.hyperparameters_artifact(output_dir,
                                              configuration.teacher_hyperparameters)]
  teacher_uri = distillation.train_teacher(inputs, dataset, configuration.budget, output_dir,
                                           seed=seed)
  test_set = distillation.test_set_for(raw_uri, graph_uri, dataset)
  measured = measuring.measure(evaluation.serving_model_path(teacher_uri), test_set,
                               latency_runs=1)
  return {'uri': teacher_uri, 'accuracy': measured['accuracy'],
          'majority': measured['majority_accuracy'], 'test_examples': test_set.size,
          'curve': distillation.teacher_curve(teacher_uri)}


def run_student(work_dir: str, dataset, uris: tuple, teacher_uri: str, seed: int,
                configuration_name: str, architecture: str, name: str, settings_name: str,
                budget: dict, pool_uri: Optional[str] = None) -> dict:
  """One student by the Distiller executor: its eval accuracy (which chooses) and test's.

  `name` is its row in the table: `scratch`, `recipe`, `ours@ROWS`, `pseudo@ROWS` or
  `labelled+ROWS` (scratch on `uris`, the labelled rows and ROWS more).
  """
  configuration = CONFIGURATIONS[configuration_name]
  transformed_uri, graph_uri, raw_uri = uris
  inputs = common.executor_inputs(transformed_uri, graph_uri)
  if pool_uri:
    inputs.update(transfer_input(pool_uri))
  run = distillation.distill(
      inputs, teacher_uri, dataset, budget,
      os.path.join(work_dir, 'students', f'{architecture}-{name}-{settings_name}-{seed}'), seed,
      student_settings(configuration)[settings_name],
      {'architecture': architecture, **configuration.architectures[architecture]})
  test_set = distillation.test_set_for(raw_uri, graph_uri, dataset)
  # Per eval row, whether the student is right: a choice between settings compares them
  # row by row, so that a lead of a row or two is a tie.
  eval_correct = measuring.correct_predictions(
      measuring.load_scorer(run['model_dir']), measuring.from_raw_examples(
          raw_uri, 'eval', tft.TFTransformOutput(graph_uri), reading.DEFAULT_LABEL_KEY,
          dataset.label_column, max_examples=10**9))
  return {'accuracy': measuring.measure(run['model_dir'], test_set, latency_runs=1)['accuracy'],
          'eval_accuracy': float(eval_correct.mean()), 'eval_correct': eval_correct,
          'student_params': run['student_parameters'],
          'teacher_params': run['teacher_parameters'][0]}


def student_runs(configuration: Configuration, pools) -> List[tuple]:
  """(architecture, name in the table, settings, pool rows) of every student a seed trains."""
  runs = []
  for architecture in configuration.architectures:
    runs += [(architecture, 'scratch', 'scratch', 0), (architecture, 'recipe', 'recipe', 0)]
    for rows in pools:
      runs += [(architecture, f'ours@{rows}', settings, rows)
               for settings in ours_settings_names(configuration)]
      if rows:
        runs.append((architecture, f'pseudo@{rows}', 'pseudo', rows))
  return runs


def choose_on_eval(figures: Dict[str, List[dict]],
                   settings: Dict[str, training.DistillationSettings]) -> Dict[str, dict]:
  """Per table name, its run; where ours has several settings, the one eval chooses.

  A lead within noise is a tie, and a tie keeps the setting already chosen. The choice
  starts at the Distiller's default temperature and alpha (else the first setting), and
  moves to each other setting in turn, in the configuration's order, only when that one
  leads the current choice beyond noise on the same eval rows (McNemar at 5%, the one
  measuring module's `paired_comparison`). Two settings a row or two apart on eval are
  never decided by that row: seed 201's T 2 led T 1 by one row of 1,000, and lost 0.025
  on test. (The Distiller's own tuning, `training.choose_trial`, compares only the best
  with the default.)

  Args:
    figures: Per table name, its runs: `settings` (a name in `settings`), `eval_accuracy`,
      `eval_correct` (per eval row) and `accuracy` (test).
    settings: Every student's Distiller settings, by name (`student_settings`).

  Returns:
    Per table name, the chosen run, with `why` (one line) where there was a choice.
  """
  defaults = training.DistillationSettings()
  chosen = {}
  for name, runs in figures.items():
    if len(runs) == 1:
      chosen[name] = runs[0]
      continue
    default = next((index for index, run in enumerate(runs)
                    if (settings[run['settings']].temperature, settings[run['settings']].alpha)
                    == (defaults.temperature, defaults.alpha)), 0)
    current, steps = default, []
    for index, run in enumerate(runs):
      if index == default:
        continue
      comparison = measuring.paired_comparison(run['eval_correct'], runs[current]['eval_correct'])
      moved = comparison['difference'] > 0 and not comparison['within_noise']
      steps.append(f"{run['settings']} {comparison['difference']:+.3f} against "
                   f"{runs[current]['settings']} (p {comparison['p_value']:.3f}"
                   f"{', moved' if moved else ''})")
      if moved:
        current = index
    chosen[name] = {**runs[current], 'why': (f"from {runs[default]['settings']}: "
                                             + '; '.join(steps))}
  return chosen


def run(work_dir: str, configuration: Configuration, seeds, pools, extra_labelled,
        budget: dict, processes: int = PROCESSES) -> dict:
  """Teachers, then every student of every seed, `processes` at a time; ours chosen on eval."""
  prepared = prepare(work_dir, pools, extra_labelled)
  transformed, dataset = prepared['transformed'], prepared['dataset']
  with common.process_pool(processes) as pool:
    teachers = {seed: pool.submit(run_teacher, work_dir, dataset, transformed, seed,
                                  configuration.name) for seed in seeds}
    teachers = {seed: future.result(timeout=TASK_TIMEOUT_S) for seed, future in teachers.items()}
    futures = []
    for seed in seeds:
      tasks = [(transformed, architecture, name, settings, prepared['pools'].get(rows))
               for architecture, name, settings, rows in student_runs(configuration, pools)]
      tasks += [(uris, architecture, f'labelled+{rows}', 'scratch', None)
                for architecture in configuration.architectures
                for rows, uris in prepared['labelled_more'].items()]
      for uris, architecture, name, settings, pool_uri in tasks:
        futures.append((seed, architecture, name, settings, pool.submit(
            run_student, work_dir, dataset, uris, teachers[seed]['uri'], seed,
            configuration.name, architecture, name, settings, budget, pool_uri)))
    figures = [(seed, architecture, name, settings, future.result(timeout=TASK_TIMEOUT_S))
               for seed, architecture, name, settings, future in futures]
  per_seed = []
  for seed in seeds:
    students, chosen_settings, candidates_kept, chosen_why = {}, {}, {}, {}
    for architecture in configuration.architectures:
      candidates = {}
      for figure_seed, figure_architecture, name, settings, figure in figures:
        if (figure_seed, figure_architecture) == (seed, architecture):
          candidates.setdefault(name, []).append({**figure, 'settings': settings})
      chosen = choose_on_eval(candidates, student_settings(configuration))
      students[architecture] = {name: figure['accuracy'] for name, figure in chosen.items()}
      students[architecture].update(student_params=chosen['scratch']['student_params'],
                                    teacher_params=chosen['scratch']['teacher_params'])
      chosen_settings.update({name: figure['settings'] for name, figure in chosen.items()
                              if name.startswith('ours@')})
      candidates_kept.update({name: [{key: run[key] for key in ('settings', 'eval_accuracy',
                                                                 'accuracy')} for run in runs]
                              for name, runs in candidates.items() if len(runs) > 1})
      chosen_why.update({name: figure['why'] for name, figure in chosen.items()
                         if 'why' in figure})
    record = {'seed': seed, 'teacher': teachers[seed]['accuracy'],
              'majority': teachers[seed]['majority'],
              'teacher_kept_epoch': teachers[seed]['curve']['kept_epoch'], 'students': students}
    if len(ours_settings_names(configuration)) > 1:
      # Only a configuration with one architecture has several settings of ours.
      record.update(ours_chosen=chosen_settings, candidates=candidates_kept,
                    ours_chosen_why=chosen_why)
    per_seed.append(record)
  return {'seeds': list(seeds), 'pools': list(pools),
          'architectures': list(configuration.architectures),
          'extra_labelled': labelled_more_rows(pools, extra_labelled),
          'split_rows': prepared['split_rows'],
          'test_examples': teachers[seeds[0]]['test_examples'], 'per_seed': per_seed,
          'budget': budget}


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


def _or(values) -> str:
  return ' or '.join(f'{value:g}' for value in dict.fromkeys(values))


def describe(configuration: Configuration, measured: dict) -> dict:
  """Targets, tables and notes for docs/benchmarks.md."""
  per_seed, seeds, pools = measured['per_seed'], measured['seeds'], measured['pools']
  prefix = configuration.result_name
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
          f'{prefix}: gap_closed, {label}, {HEADLINE_POOL:,}-row pool, seeds',
          [value for value in closed if value is not None],
          [seed for seed, value in zip(seeds, closed) if value is not None],
          TARGET_GAP_CLOSED if share <= 0.02 else None))
    for rows in pools:
      if rows:
        targets.append(results.over_seeds(
            f'{prefix}: ours − pseudo-labelling, {label}, {rows:,}-row pool, seeds',
            [mine - theirs for mine, theirs in zip(values(f'ours@{rows}'),
                                                   values(f'pseudo@{rows}'))],
            seeds, PSEUDO_LABEL_MARGIN))
    targets.append(results.over_seeds(
        f'{prefix}: ours (no pool) − keras.io recipe, {label}, seeds',
        [mine - theirs for mine, theirs in zip(values('ours@0'), values('recipe'))], seeds, 0.0))
    if HEADLINE_POOL in pools and 0 in pools:
      targets.append(results.over_seeds(
          f'{prefix}: ours with the {HEADLINE_POOL:,}-row pool − without, {label}, seeds',
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
  budget = measured['budget']
  ours = student_settings(configuration)[ours_settings_names(configuration)[0]]
  students = ', '.join(
      f'the {architecture.upper()}' + (f' ({", ".join(f"{key} {value}" for key, value in hyper.items())})'
                                       if hyper else '')
      for architecture, hyper in configuration.architectures.items())
  notes = [
      f'Data: the paper\'s draw (seed {mnist1d_data.PAPER_SEED}, default arguments: '
      f'{measured["split_rows"]["train"]:,} train, {measured["split_rows"]["test"]:,} test), '
      f'eval a draw of {mnist1d_data.EVAL_ROWS:,} rows with seed {mnist1d_data.EVAL_SEED}, '
      f'and the pool draws of {mnist1d_data.POOL_CHUNK_ROWS:,} rows with seeds '
      f'{mnist1d_data.POOL_FIRST_SEED} and up; a smaller pool is the start of a larger one.',
      'One teacher per seed (the DistributedTrainer executor, early stopping on eval); '
      'gap_closed is (ours − scratch) / (teacher − scratch) per seed, on test.',
      'Teacher: ' + (', '.join(f'{key} {value}' for key, value in
                               configuration.teacher_hyperparameters.items())
                     or 'the module\'s defaults') + f'; students: {students}. Every student: '
      f'{budget["student_steps"]:,} steps of {budget["batch_size"]} labelled rows (and as many '
      f'pool rows with a pool) at learning rate {budget["student_learning_rate"]:g}, '
      f'{ours.learning_rate_schedule} schedule.',
  ]
  if any('ours_chosen' in run for run in per_seed):
    chosen = [f'seed {run["seed"]}: ' + ', '.join(
        f'{name.split("@")[1]} rows {settings[len("ours-"):]}'
        for name, settings in sorted(run['ours_chosen'].items(),
                                     key=lambda item: int(item[0].split('@')[1])))
              for run in per_seed]
    defaults = training.DistillationSettings()
    notes.append('Ours\' setting, chosen on eval per seed and pool size: from the '
                 f'Distiller\'s default (T {defaults.temperature:g}, alpha {defaults.alpha:g}; '
                 'else the first setting), moved to another setting only when it leads the '
                 'current choice beyond noise on the same eval rows (McNemar at 5%), in the '
                 'configuration\'s order (pool rows: setting): '
                 + '; '.join(chosen) + '.')
  if configuration.ours:
    ours_text = (f'the Distiller at T {_or(t for t, _ in configuration.ours)} and alpha '
                 f'{_or(a for _, a in configuration.ours)}, chosen on eval, mixup {ours.mixup:g}')
  else:
    ours_text = (f'the Distiller\'s defaults (T = {ours.temperature:g}, alpha = {ours.alpha:g}, '
                 f'mixup {ours.mixup:g}, {ours.learning_rate_schedule} learning rate)')
  return {
      'title': configuration.title,
      'summary': (
          f'Seeds {", ".join(str(seed) for seed in seeds)}, fixed before any run. Ours: '
          f'{ours_text}, pool rows through the soft term only. Pseudo-labelling: the same '
          'executor with the teacher\'s most likely class as the target (T = 1, no mixup), '
          'with the same steps and schedule. Teachers: '
          + ', '.join(f'{value:.4f}' for value in teachers) + '.'),
      'targets': targets,
      'tables': tables,
      'notes': notes,
  }


# mlp-mixup-pseudo: ours at each seed's saved eval choice against pseudo-labelling with mixup.


def saved_seeds(configuration: Configuration,
                results_dir: str = results.RESULTS_DIR) -> Dict[int, dict]:
  """Per seed: the saved result it comes from, ours' eval choice and the saved test figures."""
  saved = {}
  (architecture,) = configuration.architectures
  ours, pseudo = f'ours@{HEADLINE_POOL}', f'pseudo@{HEADLINE_POOL}'
  for name in configuration.saved_choices:
    source = CONFIGURATIONS[name].result_name
    with open(os.path.join(results_dir, f'{source}.json')) as handle:
      record = json.load(handle)['result']
    for seed_run in record['per_seed']:
      students = seed_run['students'][architecture]
      saved[seed_run['seed']] = {'source': source, 'ours_settings': seed_run['ours_chosen'][ours],
                                 'ours': students[ours], 'pseudo': students[pseudo],
                                 'teacher': seed_run['teacher']}
  return saved


def check_seeds(configuration: Configuration, seeds, saved: Dict[int, dict]) -> None:
  """Refuses a seed with no saved eval choice, naming it and where choices come from."""
  missing = [seed for seed in seeds if seed not in saved]
  if missing:
    sources = ', '.join(f'docs/results/{CONFIGURATIONS[name].result_name}.json'
                        for name in configuration.saved_choices)
    raise ValueError(f'--seeds: {missing} have no eval choice for ours in {sources}; '
                     f'choose among {sorted(saved)}.')


def run_against_mixup_pseudo(work_dir: str, configuration: Configuration, seeds, budget: dict,
                             processes: int = PROCESSES) -> dict:
  """Teachers, then ours (at its saved eval choice) and pseudo with mixup per seed."""
  saved = saved_seeds(configuration)
  check_seeds(configuration, seeds, saved)
  (architecture,) = configuration.architectures
  prepared = prepare(work_dir, (HEADLINE_POOL,), ())
  transformed, dataset = prepared['transformed'], prepared['dataset']
  pool_uri = prepared['pools'][HEADLINE_POOL]
  with common.process_pool(processes) as pool:
    teachers = {seed: pool.submit(run_teacher, work_dir, dataset, transformed, seed,
                                  configuration.name) for seed in seeds}
    teachers = {seed: future.result(timeout=TASK_TIMEOUT_S) for seed, future in teachers.items()}
    futures = {seed: [pool.submit(run_student, work_dir, dataset, transformed,
                                  teachers[seed]['uri'], seed, configuration.name, architecture,
                                  name, settings, budget, pool_uri)
                      for name, settings in ((f'ours@{HEADLINE_POOL}',
                                              saved[seed]['ours_settings']),
                                             ('pseudo-mixup', 'pseudo-mixup'))]
               for seed in seeds}
    per_seed = []
    for seed, (ours, pseudo_mixup) in futures.items():
      ours = ours.result(timeout=TASK_TIMEOUT_S)
      pseudo_mixup = pseudo_mixup.result(timeout=TASK_TIMEOUT_S)
      per_seed.append({
          'seed': seed, 'source': saved[seed]['source'],
          'teacher': teachers[seed]['accuracy'], 'saved_teacher': saved[seed]['teacher'],
          'ours_settings': saved[seed]['ours_settings'],
          'ours': ours['accuracy'], 'ours_eval': ours['eval_accuracy'],
          'saved_ours': saved[seed]['ours'], 'saved_pseudo': saved[seed]['pseudo'],
          'pseudo_mixup': pseudo_mixup['accuracy'],
          'pseudo_mixup_eval': pseudo_mixup['eval_accuracy']})
  return {'seeds': list(seeds), 'pool_rows': HEADLINE_POOL, 'per_seed': per_seed,
          'budget': budget, 'test_examples': teachers[seeds[0]]['test_examples']}


def describe_against_mixup_pseudo(configuration: Configuration, measured: dict) -> dict:
  """The margin over pseudo-labelling with mixup per seed group, and the per-seed table."""
  targets = []
  for name in configuration.saved_choices:
    source = CONFIGURATIONS[name].result_name
    runs = [run for run in measured['per_seed'] if run['seed'] in CONFIGURATIONS[name].seeds]
    if runs:
      targets.append(results.over_seeds(
          f'{configuration.result_name}: ours − pseudo-labelling with mixup, MLP student, '
          f'{HEADLINE_POOL:,}-row pool (test), {source}\'s seeds',
          [run['ours'] - run['pseudo_mixup'] for run in runs], [run['seed'] for run in runs],
          PSEUDO_LABEL_MARGIN))
  rows = [[run['seed'], run['teacher'], run['ours_settings'][len('ours-'):], run['ours'],
           run['saved_pseudo'], run['pseudo_mixup'], run['ours'] - run['pseudo_mixup'],
           run['pseudo_mixup'] - run['saved_pseudo']] for run in measured['per_seed']]
  reproduced = [run['seed'] for run in measured['per_seed']
                if run['ours'] == run['saved_ours'] and run['teacher'] == run['saved_teacher']]
  budget = measured['budget']
  sources = ' or '.join(CONFIGURATIONS[name].result_name for name in configuration.saved_choices)
  return {
      'title': configuration.title,
      'summary': (
          f'Seeds {", ".join(str(seed) for seed in measured["seeds"])}; the '
          f'{HEADLINE_POOL:,}-row pool; the 128-filter teacher per seed; every student '
          f'{budget["student_steps"]:,} steps, {configuration.schedule} decay. Ours: the '
          f'Distiller at the T and alpha its seed\'s eval chose in {sources}, trained again in '
          'this run. Pseudo-labelling with mixup: the teacher\'s most likely class over the '
          'pool as the target, with ours\' mixup 1.'),
      'targets': targets,
      'tables': [results.table(
          'Per seed, test accuracy (pseudo-labelling without mixup: the saved result\'s)',
          ['seed', 'teacher', 'ours\' setting (eval)', 'ours', 'pseudo, no mixup (saved)',
           'pseudo with mixup', 'ours − pseudo with mixup', 'mixup\'s gain to pseudo'], rows)],
      'notes': [
          f'Ours and the teacher reproduce their saved test figures exactly on '
          f'{len(reproduced)} of {len(measured["per_seed"])} seeds'
          + (f' ({", ".join(str(seed) for seed in reproduced)})' if reproduced else '')
          + '; the margin compares the two students of this run either way.',
          'mixup\'s gain to pseudo compares this run\'s pseudo-labelling with the saved '
          'result\'s, trained in another run with the same seed and code.']}


def parse_arguments(argv: Optional[List[str]] = None):
  """The options, checked: (arguments, configuration, seeds, pools, extra rows, budget).

  A bad one is refused by name (SystemExit with argparse's message) before anything runs.
  """
  parser = common.argument_parser(__doc__, 'distillery-mnist1d-benchmark')
  parser.add_argument('--config', required=True, choices=sorted(CONFIGURATIONS),
                      help='the named configuration; its result is mnist1d-CONFIG.json')
  parser.add_argument('--seeds', help='default: the configuration\'s')
  parser.add_argument('--pools', help='pool sizes in rows; default: the configuration\'s')
  parser.add_argument('--extra-labelled',
                      help='extra labelled rows given to scratch (empty for none); default: the '
                      'configuration\'s')
  parser.add_argument('--student-steps', type=int,
                      help='every student\'s steps (a shorter trial; the figures are for the '
                      'default)')
  parser.add_argument('--processes', type=int, default=PROCESSES)
  args = parser.parse_args(argv)
  configuration = CONFIGURATIONS[args.config]

  def integers(option: str, text: Optional[str], default) -> List[int]:
    if text is None:
      return list(default)
    try:
      return [int(part) for part in text.split(',') if part.strip()]
    except ValueError:
      parser.error(f'{option}: expected whole numbers separated by commas; got {text!r}')

  seeds = integers('--seeds', args.seeds, configuration.seeds)
  pools = integers('--pools', args.pools, configuration.pools)
  extra_labelled = integers('--extra-labelled', args.extra_labelled,
                            configuration.extra_labelled)
  if not seeds:
    parser.error('--seeds: give at least one seed')
  if args.student_steps is not None and args.student_steps < 1:
    parser.error(f'--student-steps must be a positive number of steps; got {args.student_steps}')
  if args.processes < 1:
    parser.error(f'--processes must be at least 1; got {args.processes}')
  if configuration.saved_choices:
    try:
      check_seeds(configuration, seeds, saved_seeds(configuration))
    except ValueError as error:
      parser.error(str(error))
  budget = {**configuration.budget, **({'student_steps': args.student_steps}
                                       if args.student_steps else {})}
  return args, configuration, seeds, pools, extra_labelled, budget


def main() -> None:
  args, configuration, seeds, pools, extra_labelled, budget = parse_arguments()

  def measure():
    if configuration.saved_choices:
      measured = run_against_mixup_pseudo(args.work_dir, configuration, seeds, budget,
                                          args.processes)
      return {**describe_against_mixup_pseudo(configuration, measured), **measured,
              'configuration': configuration.name}
    measured = run(args.work_dir, configuration, seeds, pools, extra_labelled, budget,
                   args.processes)
    return {**describe(configuration, measured), **measured, 'configuration': configuration.name}

  common.print_result(measure, args, configuration.result_name)


if __name__ == '__main__':
  main()
