"""Compression benchmark: every quantization mode, budgeted pruning, and both together.

Models: the digits CNN teacher and the distilled taxi student, each trained through
the real executors on data from the real ExampleGen -> IngestionTransform path.
Per model: float32 TFLite size, size and accuracy of each Quantizer mode, the
Pruner's gzip ratio at the highest sparsity within a 1-point drop (found by its
search), pruned + int8 against dense float32 gzip, and all latencies. Top-level
keys are the digits teacher's figures (the model of TFMOT's published anchors).

Usage:
  python -m benchmarks.compression --json
"""

import json
import os
import time

from tfx.types import standard_artifacts

from benchmarks import common
from benchmarks import distillation as distillation_benchmark
from tfx_distillery.components.common import artifacts
from tfx_distillery.components.distiller import training
from tfx_distillery.components.pruner import executor as pruner_executor
from tfx_distillery.components.quantizer import executor as quantizer_executor
from tfx_distillery.pipelines import datasets

QUANTIZATION_MODES = ('dynamic_range', 'float16', 'full_integer', 'qat')
PRUNING_STEPS = {'digits': 1000, 'taxi': 600}
MAX_ACCURACY_DROP = 0.01
HEADLINE_KEYS = ('int8_size_ratio', 'int8_acc_drop', 'f16_size_ratio', 'pruned_gzip_ratio',
                 'pruned_acc_drop', 'pruned_int8_ratio', 'int8_latency_ratio')


def quantize(inputs: dict, model, mode: str, label_column: str, output_dir: str) -> dict:
  quantized = common.artifact(standard_artifacts.Model,
                                               os.path.join(output_dir, mode))
  metrics = common.artifact(artifacts.ModelMetrics,
                                             os.path.join(output_dir, mode + '-metrics'))
  quantizer_executor.Executor().Do(
      {**inputs, 'model': [model]}, {'quantized_model': [quantized], 'metrics': [metrics]},
      {'mode': mode, 'io_type': 'int8' if mode in ('full_integer', 'qat') else 'float32',
       'representative_samples': 200, 'qat_steps': 300, 'preserve_sparsity': 0,
       'eval_examples': 5000, 'latency_runs': 500, 'label_column': label_column})
  with open(os.path.join(metrics.uri, 'metrics.json')) as handle:
    return json.load(handle)


def prune(inputs: dict, model, name: str, label_column: str, output_dir: str):
  pruned = common.artifact(standard_artifacts.Model,
                                            os.path.join(output_dir, 'pruned'))
  metrics = common.artifact(artifacts.ModelMetrics,
                                             os.path.join(output_dir, 'pruned-metrics'))
  pruner_executor.Executor().Do(
      {**inputs, 'model': [model]}, {'pruned_model': [pruned], 'metrics': [metrics]},
      {'target_sparsity': 0.8, 'schedule': 'polynomial', 'begin_step': 0, 'end_step': -1,
       'max_accuracy_drop': MAX_ACCURACY_DROP,
       'sparsities': json.dumps([0.5, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97]),
       'label_column': label_column,
       'train_args': json.dumps({'num_steps': PRUNING_STEPS[name]}),
       'eval_args': json.dumps({'num_steps': 1}),
       'custom_config': json.dumps({'batch_size': 64, 'learning_rate': 1e-3})})
  with open(os.path.join(metrics.uri, 'metrics.json')) as handle:
    return pruned, json.load(handle)


def run_model(name: str, work_dir: str) -> dict:
  dataset = datasets.resolve(name, work_dir)
  budget = distillation_benchmark.BUDGETS[name]
  transformed_uri, graph_uri, _ = common.transform_dataset(name, os.path.join(work_dir, name))
  inputs = common.executor_inputs(transformed_uri, graph_uri)
  output_dir = os.path.join(work_dir, name, f'run-{time.time_ns()}')
  teacher_uri = distillation_benchmark.train_teacher(inputs, dataset, budget,
                                                     os.path.join(output_dir, 'teacher'))
  model = standard_artifacts.Model()
  if name == 'digits':
    model.uri, model_name = teacher_uri, 'digits teacher (CNN)'
  else:
    student = distillation_benchmark.distill(
        inputs, teacher_uri, dataset, budget, os.path.join(output_dir, 'student'), seed=0,
        settings=training.DistillationSettings(train_baseline=False))  # The defaults.
    model.uri, model_name = os.path.dirname(student['model_dir']), 'distilled taxi student'
  modes = {mode: quantize(inputs, model, mode, dataset.label_column,
                          os.path.join(output_dir, 'quantized')) for mode in QUANTIZATION_MODES}
  pruned, pruning = prune(inputs, model, name, dataset.label_column, output_dir)
  pruned_int8 = quantize(inputs, pruned, 'full_integer', dataset.label_column,
                         os.path.join(output_dir, 'pruned-quantized'))
  float32 = modes['full_integer']['float32_tflite']
  return {
      'model': model_name,
      'float32_tflite_bytes': float32['size_bytes'],
      'float32_tflite_accuracy': float32['accuracy'],
      'float32_tflite_latency_ms': float32['latency_ms'],
      'majority_accuracy': modes['full_integer']['majority_accuracy'],
      'modes': {mode: {key: figures[key] for key in ('size_bytes', 'size_ratio', 'accuracy',
                                                      'accuracy_drop', 'latency_ms',
                                                      'latency_ratio')}
                for mode, figures in modes.items()},
      'int8_size_ratio': modes['full_integer']['size_ratio'],
      'int8_acc_drop': modes['full_integer']['accuracy_drop'],
      'int8_latency_ratio': modes['full_integer']['latency_ratio'],
      'f16_size_ratio': modes['float16']['size_ratio'],
      'qat_size_ratio': modes['qat']['size_ratio'],
      'qat_acc_drop': modes['qat']['accuracy_drop'],
      'pruned_sparsity': pruning['sparsity'],
      'pruned_gzip_ratio': pruning['gzip_ratio'],
      'pruned_acc_drop': pruning['accuracy_drop'],
      'pruning_trials': pruning['trials'],
      'pruned_int8_ratio': pruning['dense_gzip_bytes'] / pruned_int8['gzip_bytes'],
      'pruned_int8_accuracy': pruned_int8['accuracy'],
      'pruned_int8_latency_ms': pruned_int8['latency_ms'],
  }


def main() -> None:
  parser = common.argument_parser(__doc__, 'distillery-compression-benchmark')
  parser.add_argument('--models', default='digits,taxi')
  args = parser.parse_args()

  def run():
    per_model = {name: run_model(name, args.work_dir) for name in args.models.split(',')}
    headline = per_model.get('digits') or next(iter(per_model.values()))
    return {**{key: headline[key] for key in HEADLINE_KEYS}, 'models': per_model}

  common.print_result(run, args.json)


if __name__ == '__main__':
  main()
