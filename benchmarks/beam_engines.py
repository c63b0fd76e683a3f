"""Beam engines' cost curve: `distillery run` with its Beam stages on each engine, by rows.

The taxi-like CSV (as `benchmarks.shipping` writes it: label `big_tipper`) at 1x and 100x
rows goes through `distillery run --dataset csv --seed 1` once per engine, one run at a
time, each with the same data, seed and steps:
- DirectRunner in this process (`--beam-parallelism 1`) and in 2 worker processes (2);
- a local Apache Flink cluster at parallelism 1 and 2 (TaskManagers of one slot);
- a local Apache Spark cluster of 1 and 2 cores.
For each run it records the Beam stages' wall time (CsvExampleGen, StatisticsGen and
IngestionTransform, from the run's own "finished in" lines), the whole run's, and the peak
resident memory of each process of the run (the run itself, Beam's worker processes, the
engine's JVMs, the trainers), sampled every half second. The crossover is the row count,
interpolated between the sizes measured (log rows), past which an engine's Beam stages take
less time than DirectRunner's in this process; "none" when they never do in that range.

A 2-core machine shows correctness and each engine's overhead, not the speed-up of many
machines: the engines' JVMs and the DirectRunner share the same two cores.

Usage:
  python -m benchmarks.beam_engines --json [--repeats 1,100] [--engines direct-1,flink-2]
"""

import glob
import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence

from benchmarks import common
from benchmarks import pruning
from benchmarks import results
from benchmarks import shipping

ENGINES = ('direct-1', 'direct-2', 'flink-1', 'flink-2', 'spark-1', 'spark-2')
REPEATS = (1, 100)
BEAM_STAGES = ('CsvExampleGen', 'StatisticsGen', 'IngestionTransform')
RUN_TIMEOUT_S = 3 * 3600
SAMPLE_INTERVAL_S = 0.5
MEMORY_LIMIT_BYTES = 4 * 1024**3
# A process's role, from its command line: the first pattern that matches names it.
ROLES = (
    ('flink jobmanager', 'StandaloneSessionClusterEntrypoint'),
    ('flink taskmanager', 'TaskManagerRunner'),
    ('flink job server', 'FlinkJobServerDriver'),
    ('spark master', 'org.apache.spark.deploy.master.Master'),
    ('spark worker', 'org.apache.spark.deploy.worker.Worker'),
    ('spark executor', 'CoarseGrainedExecutorBackend'),
    ('spark job server', 'SparkJobServerDriver'),
    ('trainer worker', 'distributed_trainer'),
    ('beam worker', 'apache_beam'),
)
FINISHED = re.compile(r'(\w+): finished in ([0-9.]+) s')


def role_of(command_line: str, is_run: bool) -> str:
  """What a process of the run is, from its command line."""
  if is_run:
    return 'distillery run'
  for role, pattern in ROLES:
    if pattern in command_line:
      return role
  return 'other'


def stage_seconds(output: str) -> Dict[str, float]:
  """Each component's wall time, from the run's "NAME: finished in S s" lines."""
  return {name: float(seconds) for name, seconds in FINISHED.findall(output)}


class PeakMemory:
  """The peak resident memory of each process in a process tree, by role, while it runs."""

  def __init__(self, pid: int):
    import psutil  # pylint: disable=g-import-not-at-top
    self._psutil = psutil
    self.pid = pid
    self.peaks: Dict[str, int] = {}
    self._done = threading.Event()
    self._thread = threading.Thread(target=self._sample, daemon=True)

  def __enter__(self) -> 'PeakMemory':
    self._thread.start()
    return self

  def __exit__(self, *unused) -> None:
    self._done.set()
    self._thread.join(timeout=10)

  def _sample(self) -> None:
    psutil = self._psutil
    while not self._done.wait(SAMPLE_INTERVAL_S):
      try:
        root = psutil.Process(self.pid)
        processes = [root, *root.children(recursive=True)]
      except psutil.Error:
        return
      for process in processes:
        try:
          role = role_of(' '.join(process.cmdline()), process.pid == self.pid)
          resident = process.memory_info().rss
        except psutil.Error:
          continue
        # Per process, not summed by role: the target is each process's own peak.
        self.peaks[role] = max(self.peaks.get(role, 0), resident)


def crossover_rows(points: Sequence[tuple]) -> Optional[int]:
  """Rows past which the engine beats DirectRunner: (rows, engine s, direct s) points.

  Interpolates the ratio engine/direct linearly in log rows between the first pair of
  sizes where it crosses 1; None when it never does in the range measured (or the engine
  already wins at the smallest size, reported as that size).
  """
  points = sorted(points)
  ratios = [(rows, engine / direct) for rows, engine, direct in points if direct > 0]
  if not ratios:
    return None
  if ratios[0][1] <= 1:
    return ratios[0][0]
  for (rows_a, ratio_a), (rows_b, ratio_b) in zip(ratios, ratios[1:]):
    if ratio_a > 1 >= ratio_b:
      share = (ratio_a - 1) / (ratio_a - ratio_b)
      return int(round(math.exp(math.log(rows_a) + share * (math.log(rows_b) -
                                                            math.log(rows_a)))))
  return None


def flink_targets(runs: List[dict], rows: int, direct: Dict[int, float]) -> List[dict]:
  """flink-2's rows at `rows`: its largest process's peak memory against the limit, and its
  Beam stages' seconds over DirectRunner's (`direct`: rows to the seconds of a run that
  passed). A failed run has shown neither that it fits nor how long the work takes: its
  memory target is missed, and its ratio is not computed."""
  targets = []
  for entry in runs:
    if entry['engine'] != 'flink-2' or entry['rows'] != rows:
      continue
    peak = max(entry['peak_memory_bytes'].values() or [0])
    passed = entry['exit_status'] == 0
    targets.append({'figure': f'flink-2 at {rows:,} rows: the largest process\'s peak resident '
                              'memory (bytes)',
                    'target': f'<= {MEMORY_LIMIT_BYTES}', 'value': peak,
                    'met': passed and peak <= MEMORY_LIMIT_BYTES})
    if rows in direct:
      ratio = round(entry['beam_stages_s'] / direct[rows], 2) if passed else None
      targets.append({'figure': f'flink-2 at {rows:,} rows: Beam stages\' seconds over '
                                'DirectRunner\'s in this process' + (
                                    '' if passed else f' (not computed: flink-2 exited with '
                                    f'status {entry["exit_status"]})'),
                      'target': None, 'met': None, 'value': ratio})
  return targets


def pushed_digest(home: str) -> Optional[str]:
  """SHA-256 over the pushed folder's files but its transform graph, whose saved graph
  embeds the analyzers' floats as each engine summed them; None when nothing was pushed."""
  versions = sorted(glob.glob(os.path.join(home, 'serving', '*', '[0-9]*')))
  if not versions:
    return None
  digest = hashlib.sha256()
  for folder, _, files in sorted(os.walk(versions[-1])):
    for name in sorted(files):
      path = os.path.join(folder, name)
      relative = os.path.relpath(path, versions[-1])
      if 'transform' in relative.split(os.sep)[0]:
        continue
      digest.update(relative.encode())
      with open(path, 'rb') as handle:
        digest.update(handle.read())
  return digest.hexdigest()


def one_run(engine: str, data_dir: str, work_dir: str) -> dict:
  """One `distillery run` on `engine` (NAME-PARALLELISM), measured."""
  runner, parallelism = engine.rsplit('-', 1)
  home = os.path.join(work_dir, f'home-{os.path.basename(data_dir)}-{engine}')
  shutil.rmtree(home, ignore_errors=True)
  os.makedirs(home)
  command = [os.path.join(os.path.dirname(sys.executable), 'distillery'), 'run',
             '--dataset', 'csv', '--data', data_dir, '--label', 'big_tipper', '--seed', '1',
             '--beam-runner', runner, '--beam-parallelism', parallelism]
  environment = {**os.environ, 'DISTILLERY_HOME': home}
  started = time.monotonic()
  with open(os.path.join(home, 'console.log'), 'w') as console:
    process = subprocess.Popen(command, stdout=console, stderr=subprocess.STDOUT, env=environment,
                               preexec_fn=common.die_with_parent)
    with PeakMemory(process.pid) as memory:
      try:
        status = process.wait(timeout=RUN_TIMEOUT_S)
      finally:
        if process.poll() is None:
          process.kill()
  wall = time.monotonic() - started
  with open(os.path.join(home, 'console.log')) as console:
    output = console.read()
  stages = stage_seconds(output)
  pushed = pushed_digest(home) if status == 0 else None
  return {'engine': engine, 'rows': None, 'exit_status': status,
          'beam_stages_s': round(sum(stages.get(stage, 0.0) for stage in BEAM_STAGES), 1),
          'stages_s': {stage: stages.get(stage) for stage in BEAM_STAGES},
          'run_s': round(wall, 1), 'peak_memory_bytes': memory.peaks,
          'pushed': pushed,
          'console_tail': '' if status == 0 else recordable(output[-1500:], work_dir)}


def recordable(text: str, work_dir: str) -> str:
  """`text` with this machine's paths written as variables: a result is read elsewhere."""
  return results.recordable(text, work_dir)


def measure(engines: Sequence[str], repeats_list: Sequence[int], work_dir: str) -> dict:
  taxi_like = pruning.write_taxi_like_csv(os.path.join(work_dir, 'taxi-like'))
  with open(os.path.join(taxi_like, 'data.csv')) as handle:
    base_rows = sum(1 for _ in handle) - 1
  runs: List[dict] = []
  for repeats in repeats_list:
    data_dir = shipping.write_repeated_csv(taxi_like, os.path.join(work_dir, f'x{repeats}'),
                                           repeats)
    for engine in engines:
      entry = one_run(engine, data_dir, work_dir)
      entry['rows'] = base_rows * repeats
      runs.append(entry)
      print(f'beam_engines: {repeats}x on {engine}: exit {entry["exit_status"]}, Beam stages '
            f'{entry["beam_stages_s"]} s, run {entry["run_s"]} s', file=sys.stderr, flush=True)
  direct = {entry['rows']: entry['beam_stages_s'] for entry in runs
            if entry['engine'] == 'direct-1' and entry['exit_status'] == 0}
  crossovers = {}
  for engine in engines:
    if engine == 'direct-1':
      continue
    points = [(entry['rows'], entry['beam_stages_s'], direct[entry['rows']]) for entry in runs
              if entry['engine'] == engine and entry['rows'] in direct
              and entry['exit_status'] == 0]
    crossovers[engine] = crossover_rows(points) if points else None
  targets = flink_targets(runs, base_rows * max(repeats_list), direct)
  digests = {entry['engine']: entry['pushed'] for entry in runs
             if entry['rows'] == base_rows * min(repeats_list)}
  table = results.table(
      'Each engine\'s Beam stages and whole run, by rows (one run at a time, 2 cores)',
      ['rows', 'engine', 'exit', 'Beam stages (s)', 'run (s)', 'largest process (MB)'],
      [[entry['rows'], entry['engine'], entry['exit_status'], entry['beam_stages_s'],
        entry['run_s'], round(max(entry['peak_memory_bytes'].values() or [0]) / 2**20)]
       for entry in runs])
  return {'runs': runs, 'crossover_rows': crossovers, 'pushed_model_digests': digests,
          'targets': targets, 'tables': [table],
          'summary': {'engines': list(engines), 'repeats': list(repeats_list),
                      'base_rows': base_rows}}


def main() -> None:
  parser = common.argument_parser(__doc__, 'distillery-beam-engines-benchmark')
  parser.add_argument('--engines', default=','.join(ENGINES))
  parser.add_argument('--repeats', default=','.join(str(repeats) for repeats in REPEATS))
  args = parser.parse_args()
  engines = args.engines.split(',')
  unknown = [engine for engine in engines if engine not in ENGINES]
  if unknown:
    parser.error(f'--engines: unknown {", ".join(unknown)}; choose from {", ".join(ENGINES)}')
  repeats_list = [int(repeats) for repeats in args.repeats.split(',')]
  os.makedirs(args.work_dir, exist_ok=True)
  common.print_result(lambda: measure(engines, repeats_list, args.work_dir), args,
                      'beam_engines')


if __name__ == '__main__':
  main()
