"""Ingestion benchmark: how fast each reader feeds training, and how long training waits.

The taxi data goes through IngestionTransform, is tiled to at least 1,000,000
transformed examples in the component's shard layout, and is read by each of
these (best of `--passes` single passes, the readers taking turns):
  (a) a naive reader: one file at a time, per-example parse, no prefetch;
  (b) TFX's default: the Trainer's `data_accessor.tf_dataset_factory`;
  (c) our tuned reader, `components.common.reading.make_dataset`, on the packed
      copy IngestionTransform writes beside the shards (and, for comparison, on
      the one-example-per-record shards the other two read).
Then the taxi teacher trains, alternately, on (c) with the options the component
recorded and on one batch held in memory; how much longer the step takes on (c)
is the input wait. `--open-latency-ms` simulates remote storage, where opening a
file takes that long before the first byte arrives.

Usage:
  python -m benchmarks.ingestion --json [--examples 1000000] [--open-latency-ms 0] [--passes 2]
"""

import dataclasses
import json
import math
import os
import time
from typing import Callable, Tuple

import tensorflow as tf
import tf_keras
import tensorflow_transform as tft
from tfx.components.util import tfxio_utils
from tfx.types import standard_artifacts
from tfx_bsl.public import tfxio

from benchmarks import common
from benchmarks import results
from tfx_distillery.components.common import reading
from tfx_distillery.trainer_modules import base
from tfx_distillery.trainer_modules import taxi_teacher

BATCH_SIZE = 256
# No shuffling, and TFX's default: shuffle files and 10,000 examples.
SHUFFLE_BUFFERS = (0, 10_000)
READER_NAMES = ('naive', 'tfx_default', 'tuned', 'tuned_unpacked', 'tuned_cached')


def tile_shards(source_pattern: str, output_dir: str, repeats: int, num_shards: int,
                compression: str) -> str:
  """Writes the source records `repeats` times, round-robin over shards."""
  suffix = '.gz' if compression == 'GZIP' else ''
  pattern = os.path.join(output_dir, f'tiled-*-of-{num_shards:05d}{suffix}')
  if len(tf.io.gfile.glob(pattern)) == num_shards:
    return pattern
  records = list(tf.data.TFRecordDataset(reading.list_files(source_pattern),
                                         compression_type='GZIP').as_numpy_iterator())
  os.makedirs(output_dir, exist_ok=True)
  writer_options = tf.io.TFRecordOptions(compression_type=compression)
  writers = [tf.io.TFRecordWriter(
      os.path.join(output_dir, f'tiled-{index:05d}-of-{num_shards:05d}{suffix}.tmp'),
      writer_options) for index in range(num_shards)]
  position = 0
  for _ in range(repeats):
    for record in records:
      writers[position % num_shards].write(record)
      position += 1
  for index, writer in enumerate(writers):
    writer.close()
    final = os.path.join(output_dir, f'tiled-{index:05d}-of-{num_shards:05d}{suffix}')
    os.replace(final + '.tmp', final)
  return pattern


def slow_open(latency_seconds: float, compression: str):
  """A record_dataset_fn whose file open first sleeps, like a remote first byte."""

  def sleep_then_return(path):
    time.sleep(latency_seconds)
    return path

  def open_file(path):
    delayed = tf.numpy_function(sleep_then_return, [path], tf.string, stateful=True)
    delayed.set_shape([])
    return tf.data.TFRecordDataset(delayed, compression_type=compression)

  return open_file


def examples_per_second(dataset: tf.data.Dataset) -> float:
  """One pass over a finite dataset of (features, label) batches."""
  examples = 0
  with common.Stopwatch() as stopwatch:
    for _, labels in dataset:
      examples += int(labels.shape[0])
  return examples / stopwatch.seconds


def tfx_default_dataset(pattern: str, tf_transform_output, shuffle_buffer: int) -> tf.data.Dataset:
  """Exactly what a stock TFX run_fn builds through `fn_args.data_accessor`.

  TFX shuffles files and 10,000 records by default; `shuffle_buffer` 0 turns both off.
  """
  artifact = standard_artifacts.Examples()
  artifact.uri = os.path.dirname(pattern)
  factory = tfxio_utils.get_tf_dataset_factory_from_artifact([artifact], ['benchmark'])
  options = tfxio.TensorFlowDatasetOptions(
      batch_size=BATCH_SIZE, label_key=base.LABEL_KEY, num_epochs=1,
      shuffle=bool(shuffle_buffer), shuffle_buffer_size=max(1, shuffle_buffer))
  return factory(reading.list_files(pattern), options,
                 tf_transform_output.transformed_metadata.schema)


def input_wait_fraction(pattern: str, tf_transform_output, options: reading.IngestionOptions,
                        steps: int, rounds: int = 10) -> Tuple[float, float, float]:
  """Trains the taxi teacher; returns the share of step time that input costs.

  The same compiled training step runs on batches from the reader and on one
  batch held in memory (an input that costs nothing), alternating in `rounds`
  so that drift in machine speed falls on both. What the reader adds to the
  step, CPU taken from training by the input threads included, is the input
  wait: `1 - in_memory_step / reader_step`.

  Returns:
    (input wait fraction, reader step ms, in-memory step ms).
  """
  units = base.output_units(tf_transform_output)
  model = taxi_teacher.build_teacher(tf_transform_output)
  loss_fn, _ = base.loss_and_metrics(units)
  optimizer = tf_keras.optimizers.Adam()
  reader = iter(reading.make_dataset(pattern, tf_transform_output, BATCH_SIZE, options,
                                     batch_map_fn=base.prepare_labels(units)))
  in_memory = iter(tf.data.Dataset.from_tensors(next(reader)).repeat())

  # Many steps per call, as Keras' `steps_per_execution` does, so Python's
  # per-call overhead neither dilutes the step nor gives the input threads idle cores.
  @tf.function
  def train_steps(iterator, count):
    for _ in tf.range(count):
      features, labels = next(iterator)
      with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(features, training=True))
      optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                    model.trainable_variables))

  def seconds(iterator, count):
    with common.Stopwatch() as stopwatch:
      train_steps(iterator, tf.constant(count))
    return stopwatch.seconds

  # Warm-up traces the step for each iterator (their batch shapes differ), with
  # a single reader step: the reader's first pass, filling its cache if any,
  # counts, as it does in real training.
  seconds(reader, 1)
  seconds(in_memory, 50)
  reader_seconds = in_memory_seconds = 0.0
  per_round = max(1, steps // rounds)
  for _ in range(rounds):
    reader_seconds += seconds(reader, per_round)
    in_memory_seconds += seconds(in_memory, per_round)
  total_steps = per_round * rounds
  wait = max(0.0, 1.0 - in_memory_seconds / reader_seconds)
  return wait, 1000 * reader_seconds / total_steps, 1000 * in_memory_seconds / total_steps


def median_run(measure: Callable[[], Tuple[float, ...]], runs: int = 3) -> Tuple[float, ...]:
  """The run whose first figure is the median of `runs` runs."""
  results = sorted((measure() for _ in range(runs)), key=lambda result: result[0])
  return results[len(results) // 2]


def run(num_examples: int, open_latency_ms: float, work_dir: str, train_steps: int,
        passes: int) -> dict:
  transformed_uri, graph_uri, _ = common.transform_dataset('taxi', os.path.join(work_dir, 'taxi'))
  tf_transform_output = tft.TFTransformOutput(graph_uri)
  recorded = reading.read_options(transformed_uri)
  source = os.path.join(transformed_uri, 'Split-train', '*')
  num_shards = len(reading.list_files(source))
  source_examples = sum(1 for _ in tf.data.TFRecordDataset(reading.list_files(source),
                                                           compression_type='GZIP'))
  repeats = math.ceil(num_examples / source_examples)
  # The component's layout: shards in Split-train/, their packed copy in packed/Split-train/.
  tiled_root = os.path.join(work_dir, f'tiled-{repeats}x')
  gzip_pattern = tile_shards(source, os.path.join(tiled_root, 'Split-train'), repeats,
                             num_shards, 'GZIP')
  tile_shards(os.path.join(transformed_uri, reading.PACKED_FOLDER_NAME, 'Split-train', '*'),
              os.path.join(tiled_root, reading.PACKED_FOLDER_NAME, 'Split-train'), repeats,
              num_shards, 'GZIP')
  open_fn = None
  if open_latency_ms:
    open_fn = slow_open(open_latency_ms / 1000.0, 'GZIP')
  reader_rows = []
  by_shuffle = {}
  for shuffle_buffer in SHUFFLE_BUFFERS:
    # Every reader does the same shuffling work: none, or files and 10,000 examples.
    tuned_options = reading.IngestionOptions(
        cycle_length=recorded.cycle_length, compression='GZIP', shuffle_buffer=shuffle_buffer,
        shuffle_files=bool(shuffle_buffer))
    readers = {
        'naive': lambda: reading.naive_dataset(
            gzip_pattern, tf_transform_output, BATCH_SIZE, record_dataset_fn=open_fn,
            shuffle_buffer=shuffle_buffer),  # pylint: disable=cell-var-from-loop
        'tfx_default': lambda: tfx_default_dataset(
            gzip_pattern, tf_transform_output, shuffle_buffer),  # pylint: disable=cell-var-from-loop
        'tuned': lambda: reading.make_dataset(
            gzip_pattern, tf_transform_output, BATCH_SIZE, tuned_options, num_epochs=1,
            record_dataset_fn=open_fn),  # pylint: disable=cell-var-from-loop
        # The same reader on the one-example-per-record shards, as without the packed copy.
        'tuned_unpacked': lambda: reading.make_dataset(
            gzip_pattern, tf_transform_output, BATCH_SIZE,
            dataclasses.replace(tuned_options, packed=False), num_epochs=1,  # pylint: disable=cell-var-from-loop
            record_dataset_fn=open_fn),
    }
    # Best of `passes` one-pass readings each, the readers taking turns, so a
    # slow spell of this shared machine does not land on one reader alone.
    best = {name: 0.0 for name in readers}
    for _ in range(passes):
      for name, make_reader in readers.items():
        best[name] = max(best[name], examples_per_second(make_reader()))
    # Later epochs of a run: parsed batches come from the in-memory cache.
    cached_dataset = reading.make_dataset(
        gzip_pattern, tf_transform_output, BATCH_SIZE,
        dataclasses.replace(tuned_options, cache='memory'), num_epochs=1,
        record_dataset_fn=open_fn)
    examples_per_second(cached_dataset)  # The first pass fills the cache.
    best['tuned_cached'] = examples_per_second(cached_dataset)
    by_shuffle[shuffle_buffer] = {name: round(value) for name, value in best.items()}
    reader_rows.append([shuffle_buffer] + [round(best[name]) for name in READER_NAMES] + [
        round(best['tuned'] / best['naive'], 2), round(best['tuned'] / best['tfx_default'], 2)])
  # Real training reads the real transformed split with the options the component recorded.
  # Median of three trainings each: one step time is noisy on a shared machine.
  wait, reader_step_ms, in_memory_step_ms = median_run(
      lambda: input_wait_fraction(source, tf_transform_output, recorded, train_steps))
  # The same without a cache, as for a dataset too large for `cache='auto'` to keep in memory.
  uncached_wait, _, _ = median_run(lambda: input_wait_fraction(
      source, tf_transform_output, dataclasses.replace(recorded, cache='none'), train_steps))
  shuffled = by_shuffle[SHUFFLE_BUFFERS[-1]]
  unshuffled = by_shuffle[SHUFFLE_BUFFERS[0]]
  over_default = {shuffle: figures['tuned'] / figures['tfx_default']
                  for shuffle, figures in by_shuffle.items()}
  over_naive = {shuffle: figures['tuned'] / figures['naive']
                for shuffle, figures in by_shuffle.items()}
  return {
      'title': 'Ingestion: how fast each reader feeds training, at equal shuffling',
      'summary': (
          f'The taxi data through IngestionTransform (its {num_shards} GZIP shards per split '
          f'and the packed copy beside them), tiled to {repeats * source_examples:,} '
          f'transformed examples in the same layout. Each reader makes one pass at batch '
          f'{BATCH_SIZE}, best of {passes} passes with the readers taking turns, once with '
          'no shuffling and once with every reader shuffling its files and 10,000 examples '
          '(TFX\'s default). Then the taxi teacher trains '
          f'{train_steps} steps on the real train split with the options the component '
          'recorded, alternating with the same compiled loop fed one batch held in memory; '
          'the input wait is `1 - in_memory_step / reader_step`, median of three trainings.'),
      'examples': repeats * source_examples,
      'batch_size': BATCH_SIZE,
      'num_shards': num_shards,
      'open_latency_ms': open_latency_ms,
      'passes': passes,
      'recorded_options': json.loads(recorded.to_json()),
      'examples_per_second_by_shuffle': {str(shuffle): figures
                                         for shuffle, figures in by_shuffle.items()},
      'tuned_over_naive_shuffled': round(over_naive[SHUFFLE_BUFFERS[-1]], 2),
      'tuned_over_tfx_default_shuffled': round(over_default[SHUFFLE_BUFFERS[-1]], 2),
      'tuned_over_naive_unshuffled': round(over_naive[SHUFFLE_BUFFERS[0]], 2),
      'tuned_over_tfx_default_unshuffled': round(over_default[SHUFFLE_BUFFERS[0]], 2),
      'input_wait_fraction': round(wait, 4),
      'train_step_ms': round(reader_step_ms, 3),
      'train_step_in_memory_ms': round(in_memory_step_ms, 3),
      'uncached_input_wait_fraction': round(uncached_wait, 4),
      'targets': [
          results.target('tuned / naive, shuffle 10,000', over_naive[SHUFFLE_BUFFERS[-1]],
                         '>= 6', over_naive[SHUFFLE_BUFFERS[-1]] >= 6),
          results.target('tuned / TFX default, shuffle 10,000',
                         over_default[SHUFFLE_BUFFERS[-1]], '>= 5',
                         over_default[SHUFFLE_BUFFERS[-1]] >= 5),
          results.target('tuned / naive, no shuffle', over_naive[SHUFFLE_BUFFERS[0]], '', None),
          results.target('tuned / TFX default, no shuffle', over_default[SHUFFLE_BUFFERS[0]],
                         '', None),
          results.target('input wait, cached (share of the train step)', wait, '<= 0.05',
                         wait <= 0.05),
          results.target("input wait, cache='none'", uncached_wait, '', None),
      ],
      'tables': [
          results.table(
              'Examples per second by shuffle buffer (0: no shuffling)',
              ['shuffle', 'naive', 'TFX default', 'tuned (packed)', 'tuned, unpacked shards',
               'tuned, cached later pass', 'tuned / naive', 'tuned / TFX default'],
              reader_rows),
          results.table('Train step (ms)', ['reader', 'in memory'],
                        [[round(reader_step_ms, 3), round(in_memory_step_ms, 3)]]),
      ],
      'notes': [
          'naive: one file at a time, per-example parse, no prefetch. TFX default: the '
          "Trainer's `data_accessor.tf_dataset_factory`. tuned: `make_dataset`, which every "
          'trainer module of ours gets; it reads the packed copy (32 examples per record), '
          'so its 10,000-example buffer shuffles blocks of 32.',
          'Unshuffled and shuffled rows come from the same process run; the cached figures '
          'read parsed batches from memory on a later pass, the uncached ones parse.',
      ],
  }


def main():
  parser = common.argument_parser(__doc__, 'distillery-benchmarks')
  parser.add_argument('--examples', type=int, default=1_000_000)
  parser.add_argument('--open-latency-ms', type=float, default=0.0)
  # As long as the demo trains the taxi teacher (pipelines/local_runner.py).
  parser.add_argument('--train-steps', type=int, default=1500)
  parser.add_argument('--passes', type=int, default=2, help='one-pass readings per reader')
  args = parser.parse_args()
  common.print_result(lambda: run(args.examples, args.open_latency_ms, args.work_dir,
                                  args.train_steps, args.passes), args, 'ingestion')


if __name__ == '__main__':
  main()
