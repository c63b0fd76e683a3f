"""A probe, not a benchmark: other soft-term settings through the Distiller executor, on eval.

Before a change to `benchmarks/mnist1d_large.py` (which makes its 2-hour result and the
held-out one stale), this trains the same teacher, student and budget on two of its seeds
with the 50,000-row pool, once per setting below, and prints each student's eval accuracy,
which is what chooses. Test is never read. About 20 minutes on 2 cores.

Usage (from the repository root, with TF_USE_LEGACY_KERAS=1):
  python docs/probes/distiller_settings.py WORK_DIR OUT.jsonl
"""

import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# pylint: disable=wrong-import-position
from benchmarks import common
from benchmarks import distillation
from benchmarks import mnist1d
from benchmarks import mnist1d_large
from tfx_distillery.components.distiller import training

SEEDS = (101, 102)
POOL_ROWS = 50000
# Setting name -> changes to ours' settings; None is the pseudo-labelling baseline.
SETTINGS = {
    'benchmark': {'temperature': 1.0, 'alpha': 0.5},
    'noise0.1': {'temperature': 1.0, 'alpha': 0.5, 'noise': 0.1},
    'T0.5-alpha0': {'temperature': 0.5, 'alpha': 0.0},
    'pseudo': None,
}


def settings_for(name: str) -> training.DistillationSettings:
  """The Distiller settings of one probe setting, mixup and the decay as the benchmark's."""
  if SETTINGS[name] is None:
    return mnist1d_large.student_settings()['pseudo']
  ours = training.DistillationSettings(train_baseline=False,
                                       learning_rate_schedule=mnist1d_large.SCHEDULE)
  return dataclasses.replace(ours, **SETTINGS[name])


def run_student(work_dir: str, dataset, uris: tuple, teacher_uri: str, seed: int, name: str,
                pool_uri: str) -> float:
  """One student by the Distiller executor with the pool; its eval accuracy."""
  transformed_uri, graph_uri, _ = uris
  inputs = {**common.executor_inputs(transformed_uri, graph_uri),
            **mnist1d.transfer_input(pool_uri)}
  run = distillation.distill(inputs, teacher_uri, dataset, mnist1d_large.BUDGET,
                             os.path.join(work_dir, 'students', f'{name}-{seed}'), seed,
                             settings_for(name), mnist1d_large.STUDENT_HYPERPARAMETERS)
  return run['student_accuracy']


def main() -> None:
  work_dir, output_path = sys.argv[1], sys.argv[2]
  prepared = mnist1d.prepare(work_dir, (POOL_ROWS,), ())
  transformed, dataset = prepared['transformed'], prepared['dataset']
  with common.process_pool(mnist1d.PROCESSES) as pool:
    teachers = {seed: pool.submit(mnist1d_large.run_teacher, work_dir, dataset, transformed,
                                  seed) for seed in SEEDS}
    teachers = {seed: future.result(timeout=mnist1d.TASK_TIMEOUT_S)
                for seed, future in teachers.items()}
    futures = [(seed, name, pool.submit(run_student, work_dir, dataset, transformed,
                                        teachers[seed]['uri'], seed, name,
                                        prepared['pools'][POOL_ROWS]))
               for seed in SEEDS for name in SETTINGS]
    with open(output_path, 'w') as output:
      for seed, name, future in futures:
        line = json.dumps({'seed': seed, 'setting': name,
                           'eval_accuracy': future.result(timeout=mnist1d.TASK_TIMEOUT_S)})
        print(line, flush=True)
        output.write(line + '\n')


if __name__ == '__main__':
  main()
