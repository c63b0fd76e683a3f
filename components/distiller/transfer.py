"""The transfer set: raw rows, with or without labels, that the student learns the teacher on.

Users hold far more rows than labels (serving logs, rows not yet labelled). The
Distiller reads them from an Examples artifact (ExampleGen's raw rows), applies
the transform graph itself and ignores any label they carry.

The mixing rule: every training step takes one batch of labelled rows and one
batch of transfer rows of the same size. The hard-label term averages over the
labelled rows only; the soft (teacher) term averages over every row of the step.
Rows alternate labelled, transfer, labelled..., so every replica of a
distributed step gets equal shares of both.

The set streams: shards are read, shuffled in a bounded buffer, transformed and
batched as training goes, so a set larger than memory works. The teacher labels
each batch as it is read, inside the step, as it does the labelled rows (mixup
and noise change the rows every step, so stored teacher answers would be stale);
the from-scratch twin has no use for the set and never reads it.
"""

import dataclasses
import os
from typing import Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from tfx_distillery.components.common import reading
from tfx_distillery.components.common import shapes

# ExampleGen's split folders, and the splits a pipeline chooses or reports on.
SPLIT_PREFIX = 'Split-'
MEASURED_SPLITS = ('eval', 'test')
# Raw rows read to check the set's features before training.
SAMPLE_ROWS = 256
# Raw rows held by the shuffle buffer while streaming, and parsed at once.
SHUFFLE_ROWS = 10_000
PARSE_ROWS = 1024
WHO = 'Distiller, transfer_examples'
# tf.train.Example's value lists, and the dtype a parse of each gives.
_KINDS = {'int64_list': tf.int64, 'float_list': tf.float32, 'bytes_list': tf.string}


class TransferSet:
  """The raw transfer rows of some splits of one Examples artifact, checked and streamed.

  Args:
    examples_uri: The Examples artifact's folder (ExampleGen's output).
    available_splits: The artifact's splits.
    splits: The splits to read; empty for all.
    tf_transform_output: The transform graph the labelled rows went through.
    label_column: The raw label column, dropped if the rows carry it.
    compression: The shards' TFRecord compression (ExampleGen writes GZIP).

  Raises:
    ValueError: naming a split the artifact lacks, or one that holds no rows.
  """

  def __init__(self, examples_uri: str, available_splits: Sequence[str],
               splits: Sequence[str], tf_transform_output, label_column: str,
               compression: str = 'GZIP'):
    self.examples_uri = examples_uri
    self.splits = list(splits) or list(available_splits)
    unknown = [split for split in self.splits if split not in available_splits]
    if unknown:
      raise ValueError(f'transfer_splits: {unknown} are not splits of the transfer_examples at '
                       f'{examples_uri}; it has {sorted(available_splits)}.')
    self.compression = compression
    self.files: List[str] = []
    for split in self.splits:
      files = reading.list_files(os.path.join(examples_uri, f'{SPLIT_PREFIX}{split}', '*'))
      files = reading.files_with_records(files, compression) if files else []
      if not files:
        raise ValueError(f'transfer_splits: split {split!r} of the transfer_examples at '
                         f'{examples_uri} holds no rows; give a split with rows, or leave '
                         'transfer_examples out.')
      self.files.extend(files)
    self.tf_transform_output = tf_transform_output
    self.label_column = label_column
    self.raw_spec = {name: spec for name, spec in tf_transform_output.raw_feature_spec().items()
                     if name != label_column}
    self.parse_spec = dict(self.raw_spec)
    self.layer = tf_transform_output.transform_features_layer()
    self.specs: Dict[str, shapes.InputSpec] = {}
    self.incomplete_in_sample = 0

  def measured_splits(self) -> List[str]:
    """The set's splits named like those a pipeline chooses (eval) or reports (test) on."""
    return [split for split in self.splits if split in MEASURED_SPLITS]

  def check(self, labelled_features: Dict[str, tf.TensorSpec]) -> int:
    """Refuses, by feature name, rows that the transform or the student can not take.

    Reads the first rows, checks each raw feature the transform reads against its
    kind in the transform's raw schema (an integer column where floats are wanted
    or text is cast, as a CSV column of whole numbers reads as integers), transforms them
    and brings every transformed feature to the labelled rows' shape and dtype.

    Args:
      labelled_features: The labelled training batches' features (`element_spec`).

    Returns:
      Rows read for the check.

    Raises:
      ValueError: naming the feature (raw or transformed) that does not match.
    """
    sample = []
    for file_name in self.files:
      sample.extend(tf.data.TFRecordDataset(file_name, compression_type=self.compression)
                    .take(SAMPLE_ROWS - len(sample)).as_numpy_iterator())
      if len(sample) >= SAMPLE_ROWS:
        break
    seen: Dict[str, str] = {}
    for serialized in sample:
      example = tf.train.Example.FromString(serialized)
      for name, feature in example.features.feature.items():
        kind = feature.WhichOneof('kind')
        if kind:
          seen.setdefault(name, kind)
    for name, spec in sorted(self.raw_spec.items()):
      kind = seen.get(name)
      wanted = spec.dtype
      if kind is None:
        if isinstance(spec, tf.io.FixedLenFeature) and spec.default_value is None:
          raise ValueError(
              f'{WHO}: the rows lack feature {name!r}, which the transform reads (as '
              f'{wanted.name}); the first {len(sample)} rows have {sorted(seen)}. Give the '
              'transfer rows the columns of the labelled ones (the label may be left out).')
        continue
      found = _KINDS[kind]
      if found == wanted:
        continue
      if found == tf.int64 and (wanted.is_floating or wanted == tf.string):
        # Whole numbers, cast: a CSV column of integers reads as such in one folder, while
        # the labelled folder read it as floats, or as text (a category of number codes,
        # with one cell that is not a number).
        self.parse_spec[name] = _with_dtype(spec, tf.int64)
        continue
      raise ValueError(f'{WHO}: feature {name!r} holds {found.name} values in the rows, but the '
                       f'transform reads it as {wanted.name}.')
    self.specs = {name: dataclasses.replace(spec, shape=(None,) + tuple(spec.shape[1:]))
                  for name, spec in shapes.function_specs(labelled_features).items()}
    raw, keep = self._complete_rows(tf.constant(sample))
    incomplete = len(sample) - int(tf.reduce_sum(tf.cast(keep, tf.int32)))
    if incomplete == len(sample):
      raise ValueError(
          f'{WHO}: none of the first {len(sample)} rows holds every feature the transform '
          f'requires ({", ".join(sorted(n for n, s in self.raw_spec.items() if _required(s)))}'
          '); rows with an empty required cell are left out of the transfer set.')
    self.incomplete_in_sample = incomplete
    transformed = self.layer(raw)
    missing = sorted(set(self.specs) - set(transformed))
    if missing:
      raise ValueError(
          f'{WHO}: the transform gives no {missing} for these rows, which the student reads; '
          f'it gives {sorted(transformed)}. A transformed feature made from the label column '
          f'({self.label_column!r}) can not be an input.')
    shapes.conform(transformed, self.specs, WHO)
    return len(sample)

  def _complete_rows(self, serialized: tf.Tensor) -> Tuple[Dict[str, tf.Tensor], tf.Tensor]:
    """Parses raw rows, keeping those that hold every feature the raw schema requires.

    A feature the schema gives a fixed length without a default (SchemaGen's inference
    when every labelled row had it) is parsed as a list first: a row with another number
    of values (an empty CSV cell) can not go through the transform, so it is left out
    here rather than stop the training.

    Returns:
      The kept rows' raw features, cast to the raw schema's dtypes, and the kept mask.
    """
    lists = {name: (tf.io.VarLenFeature(spec.dtype) if _required(spec) else spec)
             for name, spec in self.parse_spec.items()}
    parsed = tf.io.parse_example(serialized, lists)
    rows = tf.shape(serialized)[0]
    keep = tf.ones([rows], tf.bool)
    for name, spec in self.parse_spec.items():
      if _required(spec):
        counts = tf.math.bincount(tf.cast(parsed[name].indices[:, 0], tf.int32), minlength=rows,
                                  maxlength=rows)
        keep = tf.logical_and(keep, tf.equal(counts, _elements(spec.shape)))
    kept = {}
    for name, spec in self.parse_spec.items():
      value = parsed[name]
      if _required(spec):
        dense = tf.boolean_mask(tf.sparse.to_dense(value), keep)
        size = _elements(spec.shape)
        dense = tf.pad(dense, [[0, 0], [0, tf.maximum(0, size - tf.shape(dense)[1])]])[:, :size]
        value = tf.reshape(dense, [-1] + list(spec.shape))
      elif isinstance(value, tf.sparse.SparseTensor):
        value = tf.ragged.boolean_mask(tf.RaggedTensor.from_sparse(value), keep).to_sparse()
      else:
        value = tf.boolean_mask(value, keep)
      if spec.dtype != self.raw_spec[name].dtype:
        value = _cast(value, self.raw_spec[name].dtype)
      kept[name] = value
    return kept, keep

  def _transform(self, serialized: tf.Tensor) -> Dict[str, tf.Tensor]:
    return self.layer(self._complete_rows(serialized)[0])

  def dataset(self, batch_size: int, seed: Optional[int]) -> tf.data.Dataset:
    """Endless, shuffled batches of transformed transfer features, at the labelled shapes.

    Call `check` first: it fixes how each feature is parsed and conformed.
    """
    specs = self.specs

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def transform(serialized):
      return shapes.conform(self._transform(serialized), specs, WHO)

    files = tf.data.Dataset.from_tensor_slices(self.files).shuffle(len(self.files), seed=seed)
    dataset = files.interleave(
        lambda file_name: tf.data.TFRecordDataset(file_name, compression_type=self.compression),
        cycle_length=min(8, len(self.files)), num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True)
    dataset = dataset.shuffle(SHUFFLE_ROWS, seed=seed).repeat()
    # Parsed and transformed in blocks; rows left out leave blocks short, so the rows are
    # cut into whole batches afterwards.
    dataset = dataset.batch(PARSE_ROWS).map(transform, num_parallel_calls=tf.data.AUTOTUNE,
                                            deterministic=True)
    return dataset.unbatch().batch(batch_size, drop_remainder=True)


def alternate(labelled: tf.data.Dataset, transfer: tf.data.Dataset) -> tf.data.Dataset:
  """One step's rows: labelled and transfer rows alternating, with hard-label weights.

  Yields `(features, labels, weights)`: a transfer row's label is a placeholder
  (0) and its weight 0, so the hard term and the accuracy count labelled rows only.
  """

  def interleave_rows(first, second):
    stacked = tf.stack([first, second], axis=1)
    trailing = first.shape[1:]
    return tf.reshape(stacked, [-1] + trailing.as_list() if trailing.is_fully_defined()
                      else tf.concat([[-1], tf.shape(first)[1:]], axis=0))

  def combine(labelled_batch, transfer_features):
    features, label = labelled_batch
    merged = {name: interleave_rows(value, transfer_features[name])
              for name, value in features.items()}
    weights = interleave_rows(tf.ones_like(tf.reshape(label, [-1]), tf.float32),
                              tf.zeros_like(tf.reshape(label, [-1]), tf.float32))
    return merged, interleave_rows(label, tf.zeros_like(label)), weights

  combined = tf.data.Dataset.zip((labelled, transfer)).map(
      combine, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  options = tf.data.Options()
  if labelled.options().deterministic is not None:
    options.deterministic = labelled.options().deterministic
  # Shard by batches: the two sources' files could not be shared out between workers alike.
  options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
  return combined.prefetch(tf.data.AUTOTUNE).with_options(options)


def _required(spec) -> bool:
  return isinstance(spec, tf.io.FixedLenFeature) and spec.default_value is None


def _elements(shape) -> int:
  count = 1
  for size in shape:
    count *= int(size)
  return count


def _with_dtype(spec, dtype):
  if isinstance(spec, tf.io.FixedLenFeature):
    return tf.io.FixedLenFeature(spec.shape, dtype)
  return tf.io.VarLenFeature(dtype)


def _cast(value, dtype):
  convert = tf.strings.as_string if dtype == tf.string else lambda values: tf.cast(values, dtype)
  if isinstance(value, tf.sparse.SparseTensor):
    return tf.sparse.SparseTensor(value.indices, convert(value.values), value.dense_shape)
  return convert(value)


def describe(transfer_set: Optional[TransferSet]) -> Optional[Dict[str, object]]:
  """What metrics.json records of the set: where, which splits, how many shards."""
  if transfer_set is None:
    return None
  return {'examples': transfer_set.examples_uri, 'splits': transfer_set.splits,
          'files': len(transfer_set.files)}


def split_names(artifact) -> Tuple[str, ...]:
  """An Examples artifact's split names, as ExampleGen recorded them."""
  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  return tuple(artifact_utils.decode_split_names(artifact.split_names))
