"""Compression benchmark: every quantization mode, budgeted pruning, both together, latency.

Models: the digits CNN teacher and the distilled taxi student, each trained through
the real executors on data from the real ExampleGen -> IngestionTransform path.
Each Quantizer mode and the Pruner run as executors; then every output folder
is measured by the one measuring module on the held-out `test` split (accuracy,
folder size as the Pusher pushes it, batch-1 latency from a raw tf.Example).
Model-file ratios (TFLite flatbuffers, gzipped where sparsity is the point)
sit beside the pushed-folder ratios, which include the transform graph.

What a device ships: the int8 Quantizer also writes `model_raw.tflite`, the
transform and the model in one flatbuffer over raw columns. It runs on raw `test`
rows in a separate environment with LiteRT and numpy only (requirements/litert.txt),
against the TensorFlow path (`predict_raw` of the same folder), and its size and
batch-1 latency are set against the float SavedModel (folder size, `serving_default`
on one serialized raw example). A pruned model is also converted with TFLite's
sparse encoding, and the Quantizer keeps whichever file wins.

Int8 latency is then timed on the model alone, float32 and int8 flatbuffers of
the same model in alternation, under each setting a Python user can change:
interpreter threads, the op resolver (XNNPACK by default, or without it),
per-channel or per-tensor weight scales, and int8 or float32 inputs/outputs.

Usage:
  python -m benchmarks.compression --json [--models digits,taxi]
"""

import json
import os
import statistics
import subprocess
import time

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from tfx.types import standard_artifacts

from benchmarks import common
from benchmarks import distillation as distillation_benchmark
from benchmarks import results
from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import reading
from tfx_distillery.components.distiller import training
from tfx_distillery.components.pruner import executor as pruner_executor
from tfx_distillery.components.quantizer import conversion
from tfx_distillery.components.quantizer import executor as quantizer_executor
from tfx_distillery.components.quantizer import predict
from tfx_distillery.components.quantizer import raw_model
from tfx_distillery.pipelines import datasets

QUANTIZATION_MODES = ('dynamic_range', 'float16', 'full_integer', 'qat')
PRUNING_STEPS = {'digits': 2000, 'taxi': 600}
# The Pruner's figures on digits are a mean over teachers trained with these seeds (the
# first is the teacher every other figure here uses). Fixed before any result.
PRUNING_SEEDS = {'digits': (0, 1, 2), 'taxi': (0, 1, 2)}
SPARSITIES = (0.5, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.96, 0.97, 0.98)
MAX_ACCURACY_DROP = 0.01
LATENCY_RUNS = 300
TARGETS = {'pruned_int8_ratio': 40.0, 'int8_latency_ratio': 1.0, 'raw_agreement': 0.995,
           'device_ratio': {'digits': 20.0, 'taxi': 5.0}, 'raw_latency_ratio': 0.5,
           'shipped_pruned_ratio': 20.0}


def quantize(inputs: dict, model, mode: str, label_column: str, output_dir: str,
             seed: int = 0) -> dict:
  """Runs the Quantizer executor (raw examples given); returns its metrics and output folders."""
  quantized = common.artifact(standard_artifacts.Model, os.path.join(output_dir, mode))
  metrics = common.artifact(artifacts.ModelMetrics, os.path.join(output_dir, mode + '-metrics'))
  quantizer_executor.Executor().Do(
      {**inputs, 'model': [model]}, {'quantized_model': [quantized], 'metrics': [metrics]},
      # The Quantizer's default: float32 inputs and outputs, int8 inside (the latency
      # table below times int8 inputs and outputs too).
      {'mode': mode, 'io_type': 'float32',
       'representative_samples': 200, 'qat_steps': 300, 'preserve_sparsity': 0,
       'eval_examples': 5000, 'latency_runs': 10, 'label_column': label_column,
       'random_seed': seed})
  with open(os.path.join(metrics.uri, 'metrics.json')) as handle:
    result = json.load(handle)
  result['folder'] = os.path.join(quantized.uri, 'Format-Serving')
  result['float32_folder'] = os.path.join(metrics.uri, 'float32')
  return result


def prune(inputs: dict, model, name: str, label_column: str, output_dir: str, seed: int):
  pruned = common.artifact(standard_artifacts.Model, os.path.join(output_dir, 'pruned'))
  metrics = common.artifact(artifacts.ModelMetrics, os.path.join(output_dir, 'pruned-metrics'))
  pruner_executor.Executor().Do(
      {**inputs, 'model': [model]}, {'pruned_model': [pruned], 'metrics': [metrics]},
      {'target_sparsity': 0.8, 'schedule': 'polynomial', 'begin_step': 0, 'end_step': -1,
       'max_accuracy_drop': MAX_ACCURACY_DROP, 'sparsities': json.dumps(list(SPARSITIES)),
       'label_column': label_column,
       'train_args': json.dumps({'num_steps': PRUNING_STEPS[name]}),
       'eval_args': json.dumps({'num_steps': 1}),
       'custom_config': json.dumps({'batch_size': 64, 'learning_rate': 1e-3}),
       'random_seed': seed})
  with open(os.path.join(metrics.uri, 'metrics.json')) as handle:
    return pruned, json.load(handle)


def file_gzip_bytes(path: str) -> int:
  with open(path, 'rb') as handle:
    return measuring.gzip_bytes(handle.read())


def folder_gzip_bytes(folder: str) -> int:
  """Each file of a folder gzipped, summed: a pushed folder as an archive would carry it."""
  total = 0
  for root, _, files in os.walk(folder):
    for file_name in files:
      total += file_gzip_bytes(os.path.join(root, file_name))
  return total


def tflite_file(folder: str) -> str:
  return os.path.join(folder, predict.MODEL_FILE_NAME)


def interpreter(flatbuffer: bytes, num_threads: int, xnnpack: bool):
  resolver = (tf.lite.experimental.OpResolverType.AUTO if xnnpack else
              tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
  runner = tf.lite.Interpreter(model_content=flatbuffer, num_threads=num_threads,
                               experimental_op_resolver_type=resolver)
  runner.allocate_tensors()
  return runner


def paired_model_latency_ms(flatbuffers, num_threads: int, xnnpack: bool, rounds: int = 20,
                            calls_per_round: int = 50):
  """Median batch-1 invoke time of each flatbuffer, the models taking turns each round."""
  runners = []
  for flatbuffer in flatbuffers:
    runner = interpreter(flatbuffer, num_threads, xnnpack)
    for detail in runner.get_input_details():
      runner.set_tensor(detail['index'], np.zeros(detail['shape'], detail['dtype']))
    runner.invoke()
    runners.append(runner)
  timings = [[] for _ in runners]
  for _ in range(rounds):
    for runner, model_timings in zip(runners, timings):
      for _ in range(calls_per_round):
        start = time.perf_counter()
        runner.invoke()
        model_timings.append(time.perf_counter() - start)
  return [1000 * statistics.median(model_timings) for model_timings in timings]


def latency_settings(keras_model, calibration, float_flatbuffer: bytes) -> list:
  """int8 over float32 model latency under each setting a Python user can change."""

  def representative_features():
    for index in range(calibration.size):
      yield {name: values[index:index + 1] for name, values in calibration.features.items()}

  int8 = {(per_channel, io_type): conversion.convert(keras_model, 'full_integer',
                                                     representative_features, io_type,
                                                     per_channel=per_channel)
          for per_channel in (True, False) for io_type in ('int8', 'float32')}
  rows = []
  for xnnpack in (True, False):
    for num_threads in (1, os.cpu_count() or 1):
      for (per_channel, io_type), flatbuffer in int8.items():
        float_ms, int8_ms = paired_model_latency_ms([float_flatbuffer, flatbuffer],
                                                    num_threads, xnnpack)
        rows.append({'xnnpack': xnnpack, 'num_threads': num_threads,
                     'per_channel': per_channel, 'io_type': io_type,
                     'float32_ms': float_ms, 'int8_ms': int8_ms,
                     'ratio': int8_ms / float_ms})
  return rows


def raw_rows_as_json(serialized, inputs) -> list:
  """Raw rows as a device holds them: {column: [values]} (empty where missing), text decoded."""
  rows = []
  for row in raw_model.raw_rows(serialized, inputs):
    rows.append({entry['column']: [value.decode() if isinstance(value, bytes) else value.item()
                                   for value in row[entry['name']][0]] for entry in inputs})
  return rows


def saved_model_latency_ms(model_dir: str, serialized_example: bytes) -> float:
  """Median batch-1 `serving_default` call on one serialized raw example (TF Serving's work)."""
  serve = tf.saved_model.load(model_dir).signatures['serving_default']
  example = tf.constant([serialized_example])
  return measuring.median_latency_ms(lambda: serve(examples=example), LATENCY_RUNS)


def device_figures(quantized: dict, input_model_dir: str, test_set,
                   work_dir: str) -> dict:
  """model_raw.tflite against the TensorFlow path and the float SavedModel, on test.

  The flatbuffer runs in a LiteRT-only environment (a subprocess); the TensorFlow
  path is the same folder's `predict_raw`.
  """
  folder = quantized['folder']
  with open(os.path.join(folder, predict.SERVING_FILE_NAME)) as handle:
    serving = json.load(handle)
  saved_model_bytes = measuring.size_bytes(input_model_dir)
  if not serving.get('raw_model'):
    return {'refused': serving['raw_model_refused'], 'saved_model_bytes': saved_model_bytes}
  serialized = test_set.every_raw_example
  tensorflow_classes = predict.load_tflite(folder).predict_raw(serialized)['classes']
  os.makedirs(work_dir, exist_ok=True)
  rows_path = os.path.join(work_dir, 'raw-rows.json')
  with open(rows_path, 'w') as handle:
    json.dump(raw_rows_as_json(serialized, serving['raw_model']['inputs']), handle)
  result = subprocess.run(
      [common.litert_python(os.path.dirname(os.path.dirname(work_dir))),
       os.path.join(results.REPOSITORY, 'benchmarks', 'litert_run.py'), folder, rows_path,
       str(LATENCY_RUNS)], check=True, capture_output=True, text=True)
  litert = json.loads(result.stdout.strip().splitlines()[-1])
  classes = np.array(litert['classes'])
  flatbuffer_bytes = os.path.getsize(os.path.join(folder, predict.RAW_MODEL_FILE_NAME))
  # The example keeps its label column: our taxi SavedModels' serving_default parses it as a
  # required feature (the folder route and the flatbuffer do not need it).
  saved_model_ms = saved_model_latency_ms(input_model_dir, serialized[0])
  return {
      'flatbuffer_bytes': flatbuffer_bytes,
      'saved_model_bytes': saved_model_bytes,
      'device_ratio': saved_model_bytes / flatbuffer_bytes,
      'agreement': float(np.mean(classes == tensorflow_classes)),
      'litert_accuracy': float(np.mean(classes == test_set.labels)),
      'tensorflow_accuracy': float(np.mean(tensorflow_classes == test_set.labels)),
      'litert_latency_ms': litert['latency_ms'],
      'saved_model_latency_ms': saved_model_ms,
      'latency_ratio': litert['latency_ms'] / saved_model_ms,
      'interpreter': litert['interpreter'],
      'ops': serving['raw_model']['ops'],
      'raw_inputs': len(serving['raw_model']['inputs']),
      'test_examples': len(serialized),
  }


def chosen_device_figures(candidates: dict, input_model_dir: str, test_set,
                          work_dir: str, float32_accuracy: float) -> dict:
  """`device_figures` of each int8 candidate, and the one the gate's rule chooses.

  The rule, as the AccuracyGate's: among flatbuffers within MAX_ACCURACY_DROP of the
  float32 model on test (through LiteRT), the smallest file.
  """
  rows = {}
  for name, quantized in candidates.items():
    rows[name] = device_figures(quantized, input_model_dir, test_set,
                                os.path.join(work_dir, name.replace(' ', '').replace('+', '-')))
  built = {name: row for name, row in rows.items() if 'refused' not in row}
  if not built:
    return {**next(iter(rows.values())), 'candidate': None, 'candidates': rows}
  passing = {name: row for name, row in built.items()
             if float32_accuracy - row['litert_accuracy'] <= MAX_ACCURACY_DROP} or built
  chosen = min(passing, key=lambda name: (passing[name]['flatbuffer_bytes'],
                                          -passing[name]['litert_accuracy']))
  return {**rows[chosen], 'candidate': chosen, 'candidates': rows}


def run_model(name: str, work_dir: str) -> dict:
  dataset = datasets.resolve(name, work_dir)
  budget = distillation_benchmark.BUDGETS[name]
  transformed_uri, graph_uri, raw_uri = common.transform_dataset(name,
                                                                 os.path.join(work_dir, name))
  inputs = common.executor_inputs(transformed_uri, graph_uri)
  raw_examples = standard_artifacts.Examples()
  raw_examples.uri = raw_uri
  raw_examples.split_names = json.dumps(list(common.SPLITS))
  inputs['raw_examples'] = [raw_examples]
  output_dir = os.path.join(work_dir, name, f'run-{time.time_ns()}')
  teacher_uri = distillation_benchmark.train_teacher(inputs, dataset, budget,
                                                     os.path.join(output_dir, 'teacher'))

  def model_for_seed(seed: int, model_dir: str):
    """Digits: a teacher trained with `seed`; taxi: the defaults' student distilled with it."""
    model = standard_artifacts.Model()
    if name == 'digits':
      model.uri = (teacher_uri if seed == PRUNING_SEEDS[name][0] else
                   distillation_benchmark.train_teacher(
                       inputs, dataset, budget, os.path.join(model_dir, 'teacher'), seed=seed))
    else:
      student = distillation_benchmark.distill(
          inputs, teacher_uri, dataset, budget, os.path.join(model_dir, 'student'), seed=seed,
          settings=training.DistillationSettings(train_baseline=False))  # The defaults.
      model.uri = os.path.dirname(student['model_dir'])
    return model

  model = model_for_seed(PRUNING_SEEDS[name][0], output_dir)
  model_name = 'digits teacher (CNN)' if name == 'digits' else 'distilled taxi student'
  tf_transform_output = tft.TFTransformOutput(graph_uri)
  test_set = distillation_benchmark.test_set_for(raw_uri, graph_uri, dataset)

  def on_test(folder):
    return measuring.measure(folder, test_set, latency_runs=LATENCY_RUNS)

  modes = {mode: quantize(inputs, model, mode, dataset.label_column,
                          os.path.join(output_dir, 'quantized')) for mode in QUANTIZATION_MODES}
  float32_folder = modes['full_integer']['float32_folder']
  float32 = on_test(float32_folder)
  float32_file = os.path.getsize(tflite_file(float32_folder))
  mode_rows = {}
  for mode, metrics in modes.items():
    figures = on_test(metrics['folder'])
    mode_rows[mode] = {
        'file_bytes': os.path.getsize(tflite_file(metrics['folder'])),
        'file_ratio': os.path.getsize(tflite_file(metrics['folder'])) / float32_file,
        'folder_bytes': figures['size_bytes'],
        'folder_ratio': figures['size_bytes'] / float32['size_bytes'],
        'accuracy': figures['accuracy'],
        'accuracy_drop': float32['accuracy'] - figures['accuracy'],
        'latency_ms': figures['latency_ms'],
        'latency_ratio': figures['latency_ms'] / float32['latency_ms'],
    }
  pruning_runs = [prune_and_ship(inputs, model, name, dataset.label_column, output_dir,
                                  on_test, float32_folder, seed=0)]
  # More models, one a seed: the Pruner's figures as a mean and a spread.
  for seed in PRUNING_SEEDS[name][1:]:
    seed_dir = os.path.join(output_dir, f'seed-{seed}')
    seed_model = model_for_seed(seed, seed_dir)
    seed_float32 = quantize(inputs, seed_model, 'full_integer', dataset.label_column,
                            os.path.join(seed_dir, 'quantized'), seed)['float32_folder']
    pruning_runs.append(prune_and_ship(inputs, seed_model, name, dataset.label_column,
                                       seed_dir, on_test, seed_float32, seed=seed))
  first = pruning_runs[0]
  pruned_int8 = first.pop('pruned_int8')
  for entry in pruning_runs[1:]:
    entry.pop('pruned_int8')
  candidates = {'int8': modes['full_integer']}
  if pruned_int8 is not None:
    candidates['pruned + int8'] = pruned_int8
  device = chosen_device_figures(candidates, evaluation.serving_model_path(model.uri),
                                 test_set, output_dir, float32['accuracy'])
  calibration = measuring.from_examples_artifact(transformed_uri, 'train', tf_transform_output,
                                                 reading.DEFAULT_LABEL_KEY, 200)
  keras_model = tf_keras.models.load_model(evaluation.serving_model_path(model.uri),
                                           compile=False)
  with open(tflite_file(float32_folder), 'rb') as handle:
    latency_rows = latency_settings(keras_model, calibration, handle.read())
  return {
      'model': model_name,
      'test_examples': test_set.size,
      'majority_accuracy': float32['majority_accuracy'],
      'float32_tflite': {'file_bytes': float32_file, 'folder_bytes': float32['size_bytes'],
                         'accuracy': float32['accuracy'], 'latency_ms': float32['latency_ms']},
      'modes': mode_rows,
      **first,
      'pruning_runs': pruning_runs,
      'pruning_summary': pruning_summary(pruning_runs),
      'int8_latency_ratio': mode_rows['full_integer']['latency_ratio'],
      'latency_settings': latency_rows,
      'device': device,
  }


PRUNING_FIGURES = ('pruned_int8_ratio', 'shipped_pruned_ratio', 'pruned_int8_acc_drop',
                   'pruned_sparsity')


def pruning_summary(pruning_runs) -> dict:
  """Mean and standard deviation of each pruning figure over the runs where pruning paid."""
  paid = [entry for entry in pruning_runs if entry['pruning_paid']]
  summary = {'runs': len(pruning_runs), 'paid_runs': len(paid),
             'seeds': [entry['seed'] for entry in pruning_runs]}
  for figure in PRUNING_FIGURES:
    values = [entry[figure] for entry in paid]
    summary[figure] = {'mean': statistics.mean(values) if values else None,
                       'std': statistics.stdev(values) if len(values) > 1 else 0.0,
                       'values': values}
  return summary


def prune_and_ship(inputs: dict, model, name: str, label_column: str, output_dir: str,
                   on_test, float32_folder: str, seed: int) -> dict:
  """The Pruner's search on `model`, then int8 of what it hands on, measured on test.

  When pruning did not pay (the input handed on unchanged), nothing is quantized again:
  the figures say why, as the chain's gate would.
  """
  pruned, pruning = prune(inputs, model, name, label_column, output_dir, seed)
  entry = {'seed': seed, 'pruning_paid': pruning['pruning_paid'],
           'handed_on': pruning['handed_on'], 'pruning_reason': pruning['reason'],
           'pruned_sparsity': pruning['sparsity'], 'layer_sparsity': pruning['layer_sparsity'],
           'sensitivity': pruning['sensitivity'], 'pruning_trials': pruning['trials'],
           'pruned_gzip_ratio': pruning['gzip_ratio'], 'pruned_int8': None,
           'sparse_encoding': None}
  if not pruning['pruning_paid']:
    return entry
  float32 = on_test(float32_folder)
  pruned_int8 = quantize(inputs, pruned, 'full_integer', label_column,
                         os.path.join(output_dir, 'pruned-quantized'), seed)
  pruned_int8_figures = on_test(pruned_int8['folder'])
  pruned_keras = on_test(evaluation.serving_model_path(pruned.uri))
  float32_file = os.path.getsize(tflite_file(float32_folder))
  entry.update({
      'pruned_int8': pruned_int8,
      'pruned_accuracy': pruned_keras['accuracy'],
      'pruned_acc_drop': float32['accuracy'] - pruned_keras['accuracy'],
      'pruned_int8_ratio': (file_gzip_bytes(tflite_file(float32_folder))
                            / file_gzip_bytes(tflite_file(pruned_int8['folder']))),
      'pruned_int8_folder_gzip_ratio': (folder_gzip_bytes(float32_folder)
                                        / folder_gzip_bytes(pruned_int8['folder'])),
      'pruned_int8_accuracy': pruned_int8_figures['accuracy'],
      'pruned_int8_acc_drop': float32['accuracy'] - pruned_int8_figures['accuracy'],
      'sparse_encoding': pruned_int8['sparse_encoding'],
      'shipped_pruned_bytes': pruned_int8['flatbuffer_bytes'],
      'shipped_pruned_ratio': float32_file / pruned_int8['flatbuffer_bytes'],
  })
  return entry


def describe(per_model: dict) -> dict:
  targets, tables = [], []
  digits = per_model.get('digits')
  if digits:
    summary = digits['pruning_summary']
    paid_seeds = [entry['seed'] for entry in digits['pruning_runs'] if entry['pruning_paid']]
    teachers = (f'the {summary["paid_runs"]} of {summary["runs"]} teachers (seeds) whose '
                'pruning paid')
    drop = summary['pruned_int8_acc_drop']
    within = drop['mean'] is not None and drop['mean'] <= MAX_ACCURACY_DROP
    for figure, label, target in (
        ('pruned_int8_ratio', 'dense float32 gzip / pruned int8 gzip (model file)',
         TARGETS['pruned_int8_ratio']),
        ('shipped_pruned_ratio', 'dense float32 file / the int8 file as shipped (no gzip)',
         TARGETS['shipped_pruned_ratio'])):
      name = f'digits pruned + int8, {label}, {teachers}'
      rule = f'>= {target:g}x at <= 0.01 drop'
      if not paid_seeds:
        targets.append(results.target(f'{name}: none', None, rule, False))
        continue
      row = results.over_seeds(name, summary[figure]['values'], paid_seeds, target, rule=rule)
      row['met'] = row['met'] and within  # The ratio counts only within the accuracy budget.
      targets.append(row)
    if paid_seeds:
      targets.append(results.over_seeds(
          f'digits pruned + int8 test accuracy drop, {teachers}', drop['values'], paid_seeds,
          MAX_ACCURACY_DROP, higher_is_better=False))
  for name, figures in per_model.items():
    summary = figures['pruning_summary']
    if name != 'digits':
      # Where pruning does not pay, the Pruner must say so and hand its input on, not a
      # model that ships no smaller.
      kept = [entry for entry in figures['pruning_runs']
              if entry['pruning_paid'] or entry['handed_on'] == 'input model, unchanged']
      targets.append(results.target(
          f'{name}: runs where pruning paid (a smaller int8 file within the budget) or the '
          'input was handed on unchanged', len(kept), f'= {summary["runs"]}',
          len(kept) == summary['runs']))
  for name, figures in per_model.items():
    device = figures['device']
    if 'refused' in device:
      for figure, rule in (('model_raw.tflite agrees with the TensorFlow path (LiteRT only)',
                            f'>= {TARGETS["raw_agreement"]}'),
                           ('float SavedModel folder / model_raw.tflite (device size)',
                            f'>= {TARGETS["device_ratio"][name]:g}x'),
                           ('model_raw.tflite in LiteRT / SavedModel batch-1 latency',
                            f'<= {TARGETS["raw_latency_ratio"]}')):
        targets.append(results.target(f'{name} {figure}: refused, no flatbuffer', None, rule,
                                      False))
      continue
    targets.append(results.target(
        f'{name} model_raw.tflite agrees with the TensorFlow path (LiteRT only, test)',
        device['agreement'], f'>= {TARGETS["raw_agreement"]}',
        device['agreement'] >= TARGETS['raw_agreement']))
    targets.append(results.target(
        f'{name} float SavedModel folder / model_raw.tflite (device size)',
        device['device_ratio'], f'>= {TARGETS["device_ratio"][name]:g}x',
        device['device_ratio'] >= TARGETS['device_ratio'][name]))
    targets.append(results.target(
        f'{name} model_raw.tflite in LiteRT / SavedModel serving_default, batch-1 latency',
        device['latency_ratio'], f'<= {TARGETS["raw_latency_ratio"]}',
        device['latency_ratio'] <= TARGETS['raw_latency_ratio']))
  for name, figures in per_model.items():
    best = min(figures['latency_settings'], key=lambda row: row['ratio'])
    targets.append(results.target(
        f'{name} int8 / float32 batch-1 latency, pushed model (transform included)',
        figures['int8_latency_ratio'], '<= 1', figures['int8_latency_ratio'] <= 1))
    targets.append(results.target(
        f'{name} int8 / float32 model latency, best setting ({describe_setting(best)})',
        best['ratio'], '<= 1', best['ratio'] <= 1))
  for name, figures in per_model.items():
    float32 = figures['float32_tflite']
    rows = [['float32 TFLite', float32['file_bytes'], 1.0, float32['folder_bytes'], 1.0,
             float32['accuracy'], 0.0, float32['latency_ms'], 1.0]]
    for mode, row in figures['modes'].items():
      rows.append([mode, row['file_bytes'], row['file_ratio'], row['folder_bytes'],
                   row['folder_ratio'], row['accuracy'], row['accuracy_drop'], row['latency_ms'],
                   row['latency_ratio']])
    tables.append(results.table(
        f'{figures["model"]}: quantization modes (test {figures["test_examples"]:,} examples, '
        f'majority class {figures["majority_accuracy"]:.4f})',
        ['model', 'model file (B)', 'file ratio', 'pushed folder (B)', 'folder ratio',
         'accuracy', 'drop', 'latency (ms)', 'latency ratio'], rows))
    tables.append(results.table(
        f'{figures["model"]}: pruning, and pruning then int8, by seed',
        ['seed', 'handed on', 'sparsity (eval search)', 'pruned test accuracy / drop',
         'pruned gzip ratio (float32)', 'pruned + int8: gzip ratio', 'as shipped ratio',
         'pruned + int8: test accuracy / drop', 'why not pruned'],
        [[entry['seed'], entry['handed_on'], entry['pruned_sparsity'],
          (f'{entry["pruned_accuracy"]:.4f} / {entry["pruned_acc_drop"]:+.4f}'
           if entry['pruning_paid'] else '-'),
          entry['pruned_gzip_ratio'], entry.get('pruned_int8_ratio'),
          entry.get('shipped_pruned_ratio'),
          (f'{entry["pruned_int8_accuracy"]:.4f} / {entry["pruned_int8_acc_drop"]:+.4f}'
           if entry['pruning_paid'] else '-'),
          entry['pruning_reason'] or '']
         for entry in figures['pruning_runs']]))
    first_paid = next((entry for entry in figures['pruning_runs'] if entry['pruning_paid']),
                      None)
    if first_paid:
      tables.append(results.table(
          f'{figures["model"]}: per-layer sparsity the Pruner chose (seed {first_paid["seed"]}), '
          'with each layer\'s one-shot eval loss pruned alone',
          ['weight', 'sparsity', 'one-shot loss by sparsity'],
          [[weight, value, ', '.join(
              f'{level}: {loss:+.3f}' for level, loss in
              first_paid['sensitivity'].get(weight.split('/')[0], {}).items())]
           for weight, value in sorted(first_paid['layer_sparsity'].items())]))
    device = figures['device']
    if 'refused' in device:
      tables.append(results.table(
          f'{figures["model"]}: what a device ships (int8)', ['figure', 'value'],
          [['model_raw.tflite', 'refused: ' + device['refused']],
           ['float SavedModel folder (B)', device['saved_model_bytes']]]))
    else:
      tables.append(results.table(
          f'{figures["model"]}: what a device ships ({device["candidate"]} model_raw.tflite, '
          f'chosen as the gate chooses: the smallest within {MAX_ACCURACY_DROP} of float32 on '
          f'test; {device["raw_inputs"]} raw columns in, test {device["test_examples"]:,} '
          'examples)',
          ['figure', 'value'],
          [['model_raw.tflite (B), the whole download', device['flatbuffer_bytes']],
           ['the other int8 candidate\'s model_raw.tflite (B)',
            ', '.join(f'{name}: {row.get("flatbuffer_bytes", "refused")}'
                      for name, row in device['candidates'].items()
                      if name != device['candidate'])],
           ['float SavedModel folder (B)', device['saved_model_bytes']],
           ['SavedModel / flatbuffer size', device['device_ratio']],
           ['classes agreeing with the TensorFlow path (LiteRT only)', device['agreement']],
           ['test accuracy: LiteRT / TensorFlow path',
            f'{device["litert_accuracy"]:.4f} / {device["tensorflow_accuracy"]:.4f}'],
           ['batch-1 latency (ms): LiteRT on raw columns / SavedModel serving_default',
            f'{device["litert_latency_ms"]:.3f} / {device["saved_model_latency_ms"]:.3f}'],
           ['latency ratio', device['latency_ratio']],
           ['interpreter', device['interpreter']],
           ['ops in the flatbuffer', ', '.join(device['ops'])]]))
    sparse = figures['sparse_encoding']
    if sparse:
      tables.append(results.table(
          f'{figures["model"]}: pruned int8, dense against sparse encoding (eval)',
          ['encoding', 'file (B)', 'batch-1 latency (ms)', 'classes agree with dense',
           'shipped'],
          [['dense', sparse['dense_bytes'], sparse['dense_latency_ms'], 1.0,
            not sparse['kept']],
           ['sparse (EXPERIMENTAL_SPARSITY)', sparse['sparse_bytes'],
            sparse['sparse_latency_ms'], sparse['agreement'], sparse['kept']]]))
    tables.append(results.table(
        f'{figures["model"]}: int8 against float32 model latency by setting (batch 1, ms, '
        'median of 1,000 invokes each, in alternation)',
        ['XNNPACK', 'threads', 'weight scales', 'int8 inputs/outputs', 'float32', 'int8',
         'int8 / float32'],
        [[row['xnnpack'], row['num_threads'], 'per channel' if row['per_channel'] else
          'per tensor', row['io_type'] == 'int8', row['float32_ms'], row['int8_ms'],
          row['ratio']] for row in figures['latency_settings']]))
  return {
      'title': 'Compression: quantization, pruning, both, and int8 latency',
      'summary': (
          'The digits CNN teacher and the distilled taxi student through the Quantizer '
          '(each mode) and the Pruner (layer by layer by sensitivity, the smallest int8 file '
          f'within a 0.01 drop on eval, {len(SPARSITIES)} levels up to {max(SPARSITIES)}; on '
          'digits three teachers, seeds 0, 1 and 2), all measured on `test` by '
          'the measuring module against the float32 TFLite conversion of the same model. '
          'Pushed-folder sizes include the transform graph the folder ships with.'),
      'targets': targets,
      'tables': tables,
      'notes': [
          'model_raw.tflite runs in a separate virtual environment with requirements/litert.txt '
          'only (LiteRT and numpy; TensorFlow is not importable there). Its latency is one raw '
          'row made into inputs and run (1 interpreter thread); the SavedModel\'s is '
          '`serving_default` on one serialized raw example (parse, transform, model; '
          'TensorFlow\'s default threads).',
          'A refused flatbuffer names the transform ops with no TFLite builtin; the folder '
          'route (TFLite model with transform_graph/) still serves with TensorFlow.',
          'Latency by setting times the model alone (the transform graph is the same for '
          'both), so it shows what each setting does to int8 against float32.',
      ],
  }


def describe_setting(row: dict) -> str:
  return (f'{"XNNPACK" if row["xnnpack"] else "no XNNPACK"}, {row["num_threads"]} thread(s), '
          f'{"per-channel" if row["per_channel"] else "per-tensor"}, '
          f'{row["io_type"]} inputs/outputs')


def main() -> None:
  parser = common.argument_parser(__doc__, 'distillery-compression-benchmark')
  parser.add_argument('--models', default='digits,taxi')
  args = parser.parse_args()

  def run():
    per_model = {name: run_model(name, args.work_dir) for name in args.models.split(',')}
    return {**describe(per_model), 'models': per_model}

  common.print_result(run, args, 'compression')


if __name__ == '__main__':
  main()
