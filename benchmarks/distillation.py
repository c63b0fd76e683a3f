"""Distillation benchmark: teacher, from-scratch student and distilled student, on `test`.

Every model goes through the real path: ExampleGen -> IngestionTransform, the
teacher trained by the DistributedTrainer executor, and each student by the
Distiller executor, at its default settings (T = 2, alpha = 0.5, mixup 1; no
tuning), the from-scratch twin being the same executor at alpha = 1 (hard labels
only) with the same seed, data and step budget. Every accuracy is measured by
the one measuring module on the held-out `test` split, on all of it.

- taxi: the pipeline's hash split; one teacher, then a distilled and a scratch
  student for each seed.
- digits: 5-fold cross-validation, so that every one of the 1,797 examples is
  tested once: fold k is `test`, the other four are cut into train and eval;
  fold k gets its own transform, teacher and seed. Students of several widths
  show gap_closed against the student's share of the teacher's parameters.

The seeds are fixed here, before any result: none of them was used to choose the
Distiller's defaults (those were explored on eval with seeds 3-5 and 20-25).

Usage:
  python -m benchmarks.distillation --json [--datasets taxi,digits] [--seeds 101,...]
"""

import csv
import json
import os
import random
import statistics
import time

import tensorflow_transform as tft
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs

from benchmarks import common
from benchmarks import results
from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import reading
from tfx_distillery.components.distiller import executor as distiller_executor
from tfx_distillery.components.distiller import spec as distiller_spec
from tfx_distillery.components.distiller import training
from tfx_distillery.components.distributed_trainer import executor as trainer_executor
from tfx_distillery.pipelines import datasets

# Chosen before any run of this benchmark, and never used to choose a default.
SEEDS = (101, 102, 103, 104, 105)
FOLDS = 5
# Hidden units of the digits student (64 -> width -> 10): 0.4%, 1.6% and 6.4% of the teacher.
DIGITS_WIDTHS = (8, 32, 128)
MAX_PARAM_RATIO = 0.10
TARGET_GAP_CLOSED = 0.5
TAXI_MAX_TEACHER_GAP = 0.005

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


def train_teacher(inputs: dict, dataset, budget: dict, output_dir: str, seed: int = 0) -> str:
  """Trains the dataset's teacher with the DistributedTrainer executor; returns the model URI."""
  model = common.artifact(standard_artifacts.Model, os.path.join(output_dir, 'model'))
  model_run = common.artifact(standard_artifacts.ModelRun, os.path.join(output_dir, 'model_run'))
  trainer_executor.Executor().Do(
      inputs, {standard_component_specs.MODEL_KEY: [model],
               standard_component_specs.MODEL_RUN_KEY: [model_run]},
      _properties(dataset.teacher_module_file, budget['teacher_steps'], budget,
                  dataset.label_column, seed=seed))
  return model.uri


def hyperparameters_artifact(output_dir: str, values: dict):
  """A HyperParameters artifact as a Tuner writes it, holding `values`."""
  artifact = common.artifact(standard_artifacts.HyperParameters,
                             os.path.join(output_dir, 'hyperparameters'))
  with open(os.path.join(artifact.uri, 'best_hyperparameters.txt'), 'w') as handle:
    json.dump(values, handle)
  return artifact


def distill(inputs: dict, teacher_uri: str, dataset, budget: dict, output_dir: str,
            seed: int, settings: training.DistillationSettings,
            hyperparameters: dict = None) -> dict:
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
  input_dict = {**inputs, distiller_spec.TEACHER_MODEL_KEY: [teacher]}
  if hyperparameters:
    input_dict[standard_component_specs.HYPERPARAMETERS_KEY] = [
        hyperparameters_artifact(output_dir, hyperparameters)]
  distiller_executor.Executor().Do(
      input_dict, {standard_component_specs.MODEL_KEY: [model],
                   standard_component_specs.MODEL_RUN_KEY: [model_run],
                   distiller_spec.METRICS_KEY: [metrics]}, properties)
  result = distiller_executor.read_metrics(metrics.uri)
  result['model_dir'] = evaluation.serving_model_path(model.uri)
  return result


def distilled_and_scratch(inputs, teacher_uri, dataset, budget, output_dir, seed,
                          test_set, hyperparameters=None) -> dict:
  """The distilled student and its from-scratch twin (alpha = 1), measured on `test`."""
  figures = {}
  for name, alpha in (('distilled', training.DistillationSettings().alpha), ('scratch', 1.0)):
    # train_baseline off: each run exports the student it trained, measured below.
    settings = training.DistillationSettings(alpha=alpha, train_baseline=False)
    run = distill(inputs, teacher_uri, dataset, budget,
                  os.path.join(output_dir, f'{name}-{seed}-{time.time_ns()}'), seed, settings,
                  hyperparameters)
    measured = measuring.measure(run['model_dir'], test_set, latency_runs=1)
    figures[name] = measured['accuracy']
    figures['student_params'] = run['student_parameters']
    figures['teacher_params'] = run['teacher_parameters'][0]
  return figures


def test_set_for(raw_uri: str, graph_uri: str, dataset):
  return measuring.from_raw_examples(raw_uri, 'test', tft.TFTransformOutput(graph_uri),
                                     reading.DEFAULT_LABEL_KEY, dataset.label_column,
                                     max_examples=10**9)


def spread(values):
  return statistics.stdev(values) if len(values) > 1 else 0.0


def run_taxi(work_dir: str, seeds) -> dict:
  dataset = datasets.resolve('taxi', work_dir)
  budget = BUDGETS['taxi']
  transformed_uri, graph_uri, raw_uri = common.transform_dataset('taxi',
                                                                 os.path.join(work_dir, 'taxi'))
  inputs = common.executor_inputs(transformed_uri, graph_uri)
  teacher_uri = train_teacher(inputs, dataset, budget, os.path.join(work_dir, 'taxi', 'teacher'))
  test_set = test_set_for(raw_uri, graph_uri, dataset)
  teacher = measuring.measure(evaluation.serving_model_path(teacher_uri), test_set,
                              latency_runs=1)
  runs = [distilled_and_scratch(inputs, teacher_uri, dataset, budget,
                                os.path.join(work_dir, 'taxi', 'students'), seed, test_set)
          for seed in seeds]
  distilled = [run['distilled'] for run in runs]
  scratch = [run['scratch'] for run in runs]
  return {
      'test_examples': test_set.size,
      'majority_acc': teacher['majority_accuracy'],
      'teacher_acc': teacher['accuracy'],
      'distilled_acc_mean': statistics.fmean(distilled),
      'distilled_acc_std': spread(distilled),
      'scratch_acc_mean': statistics.fmean(scratch),
      'scratch_acc_std': spread(scratch),
      'distilled_per_seed': distilled,
      'scratch_per_seed': scratch,
      'student_params': runs[0]['student_params'],
      'teacher_params': runs[0]['teacher_params'],
  }


def write_folds(work_dir: str, folds: int) -> list:
  """Digits cut into `folds` folds; fold k's folder has train/, eval/ and test/ CSVs.

  Rows are shuffled once with a fixed seed. Fold k is `test`; of the rest, every
  fourth row goes to `eval` (what the executors validate on), the others to `train`.
  """
  source = datasets.write_digits_csv(os.path.join(work_dir, 'digits-source'))
  with open(os.path.join(source, 'data.csv')) as handle:
    header, *rows = list(csv.reader(handle))
  random.Random(0).shuffle(rows)
  roots = []
  for fold in range(folds):
    root = os.path.join(work_dir, f'digits-fold{fold}', 'data')
    held_out = rows[fold::folds]
    rest = [row for index, row in enumerate(rows) if index % folds != fold]
    splits = {'test': held_out, 'eval': rest[::4],
              'train': [row for index, row in enumerate(rest) if index % 4]}
    for name, split_rows in splits.items():
      os.makedirs(os.path.join(root, name), exist_ok=True)
      path = os.path.join(root, name, 'data.csv')
      with open(path + '.tmp', 'w', newline='') as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(split_rows)
      os.replace(path + '.tmp', path)
    roots.append(root)
  return roots


def run_digits(work_dir: str, seeds) -> dict:
  dataset = datasets.resolve('digits', work_dir)
  budget = BUDGETS['digits']
  per_fold = []
  for fold, (root, seed) in enumerate(zip(write_folds(work_dir, FOLDS), seeds)):
    fold_dir = os.path.join(work_dir, f'digits-fold{fold}')
    transformed_uri, graph_uri, raw_uri = common.transform_dataset('digits', fold_dir,
                                                                   data_root=root)
    inputs = common.executor_inputs(transformed_uri, graph_uri)
    teacher_uri = train_teacher(inputs, dataset, budget, os.path.join(fold_dir, 'teacher'),
                                seed=seed)
    test_set = test_set_for(raw_uri, graph_uri, dataset)
    teacher = measuring.measure(evaluation.serving_model_path(teacher_uri), test_set,
                                latency_runs=1)
    widths = {width: distilled_and_scratch(inputs, teacher_uri, dataset, budget,
                                           os.path.join(fold_dir, f'width{width}'), seed,
                                           test_set, {'hidden_units': width})
              for width in DIGITS_WIDTHS}
    per_fold.append({'seed': seed, 'test_examples': test_set.size,
                     'teacher': teacher['accuracy'], 'majority': teacher['majority_accuracy'],
                     'widths': widths})
  total = sum(fold['test_examples'] for fold in per_fold)

  def pooled(values):
    """Accuracy over all 1,797 examples: each fold weighted by its size."""
    return sum(value * fold['test_examples'] for value, fold in zip(values, per_fold)) / total

  teacher_acc = pooled([fold['teacher'] for fold in per_fold])
  curve = []
  for width in DIGITS_WIDTHS:
    distilled = [fold['widths'][width]['distilled'] for fold in per_fold]
    scratch = [fold['widths'][width]['scratch'] for fold in per_fold]
    distilled_acc, scratch_acc = pooled(distilled), pooled(scratch)
    gap = teacher_acc - scratch_acc
    first = per_fold[0]['widths'][width]
    curve.append({
        'hidden_units': width,
        'student_params': first['student_params'],
        'param_ratio': first['student_params'] / first['teacher_params'],
        'distilled_acc': distilled_acc, 'distilled_std': spread(distilled),
        'scratch_acc': scratch_acc, 'scratch_std': spread(scratch),
        'distilled_per_fold': distilled, 'scratch_per_fold': scratch,
        'gap': gap,
        'gap_closed': (distilled_acc - scratch_acc) / gap if gap > 0 else None,
    })
  return {
      'test_examples': total,
      'majority_acc': pooled([fold['majority'] for fold in per_fold]),
      'teacher_acc': teacher_acc,
      'teacher_per_fold': [fold['teacher'] for fold in per_fold],
      'teacher_std': spread([fold['teacher'] for fold in per_fold]),
      'teacher_params': per_fold[0]['widths'][DIGITS_WIDTHS[0]]['teacher_params'],
      'curve': curve,
  }


def describe(taxi: dict, digits: dict, seeds) -> dict:
  """Targets, tables and notes for docs/benchmarks.md."""
  targets, tables = [], []
  if digits:
    eligible = [point for point in digits['curve'] if point['param_ratio'] <= MAX_PARAM_RATIO
                and point['gap_closed'] is not None]
    best = max(eligible, key=lambda point: point['gap_closed']) if eligible else None
    targets.append(results.target(
        'digits gap_closed, best student at <= 10% of the teacher\'s parameters'
        + (f' ({best["hidden_units"]} hidden units)' if best else ''),
        best['gap_closed'] if best else None, f'>= {TARGET_GAP_CLOSED}',
        bool(best) and best['gap_closed'] >= TARGET_GAP_CLOSED))
    tables.append(results.table(
        f'digits, 5-fold cross-validation (all {digits["test_examples"]:,} examples tested '
        f'once; teacher {digits["teacher_acc"]:.4f} ± {digits["teacher_std"]:.4f}, '
        f'{digits["teacher_params"]:,} parameters; majority class {digits["majority_acc"]:.4f})',
        ['hidden units', 'parameters', 'share of teacher', 'scratch (± std over folds)',
         'distilled (± std)', 'distilled − scratch per fold', 'gap_closed'],
        [[point['hidden_units'], point['student_params'], round(point['param_ratio'], 4),
          f"{point['scratch_acc']:.4f} ± {point['scratch_std']:.4f}",
          f"{point['distilled_acc']:.4f} ± {point['distilled_std']:.4f}",
          ', '.join(f'{d - s:+.4f}' for d, s in zip(point['distilled_per_fold'],
                                                     point['scratch_per_fold'])),
          point['gap_closed']] for point in digits['curve']]))
  if taxi:
    no_harm = taxi['distilled_acc_mean'] >= taxi['scratch_acc_mean']
    near_teacher = taxi['teacher_acc'] - taxi['distilled_acc_mean'] <= TAXI_MAX_TEACHER_GAP
    targets += [
        results.target('taxi: distilled − scratch (mean over seeds)',
                       taxi['distilled_acc_mean'] - taxi['scratch_acc_mean'], '>= 0', no_harm),
        results.target('taxi: teacher − distilled', taxi['teacher_acc']
                       - taxi['distilled_acc_mean'], f'<= {TAXI_MAX_TEACHER_GAP}',
                       near_teacher)]
    tables.append(results.table(
        f'taxi, hash split (test {taxi["test_examples"]:,} examples; teacher '
        f'{taxi["teacher_params"]:,} parameters, student {taxi["student_params"]:,})',
        ['model', 'test accuracy (mean)', 'std over seeds', 'per seed'],
        [['majority class', taxi['majority_acc'], None, None],
         ['teacher (one run)', taxi['teacher_acc'], None, None],
         ['scratch student', taxi['scratch_acc_mean'], taxi['scratch_acc_std'],
          ', '.join(f'{value:.4f}' for value in taxi['scratch_per_seed'])],
         ['distilled student', taxi['distilled_acc_mean'], taxi['distilled_acc_std'],
          ', '.join(f'{value:.4f}' for value in taxi['distilled_per_seed'])]]))
  return {
      'title': 'Distillation: distilled against from-scratch students, on test',
      'summary': (
          f'Seeds {", ".join(str(seed) for seed in seeds)}, fixed before any run and never '
          'used to choose a default. Students at the Distiller\'s defaults (T = 2, alpha = '
          '0.5, mixup 1, no tuning); the from-scratch twin is the same executor at alpha = 1, '
          f'same seed, data and steps (taxi {BUDGETS["taxi"]["student_steps"]:,}, digits '
          f'{BUDGETS["digits"]["student_steps"]:,} at learning rate 3e-3). gap_closed is '
          '(distilled − scratch) / (teacher − scratch), on pooled test accuracy.'),
      'targets': targets,
      'tables': tables,
      'notes': [
          'Digits: each fold has its own transform, teacher and seed (fold k, seed k); the '
          'pipeline itself keeps its hash split. Taxi: one teacher, five student seeds.',
          'Accuracies are fractions of the whole test split, read through the serving '
          'signature (raw tf.Examples in), by the same module the gate uses.',
      ],
  }


def main() -> None:
  parser = common.argument_parser(__doc__, 'distillery-distillation-benchmark')
  parser.add_argument('--seeds', default=','.join(str(seed) for seed in SEEDS))
  parser.add_argument('--datasets', default='taxi,digits')
  args = parser.parse_args()
  seeds = [int(seed) for seed in args.seeds.split(',')]
  names = args.datasets.split(',')

  def run():
    taxi = run_taxi(os.path.join(args.work_dir, 'taxi-run'), seeds) if 'taxi' in names else {}
    digits = (run_digits(os.path.join(args.work_dir, 'digits-run'), seeds)
              if 'digits' in names else {})
    return {**describe(taxi, digits, seeds), 'seeds': seeds, 'taxi': taxi, 'digits': digits,
            'budgets': BUDGETS}

  common.print_result(run, args, 'distillation')


if __name__ == '__main__':
  main()
