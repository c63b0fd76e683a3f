"""What ships: the model each run pushes at its defaults, dataset by dataset, seed by seed (#61).

Every run is a user's command at its defaults, in a fresh home and a subprocess:
- `csv-1x`, `csv-10x`, `csv-100x`: `distillery run --dataset csv` on the taxi-like CSV
  (TFX's taxi CSV, label `big_tipper` = tips > 20% of the fare, `tips` removed; the
  pruning benchmark's), its rows written 1, 10 or 100 times;
- `digits`, `taxi`, `mnist1d`: `distillery run --dataset NAME` (`make demo` is taxi's);
- `stock-taxi`: the README's "Use it in your own pipeline" block, executed as the README
  gives it but for three things: TFX's whole taxi CSV, the stock Trainer at 1,000 steps
  (as TFX's taxi example trains it) and the run's seed for our components. Its Distiller
  has the built-in student at the component's defaults (the size search).
- `stock-taxi-bare` (#84): the same, but the Distiller is given only what a stock Trainer
  gets, `Distiller(teacher_model=..., examples=..., transform_graph=..., label_key=...,
  label_column=...)`: no statistics, no module file, no step count or budget of its own.

Each run is a configuration (`--config RUN`) with its own result,
`docs/results/shipping-<run>.json`, so that each is measured, and goes stale, on its own:
together they take hours on 2 cores. A run goes once per seed (`--seed`), two seeds at a
time, so their seconds are not compared.
- `demo`: `make demo`'s command with no seed, DEMO_RUNS times, first and one at a time
  with nothing else running. The first DEMO_PAIRS runs are each paired with the same
  command at DEMO_BASELINE_COMMIT, the last commit before #61's work, checked out in this
  process run (run first in even pairs, second in odd ones): the ratio of first runs is
  the median over those pairs.

From each run's gate decision (on `test`) and its components' `metrics.json`:
the pushed candidate, its bytes and latency, its test accuracy against the teacher's; the
chosen student's float and int8 test accuracy (the gate measures both); the layers the
Quantizer left in float; the size search's choice. The targets are #61's, decided on the
mean over seeds where they are figures, and run by run where they are counts.

Draws (#83), each run with no seed, as a newcomer types it:
- `draws-demo`: `make demo`'s command DRAWS['draws-demo'] times, one at a time; the first
  DEMO_PAIRS paired with the same command at DRAWS_BASELINE_COMMIT (main before #83), for
  the first-run ratio;
- `draws-csv-1x`, `draws-digits`: the taxi-like CSV at 1x and digits, DRAWS[...] times
  each, two at a time.
Each records the runs that pushed and that shipped int8, the pushed model's test drop
below the teacher (mean, spread, worst) and how often the from-scratch twin went on.

Usage:
  python -m benchmarks.shipping --config csv-1x|...|stock-taxi|draws-demo|... --json
      [--seeds 1,2,3]
"""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
from typing import Optional

from benchmarks import common
from benchmarks import pruning
from benchmarks import results

# Fixed before any result.
SEEDS = (1, 2, 3)
RUNS = ('demo', 'csv-1x', 'csv-10x', 'csv-100x', 'digits', 'taxi', 'mnist1d', 'stock-taxi',
        'stock-taxi-bare',
        'draws-demo', 'draws-csv-1x', 'draws-digits')
# Unseeded runs per draws configuration (#83), and the command each draws.
DRAWS = {'draws-demo': 20, 'draws-csv-1x': 10, 'draws-digits': 10}
DRAWN_RUN = {'draws-demo': 'taxi', 'draws-csv-1x': 'csv-1x', 'draws-digits': 'digits'}
# main before #83's changes to what the chain chooses: the demo's first run at most
# DEMO_RATIO_TARGET of this commit's.
DRAWS_BASELINE_COMMIT = '33067fe'
CSV_REPEATS = {'csv-1x': 1, 'csv-10x': 10, 'csv-100x': 100, 'draws-csv-1x': 1}
# The runs that must push int8 (#61): the CSVs at <= 64 KB as shipped, taxi and digits,
# and `make demo` (taxi with no seed).
INT8_RUNS = ('demo', 'csv-1x', 'csv-10x', 'csv-100x', 'digits', 'taxi', 'stock-taxi-bare')
# The README's own-pipeline block, run as a script.
STOCK_RUNS = ('stock-taxi', 'stock-taxi-bare')
# #84: the built-in student given only the stock Trainer's inputs, on eval, at most this far
# below the stock teacher.
BARE_STUDENT_MAX_DROP = 0.01
DEMO_RUNS = 5
DEMO_PAIRS = 3
DEMO_BASELINE_COMMIT = 'b2bcc59'
# `make demo`'s first run at most this share of DEMO_BASELINE_COMMIT's (#61).
DEMO_RATIO_TARGET = 1.10
# `distillery run` as the console script runs it, from whichever package is first on the
# path: the same command at both commits.
DEMO_COMMAND = 'import sys; from tfx_distillery.pipelines import cli; sys.exit(cli.main())'
INT8_BYTES = 64 * 1024
# int8 - float test accuracy of the shipped student, on the mean.
INT8_FLOAT_FLOOR = -0.005
# A run alone uses about 0.7 of a core (it waits on subprocesses, pip and Beam's start-up),
# so two go at a time; three were slower in all (make test-e2e, Makefile). Their seconds
# are not compared; the demo's are.
CONCURRENT_RUNS = 2
# A bound on each run, enforced on its process (run_chain kills it): the 100x CSV's
# (1.5 million rows) is the longest; every other run has pruning's CHAIN_TIMEOUT_S.
RUN_TIMEOUT_S = {'csv-100x': 4 * 3600}
STOCK_TRAIN_STEPS = 1000
README = os.path.join(results.REPOSITORY, 'README.md')
README_SECTION = '## Use it in your own pipeline'


def result_name(run: str) -> str:
  """The result a run writes: `shipping-<run>` (`results.ORDER` lists them)."""
  return f'shipping-{run}'


def write_repeated_csv(source_dir: str, output_dir: str, repeats: int) -> str:
  """The taxi-like CSV's rows `repeats` times over, in one file with one header."""
  os.makedirs(output_dir, exist_ok=True)
  with open(os.path.join(source_dir, 'data.csv')) as source:
    header, *rows = source.readlines()
  with open(os.path.join(output_dir, 'data.csv'), 'w') as output:
    output.write(header)
    for _ in range(repeats):
      output.writelines(rows)
  return output_dir


def readme_block() -> str:
  with open(README) as handle:
    text = handle.read()
  section = text[text.index(README_SECTION):]
  return re.search(r'```python\n(.*?)```', section, flags=re.DOTALL).group(1)


def stock_taxi_script(seed: int, bare: bool = False) -> str:
  """The README's block with the whole CSV, 1,000 Trainer steps and the seed; then runs it.

  With `bare`, its Distiller gets only the teacher, the data and the label.
  """
  block = readme_block()
  if bare:
    block, replaced = re.subn(r'distiller = Distiller\((.*?)\)\n',
                              "distiller = Distiller(teacher_model=trainer.outputs['model'], "
                              '**data, **label)\n', block, count=1, flags=re.DOTALL)
    if replaced != 1:
      raise ValueError('The README\'s own-pipeline block no longer has one '
                       '`distiller = Distiller(...)`; update benchmarks/shipping.py.')
  block, trained = re.subn(r'trainer = tfx\.components\.Trainer\((.*?)train_args=tfx\.proto'
                           r'\.TrainArgs\(num_steps=\d+\)',
                           lambda match: match.group(0).rsplit('num_steps=', 1)[0]
                           + f'num_steps={STOCK_TRAIN_STEPS})', block, flags=re.DOTALL)
  seeded = 0
  for name in ('Distiller', 'Pruner', 'Quantizer'):
    block, count = re.subn(rf'\b{name}\(', f'{name}(random_seed={seed}, ', block, count=1)
    seeded += count
  if trained != 1 or seeded != 3:
    raise ValueError('The README\'s own-pipeline block no longer has one Trainer with '
                     'train_args and one Distiller, Pruner and Quantizer; update '
                     'benchmarks/shipping.py.')
  return block + ('\ntfx.orchestration.LocalDagRunner().run(pipeline)\n')


def run_command(run: str, seed: Optional[int], data_dirs: dict):
  """The run's `distillery` arguments; a draw (seed None) has no `--seed`."""
  seeded = ['--seed', str(seed)] if seed is not None else []
  if run in CSV_REPEATS:
    return ['run', '--dataset', 'csv', '--data', data_dirs[run], '--label',
            pruning.TAXI_LIKE_LABEL, *seeded]
  return ['run', '--dataset', DRAWN_RUN.get(run, run), *seeded]


def newest_metrics(home: str, node: str, output: str = 'metrics'):
  """A component's newest metrics.json under a home (the CLI's) or a pipeline root."""
  found = pruning.newest_metrics(home, node, output)
  if found is not None:
    return found
  paths = glob.glob(os.path.join(home, '**', node, output, '*', 'metrics.json'), recursive=True)
  if not paths:
    return None
  with open(max(paths, key=lambda path: int(path.split(os.sep)[-2]))) as handle:
    return json.load(handle)


_RECORD_LOCK = threading.Lock()


def record(work_dir: str, entry: dict) -> dict:
  """Appends a finished run to `runs.jsonl` in the work folder, so a benchmark stopped
  part-way still shows the runs it finished."""
  # What a result records must not hold this machine's paths.
  entry['stderr_tail'] = results.recordable(entry['stderr_tail'], work_dir)
  with _RECORD_LOCK, open(os.path.join(work_dir, 'runs.jsonl'), 'a') as handle:
    handle.write(json.dumps(entry) + '\n')
  return entry


def one_run(run: str, seed: Optional[int], work_dir: str, data_dirs: dict,
            draw: Optional[int] = None) -> dict:
  """One run in a fresh home: its exit status and what its gate and components wrote.

  An unseeded draw is named by its number: draws run side by side, each in its own home.
  """
  home = os.path.join(work_dir, f'home-{run}-{seed}' if seed is not None
                      else f'home-{run}-draw{draw}')
  if run in STOCK_RUNS:
    # The README's block writes under the folder it runs in; run_chain empties the home, so
    # the folder is another one, made fresh here.
    cwd = os.path.join(work_dir, f'own-pipeline-{seed}')
    shutil.rmtree(cwd, ignore_errors=True)
    os.makedirs(cwd)
    script = os.path.join(cwd, 'own_pipeline.py')
    with open(script, 'w') as handle:
      handle.write(stock_taxi_script(seed, bare=run == 'stock-taxi-bare'))
    command = [sys.executable, script]
    return record(work_dir, entry_of(run, seed, cwd, pruning.run_chain(command, home, cwd=cwd)))
  command = [os.path.join(os.path.dirname(sys.executable), 'distillery'),
             *run_command(run, seed, data_dirs)]
  return record(work_dir, entry_of(run, seed, home, pruning.run_chain(
      command, home, timeout_s=RUN_TIMEOUT_S.get(run, pruning.CHAIN_TIMEOUT_S))))


def entry_of(run: str, seed, root: str, outcome: dict) -> dict:
  """One run's record from its outcome and what its gate and components wrote under `root`."""
  gate = newest_metrics(root, 'AccuracyGate', 'report') or {}
  distiller = newest_metrics(root, 'Distiller') or {}
  candidates = {candidate['name']: candidate for candidate in gate.get('candidates', [])}
  chosen = candidates.get(gate.get('chosen')) if gate.get('blessed') else None
  student = candidates.get('student') or {}
  int8 = next((candidate for name, candidate in candidates.items()
               if name in ('student_full_integer', 'int8')), None)
  quantizers = [metrics for metrics in (newest_metrics(root, node) for node in (
      'Quantizer_student_full_integer', 'Quantizer', 'Quantizer_pruned_full_integer'))
                if metrics]
  float_layers = sorted({layer for metrics in quantizers
                         for layer in metrics.get('float_layers') or []})
  search = distiller.get('size_search') or {}
  margin = distiller.get('gate_margin') or {}
  exit_status = outcome['exit_status']
  if run in STOCK_RUNS and exit_status == 0:
    exit_status = 0 if chosen else 3  # The script ends 0 whether or not the gate passed one.
  return {
      'run': run, 'seed': seed, 'exit_status': exit_status, 'pipeline_s': outcome['pipeline_s'],
      'wall_s': outcome['wall_s'], 'pushed': chosen['name'] if chosen else None,
      'pushed_format': chosen['format'] if chosen else None,
      'pushed_bytes': chosen['size_bytes'] if chosen else None,
      'pushed_latency_ms': chosen['latency_ms'] if chosen else None,
      'pushed_test_accuracy': chosen['accuracy'] if chosen else None,
      'teacher_test_accuracy': (gate.get('teacher') or {}).get('accuracy'),
      'max_accuracy_drop': gate.get('max_accuracy_drop'),
      'student_test_accuracy': student.get('accuracy'),
      'int8_test_accuracy': int8['accuracy'] if int8 else None,
      'float_layers': float_layers,
      'recovery': [metrics.get('recovery') for metrics in quantizers if metrics.get('recovery')],
      'size_search_share': search.get('chosen_share'),
      'exported_student': distiller.get('exported_student'),
      'eval_drop': margin.get('drop'), 'gate_margin': margin.get('margin'),
      'chance_of_passing': margin.get('chance_of_passing'),
      'student_parameters': distiller.get('student_parameters'),
      # On eval, as the Distiller measured them: the student it handed on, and the teacher.
      'handed_on_eval_accuracy': distiller.get('exported_accuracy'),
      'teacher_eval_accuracy': (distiller.get('teacher_accuracy') or [None])[0],
      'student_statistics': ((distiller.get('student') or {}).get('statistics') or {}).get(
          'source'),
      'refusals': '; '.join(f'{candidate["name"]}: {", ".join(candidate["reasons"])}'
                            for candidate in gate.get('candidates', [])
                            if not candidate['passed']),
      'stderr_tail': outcome['stderr_tail']}


def demo_command() -> list:
  return [sys.executable, '-c', DEMO_COMMAND, 'run', '--dataset', 'taxi']


def demo_runs(work_dir: str, runs: int = DEMO_RUNS, baseline_commit: str = DEMO_BASELINE_COMMIT,
              name: str = 'demo'):
  """`make demo` with no seed, one run at a time; the first DEMO_PAIRS paired with a baseline
  run, before the run in even pairs and after it in odd ones.

  Returns:
    (the runs' entries, one dict per pair: both commits' wall seconds and exit statuses).
  """
  entries, pairs = [], []
  with common.package_at_commit(baseline_commit, work_dir) as (package_root, environment):
    for index in range(runs):
      home = os.path.join(work_dir, f'home-demo-{index}')

      def run_baseline(index=index):
        return pruning.run_chain(demo_command(), os.path.join(
            work_dir, f'home-demo-{baseline_commit}-{index}'), environment=environment,
                                 cwd=package_root)

      # The pair's order alternates, so that neither commit always runs on a warmer machine.
      if index < DEMO_PAIRS and index % 2 == 0:
        baseline = run_baseline()
      # Run from the work folder: the repository's own tfx_distillery folder is not the package.
      current = pruning.run_chain(demo_command(), home, cwd=work_dir)
      if index < DEMO_PAIRS and index % 2 == 1:
        baseline = run_baseline()
      entries.append(record(work_dir, entry_of(name, None, home, current)))
      if index < DEMO_PAIRS:
        pairs.append({'baseline_s': baseline['wall_s'],
                      'baseline_exit_status': baseline['exit_status'],
                      'baseline_pushed': ((baseline['gate'] or {}).get('chosen')
                                          if (baseline['gate'] or {}).get('blessed') else None),
                      'baseline_component_s': baseline['component_s'],
                      'current_s': current['wall_s'],
                      'current_component_s': current['component_s']})
        record(work_dir, {'run': 'demo-pair', 'index': index, **pairs[-1],
                          'stderr_tail': baseline['stderr_tail']})
  return entries, pairs


def demo_targets(pairs: list, baseline_commit: str = DEMO_BASELINE_COMMIT,
                 name: str = 'demo') -> list:
  """The first-run ratio against `baseline_commit`, the median over the pairs."""
  ratios = [pair['current_s'] / pair['baseline_s'] for pair in pairs]
  ratio = statistics.median(ratios)
  return [results.target(
      f'{name}: first run / first run at {baseline_commit} (median of {len(ratios)} pairs, '
      f'one run at a time; ratios {", ".join(f"{value:.3f}" for value in ratios)})', ratio,
      f'<= {DEMO_RATIO_TARGET}', ratio <= DEMO_RATIO_TARGET)]


def draws_targets(run: str, entries: list) -> list:
  """#83's targets for one draws configuration: every run pushes (int8 where asked), the
  pushed model's test drop below the teacher within half the budget on the mean and the
  budget at worst, and how often the from-scratch twin went on."""
  count = len(entries)
  pushed = [entry for entry in entries if entry['exit_status'] == 0 and entry['pushed']]
  rows = [results.target(f'{run}: runs that pushed a model ({count} runs with no seed)',
                         len(pushed), f'= {count} of {count}', len(pushed) == count)]
  if DRAWN_RUN[run] in INT8_RUNS or DRAWN_RUN[run] == 'taxi':
    small = [entry for entry in pushed if is_int8(entry) and (
        not run.startswith('draws-csv') or entry['pushed_bytes'] <= INT8_BYTES)]
    rows.append(results.target(
        f'{run}: runs that pushed int8' + (f' of at most {INT8_BYTES // 1024} KB'
                                           if run.startswith('draws-csv') else ''),
        len(small), f'= {count} of {count}', len(small) == count))
  if pushed:
    drops = [entry['teacher_test_accuracy'] - entry['pushed_test_accuracy'] for entry in pushed]
    budget = pushed[0]['max_accuracy_drop']
    rows.append(results.over_seeds(f'{run}: the pushed model\'s test drop below the teacher '
                                   f'(mean; at most half the budget, {budget / 2:g})',
                                   drops, [None] * len(drops), None))
    mean = statistics.mean(drops)
    rows.append(results.target(f'{run}: mean test drop of the pushed model', mean,
                               f'<= {budget / 2:g}', mean <= budget / 2 + 1e-9))
    rows.append(results.target(f'{run}: worst test drop of the pushed model', max(drops),
                               f'<= {budget:g}', max(drops) <= budget + 1e-9))
  scratch = [entry for entry in entries if entry.get('exported_student') == 'scratch']
  rows.append(results.target(f'{run}: runs whose Distiller handed on the from-scratch twin',
                             len(scratch), 'recorded', True))
  return rows


def is_int8(entry: dict) -> bool:
  return entry['pushed_format'] in ('tflite', 'tflite_raw')


def targets_of(run: str, entries: list) -> list:
  """#61's targets for one run's seeds."""
  rows = []
  pushed = [entry for entry in entries if entry['exit_status'] == 0 and entry['pushed']]
  seeds = (f'{len(entries)} runs with no seed' if run == 'demo'
           else ', '.join(str(entry['seed']) for entry in entries))
  rows.append(results.target(f'{run}: seeds that pushed a model ({seeds})',
                             len(pushed), f'= {len(entries)} of {len(entries)}',
                             len(pushed) == len(entries)))
  if run in INT8_RUNS:
    small = [entry for entry in pushed if is_int8(entry) and (
        not run.startswith('csv') or entry['pushed_bytes'] <= INT8_BYTES)]
    rows.append(results.target(
        f'{run}: seeds whose pushed model is int8'
        + (f' and at most {INT8_BYTES // 1024} KB as shipped' if run.startswith('csv') else ''),
        len(small), f'= {len(entries)} of {len(entries)}', len(small) == len(entries)))
  if run.startswith('csv') and pushed:
    within = [entry for entry in pushed
              if entry['teacher_test_accuracy'] - entry['pushed_test_accuracy']
              <= entry['max_accuracy_drop'] + 1e-9]
    rows.append(results.target(f'{run}: pushed models within the gate\'s budget on test',
                               len(within), f'= {len(pushed)} of {len(pushed)}',
                               len(within) == len(pushed)))
  pairs = [entry for entry in entries if entry['int8_test_accuracy'] is not None and
           entry['student_test_accuracy'] is not None]
  if pairs:
    rows.append(results.over_seeds(
        f'{run}: int8 - float test accuracy of the chosen student',
        [entry['int8_test_accuracy'] - entry['student_test_accuracy'] for entry in pairs],
        [entry['seed'] for entry in pairs], INT8_FLOAT_FLOOR))
  bare = [entry for entry in entries if entry.get('handed_on_eval_accuracy') is not None]
  if run == 'stock-taxi-bare' and bare:
    rows.append(results.over_seeds(
        f'{run}: the built-in student\'s eval accuracy minus the stock teacher\'s (statistics '
        f'{", ".join(sorted({str(entry["student_statistics"]) for entry in bare}))})',
        [entry['handed_on_eval_accuracy'] - entry['teacher_eval_accuracy'] for entry in bare],
        [entry['seed'] for entry in bare], -BARE_STUDENT_MAX_DROP))
  if pushed:
    rows.append(results.over_seeds(
        f'{run}: the pushed model\'s test accuracy minus the teacher\'s',
        [entry['pushed_test_accuracy'] - entry['teacher_test_accuracy'] for entry in pushed],
        [entry['seed'] for entry in pushed], None))
  return rows


def parse_arguments(argv=None) -> argparse.Namespace:
  """The command line; the default work folder is one per configuration."""
  parser = common.argument_parser(__doc__, 'distillery-shipping-benchmark')
  parser.add_argument('--seeds', default=','.join(str(seed) for seed in SEEDS))
  parser.add_argument('--config', required=True, choices=RUNS,
                      help='the run to measure; its result is shipping-<run>')
  args = parser.parse_args(argv)
  if args.work_dir == parser.get_default('work_dir'):
    # main() empties the folder at the start: two configurations measured at once must
    # not empty each other's.
    args.work_dir = f'{args.work_dir}-{args.config}'
  return args


def main() -> None:
  args = parse_arguments()
  runs = [args.config]
  seeds = [int(seed) for seed in args.seeds.split(',')]
  shutil.rmtree(args.work_dir, ignore_errors=True)
  os.makedirs(args.work_dir)

  def measure():
    taxi_like = pruning.write_taxi_like_csv(os.path.join(args.work_dir, 'taxi-like'))
    data_dirs = {run: write_repeated_csv(taxi_like, os.path.join(args.work_dir, run), repeats)
                 for run, repeats in CSV_REPEATS.items() if run in runs}
    # The demo's runs first, alone: their seconds are compared.
    entries, pairs = demo_runs(args.work_dir) if 'demo' in runs else ([], [])
    if 'draws-demo' in runs:
      entries, pairs = demo_runs(args.work_dir, DRAWS['draws-demo'], DRAWS_BASELINE_COMMIT,
                                 'draws-demo')
    order = [(run, seed) for run in runs if run not in ('demo', 'draws-demo')
             for seed in ([None] * DRAWS[run] if run in DRAWS else seeds)]
    with concurrent.futures.ThreadPoolExecutor(CONCURRENT_RUNS) as pool:
      futures = [pool.submit(one_run, run, seed, args.work_dir, data_dirs, draw)
                 for draw, (run, seed) in enumerate(order)]
      # Each run is bounded on its own process (RUN_TIMEOUT_S), so each future ends.
      entries += [future.result() for future in futures]
    by_run = {run: [entry for entry in entries if entry['run'] == run] for run in runs}
    targets = [row for run in runs for row in (
        draws_targets(run, by_run[run]) if run in DRAWS else targets_of(run, by_run[run]))]
    if pairs:
      targets += (demo_targets(pairs, DRAWS_BASELINE_COMMIT, 'draws-demo')
                  if 'draws-demo' in runs else demo_targets(pairs))
    table = results.table(
        f'What each run pushed, on test (the demo\'s runs one at a time, the others '
        f'{CONCURRENT_RUNS} at a time, so their seconds are not compared)',
        ['run', 'seed', 'exit', 'pushed', 'bytes', 'latency (ms)', 'test accuracy', 'teacher',
         'student float', 'student int8', 'layers left float', 'size search share',
         'handed on', 'eval drop + margin', 'pipeline (s)'],
        [[entry['run'], entry['seed'], entry['exit_status'], entry['pushed'],
          entry['pushed_bytes'], entry['pushed_latency_ms'], entry['pushed_test_accuracy'],
          entry['teacher_test_accuracy'], entry['student_test_accuracy'],
          entry['int8_test_accuracy'], ', '.join(entry['float_layers']) or '-',
          entry['size_search_share'], entry.get('exported_student'),
          (None if entry.get('eval_drop') is None
           else round(entry['eval_drop'] + entry['gate_margin'], 4)),
          entry['pipeline_s']] for entry in entries])
    refusals = results.table(
        'What the gate refused, run by run',
        ['run', 'seed', 'refused'],
        [[entry['run'], entry['seed'], entry['refusals'] or '-'] for entry in entries])
    pipeline_s = [entry['pipeline_s'] for entry in entries if entry['pipeline_s']]
    return {'targets': targets, 'tables': [table, refusals], 'runs': entries,
            'demo_pairs': pairs,
            'summary': {'runs': runs, 'seeds': seeds,
                        'pipeline_s_median': statistics.median(pipeline_s) if pipeline_s
                        else None}}

  common.print_result(measure, args, result_name(args.config))


if __name__ == '__main__':
  main()
