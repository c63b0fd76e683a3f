"""The Distiller's built-in student (`module_file=None`): built from the transformed schema alone.

A stock pipeline (TFX's taxi, penguin or imdb example) needs no new module file:
- float features go in dense, flattened;
- an integer feature with a vocabulary or integer domain (or, failing those, a
  maximum in the transformed statistics) is embedded, sized from its buckets;
- a fixed-length integer sequence (a padded text) is embedded and averaged;
- an integer id with no vocabulary or domain and a wide range (a census tract) is hashed
  into HASH_BUCKETS and embedded, and goes in as a normalised number too (ids are often
  numbered in order: tracts by area);
- an integer with no statistics goes in as a number;
- a string passed through with no vocabulary is embedded by its most frequent values in the
  statistics (at most STRING_VOCABULARY_LIMIT, the rest sharing one id); a string whose
  values are too many for that (free text) is refused by name before training;
- a sparse feature, a string with no statistics or one with a single value, is left out,
  with a warning.
One hidden layer of `hidden_units` (default 16), or the widest that fits in
`parameter_share` of the teacher's parameters.
"""

import os
from typing import Dict, List, Optional, Sequence, Tuple

import tensorflow as tf
import tf_keras
import tensorflow_transform as tft

from tfx_distillery.components.common import labels
from tfx_distillery.components.common import modeling
from tfx_distillery.components.common import progress
from tfx_distillery.trainer_modules import base

DEFAULT_HIDDEN_UNITS = (16,)
# Widths tried, narrowest first, when the size is a share of the teacher's parameters.
CANDIDATE_WIDTHS = (2, 4, 8, 16, 32, 64, 128, 256, 512)
MAX_EMBEDDING_DIM = 8
# Above this many ids, a range read from statistics alone (no vocabulary, no domain) is
# more likely a number or an identifier than a category: it goes in as a number.
MAX_STATISTICS_IDS = 1000
# Such a wide-ranged id is hashed into this many buckets (a prime: ids that end alike, such
# as census tracts ending in 00, would share a bucket modulo a round number), embedded in
# HASH_DIMENSION: 127 x 4 = 508 weights, small beside the size search's smallest students.
HASH_BUCKETS = 127
HASH_DIMENSION = 4
# A passed-through string keeps at most this many of its most frequent values (TFDV's rank
# histogram holds 1,000 by default); they must cover at least STRING_MIN_COVERAGE of its
# values, or the string is more like free text than a category, and is refused.
STRING_VOCABULARY_LIMIT = 1000
STRING_MIN_COVERAGE = 0.5


def feature_statistics(statistics_uri: Optional[str], kind: str) -> Dict[str, object]:
  """Each transformed feature's `kind` statistics (`num_stats` or `string_stats`) on the
  train split, by feature name; empty without statistics."""
  if not statistics_uri:
    return {}
  from tensorflow_metadata.proto.v0 import statistics_pb2  # pylint: disable=g-import-not-at-top
  path = labels.statistics_file(statistics_uri)
  if path is None:
    return {}
  statistics = statistics_pb2.DatasetFeatureStatisticsList()
  with tf.io.gfile.GFile(path, 'rb') as handle:
    statistics.ParseFromString(handle.read())
  return {feature.path.step[-1] if feature.path.step else feature.name: getattr(feature, kind)
          for dataset in statistics.datasets for feature in dataset.features
          if feature.HasField(kind)}


class UnencodableFeature(ValueError):
  """A transformed feature the built-in student has no encoding for (refused before training)."""


def string_vocabulary(name: str, found) -> Tuple[List[str], str]:
  """The values a passed-through string is embedded by, and what the plan says of them.

  Raises:
    UnencodableFeature: when its STRING_VOCABULARY_LIMIT most frequent values cover less
      than STRING_MIN_COVERAGE of its values: free text, which a vocabulary can not hold.
  """
  ranked = sorted(found.rank_histogram.buckets, key=lambda bucket: -bucket.sample_count)
  kept = ranked[:STRING_VOCABULARY_LIMIT]
  total = found.common_stats.tot_num_values or (
      found.common_stats.num_non_missing * found.common_stats.avg_num_values)
  covered = sum(bucket.sample_count for bucket in kept) / total if total else 0.0
  if not kept or covered < STRING_MIN_COVERAGE:
    raise UnencodableFeature(
        f'Distiller (built-in student): transformed feature {name!r} is a string with '
        f'{found.unique} distinct values (average length {found.avg_length:.0f}); its '
        f'{len(kept)} most frequent cover {covered:.0%} of its values, under the '
        f'{STRING_MIN_COVERAGE:.0%} a vocabulary of at most {STRING_VOCABULARY_LIMIT} must '
        f'cover: it reads as free text. Split it into tokens in the preprocessing_fn '
        f'(tf.strings.split, tft.compute_and_apply_vocabulary), leave it out of the '
        f'transform\'s outputs, or give the Distiller a module_file.')
  vocabulary = [bucket.label for bucket in kept]
  return vocabulary, (f'string with no vocabulary: its {len(vocabulary)} most frequent values '
                      f'(of {found.unique}, {covered:.0%} of its values)')


def integer_buckets(tf_transform_output: tft.TFTransformOutput, name: str, length: int,
                    statistics: Dict[str, object]) -> Optional[int]:
  """Ids of an integer feature: its vocabulary or domain, else statistics' max + 1, else None."""
  schema = tf_transform_output.transformed_metadata.schema
  for feature in schema.feature:
    if feature.name == name and feature.HasField('int_domain') and feature.int_domain.HasField(
        'max') and feature.int_domain.max >= 0:
      return int(feature.int_domain.max) + 1
  try:
    return int(tf_transform_output.num_buckets_for_transformed_feature(name))
  except ValueError:
    pass
  found = statistics.get(name)
  # A sequence of integers is token ids whatever their range; one integer is a category only
  # when its range is small.
  if found is not None and found.min >= 0 and (length > 1 or found.max < MAX_STATISTICS_IDS):
    return int(found.max) + 1
  return None


def feature_columns(tf_transform_output: tft.TFTransformOutput, label_key: str,
                    statistics_uri: Optional[str] = None):
  """(inputs by name, encoded columns, what each feature became) for every feature but the label."""
  inputs, columns, plan = {}, [], {}
  statistics = feature_statistics(statistics_uri, 'num_stats')
  strings = feature_statistics(statistics_uri, 'string_stats')
  for name, spec in sorted(tf_transform_output.transformed_feature_spec().items()):
    if name == label_key:
      continue
    # The student reads dense numbers and ids; it leaves out what it can not read, and says so.
    if not isinstance(spec, tf.io.FixedLenFeature):
      plan[name] = f'left out: {type(spec).__name__} (sparse); make it dense to use it'
      continue
    shape = tuple(spec.shape)
    length = int(shape[0]) if shape else 1
    if spec.dtype == tf.string:
      if name not in strings:
        plan[name] = ('left out: a string with no vocabulary and no statistics to make one '
                      'from (tft.compute_and_apply_vocabulary)')
        continue
      if strings[name].unique <= 1:
        # Nothing to learn from: a column empty in every row (TFX's taxi census tracts in a
        # sample where none is given) reads as one string.
        plan[name] = (f'left out: a string with {strings[name].unique} value in the '
                      'statistics (nothing to learn from)')
        continue
      vocabulary, described = string_vocabulary(name, strings[name])
      tensor = tf_keras.Input(shape=shape, name=name, dtype=tf.string)
      inputs[name] = tensor
      dimension = int(min(MAX_EMBEDDING_DIM, max(2, round((len(vocabulary) + 1) ** 0.25 * 2))))
      # Every value of a nested list too, each looked up and embedded.
      values = tf_keras.layers.Reshape((max(1, _elements(shape)),), name=f'{name}_values')(
          tensor)
      ids = modeling.StringIds(vocabulary, name=f'{name}_lookup')(values)
      embedded = tf_keras.layers.Embedding(len(vocabulary) + 1, dimension,
                                           name=f'{name}_embedding')(ids)
      columns.append(tf_keras.layers.Flatten(name=f'{name}_flat')(embedded))
      plan[name] = f'{described}, embedded {dimension}; the others share one id'
      continue
    buckets = integer_buckets(tf_transform_output, name, length, statistics) if (
        spec.dtype.is_integer) else None
    tensor = tf_keras.Input(shape=shape, name=name, dtype=spec.dtype)
    inputs[name] = tensor
    if buckets:
      dimension = int(min(MAX_EMBEDDING_DIM, max(2, round(buckets ** 0.25 * 2))))
      # Every id of a nested list too (a 2 x 3 grid is 6 ids), each embedded.
      ids = tf_keras.layers.Reshape((max(1, _elements(shape)),), name=f'{name}_ids')(tensor)
      # Out-of-range ids (-1 for unknown, unseen values) share an edge bucket rather than
      # fail the lookup.
      ids = modeling.ClipIds(buckets, name=f'{name}_clip')(ids)
      embedded = tf_keras.layers.Embedding(buckets, dimension, name=f'{name}_embedding')(ids)
      if len(shape) == 1 and length > 1:
        columns.append(tf_keras.layers.GlobalAveragePooling1D(name=f'{name}_pool')(embedded))
        plan[name] = (f'sequence of {length} ids, {buckets} buckets, embedded {dimension} '
                      'and averaged')
      else:
        columns.append(tf_keras.layers.Flatten(name=f'{name}_flat')(embedded))
        plan[name] = f'{buckets} ids, embedded {dimension}'
    else:
      found = statistics.get(name)
      # An integer that reached here has no vocabulary or domain and is too wide (or signed)
      # to embed by its range: an id such as a census tract, or a count.
      hashed = spec.dtype.is_integer and found is not None
      if hashed:
        ids = tf_keras.layers.Reshape((max(1, _elements(shape)),), name=f'{name}_ids')(tensor)
        ids = modeling.HashIds(HASH_BUCKETS, name=f'{name}_hash')(ids)
        embedded = tf_keras.layers.Embedding(HASH_BUCKETS, HASH_DIMENSION,
                                             name=f'{name}_embedding')(ids)
        columns.append(tf_keras.layers.Flatten(name=f'{name}_hashed_flat')(embedded))
      # Scaled by the statistics' mean and spread when there are some (an integer such as a
      # census tract would otherwise swamp the int8 range of everything it is joined with);
      # the layer also casts integers to floats.
      mean = float(found.mean) if found is not None else 0.0
      spread = float(found.std_dev) if found is not None and found.std_dev > 0 else 1.0
      scaled = tf_keras.layers.Normalization(mean=mean, variance=spread ** 2, axis=None,
                                             name=f'{name}_scaled')(tensor)
      columns.append(tf_keras.layers.Reshape((max(1, _elements(shape)),), name=f'{name}_flat')(
          scaled))
      plan[name] = 'number' if not shape or _elements(shape) == 1 else f'{_elements(shape)} numbers'
      if hashed:
        plan[name] = (f'id with no vocabulary or domain ({int(found.min)} to {int(found.max)}): '
                      f'hashed into {HASH_BUCKETS} buckets, embedded {HASH_DIMENSION}, and '
                      f'a normalised {plan[name]}')
  if not inputs:
    raise ValueError(f'Distiller (built-in student): the transform emits no dense numeric '
                     f'feature besides the label {label_key!r}: {plan}. Give a module_file.')
  left_out = {name: what for name, what in plan.items() if what.startswith('left out')}
  if left_out:
    progress.get_logger().warning('WARNING: Distiller (built-in student) leaves out %s',
                                  '; '.join(f'{name} ({what[10:]})'
                                            for name, what in left_out.items()))
  return inputs, columns, plan


def _elements(shape: Sequence[int]) -> int:
  count = 1
  for size in shape:
    count *= int(size)
  return count


def build(tf_transform_output: tft.TFTransformOutput, hidden_units: Sequence[int],
          label_key: str, num_outputs: int, statistics_uri: Optional[str] = None
         ) -> tf_keras.Model:
  """The student at one size: encoded features, hidden ReLU layers, logits."""
  inputs, columns, plan = feature_columns(tf_transform_output, label_key, statistics_uri)
  hidden = columns[0] if len(columns) == 1 else tf_keras.layers.Concatenate(name='features')(
      columns)
  for position, units in enumerate(hidden_units):
    hidden = tf_keras.layers.Dense(int(units), activation='relu', name=f'hidden_{position}')(
        hidden)
  logits = tf_keras.layers.Dense(num_outputs, name='logits')(hidden)
  model = tf_keras.Model(inputs=inputs, outputs=logits, name='builtin_student')
  model.feature_plan = plan  # Recorded in the Distiller's metrics.
  return model


def widths_for_share(build_at, teacher_parameters: int, share: float) -> List[int]:
  """The widest single hidden layer whose student has at most `share` of the teacher's weights."""
  budget = share * teacher_parameters
  chosen = [CANDIDATE_WIDTHS[0]]
  for width in CANDIDATE_WIDTHS:
    if build_at([width]).count_params() <= budget:
      chosen = [width]
  return chosen


# Called by the Distiller when module_file is None.
def build_student(tf_transform_output: tft.TFTransformOutput, hyperparameters=None
                 ) -> tf_keras.Model:
  """The built-in student; the Distiller passes its size and the label in `hyperparameters`."""
  hyperparameters = hyperparameters if isinstance(hyperparameters, dict) else {}
  settings = base.label_settings(hyperparameters)
  label_key = settings['label_key']
  num_outputs = settings['num_outputs'] or base.output_units(tf_transform_output, label_key)
  statistics_uri = hyperparameters.get('statistics_uri')

  def build_at(hidden_units):
    return build(tf_transform_output, hidden_units, label_key, num_outputs, statistics_uri)

  share = hyperparameters.get('student_parameter_share')
  teacher_parameters = hyperparameters.get('teacher_parameters')
  if share and teacher_parameters:
    hidden_units = widths_for_share(build_at, int(teacher_parameters), float(share))
  else:
    hidden_units = list(hyperparameters.get('student_hidden_units') or DEFAULT_HIDDEN_UNITS)
  return build_at(hidden_units)


def describe(model: tf_keras.Model) -> Dict[str, object]:
  """What the built-in student is, for metrics.json."""
  return {'hidden_units': [layer.units for layer in model.layers
                           if layer.name.startswith('hidden_')],
          'features': dict(getattr(model, 'feature_plan', {}))}
