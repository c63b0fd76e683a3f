"""Distillation benchmark: teacher, from-scratch student and distilled student.

For taxi and digits, the data goes through the real ExampleGen -> IngestionTransform
path, the teacher is trained once by the DistributedTrainer executor, and the
Distiller executor (tune=True, or fixed settings with --no-tune) is run for each
seed. It reports means over the
seeds, with the majority-class baseline beside every accuracy.

Usage:
  python -m benchmarks.distillation --json [--seeds 0,1,2] [--datasets taxi,digits]
      [--no-tune [--temperature 2 --alpha 0.5 --mixup 1]] [--student-steps N]
"""

import json
import os
import statistics
import time

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
from sklearn import ensemble
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs

from benchmarks import common
from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import reading
from tfx_distillery.components.distiller import executor as distiller_executor
from tfx_distillery.components.distiller import spec as distiller_spec
from tfx_distillery.components.distiller import training
from tfx_distillery.components.distributed_trainer import executor as trainer_executor
from tfx_distillery.pipelines import datasets

# Per dataset: teacher steps, student steps, per-replica batch, epochs, eval steps.
BUDGETS = {
    'taxi': {'teacher_steps': 300, 'student_steps': 3000, 'batch_size': 256, 'epochs': 3,
             'eval_steps': 19, 'student_learning_rate': 3e-3},
    'digits': {'teacher_steps': 400, 'student_steps': 6000, 'batch_size': 64, 'epochs': 4,
               'eval_steps': 10, 'student_learning_rate': 3e-3},
}


def _properties(module_file: str, steps: int, budget: dict, label_column: str,
                seed: int, learning_rate: float = 1e-3) -> dict:
  return {'train_args': json.dumps({'num_steps': steps}),
          'eval_args': json.dumps({'num_steps': budget['eval_steps']}),
          'module_file': module_file,
          'custom_config': json.dumps({'label_column': label_column, 'epochs': budget['epochs'],
                                       'batch_size': budget['batch_size'], 'seed': seed,
                                       'learning_rate': learning_rate}),
          'strategy': 'multi_worker_mirrored', 'num_workers': 1,
          'num_parameter_servers': 0, 'communication': 'auto'}


def train_teacher(inputs: dict, dataset, budget: dict, output_dir: str) -> str:
  """Trains the dataset's teacher with the DistributedTrainer executor; returns the model URI."""
  model = common.artifact(standard_artifacts.Model, os.path.join(output_dir, 'model'))
  model_run = common.artifact(standard_artifacts.ModelRun, os.path.join(output_dir, 'model_run'))
  trainer_executor.Executor().Do(
      inputs, {standard_component_specs.MODEL_KEY: [model],
               standard_component_specs.MODEL_RUN_KEY: [model_run]},
      _properties(dataset.teacher_module_file, budget['teacher_steps'], budget,
                  dataset.label_column, seed=0))
  return model.uri


def distill(inputs: dict, teacher_uri: str, dataset, budget: dict, output_dir: str,
            seed: int, settings: training.DistillationSettings) -> dict:
  """Runs the Distiller executor once; returns its metrics and the student's folder."""
  teacher = standard_artifacts.Model()
  teacher.uri = teacher_uri
  model = common.artifact(standard_artifacts.Model, os.path.join(output_dir, 'model'))
  model_run = common.artifact(standard_artifacts.ModelRun, os.path.join(output_dir, 'model_run'))
  metrics = common.artifact(artifacts.ModelMetrics, os.path.join(output_dir, 'metrics'))
  properties = _properties(dataset.student_module_file, budget['student_steps'], budget,
                           dataset.label_column, seed,
                           learning_rate=budget['student_learning_rate'])
  properties[distiller_spec.DISTILLATION_KEY] = settings.to_json()
  distiller_executor.Executor().Do(
      {**inputs, distiller_spec.TEACHER_MODEL_KEY: [teacher]},
      {standard_component_specs.MODEL_KEY: [model],
       standard_component_specs.MODEL_RUN_KEY: [model_run],
       distiller_spec.METRICS_KEY: [metrics]}, properties)
  result = distiller_executor.read_metrics(metrics.uri)
  result['model_dir'] = evaluation.serving_model_path(model.uri)
  return result


def feature_matrix(pattern: str, tf_transform_output, label_key: str):
  """All transformed features of one split as a (rows, columns) array, and the labels."""
  options = reading.IngestionOptions(shuffle_buffer=0, shuffle_files=False, deterministic=True)
  columns, labels = [], []
  for features, label in reading.make_dataset(pattern, tf_transform_output, 1024, options,
                                               label_key=label_key, num_epochs=1):
    columns.append(np.concatenate([np.reshape(features[key].numpy(), (len(label), -1))
                                   for key in sorted(features)], axis=1))
    labels.append(np.reshape(label.numpy(), (-1,)))
  return np.concatenate(columns), np.concatenate(labels)


def reference_accuracy(transformed_uri: str, graph_uri: str, label_key: str) -> float:
  """Eval accuracy of gradient-boosted trees on the same transformed features.

  Not a model we ship: it shows how much accuracy the features support, so a
  small teacher - scratch gap can be told apart from a weak teacher.
  """
  tf_transform_output = tft.TFTransformOutput(graph_uri)
  train = feature_matrix(os.path.join(transformed_uri, 'Split-train', '*'), tf_transform_output,
                         label_key)
  evaluation_split = feature_matrix(os.path.join(transformed_uri, 'Split-eval', '*'),
                                    tf_transform_output, label_key)
  trees = ensemble.HistGradientBoostingClassifier(max_iter=500, learning_rate=0.05,
                                                  random_state=0).fit(*train)
  return float(trees.score(*evaluation_split))


def paired_latency_ms(model_dirs, serialized_example: bytes, rounds: int = 20,
                      calls_per_round: int = 25):
  """Median batch-1 latency of each model's serving signature, timed in alternation.

  The models take turns, a round of calls each, so drift in this machine's speed
  falls on all of them alike instead of on whichever was timed last.
  """
  example = tf.constant([serialized_example])
  serves = [tf.saved_model.load(model_dir).signatures[evaluation.SERVING_SIGNATURE]
            for model_dir in model_dirs]
  for serve in serves:
    serve(examples=example)  # The first call traces; keep it out of the timing.
  timings = [[] for _ in serves]
  for _ in range(rounds):
    for serve, model_timings in zip(serves, timings):
      for _ in range(calls_per_round):
        start = time.perf_counter()
        serve(examples=example)
        model_timings.append(time.perf_counter() - start)
  return [1000.0 * statistics.median(model_timings) for model_timings in timings]


def run_dataset(name: str, work_dir: str, seeds, settings) -> dict:
  dataset = datasets.resolve(name, work_dir)
  budget = BUDGETS[name]
  transformed_uri, graph_uri, raw_uri = common.transform_dataset(name, os.path.join(
      work_dir, name))
  inputs = common.executor_inputs(transformed_uri, graph_uri)
  teacher_uri = train_teacher(inputs, dataset, budget, os.path.join(work_dir, name, 'teacher'))
  runs = [distill(inputs, teacher_uri, dataset, budget,
                  os.path.join(work_dir, name, f'student-{seed}-{time.time_ns()}'), seed,
                  settings) for seed in seeds]
  evaluation_set = measuring.from_raw_examples(
      raw_uri, 'eval', tft.TFTransformOutput(graph_uri), reading.DEFAULT_LABEL_KEY,
      dataset.label_column)
  teacher_figures = measuring.measure(evaluation.serving_model_path(teacher_uri),
                                      evaluation_set, latency_runs=10)
  student_figures = measuring.measure(runs[0]['model_dir'], evaluation_set, latency_runs=10)
  raw_eval = evaluation.read_serialized_examples(os.path.join(raw_uri, 'Split-eval', '*'),
                                                 limit=1)
  teacher_latency_ms, student_latency_ms = paired_latency_ms(
      [evaluation.serving_model_path(teacher_uri), runs[0]['model_dir']], raw_eval[0])

  def mean(key):
    return statistics.fmean(run[key] for run in runs)

  teacher_acc = statistics.fmean(run['teacher_accuracy'][0] for run in runs)
  scratch_acc = mean('scratch_accuracy')
  distilled_acc = mean('student_accuracy')
  gap = teacher_acc - scratch_acc
  return {
      'teacher_acc': teacher_acc,
      'scratch_acc': scratch_acc,
      'distilled_acc': distilled_acc,
      'exported_acc': mean('exported_accuracy'),
      'majority_acc': mean('majority_accuracy'),
      'reference_trees_acc': reference_accuracy(transformed_uri, graph_uri, reading.DEFAULT_LABEL_KEY),
      'gap': gap,
      'gap_closed': (distilled_acc - scratch_acc) / gap if gap > 0 else None,
      'distilled_minus_scratch_per_seed': [run['student_accuracy'] - run['scratch_accuracy']
                                           for run in runs],
      'exported_student_per_seed': [run['exported_student'] for run in runs],
      'chosen_settings_per_seed': [(run['temperature'], run['alpha']) for run in runs],
      'teacher_params': runs[0]['teacher_parameters'][0],
      'student_params': runs[0]['student_parameters'],
      'student_param_ratio': runs[0]['student_param_ratio'],
      'teacher_latency_ms': teacher_latency_ms,
      'student_latency_ms': student_latency_ms,
      'student_latency_ratio': student_latency_ms / teacher_latency_ms,
      'raw_eval_teacher_acc': teacher_figures['accuracy'],
      'raw_eval_student_acc': student_figures['accuracy'],
      'eval_examples': teacher_figures['examples'],
  }


def main() -> None:
  parser = common.argument_parser(__doc__, 'distillery-distillation-benchmark')
  parser.add_argument('--seeds', default='0,1,2')
  parser.add_argument('--datasets', default='taxi,digits')
  parser.add_argument('--no-tune', action='store_true',
                      help='fixed settings (the defaults, T=2, alpha=0.5, mixup=1, unless the '
                      'flags below say otherwise) instead of the tuning grid')
  defaults = training.DistillationSettings()
  parser.add_argument('--temperature', type=float, default=defaults.temperature)
  parser.add_argument('--alpha', type=float, default=defaults.alpha)
  parser.add_argument('--mixup', type=float, default=defaults.mixup)
  parser.add_argument('--student-steps', type=int, default=None,
                      help="overrides the dataset's student step budget")
  args = parser.parse_args()
  seeds = [int(seed) for seed in args.seeds.split(',')]
  # A fifth of the training split for tuning: digits' tenth would be ~115 examples,
  # where one example moves accuracy by almost a point.
  settings = training.DistillationSettings(
      temperature=args.temperature, alpha=args.alpha, mixup=args.mixup,
      tune=not args.no_tune, validation_percent=20)
  training.validate(settings, num_teachers=1)
  if args.student_steps is not None:
    for budget in BUDGETS.values():
      budget['student_steps'] = args.student_steps

  def run():
    result = {name: run_dataset(name, args.work_dir, seeds, settings)
              for name in args.datasets.split(',')}
    result['seeds'] = seeds
    result['tuned'] = settings.tune
    result['settings'] = json.loads(settings.to_json())
    result['student_steps'] = {name: BUDGETS[name]['student_steps'] for name in BUDGETS}
    return result

  common.print_result(run, args.json)


if __name__ == '__main__':
  main()
