"""Distributed-training benchmark: 2 workers against the best 1-worker run, same cores.

The taxi teacher is trained by the DistributedTrainer executor at each per-replica
batch: with one worker at each thread count tried (all the cores, and half of
them), keeping the fastest, and with two MultiWorkerMirroredStrategy workers that
share the same cores (`DISTILLERY_CORES`, so each worker gets half). Every run is
its own process, so each gets the thread pools it was given; both sides have
the same total thread budget. Throughput counts steady-state epochs only (the
first epoch traces). Accuracy is on the held-out `test` split.

The headline is the largest per-replica batch at which the two-worker teacher's
test accuracy stays within 0.01 of the one-worker teacher's at the smallest batch
tried (the usual setting): growing the batch is what makes distribution pay, so
it only counts while the model does not get worse.

Usage:
  python -m benchmarks.distributed --json [--batch-sizes 64,512,4096]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from benchmarks import common
from benchmarks import results

EPOCHS = 3
EXAMPLES_PER_EPOCH = 200_000
MIN_STEPS_PER_EPOCH = 32
MAX_ACCURACY_DROP = 0.01
TARGET_TWO_OVER_ONE = 0.9


def train_once(transformed_uri: str, graph_uri: str, output_dir: str, num_workers: int,
               per_replica_batch_size: int) -> dict:
  """Runs the DistributedTrainer executor once in this process; returns its metrics.json."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_component_specs  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import executor as trainer_executor  # pylint: disable=g-import-not-at-top
  from tfx_distillery.pipelines import datasets  # pylint: disable=g-import-not-at-top
  inputs = common.executor_inputs(transformed_uri, graph_uri)
  model = common.artifact(standard_artifacts.Model, os.path.join(output_dir, 'model'))
  model_run = common.artifact(standard_artifacts.ModelRun, os.path.join(output_dir, 'model_run'))
  global_batch_size = per_replica_batch_size * num_workers
  # Large batches still get enough steps to learn something.
  steps_per_epoch = max(MIN_STEPS_PER_EPOCH, EXAMPLES_PER_EPOCH // global_batch_size)
  trainer_executor.Executor().Do(
      inputs, {standard_component_specs.MODEL_KEY: [model],
               standard_component_specs.MODEL_RUN_KEY: [model_run]},
      {'train_args': json.dumps({'num_steps': steps_per_epoch * EPOCHS}),
       'eval_args': json.dumps({'num_steps': 2}),
       'module_file': datasets.module_file('taxi_teacher'),
       'custom_config': json.dumps({'label_column': 'tips', 'epochs': EPOCHS,
                                    'batch_size': per_replica_batch_size, 'seed': 0}),
       'strategy': 'multi_worker_mirrored', 'num_workers': num_workers,
       'num_parameter_servers': 0, 'communication': 'auto'})
  with open(os.path.join(model_run.uri, 'metrics.json')) as handle:
    metrics = json.load(handle)
  metrics['model_dir'] = os.path.join(model.uri, 'Format-Serving')
  return metrics


def train(transformed_uri: str, graph_uri: str, output_dir: str, num_workers: int,
          per_replica_batch_size: int, threads: int, cores: int) -> dict:
  """One training in a fresh process: `threads` per worker, `cores` for the whole cluster."""
  os.makedirs(output_dir, exist_ok=True)
  metrics_path = os.path.join(output_dir, 'run.json')
  environment = {**os.environ, 'DISTILLERY_CORES': str(cores)}
  subprocess.run(
      [sys.executable, '-m', 'benchmarks.distributed', '--train-once', metrics_path,
       '--transformed', transformed_uri, '--graph', graph_uri, '--workers', str(num_workers),
       '--batch', str(per_replica_batch_size), '--threads', str(threads)],
      check=True, env=environment, stdout=sys.stderr)
  with open(metrics_path) as handle:
    return json.load(handle)


def steady_examples_per_second(metrics: dict) -> float:
  steady = metrics['epoch_seconds'][1:]
  return metrics['steps_per_epoch'] * metrics['global_batch_size'] * len(steady) / sum(steady)


def thread_counts(cores: int):
  """Thread counts the one-worker baseline tries: all the cores, and half of them."""
  return sorted({cores, max(1, cores // 2)}, reverse=True)


def run(batch_sizes, work_dir: str) -> dict:
  import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.common import measuring  # pylint: disable=g-import-not-at-top
  from tfx_distillery.pipelines import datasets  # pylint: disable=g-import-not-at-top
  transformed_uri, graph_uri, raw_uri = common.transform_dataset(
      'taxi', os.path.join(work_dir, 'taxi'))
  test_set = measuring.from_raw_examples(
      raw_uri, 'test', tft.TFTransformOutput(graph_uri), 'label',
      datasets.resolve('taxi', work_dir).label_column)
  cores = os.cpu_count() or 1
  curve, profiles = [], []
  for batch_size in batch_sizes:
    row = {'per_replica_batch': batch_size}
    one_worker = {}
    for threads in thread_counts(cores):
      metrics = train(transformed_uri, graph_uri,
                      tempfile.mkdtemp(dir=work_dir, prefix=f'w1-t{threads}-b{batch_size}-'),
                      1, batch_size, threads, cores)
      one_worker[threads] = (steady_examples_per_second(metrics), metrics)
    best_threads = max(one_worker, key=lambda threads: one_worker[threads][0])
    best_eps, best_metrics = one_worker[best_threads]
    two_workers = train(transformed_uri, graph_uri,
                        tempfile.mkdtemp(dir=work_dir, prefix=f'w2-b{batch_size}-'),
                        2, batch_size, max(1, cores // 2), cores)
    row['workers_1_eps_by_threads'] = {str(threads): round(eps)
                                       for threads, (eps, _) in one_worker.items()}
    row['workers_1_threads'] = best_threads
    row['workers_1_eps'] = round(best_eps)
    row['workers_2_eps'] = round(steady_examples_per_second(two_workers))
    row['two_over_one'] = round(row['workers_2_eps'] / row['workers_1_eps'], 3)
    row['workers_1_accuracy'] = round(
        measuring.measure(best_metrics['model_dir'], test_set, latency_runs=1)['accuracy'], 4)
    row['workers_2_accuracy'] = round(
        measuring.measure(two_workers['model_dir'], test_set, latency_runs=1)['accuracy'], 4)
    row['workers_1_profile'] = best_metrics.get('step_profile', {})
    row['workers_2_profile'] = two_workers.get('step_profile', {})
    curve.append(row)
  reference = curve[0]['workers_1_accuracy']
  within = [row for row in curve if row['workers_2_accuracy'] >= reference - MAX_ACCURACY_DROP]
  headline = max(within, key=lambda row: row['per_replica_batch']) if within else None
  rule = (f'the largest per-replica batch whose 2-worker test accuracy is within '
          f'{MAX_ACCURACY_DROP} of the 1-worker accuracy at batch {curve[0]["per_replica_batch"]} '
          f'({reference:.4f})')

  def profile_cell(profile, key):
    return round(profile[key], 2) if key in profile else None

  return {
      'title': 'Distributed training: two workers against the best one-worker run, same cores',
      'summary': (
          f'The taxi teacher, trained by the DistributedTrainer executor for {EPOCHS} epochs of '
          f'max({MIN_STEPS_PER_EPOCH}, {EXAMPLES_PER_EPOCH:,} / global batch) steps, each run '
          f'in its own process on {cores} cores. One worker tries '
          f'{" and ".join(str(count) for count in thread_counts(cores))} threads and keeps '
          f'the faster; two MultiWorkerMirroredStrategy workers get {max(1, cores // 2)} each, '
          'the same budget. Examples/s counts steady epochs (the first traces). The headline '
          f'is {rule}.'),
      'headline_rule': rule,
      'cores': cores,
      'majority_accuracy': round(measuring.majority_accuracy(test_set.labels), 4),
      'test_examples': test_set.size,
      'two_over_one': headline['two_over_one'] if headline else None,
      'at_per_replica_batch': headline['per_replica_batch'] if headline else None,
      'curve': curve,
      'targets': [results.target(
          'two_over_one at the headline batch '
          f'({headline["per_replica_batch"] if headline else "none qualifies"})',
          headline['two_over_one'] if headline else None, f'>= {TARGET_TWO_OVER_ONE}',
          bool(headline) and headline['two_over_one'] >= TARGET_TWO_OVER_ONE)],
      'tables': [
          results.table(
              'Throughput and test accuracy by per-replica batch',
              ['per-replica batch', '1 worker: examples/s by threads', 'threads kept',
               '2 workers: examples/s', 'two_over_one', 'accuracy 1 / 2 workers'],
              [[row['per_replica_batch'],
                ', '.join(f'{threads}: {eps:,}'
                          for threads, eps in row['workers_1_eps_by_threads'].items()),
                row['workers_1_threads'], row['workers_2_eps'], row['two_over_one'],
                f"{row['workers_1_accuracy']:.4f} / {row['workers_2_accuracy']:.4f}"]
               for row in curve]),
          results.table(
              'Step profile (ms; the CommunicationProfile callback, second epoch)',
              ['per-replica batch', 'step, 1 worker', 'forward+backward, 1 worker',
               'step, 2 workers', 'forward+backward, 2 workers', 'gradient all-reduce, 2 workers',
               'all-reduce share, 2 workers', 'suggested batch'],
              [[row['per_replica_batch'],
                profile_cell(row['workers_1_profile'], 'step_ms'),
                profile_cell(row['workers_1_profile'], 'forward_backward_ms'),
                profile_cell(row['workers_2_profile'], 'step_ms'),
                profile_cell(row['workers_2_profile'], 'forward_backward_ms'),
                profile_cell(row['workers_2_profile'], 'all_reduce_ms'),
                profile_cell(row['workers_2_profile'], 'communication_share'),
                row['workers_2_profile'].get('suggested_per_replica_batch')]
               for row in curve]),
      ],
      'notes': NOTES,
  }


NOTES = [
    'The all-reduce is timed by the strategy\'s own collective on tensors shaped like the '
    'gradients; its share is that time over the measured step. Forward+backward is one '
    "replica's pass on a batch of zeros with the gradients left unreduced; the rest of the "
    'step is input, the optimizer and waiting for the other worker.',
    'On one machine two workers cannot beat one that already uses every core: they split '
    'the same cores, and add an all-reduce and a second input pipeline. two_over_one near 1 '
    'means the overhead of distribution is paid for; the speed-up comes with more machines.',
]


def main():
  parser = common.argument_parser(__doc__, 'distillery-benchmarks')
  parser.add_argument('--batch-sizes', default='64,512,4096')
  # One training in this process (what `train` starts); not for users.
  parser.add_argument('--train-once', help=argparse.SUPPRESS)
  parser.add_argument('--transformed')
  parser.add_argument('--graph')
  parser.add_argument('--workers', type=int, default=1)
  parser.add_argument('--batch', type=int, default=64)
  parser.add_argument('--threads', type=int, default=0)
  args = parser.parse_args()
  if args.train_once:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if args.threads:
      # Thread pools are sized once, before TensorFlow first runs anything.
      tf.config.threading.set_intra_op_parallelism_threads(args.threads)
      tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    metrics = train_once(args.transformed, args.graph, os.path.dirname(args.train_once),
                         args.workers, args.batch)
    with open(args.train_once, 'w') as handle:
      json.dump(metrics, handle)
    return
  batch_sizes = [int(size) for size in args.batch_sizes.split(',')]
  os.makedirs(args.work_dir, exist_ok=True)
  common.print_result(lambda: run(batch_sizes, args.work_dir), args, 'distributed')


if __name__ == '__main__':
  main()
