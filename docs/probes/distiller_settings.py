"""A probe, not a benchmark: other soft-term settings through the Distiller executor, on eval.

Before a change to `benchmarks/mnist1d.py`'s `large-cnn` configuration (which makes its
2-hour result and the held-out one stale), this trains the same teacher, student and budget on two of its seeds
with the 50,000-row pool, once per setting below, and prints each student's eval accuracy,
which is what chooses, one JSON line each, appended to OUT.jsonl. No test figure is
kept (mnist1d's `run_teacher` measures the teacher on test; the probe drops it).
About 20 minutes on 2 cores.

`--student mlp` trains the MNIST-1D MLP (6,538 parameters, 6.2% of the teacher) instead of
the benchmark's 16-filter CNN, with ours, pseudo-labelling and scratch. `--student-steps`
trains every student longer (or shorter) than the benchmark's 20,000 steps; each line then
records its steps.

Other settings ask other questions: `pseudo-mixup1` (both students) is pseudo-labelling with
ours' mixup, to see how much of ours' lead over pseudo-labelling is mixup's; `T1-alpha0` (the
MLP) is what `large-mlp`'s eval chose; the CNN's `-3teachers` settings distil from three
teachers per seed (its own and seeds + 1000 and + 2000, the Distiller's multi-teacher
`average` mode, equal weights), the one lever from the literature not yet tried: an
ensemble's averaged distribution carries more than one teacher's. Each line records the
eval accuracy of its teachers' averaged distribution (`teacher_eval_accuracy`).

Usage (from the repository root, with TF_USE_LEGACY_KERAS=1):
  python docs/probes/distiller_settings.py WORK_DIR OUT.jsonl [--student mlp]
      [--settings NAME,...] [--student-steps N]
"""

import argparse
import dataclasses
import json
import os
import sys

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
from tfx.types import standard_artifacts

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# pylint: disable=wrong-import-position
from benchmarks import common
from benchmarks import distillation
from benchmarks import mnist1d
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import reading
from tfx_distillery.components.distiller import spec as distiller_spec
from tfx_distillery.components.distiller import teachers as distiller_teachers
from tfx_distillery.components.distiller import training

SEEDS = (101, 102)
POOL_ROWS = 50000
# The benchmark configuration the probe mirrors: its teacher, student, budget and decay.
LARGE_CNN = mnist1d.CONFIGURATIONS['large-cnn']
# Setting name -> changes to ours' settings; None: the benchmark's baseline of that name.
SETTINGS = {
    'benchmark': {'temperature': 1.0, 'alpha': 0.5},
    'noise0.1': {'temperature': 1.0, 'alpha': 0.5, 'noise': 0.1},
    'T0.5-alpha0': {'temperature': 0.5, 'alpha': 0.0},
    # The mirror's best for the MLP (there without mixup).
    'T2-alpha0': {'temperature': 2.0, 'alpha': 0.0},
    # large-mlp's choice on eval in 9 of 10 seeds and pools.
    'T1-alpha0': {'temperature': 1.0, 'alpha': 0.0},
    'pseudo': None,
    'scratch': None,
    # Pseudo-labelling with ours' mixup (pseudo has none): is ours' lead mixup's?
    'pseudo-mixup1': {**mnist1d.PSEUDO_LABELS, 'mixup': 1.0},
    # Three teachers per seed, their distributions averaged (hard: the average's argmax).
    'benchmark-3teachers': {'temperature': 1.0, 'alpha': 0.5},
    'pseudo-3teachers': dict(mnist1d.PSEUDO_LABELS),
}
# Setting name -> teachers per seed (1 when not named): the seed's own, then seed + 1000, ...
TEACHERS = {'benchmark-3teachers': 3, 'pseudo-3teachers': 3}
TEACHER_SEED_STEP = 1000
# Student -> (its hyperparameters, the settings it trains).
STUDENTS = {
    'cnn': ({'architecture': 'cnn', **LARGE_CNN.architectures['cnn']},
            ('benchmark', 'noise0.1', 'T0.5-alpha0', 'pseudo', 'pseudo-mixup1',
             'benchmark-3teachers', 'pseudo-3teachers')),
    'mlp': ({'architecture': 'mlp'}, ('benchmark', 'T2-alpha0', 'pseudo', 'scratch',
                                      'T1-alpha0', 'pseudo-mixup1')),
}


def settings_for(name: str) -> training.DistillationSettings:
  """The Distiller settings of one probe setting, mixup and the decay as the benchmark's."""
  if name in ('pseudo', 'scratch'):
    return mnist1d.student_settings(LARGE_CNN)[name]
  ours = training.DistillationSettings(train_baseline=False,
                                       learning_rate_schedule=LARGE_CNN.schedule)
  return dataclasses.replace(ours, **SETTINGS[name])


def teacher_seeds(seed: int, name: str) -> list:
  """The seeds of the teachers a setting's student at `seed` distils from."""
  return [seed + position * TEACHER_SEED_STEP for position in range(TEACHERS.get(name, 1))]


def teachers_eval_accuracy(teacher_uris: list, uris: tuple, dataset) -> float:
  """Eval accuracy of the teachers' averaged distribution, as the Distiller's average mode."""
  _, graph_uri, raw_uri = uris
  eval_set = measuring.from_raw_examples(raw_uri, 'eval', tft.TFTransformOutput(graph_uri),
                                         reading.DEFAULT_LABEL_KEY, dataset.label_column)
  probabilities = 0.0
  for uri in teacher_uris:
    teacher = distiller_teachers.load_teacher(evaluation.serving_model_path(uri))
    if teacher.output_kind is None:
      teacher.resolve_output_kind(next(eval_set.batches(64)))
    probabilities = probabilities + np.concatenate(
        [tf.nn.softmax(teacher.logits(batch)).numpy() for batch in eval_set.batches()])
  return float(np.mean(probabilities.argmax(axis=-1) == eval_set.labels))


def run_student(work_dir: str, dataset, uris: tuple, teacher_uris: list, seed: int, name: str,
                pool_uri: str, student: str = 'cnn',
                budget: dict = mnist1d.LARGE_BUDGET) -> dict:
  """One student by the Distiller executor (with the pool but scratch); eval accuracies."""
  transformed_uri, graph_uri, _ = uris
  inputs = common.executor_inputs(transformed_uri, graph_uri)
  if name != 'scratch':  # Scratch learns from the labelled rows alone, as in the benchmark.
    inputs.update(mnist1d.transfer_input(pool_uri))
  teacher_uri, *more_teachers = teacher_uris
  for key, uri in zip(distiller_spec.TEACHER_MODEL_KEYS[1:], more_teachers):
    teacher = standard_artifacts.Model()
    teacher.uri = uri
    inputs[key] = [teacher]
  run = distillation.distill(inputs, teacher_uri, dataset, budget,
                             os.path.join(work_dir, 'students',
                                          f'{student}-{name}-{seed}-{budget["student_steps"]}'),
                             seed, settings_for(name), STUDENTS[student][0])
  # The Distiller's figure per teacher, and (the same for one teacher) the averaged one's.
  return {'eval_accuracy': run['student_accuracy'], 'teachers': len(teacher_uris),
          'teacher_eval_accuracy': teachers_eval_accuracy(teacher_uris, uris, dataset),
          'each_teacher_eval_accuracy': run['teacher_accuracy']}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('work_dir')
  parser.add_argument('output_path')
  parser.add_argument('--student', choices=sorted(STUDENTS), default='cnn')
  parser.add_argument('--settings', help='comma-separated: only these of the student\'s')
  parser.add_argument('--student-steps', type=int, help='every student\'s steps (default: '
                      f'the benchmark\'s {mnist1d.LARGE_BUDGET["student_steps"]:,})')
  args = parser.parse_args()
  if args.student_steps is not None and args.student_steps < 1:
    parser.error(f'--student-steps must be a positive number of steps; got {args.student_steps}')
  names = STUDENTS[args.student][1]
  if args.settings:
    unknown = set(args.settings.split(',')) - set(names)
    if unknown:
      parser.error(f'--settings: {sorted(unknown)} are not among the {args.student} '
                   f'student\'s settings {list(names)}')
    names = [name for name in names if name in args.settings.split(',')]
  work_dir, output_path, student = args.work_dir, args.output_path, args.student
  budget = dict(mnist1d.LARGE_BUDGET)
  if args.student_steps:
    budget['student_steps'] = args.student_steps
  prepared = mnist1d.prepare(work_dir, (POOL_ROWS,), ())
  transformed, dataset = prepared['transformed'], prepared['dataset']
  seeds_needed = sorted({teacher_seed for seed in SEEDS for name in names
                         for teacher_seed in teacher_seeds(seed, name)})
  with common.process_pool(mnist1d.PROCESSES) as pool:
    teachers = {seed: pool.submit(mnist1d.run_teacher, work_dir, dataset, transformed, seed,
                                  LARGE_CNN.name) for seed in seeds_needed}
    teachers = {seed: future.result(timeout=mnist1d.TASK_TIMEOUT_S)['uri']
                for seed, future in teachers.items()}
    futures = [(seed, name, pool.submit(run_student, work_dir, dataset, transformed,
                                        [teachers[teacher_seed] for teacher_seed in
                                         teacher_seeds(seed, name)], seed, name,
                                        prepared['pools'][POOL_ROWS], student, budget))
               for seed in SEEDS for name in names]
    with open(output_path, 'a') as output:
      for seed, name, future in futures:
        record = {'student': student, 'seed': seed, 'setting': name,
                  **future.result(timeout=mnist1d.TASK_TIMEOUT_S)}
        if args.student_steps:
          record['student_steps'] = args.student_steps
        line = json.dumps(record)
        print(line, flush=True)
        output.write(line + '\n')


if __name__ == '__main__':
  main()
