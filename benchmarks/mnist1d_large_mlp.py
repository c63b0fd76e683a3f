"""MNIST-1D with the larger teacher and the MLP student: where do soft targets pay?

`benchmarks/mnist1d_large.py` measures the 16-filter CNN (1.0% of the 128-filter teacher):
with the 50,000-row pool, ours is level with pseudo-labelling. A probe through the
Distiller executor on eval (docs/probes/distiller_settings.py, seeds 101 and 102) found the
MLP (6,538 parameters, 6.2% of the same teacher) ahead of pseudo-labelling by 0.036 at
T = 2 with soft targets alone, and level with it at the CNN's T = 1 / alpha 0.5. This
benchmark measures that student on the real path, with the same teacher per seed,
budget, data, pool and baselines as mnist1d_large, on the pools the headline targets need
(none and 50,000 rows).

Ours is the Distiller at T in {1, 2} x alpha in {0.5, 0}: the pair with the highest accuracy
on `eval`, per seed and pool, is ours. The probe read eval only; test decides nothing.

Usage:
  python -m benchmarks.mnist1d_large_mlp --json [--seeds 101,...] [--pools 0,50000]
"""

import dataclasses
import itertools
import os
from typing import Dict, List, Optional

from benchmarks import common
from benchmarks import distillation
from benchmarks import mnist1d
from benchmarks import mnist1d_large
from tfx_distillery.components.common import measuring
from tfx_distillery.components.distiller import training

NAME = 'mnist1d_large_mlp'
ARCHITECTURE = 'mlp'
STUDENT_HYPERPARAMETERS = {'architecture': ARCHITECTURE}
POOLS = (0, mnist1d.HEADLINE_POOL)
# Ours' grid, chosen on eval per seed and pool: mnist1d_large's T = 1 and the Distiller's
# default T = 2, each at the default alpha and at soft targets alone.
TEMPERATURES = (1.0, 2.0)
ALPHAS = mnist1d_large.ALPHAS


def ours_name(temperature: float, alpha: float) -> str:
  return f'ours-T{temperature:g}-alpha{alpha:g}'


def student_settings() -> Dict[str, training.DistillationSettings]:
  """mnist1d_large's baselines (scratch, recipe, pseudo; cosine decay) and ours' grid."""
  settings = {name: value for name, value in mnist1d_large.student_settings().items()
              if not name.startswith('ours')}
  ours = training.DistillationSettings(train_baseline=False,
                                       learning_rate_schedule=mnist1d_large.SCHEDULE)
  for temperature, alpha in itertools.product(TEMPERATURES, ALPHAS):
    settings[ours_name(temperature, alpha)] = dataclasses.replace(
        ours, temperature=temperature, alpha=alpha)
  return settings


def student_runs(pools) -> List[tuple]:
  """(name in the table, settings, pool rows) of every student a seed trains on `train`."""
  runs = [('scratch', 'scratch', 0), ('recipe', 'recipe', 0)]
  for rows in pools:
    runs += [(f'ours@{rows}', ours_name(temperature, alpha), rows)
             for temperature, alpha in itertools.product(TEMPERATURES, ALPHAS)]
    if rows:
      runs.append((f'pseudo@{rows}', 'pseudo', rows))
  return runs


def run_student(work_dir: str, dataset, uris: tuple, teacher_uri: str, seed: int,
                name: str, settings_name: str, budget: dict,
                pool_uri: Optional[str] = None) -> dict:
  """One MLP student by the Distiller executor: its eval accuracy (which chooses) and test's."""
  transformed_uri, graph_uri, raw_uri = uris
  inputs = common.executor_inputs(transformed_uri, graph_uri)
  if pool_uri:
    inputs.update(mnist1d.transfer_input(pool_uri))
  run = distillation.distill(
      inputs, teacher_uri, dataset, budget,
      os.path.join(work_dir, 'students', f'{name}-{settings_name}-{seed}'), seed,
      student_settings()[settings_name], STUDENT_HYPERPARAMETERS)
  test_set = distillation.test_set_for(raw_uri, graph_uri, dataset)
  return {'accuracy': measuring.measure(run['model_dir'], test_set, latency_runs=1)['accuracy'],
          'eval_accuracy': run['student_accuracy'],
          'student_params': run['student_parameters'],
          'teacher_params': run['teacher_parameters'][0]}


def run(work_dir: str, seeds, pools, processes: int, budget: dict = mnist1d_large.BUDGET) -> dict:
  """Teachers, then every student of every seed, two at a time; ours chosen on eval."""
  prepared = mnist1d.prepare(work_dir, pools, extra_labelled=())
  transformed, dataset = prepared['transformed'], prepared['dataset']
  with common.process_pool(processes) as pool:
    teachers = {seed: pool.submit(mnist1d_large.run_teacher, work_dir, dataset, transformed,
                                  seed) for seed in seeds}
    teachers = {seed: future.result(timeout=mnist1d.TASK_TIMEOUT_S)
                for seed, future in teachers.items()}
    futures = []
    for seed in seeds:
      for name, settings_name, rows in student_runs(pools):
        futures.append((seed, name, settings_name, pool.submit(
            run_student, work_dir, dataset, transformed, teachers[seed]['uri'], seed, name,
            settings_name, budget, prepared['pools'].get(rows))))
      for rows, uris in prepared['labelled_more'].items():
        futures.append((seed, f'labelled+{rows}', 'scratch', pool.submit(
            run_student, work_dir, dataset, uris, teachers[seed]['uri'], seed,
            f'labelled+{rows}', 'scratch', budget)))
    figures = [(seed, name, settings_name, future.result(timeout=mnist1d.TASK_TIMEOUT_S))
               for seed, name, settings_name, future in futures]
  per_seed = []
  for seed in seeds:
    candidates = {}
    for figure_seed, name, settings_name, figure in figures:
      if figure_seed == seed:
        candidates.setdefault(name, []).append({**figure, 'settings': settings_name})
    chosen = mnist1d_large.choose_on_eval(candidates)
    students = {name: figure['accuracy'] for name, figure in chosen.items()}
    students.update(student_params=chosen['scratch']['student_params'],
                    teacher_params=chosen['scratch']['teacher_params'])
    per_seed.append({
        'seed': seed, 'teacher': teachers[seed]['accuracy'],
        'majority': teachers[seed]['majority'],
        'teacher_kept_epoch': teachers[seed]['curve']['kept_epoch'],
        'students': {ARCHITECTURE: students},
        'ours_chosen': {name: figure['settings'] for name, figure in chosen.items()
                        if name.startswith('ours@')},
        'candidates': {name: [{key: run[key] for key in ('settings', 'eval_accuracy',
                                                         'accuracy')} for run in runs]
                       for name, runs in candidates.items() if len(runs) > 1}})
  return {'seeds': list(seeds), 'pools': list(pools), 'architectures': [ARCHITECTURE],
          'extra_labelled': mnist1d.labelled_more_rows(pools, ()),
          'split_rows': prepared['split_rows'],
          'test_examples': teachers[seeds[0]]['test_examples'], 'per_seed': per_seed,
          'budget': budget}


def describe(measured: dict) -> dict:
  """mnist1d's targets and tables, named as this benchmark's, with ours' choices."""
  described = mnist1d.describe(measured)
  for target in described['targets']:
    target['figure'] = target['figure'].replace('mnist1d:', f'{NAME}:', 1)
  budget = measured['budget']
  chosen = [f'seed {run["seed"]}: ' + ', '.join(
      f'{name.split("@")[1]} rows {settings[len("ours-"):]}'
      for name, settings in sorted(run['ours_chosen'].items(),
                                   key=lambda item: int(item[0].split('@')[1])))
            for run in measured['per_seed']]
  described['notes'] = described['notes'][:2] + [
      f'Teacher: {mnist1d_large.TEACHER_HYPERPARAMETERS["filters"]} filters (mnist1d_large\'s, '
      'the same per seed); student: the MNIST-1D MLP. Every student: '
      f'{budget["student_steps"]:,} steps of {budget["batch_size"]} labelled rows (and as '
      f'many pool rows with a pool) at learning rate {budget["student_learning_rate"]:g}, '
      f'{mnist1d_large.SCHEDULE} decay.',
      'Ours\' T and alpha, chosen on eval per seed and pool size (pool rows: setting): '
      + '; '.join(chosen) + '.']
  described['title'] = ('MNIST-1D, the 128-filter teacher and the MLP student: '
                        'distillation with an unlabelled pool, on test')
  described['summary'] = (
      f'Seeds {", ".join(str(seed) for seed in measured["seeds"])}. Ours: the Distiller at '
      f'T {" or ".join(f"{value:g}" for value in TEMPERATURES)} and alpha '
      f'{" or ".join(f"{value:g}" for value in ALPHAS)}, chosen on eval, mixup 1, pool rows '
      'through the soft term only. Baselines as in mnist1d_large, with the same steps and '
      'decay. Teachers: ' + ', '.join(f'{run["teacher"]:.4f}' for run in measured['per_seed'])
      + '.')
  return described


def main() -> None:
  parser = common.argument_parser(__doc__, 'distillery-mnist1d-large-mlp-benchmark')
  parser.add_argument('--seeds', default=','.join(str(seed) for seed in mnist1d.SEEDS))
  parser.add_argument('--pools', default=','.join(str(rows) for rows in POOLS))
  parser.add_argument('--student-steps', type=int,
                      default=mnist1d_large.BUDGET['student_steps'],
                      help='every student\'s steps (a shorter trial; the figures are for the '
                      'default)')
  parser.add_argument('--processes', type=int, default=mnist1d.PROCESSES)
  args = parser.parse_args()
  # Passed to the workers: a spawned worker imports this module afresh.
  budget = {**mnist1d_large.BUDGET, 'student_steps': args.student_steps}

  def measure():
    measured = run(args.work_dir, [int(seed) for seed in args.seeds.split(',')],
                   [int(rows) for rows in args.pools.split(',')], args.processes, budget)
    return {**describe(measured), **measured}

  common.print_result(measure, args, NAME)


if __name__ == '__main__':
  main()
