"""IngestionTransform's executor: TFX's Transform executor with sharded, recorded output."""

import collections
import contextlib
import hashlib
import json
import os
import uuid
from typing import Any, Dict, Iterable, List, Optional, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
import tensorflow as tf
from tfx import types
from tfx.components.transform import executor as transform_executor
from tfx.components.transform import executor_utils
from tfx.components.transform import labels
from tfx.types import artifact_utils
from tfx.types import standard_component_specs
from tfx_bsl.coders import example_coder
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import schema_utils

from tfx_distillery.components.common import beam_runner
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import labels as label_checks
from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import modules
from tfx_distillery.components.common import progress
from tfx_distillery.components.common import reading
from tfx_distillery.components.ingest_transform import spec as ingest_spec

# Crossover measured by benchmarks/beam_modes.py (README, "Beam DirectRunner mode"):
# below about this many bytes of input examples the in-memory DirectRunner is faster.
# Linear in size for both modes at 0.9 MB and 8.7 MB, the lines cross near 33 MB.
MULTI_PROCESSING_MIN_BYTES = 32 * 1024 * 1024
MULTI_PROCESSING_WORKERS = 2
AUTO_CACHE = 'auto'
# `cache='auto'` keeps parsed batches in memory below this many bytes of
# compressed transformed examples (parsed tensors take several times more).
MEMORY_CACHE_MAX_BYTES = 256 * 1024 * 1024
# GZIP at level 1: files about a third larger than zlib's default level, written about
# three times faster (200,000 transformed taxi examples: 0.56 s against 1.7 s).
WRITE_OPTIONS = tf.io.TFRecordOptions(compression_type='GZIP', compression_level=1)
# Transform's reads batch this many examples. Left to Beam, a batch's size follows how
# long the last batches took, so under another load the analyzers (mean, variance) add
# their partial sums in other groups and the transform's constants move in the last bit:
# the same seed then trained another model. 1,000 is where tfx_bsl's own tuning stops.
TRANSFORM_BATCH_SIZE = 1000


def pack_record_batch(record_batch: pa.RecordBatch, block_size: int) -> Optional[pa.RecordBatch]:
  """The batch with each run of `block_size` rows as one row, every feature's values joined.

  Returns None when a feature does not hold the same number of values in every row
  (the packed copy needs fixed shapes to split blocks back into examples).
  """
  rows = record_batch.num_rows
  block_starts = np.append(np.arange(0, rows, block_size), rows)
  columns = []
  for column in record_batch.columns:
    values = column.flatten()
    lengths = np.asarray(column.value_lengths().fill_null(-1))
    if column.null_count or len(values) != lengths[0] * rows or np.any(lengths != lengths[0]):
      return None
    offset_type = pa.int64() if pa.types.is_large_list(column.type) else pa.int32()
    columns.append(type(column).from_arrays(
        pa.array(block_starts * lengths[0], offset_type), values))
  return pa.RecordBatch.from_arrays(columns, schema=pa.schema(
      [pa.field(name, array.type) for name, array in zip(record_batch.schema.names, columns)]))


# SplitMix64's multipliers: each output bit of `mix64` depends on every input bit.
_MIX_MULTIPLIERS = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# The key column in the temporary shard files; never written to the examples.
ROW_KEY_COLUMN = '__distillery_row_key__'


def mix64(values: np.ndarray) -> np.ndarray:
  """SplitMix64's finalizer over a uint64 array (wrapping arithmetic)."""
  mixed = np.asarray(values, dtype=np.uint64).copy()
  mixed ^= mixed >> np.uint64(30)
  mixed *= _MIX_MULTIPLIERS[0]
  mixed ^= mixed >> np.uint64(27)
  mixed *= _MIX_MULTIPLIERS[1]
  mixed ^= mixed >> np.uint64(31)
  return mixed


def name_salt(name: str) -> np.uint64:
  """A 64-bit number from a column's name, so equal values in two columns key apart."""
  return np.uint64(int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(),
                                  'little'))


def value_bits(values: pa.Array) -> np.ndarray:
  """Each value of a flat Arrow array as uint64 bits; strings and bytes by their digest."""
  if values.null_count:
    values = values.fill_null(0 if not (pa.types.is_binary(values.type) or
                                        pa.types.is_large_binary(values.type) or
                                        pa.types.is_string(values.type) or
                                        pa.types.is_large_string(values.type)) else b'')
  if pa.types.is_integer(values.type) or pa.types.is_floating(values.type) or (
      pa.types.is_boolean(values.type)):
    array = np.ascontiguousarray(values.to_numpy(zero_copy_only=False))
    if array.dtype == np.bool_:
      return array.astype(np.uint64)
    unsigned = {8: np.uint64, 4: np.uint32, 2: np.uint16, 1: np.uint8}[array.dtype.itemsize]
    return array.view(unsigned).astype(np.uint64)
  return np.fromiter((int.from_bytes(hashlib.blake2b(
      value if isinstance(value, bytes) else value.encode(), digest_size=8).digest(), 'little')
                      for value in values.to_pylist()), dtype=np.uint64, count=len(values))


def row_keys(record_batch: pa.RecordBatch) -> np.ndarray:
  """A 64-bit key per row from its values alone, the same in every process and batch.

  The shard a transformed example goes to, and its place in the shard, follow this key.
  It cannot be a digest of the serialized example: tfx_bsl's encoder orders an example's
  features differently in each process, so the same row has other bytes on each run.
  Columns are taken in name order, each value salted by the column's name and its
  position in the row, so equal values in other features or places give other keys.
  """
  rows = record_batch.num_rows
  keys = np.zeros(rows, np.uint64)
  for name in sorted(record_batch.schema.names):
    column = record_batch.column(record_batch.schema.get_field_index(name))
    salt = name_salt(name)
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
      lengths = np.asarray(column.value_lengths().fill_null(-1), np.int64)
      values = column.flatten()
    else:
      lengths = np.where(np.asarray(column.is_valid()), 1, -1).astype(np.int64)
      values = column.drop_null()
    bits = value_bits(values)
    counts = np.maximum(lengths, 0)
    if len(bits) and np.all(counts == counts[0]):
      # Fixed shape (the common case): the row's values are one row of a matrix.
      positions = np.tile(np.arange(counts[0], dtype=np.uint64), rows)
      per_value = mix64(bits ^ mix64(positions + salt))
      row_sums = per_value.reshape(rows, counts[0]).sum(axis=1, dtype=np.uint64)
    else:
      starts = np.cumsum(counts) - counts
      positions = (np.arange(len(bits)) - np.repeat(starts, counts)).astype(np.uint64)
      per_value = mix64(bits ^ mix64(positions + salt))
      row_sums = np.zeros(rows, np.uint64)
      np.add.at(row_sums, np.repeat(np.arange(rows), counts), per_value)
    keys = mix64(keys * _GOLDEN ^ mix64(row_sums ^ salt ^ lengths.astype(np.uint64)))
  return keys


class KeyRowsFn(beam.DoFn):
  """Each transformed record batch as one `(row keys, record batch)` pair.

  The batch keeps only the schema's features, in name order. Examples are encoded later,
  per shard: a list per record batch, not an element per example, since Beam's
  per-element cost was a large share of the transform's time at a million rows.
  """

  def __init__(self, schema: schema_pb2.Schema):
    self._schema = schema
    self._feature_names = None

  def setup(self):
    self._feature_names = set(schema_utils.schema_as_feature_spec(self._schema).feature_spec)

  def process(self, data_batch):
    record_batch = data_batch[0]
    # Transform may add an internal key column; what is written never carries it.
    kept = sorted(name for name in record_batch.schema.names if name in self._feature_names)
    if not record_batch.num_rows:
      return
    record_batch = pa.RecordBatch.from_arrays(
        [record_batch.column(record_batch.schema.get_field_index(name)) for name in kept], kept)
    yield row_keys(record_batch), record_batch


class WriteShardsFn(beam.DoFn):
  """Writes each bundle's rows into one Arrow stream file per shard, with their keys.

  Beam's `WriteToTFRecord(num_shards=N)` groups every record by shard, and the
  DirectRunner holds a grouped collection in memory: peak memory grew with the rows.
  Here nothing is grouped but the file names. A row's shard is its key modulo the shard
  count, so which rows share a shard does not depend on how Beam cut them into batches
  and bundles (that follows the machine's load); `MergeShardFn` then orders each shard.
  """

  def __init__(self, temporary_folder: str, num_shards: int):
    self._temporary_folder = temporary_folder
    self._num_shards = num_shards
    self._writers = None
    self._paths = None

  def start_bundle(self):
    self._writers, self._paths = {}, {}

  def process(self, keyed_rows: Tuple[np.ndarray, pa.RecordBatch]):
    keys, record_batch = keyed_rows
    shards = keys % np.uint64(self._num_shards)
    keyed = pa.RecordBatch.from_arrays([*record_batch.columns, pa.array(keys, pa.uint64())],
                                       [*record_batch.schema.names, ROW_KEY_COLUMN])
    for shard in np.unique(shards).tolist():
      rows = keyed.take(pa.array(np.flatnonzero(shards == shard)))
      if shard not in self._writers:
        # The random part keeps this bundle's file apart from another's (or a retry's).
        path = os.path.join(self._temporary_folder, f'{shard:05d}-{uuid.uuid4().hex}.arrow')
        sink = pa.OSFile(path, 'wb')
        self._writers[shard] = (sink, pa.ipc.new_stream(sink, rows.schema), rows.schema)
        self._paths[shard] = path
      _, writer, schema = self._writers[shard]
      if not rows.schema.equals(schema):
        rows = pa.Table.from_batches([rows]).cast(schema).combine_chunks().to_batches()[0]
      writer.write_batch(rows)

  def finish_bundle(self):
    for sink, writer, _ in self._writers.values():
      writer.close()
      sink.close()
    for shard, path in self._paths.items():
      yield beam.transforms.window.GlobalWindows.windowed_value((shard, path))


def plan_shards(written: List[Tuple[int, str]], output_path: str,
                packed_path: Optional[str]) -> List[Tuple[List[str], str, Optional[str]]]:
  """One `(bundle files, output file, packed file)` per shard that holds rows."""
  by_shard = collections.defaultdict(list)
  for shard, path in written:
    by_shard[shard].append(path)
  count = len(by_shard)
  names = [f'-{index:05d}-of-{count:05d}.gz' for index in range(count)]
  return [(sorted(by_shard[shard]), output_path + name,
           packed_path + name if packed_path else None)
          for shard, name in zip(sorted(by_shard), names)]


def write_records_atomically(records: Iterable[bytes], path: str) -> None:
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.TFRecordWriter(path + '.tmp', WRITE_OPTIONS) as writer:
    for record in records:
      writer.write(record)
  tf.io.gfile.rename(path + '.tmp', path, overwrite=True)


class MergeShardFn(beam.DoFn):
  """Reads one shard's bundle files, orders its rows by key, encodes and writes it whole.

  Ordered by key, not by arrival: the same rows then make the same file on every run,
  whatever the load, and a seeded reader trains the same model from them. The key is a
  hash, so the order is a fixed shuffle, not a sort by any feature. The packed copy (blocks
  of `packed_block_size` examples, each block's values joined from the columns) is built
  from the same ordered rows, so its blocks hold the same examples on every run too.
  """

  def __init__(self, schema: schema_pb2.Schema, packed_block_size: int):
    self._schema = schema
    self._packed_block_size = packed_block_size
    self._encoder = None
    self._feature_spec = None

  def setup(self):
    self._encoder = example_coder.RecordBatchToExamplesEncoder(self._schema)
    self._feature_spec = schema_utils.schema_as_feature_spec(self._schema).feature_spec

  def process(self, planned: Tuple[List[str], str, Optional[str]]):
    paths, output_file, packed_file = planned
    tables = []
    for path in paths:
      with pa.OSFile(path, 'rb') as handle:
        tables.append(pa.ipc.open_stream(handle).read_all())
    table = pa.concat_tables(tables)
    del tables
    # Equal keys are equal rows, so a stable sort on the key alone is enough.
    order = np.argsort(table.column(ROW_KEY_COLUMN).to_numpy(), kind='stable')
    table = table.drop([ROW_KEY_COLUMN]).take(pa.array(order)).combine_chunks()
    batches = table.to_batches()
    examples = [example for batch in batches for example in self._encoder.encode(batch)]
    write_records_atomically(examples, output_file)
    if packed_file:
      write_records_atomically(self.pack(batches, examples), packed_file)
    yield table.num_rows

  def pack(self, batches: List[pa.RecordBatch], examples: List[bytes]) -> List[bytes]:
    size = self._packed_block_size
    packed = [pack_record_batch(batch, size) for batch in batches]
    if len(batches) == 1 and packed[0] is not None:
      return self._encoder.encode(packed[0])
    return [reading.pack_examples(examples[start:start + size], self._feature_spec)
            for start in range(0, len(examples), size)]


@beam.ptransform_fn
def WriteShardedTFRecords(keyed_rows, output_path: str, num_shards: int,  # pylint: disable=invalid-name
                          schema: schema_pb2.Schema, packed_block_size: int = 0):
  """Writes `(row keys, record batch)` pairs as at most `num_shards` GZIP TFRecord files.

  Files are `<output_path>-NNNNN-of-MMMMM.gz` of serialized `tf.Example`s, one per shard
  that holds rows; with `packed_block_size` > 0 the packed copy goes beside them, at
  `packed_output_path(output_path)`. Bundles write to a temporary folder, removed once
  every shard is merged and renamed into place.
  """
  temporary_folder = os.path.join(os.path.dirname(output_path),
                                  f'.incomplete-{os.path.basename(output_path)}')
  tf.io.gfile.makedirs(temporary_folder)
  packed_path = packed_output_path(output_path) if packed_block_size else None
  return (keyed_rows
          | 'WriteShards' >> beam.ParDo(WriteShardsFn(temporary_folder, num_shards))
          | 'AllShards' >> beam.combiners.ToList()
          | 'PlanShards' >> beam.FlatMap(plan_shards, output_path, packed_path)
          | 'Spread' >> beam.Reshuffle()
          | 'MergeShards' >> beam.ParDo(MergeShardFn(schema, packed_block_size))
          | 'AllMerged' >> beam.combiners.ToList()
          # Files of a retried bundle were never listed; they go with the folder.
          | 'RemoveTemporary' >> beam.Map(
              lambda counts: (tf.io.gfile.rmtree(temporary_folder), len(counts))[1]))


def packed_output_path(output_path: str) -> str:
  """`<uri>/Split-<name>/<prefix>` -> `<uri>/packed/Split-<name>/<prefix>`."""
  split_folder = os.path.dirname(output_path)
  return os.path.join(os.path.dirname(split_folder), reading.PACKED_FOLDER_NAME,
                      os.path.basename(split_folder), os.path.basename(output_path))


class CopiedStatistics:
  """Which file stands for the pre-transform statistics; `source` None computes them."""

  def __init__(self, source: Optional[str], target: Optional[str]):
    self.source = source
    self.target = target


def sharded_transform_processor(num_shards: int, packed_block_size: int,
                                copied_statistics: Optional[CopiedStatistics] = None):
  """Transform's processor class, writing each split in at most `num_shards` TFRecord files.

  With `packed_block_size` > 0 the same pipeline also writes the packed copy that
  `reading.make_dataset` prefers (blocks of that many examples per record), when
  every transformed feature has a fixed shape. With `copied_statistics.source` set,
  its file is copied as the pre-transform statistics instead of computed. Reads are
  batched by TRANSFORM_BATCH_SIZE, not by Beam's timing.
  """
  stock = transform_executor.TransformProcessor

  class ShardedTransformProcessor(stock):

    def _GetDesiredBatchSize(self, data_format, schema):
      # Transform asks for 1 where it must (sequence examples as raw records); else fixed.
      desired = super()._GetDesiredBatchSize(data_format, schema)
      return TRANSFORM_BATCH_SIZE if desired is None else desired

    def _GenerateAndMaybeValidateStats(self, stats_output_loc, stats_options,  # pylint: disable=arguments-differ
                                       enable_validation):
      copied = copied_statistics
      if (copied is not None and copied.source and isinstance(stats_output_loc, dict) and
          stats_output_loc.get(transform_executor._STATS_KEY) == copied.target):  # pylint: disable=protected-access
        progress.get_logger().info('IngestionTransform: pre_transform_stats copied from %s',
                                   copied.source)
        return CopyStatistics(copied.source, stats_output_loc, stats_options)
      return stock._GenerateAndMaybeValidateStats(  # pylint: disable=protected-access
          stats_output_loc, stats_options=stats_options, enable_validation=enable_validation)

    @staticmethod
    @beam.ptransform_fn
    def _EncodeAndWrite(pcoll, schema, file_format, output_path):  # pylint: disable=invalid-name
      if file_format != labels.FORMAT_TFRECORD:
        return pcoll | stock._EncodeAndWrite(  # pylint: disable=protected-access
            schema=schema, file_format=file_format, output_path=output_path)
      feature_spec = schema_utils.schema_as_feature_spec(schema).feature_spec
      block_size = packed_block_size if reading.can_pack(feature_spec) else 0
      if packed_block_size and not block_size:
        progress.get_logger().info(
            'IngestionTransform: no packed copy, some transformed features are not '
            'fixed-shape (readers parse the examples instead).')
      return (pcoll
              | 'KeyRows' >> beam.ParDo(KeyRowsFn(schema))
              | 'WriteToTFRecord' >> WriteShardedTFRecords(
                  output_path, num_shards, schema=schema, packed_block_size=block_size))

  return ShardedTransformProcessor


@contextlib.contextmanager
def use_transform_processor(processor_class):
  """Makes Transform's executor build `processor_class` for this execution only.

  Transform's executor constructs `TransformProcessor()` inside `Do`, with no hook
  for the writer; swapping the class for the call keeps the rest of Transform
  (analysis, statistics, caching, every option) exactly as TFX ships it.
  """
  stock = transform_executor.TransformProcessor
  transform_executor.TransformProcessor = processor_class
  try:
    yield
  finally:
    transform_executor.TransformProcessor = stock


def artifact_bytes(examples: List[types.Artifact]) -> int:
  """Bytes of the files under the artifacts' URIs (every split)."""
  total = 0
  for artifact in examples:
    for folder, _, files in tf.io.gfile.walk(artifact.uri):
      total += sum(tf.io.gfile.stat(os.path.join(folder, name)).length for name in files)
  return total


def direct_runner_args(beam_pipeline_args: List[str], direct_num_processes: int,
                       examples_bytes: int) -> List[str]:
  """Beam arguments that pick the DirectRunner's mode, unless the user already did.

  Args:
    beam_pipeline_args: The component's Beam arguments.
    direct_num_processes: -1 to choose by size, 0 for in-memory, N >= 2 for N processes.
    examples_bytes: Size of the input examples.

  Returns:
    Arguments to append (possibly none); with no runner named, Beam's DirectRunner without
    its first try of Prism (`beam_runner`).
  """
  named_runner = beam_runner.runner_name(beam_pipeline_args)
  runner = [] if named_runner else [beam_runner.RUNNER_ARGUMENT]
  other_runner = named_runner is not None and 'Direct' not in named_runner
  mode_given = any(arg.startswith('--direct_running_mode') for arg in beam_pipeline_args)
  if other_runner or mode_given:
    return runner
  if direct_num_processes < 0:
    direct_num_processes = (MULTI_PROCESSING_WORKERS
                            if examples_bytes >= MULTI_PROCESSING_MIN_BYTES else 0)
  if direct_num_processes == 0:
    return runner + ['--direct_running_mode=in_memory', '--direct_num_workers=1']
  return runner + ['--direct_running_mode=multi_processing',
                   f'--direct_num_workers={direct_num_processes}']


def write_options(uri: str, options: reading.IngestionOptions) -> None:
  """Writes `ingestion_options.json` whole (temporary file, then rename)."""
  path = os.path.join(uri, reading.OPTIONS_FILE_NAME)
  with tf.io.gfile.GFile(path + '.tmp', 'w') as handle:
    handle.write(options.to_json())
  tf.io.gfile.rename(path + '.tmp', path, overwrite=True)


def check_labels(input_dict, output_dict, exec_properties, label_key: str) -> None:
  """Refuses a label that can not train a classifier, before anything trains on it.

  Raises:
    label_checks.LabelError: naming the label, the column, the split and the count,
      with the raw values the transform could not map to a class.
  """
  import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
  graph = output_dict[standard_component_specs.TRANSFORM_GRAPH_KEY][0].uri
  tf_transform_output = tft.TFTransformOutput(graph)
  custom_config = json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY)
                             or 'null') or {}
  label_column = custom_config.get('label_column')
  transformed = output_dict[standard_component_specs.TRANSFORMED_EXAMPLES_KEY][0]
  counts = {split: label_checks.count_values(os.path.join(transformed.uri, f'Split-{split}', '*'),
                                       tf_transform_output, label_key)
            for split in label_checks.splits_present(transformed.uri)}
  try:
    classes = label_checks.from_schema(tf_transform_output, label_key)
    label_checks.check_counts(counts, label_key, label_column,
                        classes.num_classes if classes else None)
  except label_checks.LabelError as error:
    raw = input_dict[standard_component_specs.EXAMPLES_KEY][0]
    unmapped = {}
    for split, split_counts in counts.items():
      if label_column and any(value < 0 for value in split_counts):
        unmapped[split] = label_checks.unmapped_raw_values(
            evaluation.read_serialized_examples(os.path.join(raw.uri, f'Split-{split}', '*')),
            tf_transform_output, label_key, label_column)
    if unmapped:
      named = '; '.join(f'{split}: {values[:10]}' for split, values in sorted(unmapped.items()))
      raise label_checks.LabelError(f'{error} Raw {label_column!r} values the train split never '
                              f'had: {named}.') from None
    raise
  progress.get_logger().info('IngestionTransform: label %r has %d classes in train (%s)',
                             label_key, len(counts.get('train', {})),
                             ', '.join(f'{split}: {sum(value.values())} rows'
                                       for split, value in sorted(counts.items())))


def reusable_statistics(input_dict, output_dict, exec_properties) -> Optional[Tuple[str, str]]:
  """(StatisticsGen's file, pre_transform_stats' file) when the first can stand for the second.

  Transform computes pre-transform statistics over the splits it analyzes, all together;
  StatisticsGen's file of that split holds the same rows' statistics when Transform
  analyzes a single split of a single examples artifact.

  Returns:
    The two paths, or None (Transform then computes them, as stock Transform does).
  """
  statistics = input_dict.get(ingest_spec.STATISTICS_KEY) or []
  stats_outputs = output_dict.get(standard_component_specs.PRE_TRANSFORM_STATS_KEY) or []
  examples = input_dict[standard_component_specs.EXAMPLES_KEY]
  if (len(statistics) != 1 or len(stats_outputs) != 1 or len(examples) != 1 or
      exec_properties.get(standard_component_specs.DISABLE_STATISTICS_KEY)):
    return None
  splits_config = executor_utils.ResolveSplitsConfig(
      exec_properties.get(standard_component_specs.SPLITS_CONFIG_KEY), examples)
  if len(splits_config.analyze) != 1:
    return None
  split = splits_config.analyze[0]
  if split not in artifact_utils.decode_split_names(statistics[0].split_names):
    return None
  source = os.path.join(artifact_utils.get_split_uri(statistics, split),
                        transform_executor.STATS_FILE)
  if not tf.io.gfile.exists(source):
    return None
  return source, os.path.join(stats_outputs[0].uri, transform_executor.STATS_FILE)


def copy_atomically(source: str, target: str) -> None:
  tf.io.gfile.copy(source, target + '.tmp', overwrite=True)
  tf.io.gfile.rename(target + '.tmp', target, overwrite=True)


@beam.ptransform_fn
def CopyStatistics(examples, source: str, stats_output_loc: Dict[str, str],  # pylint: disable=invalid-name
                   stats_options):
  """Stands for Transform's statistics step: the file copied, the schema written as Transform's."""
  # The analyzers read these rows; nothing here needs them again.
  pipeline = examples.pipeline
  copied = (pipeline | 'StatisticsFile' >> beam.Create([source])
            | 'Copy' >> beam.Map(copy_atomically, stats_output_loc[transform_executor._STATS_KEY]))  # pylint: disable=protected-access
  if stats_options.schema is None:
    return copied, None, None
  written = (pipeline
             | 'CreateSchema' >> beam.Create([text_format.MessageToString(stats_options.schema)])
             | 'WriteSchema' >> beam.Map(lambda schema_text, target: measuring.write_atomically(
                 target, schema_text), stats_output_loc[transform_executor._SCHEMA_KEY]))  # pylint: disable=protected-access
  return copied, written, None


class Executor(transform_executor.Executor):
  """Runs TFX's Transform, then records how the output should be read."""

  _copied_statistics = None

  def _GetStatsOptionsUpdaterFn(self, inputs):
    updater = super()._GetStatsOptionsUpdaterFn(inputs)
    if updater is not None and self._copied_statistics is not None:
      # A user's updater may change what pre-transform statistics hold: computed then.
      self._copied_statistics.source = None
    return updater

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    with progress.component_timer('IngestionTransform executor'):
      num_shards = int(exec_properties[ingest_spec.NUM_SHARDS_KEY])
      extra_args = direct_runner_args(
          self._beam_pipeline_args,
          int(exec_properties.get(ingest_spec.DIRECT_NUM_PROCESSES_KEY, -1)),
          artifact_bytes(input_dict[standard_component_specs.EXAMPLES_KEY]))
      self._beam_pipeline_args = list(self._beam_pipeline_args) + extra_args
      progress.get_logger().info('IngestionTransform: %d shards per split, Beam %s',
                                 num_shards, ' '.join(extra_args) or 'as configured')
      packed_block_size = int(exec_properties.get(ingest_spec.PACKED_BLOCK_SIZE_KEY, 0))
      self._copied_statistics = CopiedStatistics(
          *(reusable_statistics(input_dict, output_dict, exec_properties) or (None, None)))
      with use_transform_processor(sharded_transform_processor(
          num_shards, packed_block_size, self._copied_statistics)), \
          modules.user_module_first(exec_properties):
        super().Do(input_dict, output_dict, exec_properties)

      transformed = output_dict.get(standard_component_specs.TRANSFORMED_EXAMPLES_KEY, [])
      cache = exec_properties[ingest_spec.CACHE_KEY]
      if cache == AUTO_CACHE:
        cache = 'memory' if artifact_bytes(transformed) <= MEMORY_CACHE_MAX_BYTES else 'none'
      options = reading.IngestionOptions(
          cycle_length=int(exec_properties[ingest_spec.CYCLE_LENGTH_KEY]),
          deterministic=bool(exec_properties[ingest_spec.DETERMINISTIC_KEY]),
          cache=cache,
          cache_path=exec_properties.get(ingest_spec.CACHE_PATH_KEY) or '',
          shuffle_buffer=int(exec_properties[ingest_spec.SHUFFLE_BUFFER_KEY]))
      label_key = exec_properties.get(ingest_spec.LABEL_KEY_KEY)
      if label_key:
        check_labels(input_dict, output_dict, exec_properties, label_key)
      for artifact in transformed:
        write_options(artifact.uri, options)
      progress.get_logger().info('IngestionTransform: readers will use %s', options.to_json())
