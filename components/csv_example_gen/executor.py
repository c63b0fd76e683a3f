"""ArrowCsvExampleGen's executor: CSV files to tf.Examples in Arrow blocks, not row by row.

TFX's CsvExampleGen parses each line in Python and builds each tf.Example field by
field: about 6,000 rows/s on one core (docs/benchmarks.md, "Scale"). This executor reads
each file with pyarrow's streaming CSV reader, encodes whole blocks with tfx_bsl's
RecordBatchToExamplesEncoder (C++) and writes each block's rows straight to TensorFlow's
TFRecordWriter, so Python work per row is one hash and one write call, not a chain of
Beam elements; memory is a block per worker, whatever the file's size. The output is what CsvExampleGen writes:
gzipped TFRecords of tf.Example in `Split-<name>/`, the same splits by hash buckets, the
same column types (a column is INT when every cell is an integer, FLOAT when every cell
is a number, else STRING; empty cells are empty features) and the same errors for files
whose headers differ.

One difference: a row's split is chosen from a hash of its cells, not of the serialized
tf.Example (tfx_bsl's encoder orders features differently in every process, and a split
must not change between runs). Identical rows still land in the same split.
"""

import hashlib
import os
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
from pyarrow import compute
from pyarrow import csv as arrow_csv
from tfx import types
from tfx.components.example_gen import base_example_gen_executor
from tfx.components.example_gen import utils
from tfx.components.example_gen import write_split
from tfx.components.util import examples_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils
from tfx.types import standard_component_specs
from tfx.utils import io_utils
from tfx.utils import proto_utils
from tfx_bsl.coders import example_coder

from tfx_distillery.components.common import progress

# Column kinds, in the order a column widens: a cell that is not an INT makes it FLOAT, etc.
UNKNOWN, INT, FLOAT, STRING = 'unknown', 'int', 'float', 'string'
_WIDTH = {UNKNOWN: 0, INT: 1, FLOAT: 2, STRING: 3}
_ARROW_TYPES = {INT: pa.int64(), FLOAT: pa.float64(), STRING: pa.string(), UNKNOWN: pa.string()}
# Bytes of CSV text per Arrow block: bounds memory per worker, whatever the file's size.
BLOCK_BYTES = 8 << 20
# Separates cells in a row's split key; no CSV cell that pyarrow reads holds it.
_KEY_SEPARATOR = '\x1f'
# Written files are named so until every file of the split is written.
TEMPORARY_PREFIX = '.incomplete-'
# GZIP, as CsvExampleGen writes, at zlib's fastest level: files about a quarter larger
# than at the default level, and compression was a third of this executor's time.
GZIP_LEVEL = 1


def merge_kinds(first: Dict[str, str], second: Dict[str, str]) -> Dict[str, str]:
  """The wider kind of each column (INT < FLOAT < STRING; UNKNOWN when all cells are empty)."""
  merged = dict(first)
  for name, kind in second.items():
    if _WIDTH[kind] > _WIDTH[merged.get(name, UNKNOWN)]:
      merged[name] = kind
  return merged


def _block_kind(column: pa.Array) -> str:
  """The narrowest kind that holds every non-empty cell of a block's string column."""
  present = column.drop_null()
  if len(present) == 0:
    return UNKNOWN
  for kind in (INT, FLOAT):
    try:
      compute.cast(present, _ARROW_TYPES[kind])
      return kind
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
      continue
  return STRING


def _open_blocks(path: str, column_names: Sequence[str],
                 column_types: Optional[Dict[str, pa.DataType]] = None) -> Iterator[pa.RecordBatch]:
  """Streams one CSV file (local or any Beam file system, `.gz` too) as Arrow blocks.

  Only empty cells are missing (CsvExampleGen's rule, not pyarrow's longer list), and
  quoted cells may hold newlines.
  """
  types = column_types or {name: pa.string() for name in column_names}
  with beam.io.filesystems.FileSystems.open(path) as handle:
    if not handle.read(1):
      return  # An empty file has no rows, as CsvExampleGen reads it (pyarrow refuses it).
    handle.seek(0)
    reader = arrow_csv.open_csv(
        handle,
        read_options=arrow_csv.ReadOptions(block_size=BLOCK_BYTES, use_threads=False),
        parse_options=arrow_csv.ParseOptions(newlines_in_values=True),
        convert_options=arrow_csv.ConvertOptions(
            column_types=types, null_values=[''], strings_can_be_null=True,
            quoted_strings_can_be_null=True))
    for block in reader:
      if block.num_rows:
        yield block


class InferColumnKinds(beam.DoFn):
  """One file's column kinds, read block by block as text."""

  def __init__(self, column_names: Sequence[str]):
    self._column_names = list(column_names)

  def process(self, path: str) -> Iterator[Dict[str, str]]:
    kinds = {name: UNKNOWN for name in self._column_names}
    for block in _open_blocks(path, self._column_names):
      kinds = merge_kinds(kinds, {name: _block_kind(block.column(index))
                                  for index, name in enumerate(self._column_names)})
    yield kinds


class MergeColumnKinds(beam.CombineFn):
  """The kinds of all files together."""

  def create_accumulator(self):
    return {}

  def add_input(self, accumulator, kinds):
    return merge_kinds(accumulator, kinds)

  def merge_accumulators(self, accumulators):
    merged = {}
    for kinds in accumulators:
      merged = merge_kinds(merged, kinds)
    return merged

  def extract_output(self, accumulator):
    return accumulator


def _list_column(column: pa.Array, kind: str) -> pa.Array:
  """A column as the list array the encoder takes: one value per cell, [] for an empty one."""
  if kind == UNKNOWN:
    # CsvExampleGen writes a feature with no values of any type for a column never filled.
    return pa.array([None] * len(column), pa.list_(pa.binary()))
  valid = np.asarray(column.is_valid(), dtype=bool)
  offsets = np.zeros(len(column) + 1, dtype=np.int32)
  np.cumsum(valid, out=offsets[1:])
  values = column.filter(pa.array(valid))
  if kind == FLOAT:
    values = values.cast(pa.float32())  # tf.train.FloatList holds float32, as CsvExampleGen's.
  elif kind == STRING:
    values = values.cast(pa.binary())
  return pa.ListArray.from_arrays(pa.array(offsets), values)


def split_keys(block: pa.RecordBatch) -> List[bytes]:
  """Each row's cells as one string, the input of its split's hash."""
  texts = [compute.cast(column, pa.string()) for column in block.columns]
  joined = compute.binary_join_element_wise(*texts, _KEY_SEPARATOR,
                                            null_handling='replace', null_replacement='')
  return [text.encode('utf-8') for text in joined.to_pylist()]


def bucket_of(key: bytes, total_buckets: int) -> int:
  """TFX's split rule (sha256 of the key, modulo the buckets) for one key."""
  return int.from_bytes(hashlib.sha256(key).digest(), 'big') % total_buckets


def encode_block(encoder, block: pa.RecordBatch, column_names: Sequence[str],
                 kinds: Dict[str, str]) -> List[bytes]:
  """A block of rows as serialized tf.Examples, in row order."""
  return encoder.encode(pa.RecordBatch.from_arrays(
      [_list_column(block.column(index), kinds.get(name, UNKNOWN))
       for index, name in enumerate(column_names)], list(column_names)))


def _arrow_types(column_names: Sequence[str], kinds: Dict[str, str]) -> Dict[str, pa.DataType]:
  return {name: _ARROW_TYPES[kinds.get(name, UNKNOWN)] for name in column_names}


def split_indices(block: pa.RecordBatch, buckets: Sequence[int],
                  partition_column: Optional[str], path: str) -> np.ndarray:
  """The output split of each row of a block: TFX's hash buckets over the row's cells."""
  if partition_column:
    block = block.select([partition_column])
    if block.column(0).null_count:
      raise RuntimeError(f'partition_feature_name {partition_column!r} is empty in a row of '
                         f'{path}.')
  total = buckets[-1]
  return np.searchsorted(np.asarray(buckets), [bucket_of(key, total) for key in split_keys(block)],
                         side='right')


class EncodeFile(beam.DoFn):
  """One CSV file to one gzipped TFRecord file per output split, written beside the splits.

  Beam's WriteToTFRecord would take each row as an element (several Python calls a row,
  most of CsvExampleGen's time); here each block's rows go straight to TensorFlow's
  TFRecordWriter. Files are written under temporary names and yielded as
  (split index, temporary path, rows); `FinalizeSplits` names the ones to keep, so a
  retried bundle leaves nothing behind.
  """

  def __init__(self, column_names: Sequence[str], buckets: Sequence[int],
               partition_column: Optional[str], split_uris: Sequence[str]):
    self._column_names = list(column_names)
    self._buckets = list(buckets)
    self._partition_column = partition_column
    self._split_uris = list(split_uris)
    self._encoder = None

  def setup(self):
    self._encoder = example_coder.RecordBatchToExamplesEncoder()

  def process(self, indexed_path: Tuple[int, str],
              kinds: Dict[str, str]) -> Iterator[Tuple[int, str, int]]:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    file_index, path = indexed_path
    attempt = uuid.uuid4().hex
    temporary = [os.path.join(uri, f'{TEMPORARY_PREFIX}{file_index:05d}-{attempt}.gz')
                 for uri in self._split_uris]
    options = tf.io.TFRecordOptions(compression_type='GZIP', compression_level=GZIP_LEVEL)
    writers = [tf.io.TFRecordWriter(name, options) for name in temporary]
    counts = [0] * len(writers)
    try:
      for block in _open_blocks(path, self._column_names,
                                _arrow_types(self._column_names, kinds)):
        encoded = encode_block(self._encoder, block, self._column_names, kinds)
        if len(writers) == 1:
          targets = np.zeros(len(encoded), dtype=np.int64)
        else:
          targets = split_indices(block, self._buckets, self._partition_column, path)
        for example, target in zip(encoded, targets.tolist()):
          writers[target].write(example)
        counts = [count + int(np.sum(targets == index)) for index, count in enumerate(counts)]
    finally:
      for writer in writers:
        writer.close()
    progress.get_logger().info('CsvExampleGen: %s: %d rows', os.path.basename(path), sum(counts))
    for index, name in enumerate(temporary):
      yield index, name, counts[index]


class FinalizeSplits(beam.DoFn):
  """Renames the written files to `data_tfrecord-<n>-of-<total>.gz` in each split folder."""

  def process(self, written: List[Tuple[int, str, int]]) -> Iterator[int]:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    by_split = {}
    for index, name, count in sorted(written, key=lambda item: item[1]):
      by_split.setdefault(index, []).append((name, count))
    for names in by_split.values():
      for shard, (name, _) in enumerate(names):
        final = os.path.join(os.path.dirname(name),
                             f'data_tfrecord-{shard:05d}-of-{len(names):05d}.gz')
        tf.io.gfile.rename(name, final, overwrite=True)
    # A retried bundle's files were never yielded: readers glob the whole split folder.
    for folder in {os.path.dirname(name) for _, name, _ in written}:
      for leftover in tf.io.gfile.glob(os.path.join(folder, TEMPORARY_PREFIX + '*')):
        tf.io.gfile.remove(leftover)
    yield sum(count for _, _, count in written)


def column_names_of(csv_files: Sequence[str], pattern: str) -> List[str]:
  """The header shared by every file, as CsvExampleGen requires it."""
  column_names = io_utils.load_csv_column_names(csv_files[0])
  for csv_file in csv_files[1:]:
    if io_utils.load_csv_column_names(csv_file) != column_names:
      raise RuntimeError(f'Files in same split {pattern} have different header.')
  return column_names


def column_kinds(files: beam.PCollection, column_names: Sequence[str], suffix: str = ''):
  """The files' column kinds, as a singleton side input (`suffix` keeps labels unique)."""
  return beam.pvalue.AsSingleton(
      files
      | f'InferKinds{suffix}' >> beam.ParDo(InferColumnKinds(column_names))
      | f'MergeKinds{suffix}' >> beam.CombineGlobally(MergeColumnKinds()))


def _input_files(pattern: str, partition_column: Optional[str] = None) -> Tuple[List[str], List[str]]:
  """The files of a pattern and their shared header; refuses what CsvExampleGen refuses."""
  csv_files = sorted(fileio.glob(pattern))
  if not csv_files:
    raise RuntimeError(f'Split pattern {pattern} does not match any files.')
  column_names = column_names_of(csv_files, pattern)
  if partition_column and partition_column not in column_names:
    raise RuntimeError(f'partition_feature_name {partition_column!r} is not a column of '
                       f'{pattern} (columns: {column_names}).')
  return csv_files, column_names


class ExamplesOfFile(beam.DoFn):
  """One CSV file as serialized tf.Examples, one element each (for a composed pipeline)."""

  def __init__(self, column_names: Sequence[str]):
    self._column_names = list(column_names)
    self._encoder = None

  def setup(self):
    self._encoder = example_coder.RecordBatchToExamplesEncoder()

  def process(self, path: str, kinds: Dict[str, str]) -> Iterator[bytes]:
    for block in _open_blocks(path, self._column_names, _arrow_types(self._column_names, kinds)):
      yield from encode_block(self._encoder, block, self._column_names, kinds)


class Executor(base_example_gen_executor.BaseExampleGenExecutor):
  """CsvExampleGen's executor with Arrow block reading, encoding and writing."""

  def GetInputSourceToExamplePTransform(self) -> beam.PTransform:
    """The rows of an input pattern as serialized tf.Examples, one Beam element each.

    `Do` does not use it (it writes whole blocks); it is for a user's own ExampleGen
    that composes this reader with TFX's per-record splitting.
    """

    @beam.ptransform_fn
    def to_examples(pipeline, exec_properties: Dict[str, Any], split_pattern: str):
      csv_files, column_names = _input_files(
          os.path.join(exec_properties[standard_component_specs.INPUT_BASE_KEY], split_pattern))
      files = pipeline | 'Files' >> beam.Create(csv_files)
      return files | 'Encode' >> beam.ParDo(ExamplesOfFile(column_names),
                                            kinds=column_kinds(files, column_names))
    return to_examples

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    """Writes the Examples artifact's splits as CsvExampleGen does, a block at a time."""
    self._log_startup(input_dict, output_dict, exec_properties)
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.INPUT_CONFIG_KEY],
                              input_config)
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY],
                              output_config)
    file_format = exec_properties.get(standard_component_specs.OUTPUT_FILE_FORMAT_KEY,
                                      example_gen_pb2.FILE_FORMAT_UNSPECIFIED)
    payload_format = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
    if payload_format not in (None, example_gen_pb2.FORMAT_TF_EXAMPLE):
      raise ValueError('output_data_format: ArrowCsvExampleGen writes tf.Examples '
                       f'(FORMAT_TF_EXAMPLE), got {payload_format}.')
    examples = artifact_utils.get_single_instance(
        output_dict[standard_component_specs.EXAMPLES_KEY])
    split_names = utils.generate_output_split_names(input_config, output_config)
    examples.split_names = artifact_utils.encode_split_names(split_names)
    input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
    # (input pattern, the output splits its rows go to, their cumulative hash buckets)
    if output_config.split_config.splits:
      if len(input_config.splits) != 1:
        raise ValueError('input_config: one input split when output_config names the splits '
                         f'(got {len(input_config.splits)}).')
      buckets = np.cumsum([split.hash_buckets for split in output_config.split_config.splits])
      jobs = [(input_config.splits[0].pattern, split_names, [int(bucket) for bucket in buckets])]
    else:
      jobs = [(split.pattern, [name], [])
              for split, name in zip(input_config.splits, split_names)]
    partition_column = output_config.split_config.partition_feature_name or None
    with self._make_beam_pipeline() as pipeline:
      for job_index, (pattern, names, buckets) in enumerate(jobs):
        csv_files, column_names = _input_files(os.path.join(input_base, pattern),
                                               partition_column)
        split_uris = [artifact_utils.get_split_uri([examples], name) for name in names]
        for uri in split_uris:
          fileio.makedirs(uri)
        files = (pipeline
                 | f'Files[{job_index}]' >> beam.Create(list(enumerate(csv_files)))
                 # One file per worker, whichever workers the runner has.
                 | f'Spread[{job_index}]' >> beam.Reshuffle())
        _ = (files
             | f'Encode[{job_index}]' >> beam.ParDo(
                 EncodeFile(column_names, buckets, partition_column, split_uris),
                 kinds=column_kinds(files | f'Paths[{job_index}]' >> beam.Values(),
                                    column_names, f'[{job_index}]'))
             | f'Written[{job_index}]' >> beam.combiners.ToList()
             | f'Finalize[{job_index}]' >> beam.ParDo(FinalizeSplits()))
    if payload_format is not None:
      examples_utils.set_payload_format(examples, payload_format)
    examples_utils.set_file_format(examples, write_split.to_file_format_str(file_format))
