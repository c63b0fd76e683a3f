"""The MLP's lead over pseudo-labelling: the soft targets', or mixup's?

Ours trains its soft term on mixup-mixed rows; the pseudo-labelling baseline of
`benchmarks/mnist1d_large_mlp.py` (the issue's: the teacher's hard labels over the pool) has
no mixup. A probe on eval (docs/mnist1d.md, the fourth probe) found mixup worth 0.0105 to
pseudo-labelling for the CNN, which it brought level with ours, and 0.001 for the MLP. This
benchmark measures the MLP's margin on test against pseudo-labelling *with* ours' mixup, on
the ten seeds of mnist1d_large_mlp (101-105) and mnist1d_mlp_held_out (201-205), with the
50,000-row pool.

Per seed, in one run: the teacher (mnist1d_large's), ours at the T and alpha that seed's eval
chose in its saved result (`ours_chosen`; test chose nothing), and pseudo-labelling with
mixup 1, all on the same data, pool, budget and seeds. Ours is trained again here, not read,
so the margin compares two students of one run; the run also says whether each seed's ours
and teacher reproduce the saved test figures.

Usage:
  python -m benchmarks.mnist1d_mlp_mixup_pseudo --json [--seeds 101,...,205]
"""

import dataclasses
import json
import os
from typing import Dict, List

from benchmarks import common
from benchmarks import distillation
from benchmarks import mnist1d
from benchmarks import mnist1d_held_out
from benchmarks import mnist1d_large
from benchmarks import mnist1d_large_mlp
from benchmarks import results
from tfx_distillery.components.common import measuring
from tfx_distillery.components.distiller import training

NAME = 'mnist1d_mlp_mixup_pseudo'
POOL_ROWS = mnist1d.HEADLINE_POOL
OURS = f'ours@{POOL_ROWS}'
PSEUDO = f'pseudo@{POOL_ROWS}'
# Where each seed's eval choice and saved figures are: the MLP benchmark and its held-out run.
SOURCES = {mnist1d_large_mlp.NAME: mnist1d.SEEDS,
           'mnist1d_mlp_held_out': mnist1d_held_out.HELD_OUT_SEEDS}
SEEDS = tuple(seed for seeds in SOURCES.values() for seed in seeds)
MARGIN_TARGET = 0.01


def pseudo_with_mixup_settings() -> training.DistillationSettings:
  """mnist1d_large's pseudo-labelling (hard targets, cosine decay) with ours' mixup."""
  return dataclasses.replace(mnist1d_large.student_settings()['pseudo'], mixup=1.0)


def saved_seeds(results_dir: str = results.RESULTS_DIR) -> Dict[int, dict]:
  """Per seed: the source benchmark, ours' eval choice and the saved test figures."""
  saved = {}
  for name in SOURCES:
    with open(os.path.join(results_dir, f'{name}.json')) as handle:
      record = json.load(handle)['result']
    for run in record['per_seed']:
      students = run['students'][mnist1d_large_mlp.ARCHITECTURE]
      saved[run['seed']] = {'source': name, 'ours_settings': run['ours_chosen'][OURS],
                            'ours': students[OURS], 'pseudo': students[PSEUDO],
                            'teacher': run['teacher']}
  return saved


def check_seeds(seeds, saved: Dict[int, dict]) -> None:
  """Refuses a seed with no saved eval choice, naming it and where choices come from."""
  missing = [seed for seed in seeds if seed not in saved]
  if missing:
    raise ValueError(f'--seeds: {missing} have no eval choice for ours in '
                     f'{", ".join(f"docs/results/{name}.json" for name in SOURCES)}; '
                     f'choose among {sorted(saved)}.')


def run_pseudo_with_mixup(work_dir: str, dataset, uris: tuple, teacher_uri: str, seed: int,
                          pool_uri: str, budget: dict) -> dict:
  """Pseudo-labelling with mixup, the MLP student: its eval and test accuracy (a worker's task)."""
  transformed_uri, graph_uri, raw_uri = uris
  run = distillation.distill(
      {**common.executor_inputs(transformed_uri, graph_uri), **mnist1d.transfer_input(pool_uri)},
      teacher_uri, dataset, budget, os.path.join(work_dir, 'students', f'pseudo-mixup-{seed}'),
      seed, pseudo_with_mixup_settings(), mnist1d_large_mlp.STUDENT_HYPERPARAMETERS)
  test_set = distillation.test_set_for(raw_uri, graph_uri, dataset)
  return {'accuracy': measuring.measure(run['model_dir'], test_set, latency_runs=1)['accuracy'],
          'eval_accuracy': run['student_accuracy']}


def run(work_dir: str, seeds, processes: int, budget: dict = mnist1d_large.BUDGET) -> dict:
  """Teachers, then ours (at its saved eval choice) and pseudo with mixup per seed."""
  saved = saved_seeds()
  check_seeds(seeds, saved)
  prepared = mnist1d.prepare(work_dir, (POOL_ROWS,), ())
  transformed, dataset = prepared['transformed'], prepared['dataset']
  pool_uri = prepared['pools'][POOL_ROWS]
  with common.process_pool(processes) as pool:
    teachers = {seed: pool.submit(mnist1d_large.run_teacher, work_dir, dataset, transformed,
                                  seed) for seed in seeds}
    teachers = {seed: future.result(timeout=mnist1d.TASK_TIMEOUT_S)
                for seed, future in teachers.items()}
    futures = {seed: (pool.submit(mnist1d_large_mlp.run_student, work_dir, dataset, transformed,
                                  teachers[seed]['uri'], seed, OURS,
                                  saved[seed]['ours_settings'], budget, pool_uri),
                      pool.submit(run_pseudo_with_mixup, work_dir, dataset, transformed,
                                  teachers[seed]['uri'], seed, pool_uri, budget))
               for seed in seeds}
    per_seed = []
    for seed, (ours, pseudo_mixup) in futures.items():
      ours = ours.result(timeout=mnist1d.TASK_TIMEOUT_S)
      pseudo_mixup = pseudo_mixup.result(timeout=mnist1d.TASK_TIMEOUT_S)
      per_seed.append({
          'seed': seed, 'source': saved[seed]['source'],
          'teacher': teachers[seed]['accuracy'], 'saved_teacher': saved[seed]['teacher'],
          'ours_settings': saved[seed]['ours_settings'],
          'ours': ours['accuracy'], 'ours_eval': ours['eval_accuracy'],
          'saved_ours': saved[seed]['ours'], 'saved_pseudo': saved[seed]['pseudo'],
          'pseudo_mixup': pseudo_mixup['accuracy'],
          'pseudo_mixup_eval': pseudo_mixup['eval_accuracy']})
  return {'seeds': list(seeds), 'pool_rows': POOL_ROWS, 'per_seed': per_seed, 'budget': budget,
          'test_examples': teachers[seeds[0]]['test_examples']}


def describe(measured: dict) -> dict:
  """The margin over pseudo-labelling with mixup per seed group, and the per-seed table."""
  targets = []
  for source, source_seeds in SOURCES.items():
    runs = [run for run in measured['per_seed'] if run['seed'] in source_seeds]
    if runs:
      targets.append(results.over_seeds(
          f'{NAME}: ours − pseudo-labelling with mixup, MLP student, {POOL_ROWS:,}-row pool '
          f'(test), {source}\'s seeds',
          [run['ours'] - run['pseudo_mixup'] for run in runs], [run['seed'] for run in runs],
          MARGIN_TARGET))
  rows = [[run['seed'], run['teacher'], run['ours_settings'][len('ours-'):], run['ours'],
           run['saved_pseudo'], run['pseudo_mixup'], run['ours'] - run['pseudo_mixup'],
           run['pseudo_mixup'] - run['saved_pseudo']] for run in measured['per_seed']]
  reproduced = [run['seed'] for run in measured['per_seed']
                if run['ours'] == run['saved_ours'] and run['teacher'] == run['saved_teacher']]
  budget = measured['budget']
  return {
      'title': ('MNIST-1D, the MLP student: its margin over pseudo-labelling given the same '
                'mixup, on test'),
      'summary': (
          f'Seeds {", ".join(str(seed) for seed in measured["seeds"])}; the '
          f'{POOL_ROWS:,}-row pool; mnist1d_large\'s 128-filter teacher per seed; every student '
          f'{budget["student_steps"]:,} steps, {mnist1d_large.SCHEDULE} decay. Ours: the '
          'Distiller at the T and alpha its seed\'s eval chose in mnist1d_large_mlp or '
          'mnist1d_mlp_held_out, trained again in this run. Pseudo-labelling with mixup: the '
          'teacher\'s most likely class over the pool as the target, with ours\' mixup 1.'),
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


def main() -> None:
  parser = common.argument_parser(__doc__, 'distillery-mnist1d-mlp-mixup-pseudo-benchmark')
  parser.add_argument('--seeds', default=','.join(str(seed) for seed in SEEDS))
  parser.add_argument('--processes', type=int, default=mnist1d.PROCESSES)
  args = parser.parse_args()
  seeds = [int(seed) for seed in args.seeds.split(',')]
  check_seeds(seeds, saved_seeds())

  def measure():
    measured = run(args.work_dir, seeds, args.processes)
    return {**describe(measured), **measured}

  common.print_result(measure, args, NAME)


if __name__ == '__main__':
  main()
