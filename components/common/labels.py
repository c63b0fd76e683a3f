"""The label, named once: how many classes it has, and whether it can be learnt at all.

Every component that reads labels takes `label_key`, TFMA's name for the
transformed label feature, and resolves its class count here, in this order:

1. `num_classes` given explicitly;
2. the transformed schema's domain (a vocabulary, or an integer domain);
3. the teacher's output width (1 is binary, k is k classes);
4. the label's values in the transformed statistics.

Labels that can not train a classifier (one class, a continuous column, values
the transform could not map to a class) are refused before any training, with
the column, the count and the fix named.
"""

import collections
import dataclasses
import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from tfx_distillery.components.common import reading

DEFAULT_LABEL_KEY = reading.DEFAULT_LABEL_KEY
# A label with more distinct values than this, that are also at least
# CONTINUOUS_FRACTION of the rows, is a measurement, not a class.
CONTINUOUS_MIN_DISTINCT = 50
CONTINUOUS_FRACTION = 0.5
SOURCES = ('num_classes', 'schema', 'teacher', 'statistics')


class LabelError(ValueError):
  """A label that can not train a classifier; the message names the key and the fix."""


@dataclasses.dataclass(frozen=True)
class ClassCount:
  """How many classes the label has, and what said so.

  Attributes:
    num_classes: Classes; the label's values are indices in [0, num_classes).
    source: One of `SOURCES`.
    detail: A readable note on the source (the domain, the teacher's width...).
  """
  num_classes: int
  source: str
  detail: str = ''

  @property
  def units(self) -> int:
    """Logits a model needs: one for a binary label, one per class otherwise."""
    return 1 if self.num_classes == 2 else self.num_classes

  def describe(self) -> Dict[str, object]:
    """What the metrics artifacts record."""
    return {'num_classes': self.num_classes, 'num_classes_source': self.source,
            'num_classes_detail': self.detail}


def _fix(label_key: str) -> str:
  return (f'Give num_classes explicitly (a Distiller/Pruner/Quantizer argument, or '
          f"custom_config={{'num_classes': N}} for a teacher module), or give {label_key!r} a "
          'domain in the transformed schema (tft.compute_and_apply_vocabulary, or '
          'tft.schema_inference.set_tensor_schema_override).')


def from_schema(tf_transform_output, label_key: str) -> Optional[ClassCount]:
  """Classes from the transformed schema's vocabulary or integer domain, if it has one."""
  schema = tf_transform_output.transformed_metadata.schema
  features = {feature.name: feature for feature in schema.feature}
  if label_key not in features:
    raise LabelError(
        f'label_key {label_key!r} is not a transformed feature; the transform emits '
        f'{", ".join(sorted(features))}. Set label_key to the name your preprocessing_fn '
        'gives the label.')
  feature = features[label_key]
  if feature.HasField('int_domain') and feature.int_domain.HasField('max'):
    minimum = feature.int_domain.min if feature.int_domain.HasField('min') else 0
    maximum = feature.int_domain.max
    if maximum < 0:
      raise LabelError(f'label_key {label_key!r} has the integer domain [{minimum}, '
                       f'{maximum}]: no class index >= 0. Map the label to 0..N-1 in your '
                       'preprocessing_fn (tft.compute_and_apply_vocabulary does).')
    # A vocabulary's domain starts at its default value, -1 for "unknown": such values are
    # refused where they occur (check_counts). Indices below a positive min never occur;
    # they only cost unused logits.
    return ClassCount(int(maximum) + 1, 'schema', f'integer domain [{minimum}, {maximum}]')
  try:
    buckets = tf_transform_output.num_buckets_for_transformed_feature(label_key)
  except ValueError:
    return None
  return ClassCount(int(buckets), 'schema', 'vocabulary')


def from_teacher_width(width: Optional[int]) -> Optional[ClassCount]:
  """Classes from a teacher's output width: 1 is a binary label, k is k classes."""
  if not width:
    return None
  return ClassCount(2 if width == 1 else int(width), 'teacher', f'output width {width}')


def statistics_file(statistics_uri: str, split: str = 'train') -> Optional[str]:
  """The split's FeatureStats.pb, else the artifact's own (Transform's post_transform_stats
  has no split folders), else None."""
  for path in (os.path.join(statistics_uri, f'Split-{split}', 'FeatureStats.pb'),
               os.path.join(statistics_uri, 'FeatureStats.pb')):
    if tf.io.gfile.exists(path):
      return path
  return None


def from_statistics(statistics_uri: Optional[str], label_key: str,
                    split: str = 'train') -> Optional[ClassCount]:
  """Classes from TFDV statistics of the transformed data (distinct values, else max + 1)."""
  if not statistics_uri:
    return None
  from tensorflow_metadata.proto.v0 import statistics_pb2  # pylint: disable=g-import-not-at-top
  path = statistics_file(statistics_uri, split)
  if path is None:
    return None
  stats_list = statistics_pb2.DatasetFeatureStatisticsList()
  with tf.io.gfile.GFile(path, 'rb') as handle:
    stats_list.ParseFromString(handle.read())
  for dataset in stats_list.datasets:
    for feature in dataset.features:
      name = feature.path.step[-1] if feature.path.step else feature.name
      if name != label_key:
        continue
      if feature.HasField('string_stats') and feature.string_stats.unique:
        return ClassCount(int(feature.string_stats.unique), 'statistics',
                          f'{feature.string_stats.unique} distinct values in {split}')
      if feature.HasField('num_stats') and feature.num_stats.min >= 0 and float(
          feature.num_stats.max).is_integer():
        return ClassCount(int(feature.num_stats.max) + 1, 'statistics',
                          f'values {feature.num_stats.min:g}..{feature.num_stats.max:g} in '
                          f'{split}')
  return None


def resolve(tf_transform_output, label_key: str, num_classes: Optional[int] = None,
            teacher_width: Optional[int] = None,
            statistics_uri: Optional[str] = None) -> ClassCount:
  """The label's class count, from the first source that answers.

  Args:
    tf_transform_output: The transform graph's output (its transformed schema).
    label_key: The transformed label feature.
    num_classes: An explicit count, which wins when given.
    teacher_width: The teacher's output width, when there is a teacher.
    statistics_uri: An ExampleStatistics artifact of the transformed data.

  Returns:
    The `ClassCount`.

  Raises:
    LabelError: when no source answers, or the answer is fewer than two classes.
  """
  count = None
  if num_classes is not None:
    count = ClassCount(int(num_classes), 'num_classes', 'given')
  count = (count or from_schema(tf_transform_output, label_key)
           or from_teacher_width(teacher_width)
           or from_statistics(statistics_uri, label_key))
  if count is None:
    raise LabelError(
        f'The number of classes of label_key {label_key!r} is unknown: the transformed schema '
        'gives it no domain, and there is no teacher or statistics to read it from. '
        + _fix(label_key))
  if count.num_classes < 2:
    raise LabelError(f'label_key {label_key!r} has {count.num_classes} class ({count.source}: '
                     f'{count.detail}); a classifier needs at least two.')
  return count


def validate_num_classes(num_classes) -> None:
  """Construction-time check of an explicit `num_classes`."""
  if num_classes is not None and (not reading.is_count(num_classes) or num_classes < 2):
    raise ValueError(f'num_classes must be an integer >= 2 or None (read from the schema, '
                     f'the teacher or statistics); got {num_classes!r}.')


def validate_label_key(label_key) -> None:
  """Construction-time check of `label_key`."""
  if not isinstance(label_key, str) or not label_key:
    raise ValueError(f"label_key must name the transformed label feature (e.g. 'label' or "
                     f"'species_xf'); got {label_key!r}.")


def count_values(file_pattern, tf_transform_output, label_key: str,
                 compression: str = 'GZIP') -> collections.Counter:
  """How often each label value occurs in transformed examples (one pass)."""
  spec = tf_transform_output.transformed_feature_spec()
  if label_key not in spec:
    raise LabelError(f'label_key {label_key!r} is not a transformed feature; the transform '
                     f'emits {", ".join(sorted(spec))}.')
  dtype = spec[label_key].dtype
  if dtype.is_floating:
    raise LabelError(
        f'label_key {label_key!r} is a float feature: it looks continuous, and a classifier '
        'needs integer class indices. Map the label to classes in your preprocessing_fn '
        '(tft.compute_and_apply_vocabulary), or choose a categorical label column.')
  # Counts do not depend on order, so files are read in parallel, and from IngestionTransform's
  # packed copy where there is one (a tenth of the time at 1.5 million rows).
  options = reading.IngestionOptions(shuffle_files=False, deterministic=False, cache='none',
                                     shuffle_buffer=0, compression=compression)
  dataset = reading.make_dataset(file_pattern, tf_transform_output, 1024, options,
                                 num_epochs=1, label_key=label_key, feature_keys=[])
  counts = collections.Counter()
  for _, values in dataset:
    counts.update(np.reshape(values.numpy(), [-1]).tolist())
  return counts


def check_counts(counts_by_split: Dict[str, collections.Counter], label_key: str,
                 label_column: Optional[str] = None,
                 num_classes: Optional[int] = None) -> None:
  """Refuses labels that can not train a classifier, naming the column and the count.

  Args:
    counts_by_split: Label value counts per split name (`train` must be there).
    label_key: The transformed label feature.
    label_column: The raw column, for messages.
    num_classes: The resolved class count, to check values against.

  Raises:
    LabelError: for fewer than two classes in train, a continuous-looking label,
      or values outside [0, num_classes) in any split.
  """
  column = f' (raw column {label_column!r})' if label_column else ''
  train = counts_by_split.get('train') or collections.Counter()
  rows = sum(train.values())
  if len(train) < 2:
    shown = ', '.join(f'{value!r} on {count} rows' for value, count in train.most_common(3))
    raise LabelError(
        f'label_key {label_key!r}{column} has {len(train)} class in the train split '
        f'({shown or "no rows"}); a classifier needs at least two. Check the label column, '
        'or give data with more than one class.')
  if len(train) > CONTINUOUS_MIN_DISTINCT and len(train) >= CONTINUOUS_FRACTION * rows:
    raise LabelError(
        f'label_key {label_key!r}{column} has {len(train)} distinct values on {rows} train '
        'rows: it looks continuous (a measurement, not a class). These components classify; '
        'bucketize the column into classes in your preprocessing_fn, or choose a categorical '
        'label column.')
  for split, counts in sorted(counts_by_split.items()):
    bad = sorted(value for value in counts if value < 0 or (
        num_classes is not None and value >= num_classes))
    if bad:
      raise LabelError(
          f'label_key {label_key!r}{column} holds {bad[:5]} in the {split} split, outside the '
          f'class indices [0, {num_classes if num_classes is not None else len(train)}). A '
          'value seen only outside the train split gets no class from a vocabulary built on '
          'train (-1 is its "unknown" index); build the label vocabulary over every split, '
          'or remove those rows.')


def unmapped_raw_values(raw_examples: Sequence[bytes], tf_transform_output, label_key: str,
                        label_column: str) -> List[str]:
  """Raw label values whose transformed label is negative (unknown to the vocabulary)."""
  raw_spec = tf_transform_output.raw_feature_spec()
  if label_column not in raw_spec:
    return []
  layer = tf_transform_output.transform_features_layer()
  found = set()
  for start in range(0, len(raw_examples), 1024):
    batch = tf.constant(list(raw_examples[start:start + 1024]))
    raw = tf.io.parse_example(batch, raw_spec)
    transformed = np.reshape(layer(raw)[label_key].numpy(), [-1])
    values = raw[label_column]
    if isinstance(values, tf.sparse.SparseTensor):
      values = tf.sparse.to_dense(values, default_value=b'' if values.dtype == tf.string
                                  else tf.cast(0, values.dtype))
    values = np.reshape(values.numpy(), [len(transformed), -1])[:, 0]
    for raw_value, index in zip(values, transformed):
      if index < 0:
        found.add(raw_value.decode() if isinstance(raw_value, bytes) else str(raw_value))
  return sorted(found)


def splits_present(examples_uri: str) -> List[str]:
  """Split names of an Examples artifact, from its `Split-<name>` folders."""
  names = [name.rstrip('/') for name in tf.io.gfile.listdir(examples_uri)]
  return sorted(name[len('Split-'):] for name in names if name.startswith('Split-'))


def class_names(tf_transform_output, label_key: str, label_column: str,
                num_classes: int) -> Optional[List[str]]:
  """The raw label value of each class index, when a vocabulary built the label.

  A TFT vocabulary maps raw values to class indices in file order. The file is looked
  up by the names a `preprocessing_fn` gives it most often: the transformed label's
  name, the raw column's, or plain `label`; one whose size is not the class count is
  not the label's.

  Returns:
    One name per class, or None when the label needs no vocabulary (integer classes).
  """
  for vocabulary_name in dict.fromkeys((label_key, label_column, DEFAULT_LABEL_KEY)):
    try:
      vocabulary = tf_transform_output.vocabulary_by_name(vocabulary_name)
    except (ValueError, OSError, KeyError):
      continue
    if len(vocabulary) == num_classes:
      return [value.decode('utf-8', 'replace') if isinstance(value, bytes) else str(value)
              for value in vocabulary]
  return None
