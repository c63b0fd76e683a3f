"""The one reading library: every trainer, distiller and optimizer reads through it.

The accelerator sits idle while the CPU reads and parses, so the dataset built
here overlaps the two: shard files are interleaved in parallel, records are
batched before one vectorised `parse_example` per batch, parsed batches can be
cached, and the whole thing ends in `prefetch(AUTOTUNE)`.

Parsing one `tf.Example` per training example is most of the cost, so
IngestionTransform also writes a packed copy of each split beside the shards
(`<uri>/packed/Split-<name>/`): each record holds a block of examples, every
feature's values concatenated. The reader uses it when it is there.
"""

import dataclasses
import functools
import json
import os
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Union

import tensorflow as tf

# Name of the JSON that IngestionTransform writes beside the transformed data.
OPTIONS_FILE_NAME = 'ingestion_options.json'
# Folder, at the root of the transformed examples artifact, of the packed copy.
PACKED_FOLDER_NAME = 'packed'
# Examples per packed record: enough to make parsing cheap, few enough that
# shuffling whole blocks still mixes the data.
DEFAULT_PACKED_BLOCK_SIZE = 32
CACHE_MODES = ('none', 'memory', 'file')
COMPRESSION_TYPES = ('GZIP', 'ZLIB', '')
DEFAULT_LABEL_KEY = 'label'
# Opens one shard (a scalar string tensor) as a dataset of serialized records.
RecordDatasetFn = Callable[[tf.Tensor], tf.data.Dataset]


@dataclasses.dataclass(frozen=True)
class IngestionOptions:
  """How `make_dataset` reads transformed examples.

  Attributes:
    cycle_length: Shards read at once by the parallel interleave.
    deterministic: Keep a reproducible element order (slower).
    compression: TFRecord compression of the shards: `GZIP`, `ZLIB` or ``.
    cache: `none`, `memory` (parsed batches kept in RAM) or `file`.
    cache_path: Prefix of the cache files when `cache` is `file`.
    shuffle_buffer: Records held by the shuffle buffer; 0 disables shuffling.
    shuffle_files: Shuffle the order of the shard files.
    seed: Seed for the file and record shuffles; None for a fresh one each run.
    packed: Read the packed copy of the split when IngestionTransform wrote one
      (same examples, a block of them per record, far less to parse).
  """
  cycle_length: int = 8
  deterministic: bool = False
  compression: str = 'GZIP'
  cache: str = 'none'
  cache_path: str = ''
  shuffle_buffer: int = 10_000
  shuffle_files: bool = True
  seed: Optional[int] = None
  packed: bool = True

  def __post_init__(self):
    validate_options(self)

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> 'IngestionOptions':
    known = {field.name for field in dataclasses.fields(cls)}
    return cls(**{key: value for key, value in json.loads(text).items() if key in known})


def is_count(value) -> bool:
  """An int that is not a bool (True would otherwise count as 1)."""
  return isinstance(value, int) and not isinstance(value, bool)


def validate_options(options: IngestionOptions) -> None:
  """Raises ValueError naming the first option that is out of range."""
  if not is_count(options.cycle_length) or options.cycle_length < 1:
    raise ValueError(f'cycle_length must be an integer >= 1; got {options.cycle_length!r}.')
  if options.compression not in COMPRESSION_TYPES:
    raise ValueError(f'compression must be one of {COMPRESSION_TYPES}; '
                     f'got {options.compression!r}.')
  if options.cache not in CACHE_MODES:
    raise ValueError(f'cache must be one of {", ".join(CACHE_MODES)}; got {options.cache!r}.')
  if options.cache == 'file':
    if not options.cache_path:
      raise ValueError("cache_path must be set when cache is 'file'.")
    check_writable_prefix(options.cache_path)
  if not is_count(options.shuffle_buffer) or options.shuffle_buffer < 0:
    raise ValueError(f'shuffle_buffer must be an integer >= 0; got {options.shuffle_buffer!r}.')


def check_writable_prefix(cache_path: str) -> None:
  """Raises ValueError if the folder of a cache file prefix can't be written."""
  folder = os.path.dirname(cache_path) or '.'
  if '://' in cache_path:
    return  # Remote storage: can't be probed cheaply here; tf.data reports failures.
  probe_folder = folder
  while not os.path.exists(probe_folder):
    probe_folder = os.path.dirname(probe_folder) or '.'
  if not os.path.isdir(probe_folder) or not os.access(probe_folder, os.W_OK):
    raise ValueError(f'cache_path {cache_path!r} can not be written: {probe_folder!r} is '
                     'not a writable folder.')


def read_options(transformed_examples_uri: str) -> IngestionOptions:
  """Reads the options IngestionTransform recorded, or the defaults if none were."""
  path = os.path.join(transformed_examples_uri, OPTIONS_FILE_NAME)
  if tf.io.gfile.exists(path):
    with tf.io.gfile.GFile(path) as handle:
      return IngestionOptions.from_json(handle.read())
  return IngestionOptions()


def list_files(file_pattern: Union[str, Sequence[str]]) -> List[str]:
  """Expands one or several glob patterns (TFX gives lists) into sorted file names."""
  patterns = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
  files = sorted({name for pattern in patterns for name in tf.io.gfile.glob(pattern)})
  if not files:
    raise FileNotFoundError(f'No files match {patterns}.')
  return files


def packed_files(file_pattern: Union[str, Sequence[str]]) -> Optional[List[str]]:
  """The packed copy of the split(s) `file_pattern` names, or None if any lacks one.

  `<uri>/Split-<name>/<glob>` has its packed copy in `<uri>/packed/Split-<name>/`.
  """
  patterns = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
  files = set()
  for pattern in patterns:
    split_folder = os.path.dirname(pattern)
    packed_pattern = os.path.join(os.path.dirname(split_folder), PACKED_FOLDER_NAME,
                                  os.path.basename(split_folder), '*')
    found = tf.io.gfile.glob(packed_pattern)
    if not found:
      return None
    files.update(found)
  return sorted(files)


def pack_examples(serialized_examples: Sequence[bytes], feature_spec: Dict) -> bytes:
  """One packed record: the examples' values of each feature, concatenated in order.

  Args:
    serialized_examples: A block of serialized transformed `tf.Example`s.
    feature_spec: Their feature spec; every feature a `tf.io.FixedLenFeature`.

  Returns:
    A serialized `tf.Example` with the same feature names.
  """
  parsed = tf.io.parse_example(tf.constant(list(serialized_examples), tf.string), feature_spec)
  features = {}
  for key, value in parsed.items():
    values = value.numpy().reshape(-1)
    if value.dtype == tf.float32:
      features[key] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    elif value.dtype == tf.int64:
      features[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    else:
      features[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=list(values)))
  return tf.train.Example(
      features=tf.train.Features(feature=features)).SerializeToString()


def can_pack(feature_spec: Dict) -> bool:
  """Only fixed-shape features can be concatenated and split back by shape."""
  return all(isinstance(spec, tf.io.FixedLenFeature) for spec in feature_spec.values())


def unpack_parser(feature_spec: Dict) -> Callable[[tf.Tensor], Dict[str, tf.Tensor]]:
  """Parses a batch of packed records back into `[examples, *shape]` tensors."""
  ragged_spec = {key: tf.io.RaggedFeature(dtype=spec.dtype)
                 for key, spec in feature_spec.items()}

  def parse_packed(serialized: tf.Tensor) -> Dict[str, tf.Tensor]:
    ragged = tf.io.parse_example(serialized, ragged_spec)
    return {key: tf.reshape(ragged[key].flat_values, [-1, *feature_spec[key].shape])
            for key in feature_spec}

  return parse_packed


def workers_in_cluster() -> int:
  """Number of workers in TF_CONFIG's cluster (1 outside multi-worker training)."""
  tf_config = json.loads(os.environ.get('TF_CONFIG', '{}') or '{}')
  cluster = tf_config.get('cluster', {})
  return max(1, len(cluster.get('worker', [])) + len(cluster.get('chief', [])))


def files_with_records(files: Sequence[str], compression: str) -> List[str]:
  """The files that hold at least one record (each is opened and one record read)."""
  return [name for name in files
          if any(True for _ in tf.data.TFRecordDataset(name, compression_type=compression)
                 .take(1))]


def auto_shard_policy(num_files: int, num_workers: int) -> tf.data.experimental.AutoShardPolicy:
  """FILE sharding when every worker gets a file of its own, DATA otherwise."""
  if num_files >= num_workers:
    return tf.data.experimental.AutoShardPolicy.FILE
  return tf.data.experimental.AutoShardPolicy.DATA


def make_dataset(file_pattern: Union[str, Sequence[str]],
                 tf_transform_output,
                 batch_size: int,
                 options: Optional[IngestionOptions] = None,
                 label_key: Optional[str] = DEFAULT_LABEL_KEY,
                 feature_keys: Optional[Iterable[str]] = None,
                 num_epochs: Optional[int] = None,
                 drop_remainder: bool = False,
                 num_workers: Optional[int] = None,
                 record_dataset_fn: Optional[RecordDatasetFn] = None,
                 batch_map_fn: Optional[Callable] = None) -> tf.data.Dataset:
  """Builds the tuned input pipeline over transformed TFRecord shards.

  Args:
    file_pattern: Glob pattern, or list of them, of the transformed shards.
    tf_transform_output: `tft.TFTransformOutput` whose transformed feature spec
      describes the records.
    batch_size: Examples per batch (per replica times replicas under a strategy).
    options: `IngestionOptions`; defaults when None.
    label_key: Feature popped out as the label; None yields feature dicts only.
    feature_keys: Only these features are parsed (plus the label); None parses all.
    num_epochs: Passes over the data; None repeats forever.
    drop_remainder: Drop the last partial batch (needed for static batch shapes).
    num_workers: Workers reading in parallel; read from TF_CONFIG when None.
    record_dataset_fn: Opens one shard as a dataset of serialized records; a
      GZIP/ZLIB `TFRecordDataset` per `options.compression` when None.
    batch_map_fn: Per-batch work on the parsed `(features, label)` (or features),
      run in the same parallel map as the parse, so it is cached and prefetched
      with it instead of running on the training thread. It must treat rows
      independently: with the packed copy it sees parsed blocks, whose size
      need not be `batch_size`.

  Returns:
    A `tf.data.Dataset` of `(features, label)` batches, or of feature dicts.
  """
  options = options or IngestionOptions()
  if batch_size < 1:
    raise ValueError(f'batch_size must be >= 1; got {batch_size}.')
  files = list_files(file_pattern)
  if options.cache == 'file':
    tf.io.gfile.makedirs(os.path.dirname(options.cache_path) or '.')
  feature_spec = dict(tf_transform_output.transformed_feature_spec())
  if feature_keys is not None:
    wanted = set(feature_keys) | ({label_key} if label_key else set())
    unknown = wanted - set(feature_spec)
    if unknown:
      raise ValueError(f'feature_keys name features the transform does not output: '
                       f'{sorted(unknown)}; it outputs {sorted(feature_spec)}.')
    feature_spec = {key: spec for key, spec in feature_spec.items() if key in wanted}

  def split_label(features: Dict[str, tf.Tensor]):
    parsed = features if label_key is None else (features, features.pop(label_key))
    if batch_map_fn is None:
      return parsed
    return batch_map_fn(*parsed) if label_key is not None else batch_map_fn(parsed)

  packed = packed_files(file_pattern) if options.packed else None
  if packed:
    files = packed
    parse_records = unpack_parser(feature_spec)
    # A batch's worth of blocks per parse; `rebatch` below cuts exact batches.
    records_per_parse = max(1, batch_size // DEFAULT_PACKED_BLOCK_SIZE)
    examples_per_record = DEFAULT_PACKED_BLOCK_SIZE
  else:
    parse_records = functools.partial(tf.io.parse_example, features=feature_spec)
    records_per_parse = batch_size
    examples_per_record = 1

  workers = num_workers or workers_in_cluster()
  if workers > 1 and tf.executing_eagerly():
    # Small splits leave some shards empty. A worker given only empty files would stop
    # its epoch (or its validation) while the others wait for it in a collective, for
    # ever; so only files that hold records are shared out.
    files = files_with_records(files, options.compression) or files

  def parse(serialized: tf.Tensor):
    return split_label(parse_records(serialized))

  dataset = tf.data.Dataset.from_tensor_slices(files)
  if options.shuffle_files:
    dataset = dataset.shuffle(len(files), seed=options.seed)
  record_dataset_fn = record_dataset_fn or functools.partial(
      tf.data.TFRecordDataset, compression_type=options.compression)
  dataset = dataset.interleave(
      record_dataset_fn,
      cycle_length=min(options.cycle_length, len(files)),
      num_parallel_calls=tf.data.AUTOTUNE,
      deterministic=options.deterministic)
  if options.cache == 'none':
    if options.shuffle_buffer:
      dataset = dataset.shuffle(max(1, options.shuffle_buffer // examples_per_record),
                                seed=options.seed)
    # Repeating before batching lets batches span passes, so a shard smaller
    # than one batch still yields whole batches when the remainder is dropped.
    dataset = dataset.repeat(num_epochs)
    dataset = dataset.batch(records_per_parse, drop_remainder=drop_remainder and not packed)
    dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=options.deterministic)
    if packed:
      dataset = dataset.rebatch(batch_size, drop_remainder=drop_remainder)
  else:
    # Parsing dominates the cost, so the cache holds parsed batches; later
    # passes shuffle whole batches instead of records.
    dataset = dataset.batch(records_per_parse)
    dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=options.deterministic)
    dataset = dataset.cache(options.cache_path if options.cache == 'file' else '')
    if options.shuffle_buffer:
      dataset = dataset.shuffle(
          max(1, options.shuffle_buffer // (records_per_parse * examples_per_record)),
          seed=options.seed)
    dataset = dataset.repeat(num_epochs)
    if drop_remainder or packed:
      # Re-slices the cached batches across pass boundaries into whole ones.
      dataset = dataset.rebatch(batch_size, drop_remainder=drop_remainder)
  dataset = dataset.prefetch(tf.data.AUTOTUNE)
  if num_epochs is None:
    # Said outright: rebatch hides that the data never ends, and under a
    # multi-worker strategy an unknown length makes every step agree across
    # workers on whether data is left (an extra collective round trip per step).
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(
        tf.data.INFINITE_CARDINALITY))

  dataset_options = tf.data.Options()
  dataset_options.experimental_deterministic = options.deterministic
  dataset_options.experimental_distribute.auto_shard_policy = auto_shard_policy(
      len(files), workers)
  return dataset.with_options(dataset_options)


def hash_slice(compression: str, percent: int, held_out: bool) -> RecordDatasetFn:
  """A `record_dataset_fn` that keeps a fixed slice of the records, chosen by hash.

  The same record always falls on the same side, in every epoch and process, so
  a validation slice of the training split never leaks into training.

  Args:
    compression: TFRecord compression of the shards.
    percent: Share of records (0-100) in the held-out slice.
    held_out: Keep the held-out slice (True) or the rest (False).
  """

  def open_shard(filename):
    records = tf.data.TFRecordDataset(filename, compression_type=compression)

    def keep(record):
      in_slice = tf.strings.to_hash_bucket_fast(record, 100) < percent
      return in_slice if held_out else tf.logical_not(in_slice)

    return records.filter(keep)

  return open_shard


def naive_dataset(file_pattern: Union[str, Sequence[str]],
                  tf_transform_output,
                  batch_size: int,
                  compression: str = 'GZIP',
                  label_key: Optional[str] = DEFAULT_LABEL_KEY,
                  record_dataset_fn: Optional[RecordDatasetFn] = None,
                  shuffle_buffer: int = 0) -> tf.data.Dataset:
  """One file at a time, one example parsed at a time, no prefetch.

  This is the baseline the ingestion benchmark and tests compare against.
  `shuffle_buffer` records are shuffled before parsing (0: none), so the
  baseline can do the same shuffling work as the readers it is compared with.
  """
  feature_spec = tf_transform_output.transformed_feature_spec()

  def parse_one(serialized):
    features = tf.io.parse_single_example(serialized, feature_spec)
    if label_key is None:
      return features
    label = features.pop(label_key)
    return features, label

  record_dataset_fn = record_dataset_fn or functools.partial(
      tf.data.TFRecordDataset, compression_type=compression)
  dataset = tf.data.Dataset.from_tensor_slices(list_files(file_pattern)).flat_map(
      record_dataset_fn)
  if shuffle_buffer:
    dataset = dataset.shuffle(shuffle_buffer)
  return dataset.map(parse_one).batch(batch_size)

