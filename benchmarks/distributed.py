"""Distributed-training benchmark: 2 workers against 1 on the same cores.

The taxi teacher is trained by the DistributedTrainer executor, once with one
worker and once with two MultiWorkerMirroredStrategy workers, for each
per-replica batch size. Throughput counts steady-state epochs only (the first
epoch pays for tracing). On 2 cores this measures the overhead of distribution,
not a speed-up: `two_over_one` near 1 means the overhead is paid for.

Usage:
  python -m benchmarks.distributed --json [--batch-sizes 64,512,4096]
"""

import json
import os
import tempfile

import tensorflow_transform as tft
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs

from benchmarks import common
from tfx_distillery.components.common import measuring
from tfx_distillery.components.distributed_trainer import executor as trainer_executor
from tfx_distillery.pipelines import datasets

EPOCHS = 4
EXAMPLES_PER_EPOCH = 40_000
MIN_STEPS_PER_EPOCH = 32


def train(transformed_uri: str, graph_uri: str, output_dir: str, num_workers: int,
          per_replica_batch_size: int) -> dict:
  """Runs the DistributedTrainer executor once; returns its metrics.json."""
  examples = standard_artifacts.Examples()
  examples.uri = transformed_uri
  examples.split_names = '["train", "eval"]'
  graph = standard_artifacts.TransformGraph()
  graph.uri = graph_uri
  model = standard_artifacts.Model()
  model.uri = os.path.join(output_dir, 'model')
  model_run = standard_artifacts.ModelRun()
  model_run.uri = os.path.join(output_dir, 'model_run')
  global_batch_size = per_replica_batch_size * num_workers
  # Large batches still get enough steps to learn something.
  steps_per_epoch = max(MIN_STEPS_PER_EPOCH, EXAMPLES_PER_EPOCH // global_batch_size)
  trainer_executor.Executor().Do(
      {standard_component_specs.EXAMPLES_KEY: [examples],
       standard_component_specs.TRANSFORM_GRAPH_KEY: [graph]},
      {standard_component_specs.MODEL_KEY: [model],
       standard_component_specs.MODEL_RUN_KEY: [model_run]},
      {'train_args': json.dumps({'num_steps': steps_per_epoch * EPOCHS}),
       'eval_args': json.dumps({'num_steps': 2}),
       'module_file': datasets.module_file('taxi_teacher'),
       'custom_config': json.dumps({'label_column': 'tips', 'epochs': EPOCHS,
                                    'batch_size': per_replica_batch_size}),
       'strategy': 'multi_worker_mirrored', 'num_workers': num_workers,
       'num_parameter_servers': 0, 'communication': 'auto'})
  with open(os.path.join(model_run.uri, 'metrics.json')) as handle:
    metrics = json.load(handle)
  metrics['model_dir'] = os.path.join(model.uri, 'Format-Serving')
  return metrics


def steady_examples_per_second(metrics: dict) -> float:
  steady = metrics['epoch_seconds'][1:]
  return metrics['steps_per_epoch'] * metrics['global_batch_size'] * len(steady) / sum(steady)


def run(batch_sizes, work_dir: str) -> dict:
  transformed_uri, graph_uri, raw_uri = common.transform_dataset(
      'taxi', os.path.join(work_dir, 'taxi'))
  evaluation_set = measuring.from_raw_examples(
      raw_uri, 'eval', tft.TFTransformOutput(graph_uri), 'label',
      datasets.resolve('taxi', work_dir).label_column)
  curve = []
  for batch_size in batch_sizes:
    row = {'per_replica_batch': batch_size}
    for num_workers in (1, 2):
      metrics = train(transformed_uri, graph_uri,
                      tempfile.mkdtemp(dir=work_dir, prefix=f'w{num_workers}-b{batch_size}-'),
                      num_workers, batch_size)
      figures = measuring.measure(metrics['model_dir'], evaluation_set, latency_runs=10)
      row[f'workers_{num_workers}_eps'] = round(steady_examples_per_second(metrics))
      row[f'workers_{num_workers}_accuracy'] = round(figures['accuracy'], 4)
    row['two_over_one'] = round(row['workers_2_eps'] / row['workers_1_eps'], 3)
    curve.append(row)
  # Headline at the largest per-replica batch, where distribution should pay for itself.
  best = curve[-1]
  return {
      'model': 'taxi_teacher',
      'majority_accuracy': round(figures['majority_accuracy'], 4),
      'one_worker_eps': best['workers_1_eps'],
      'two_worker_eps': best['workers_2_eps'],
      'two_over_one': best['two_over_one'],
      'at_per_replica_batch': best['per_replica_batch'],
      'curve': curve,
  }


def main():
  parser = common.argument_parser(__doc__, 'distillery-benchmarks')
  parser.add_argument('--batch-sizes', default='64,512,4096')
  args = parser.parse_args()
  batch_sizes = [int(size) for size in args.batch_sizes.split(',')]
  os.makedirs(args.work_dir, exist_ok=True)
  common.print_result(lambda: run(batch_sizes, args.work_dir), args.json)


if __name__ == '__main__':
  main()
