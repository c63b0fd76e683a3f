"""What the built-in student makes of each transformed feature, read off a stand-in transform
output and TFDV statistics, down to the int8 flatbuffer it must convert to."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_metadata.proto.v0 import statistics_pb2

from tfx_distillery.components.quantizer import conversion
from tfx_distillery.trainer_modules import builtin_student

# TFX's taxi transform passes census tracts through as they are: 11-digit numbers with no
# vocabulary and no domain.
TRACTS = np.array([17031081500, 17031839100, 17031320100, 17031081700, 17031281900])


class _TransformOutput:
  """The three things the built-in student asks of a TFTransformOutput."""

  def __init__(self, feature_spec):
    self._feature_spec = feature_spec
    self.transformed_metadata = type('Metadata', (), {'schema': schema_pb2.Schema()})()

  def transformed_feature_spec(self):
    return dict(self._feature_spec)

  def num_buckets_for_transformed_feature(self, name):
    raise ValueError(f'{name} has no vocabulary')


def write_statistics(folder, numbers, strings=None):
  statistics = statistics_pb2.DatasetFeatureStatisticsList()
  dataset = statistics.datasets.add(num_examples=100)
  for name, (low, high, mean, spread) in numbers.items():
    feature = dataset.features.add()
    feature.path.step.append(name)
    feature.num_stats.min, feature.num_stats.max = low, high
    feature.num_stats.mean, feature.num_stats.std_dev = mean, spread
  # A string's values and their counts, as TFDV's rank histogram gives them.
  for name, (counts, unique) in (strings or {}).items():
    feature = dataset.features.add()
    feature.path.step.append(name)
    feature.string_stats.unique = unique
    feature.string_stats.common_stats.tot_num_values = 100
    for value, count in counts.items():
      feature.string_stats.rank_histogram.buckets.add(label=value, sample_count=count)
  os.makedirs(os.path.join(folder, 'Split-train'))
  with open(os.path.join(folder, 'Split-train', 'FeatureStats.pb'), 'wb') as handle:
    handle.write(statistics.SerializeToString())
  return str(folder)


def test_an_integer_id_with_no_vocabulary_is_hashed_embedded_and_still_a_number(tmp_path):
  spec = {'tract_xf': tf.io.FixedLenFeature([], tf.int64),
          'area_xf': tf.io.FixedLenFeature([], tf.int64),
          'grid_xf': tf.io.FixedLenFeature([2, 3], tf.int64),
          'fare_xf': tf.io.FixedLenFeature([], tf.float32),
          'label': tf.io.FixedLenFeature([], tf.int64)}
  statistics_uri = write_statistics(tmp_path / 'statistics', {
      'tract_xf': (TRACTS.min(), TRACTS.max(), TRACTS.mean(), TRACTS.std()),
      'area_xf': (1, 77, 30.0, 20.0), 'grid_xf': (0, 9, 4.5, 2.9),
      'fare_xf': (-2.0, 3.0, 0.0, 1.0)})
  inputs, columns, plan = builtin_student.feature_columns(_TransformOutput(spec), 'label',
                                                          statistics_uri)
  assert plan['tract_xf'] == (
      f'id with no vocabulary or domain ({TRACTS.min()} to {TRACTS.max()}): hashed into '
      f'{builtin_student.HASH_BUCKETS} buckets, embedded {builtin_student.HASH_DIMENSION}, '
      'and a normalised number')
  assert plan['area_xf'].startswith('78 ids, embedded')  # A small range: embedded by it.
  # A nested list of ids (2 x 3) is embedded whole, not refused with a reshape traceback.
  assert plan['grid_xf'] == '10 ids, embedded 4'
  assert plan['fare_xf'] == 'number'
  logits = tf_keras.layers.Dense(1)(tf_keras.layers.Concatenate()(columns))
  model = tf_keras.Model(inputs, logits)
  features = {'tract_xf': TRACTS, 'area_xf': np.array([1, 5, 77, 3, 8]),
              'grid_xf': np.arange(30).reshape(5, 2, 3) % 10,
              'fare_xf': np.linspace(-1, 1, 5).astype(np.float32)}
  # Distinct tracts land in distinct buckets here (a prime spreads ids ending alike).
  hashed = model.get_layer('tract_xf_hash')(tf.constant(TRACTS)).numpy()
  assert len(set(hashed)) == len(TRACTS) and hashed.min() >= 0
  assert hashed.max() < builtin_student.HASH_BUCKETS
  predicted = model.predict(features, verbose=0)
  assert predicted.shape == (5, 1)
  # The Pruner and the Quantizer load the student back, custom layers and all.
  model.save(str(tmp_path / 'student'), save_format='tf')
  loaded = tf_keras.models.load_model(str(tmp_path / 'student'), compile=False)
  assert loaded.get_layer('tract_xf_hash').num_buckets == builtin_student.HASH_BUCKETS
  np.testing.assert_allclose(loaded.predict(features, verbose=0), predicted, rtol=1e-6)

  def representative():
    for index in range(5):
      yield {name: value[index:index + 1] for name, value in features.items()}

  # The int8 flatbuffer takes it with builtin ops alone (FLOOR_MOD, GATHER).
  flatbuffer = conversion.convert(model, 'full_integer', representative, strict_int8=False)
  assert conversion.tensor_dtypes(flatbuffer).get('int8', 0) > 0
  interpreter = tf.lite.Interpreter(model_content=flatbuffer)
  assert not [op for op in interpreter._get_ops_details()  # pylint: disable=protected-access
              if op['op_name'].startswith('Flex')]


def test_a_passed_through_string_is_embedded_by_its_frequent_values_down_to_int8(tmp_path):
  spec = {'payment_xf': tf.io.FixedLenFeature([], tf.string),
          'tract_xf': tf.io.FixedLenFeature([], tf.string),
          'fare_xf': tf.io.FixedLenFeature([], tf.float32),
          'label': tf.io.FixedLenFeature([], tf.int64)}
  statistics_uri = write_statistics(
      tmp_path / 'statistics', {'fare_xf': (-2.0, 3.0, 0.0, 1.0)},
      {'payment_xf': ({'Cash': 60, 'Credit Card': 35, 'No Charge': 3}, 4),
       # Empty in every row of a sample (TFX's taxi census tracts): one value, nothing to learn.
       'tract_xf': ({'': 100}, 1)})
  inputs, columns, plan = builtin_student.feature_columns(_TransformOutput(spec), 'label',
                                                          statistics_uri)
  assert plan['tract_xf'].startswith('left out: a string with 1 value') and (
      'tract_xf' not in inputs)
  assert plan['payment_xf'] == ('string with no vocabulary: its 3 most frequent values (of 4, '
                                '98% of its values), embedded 3; the others share one id')
  logits = tf_keras.layers.Dense(1)(tf_keras.layers.Concatenate()(columns))
  model = tf_keras.Model(inputs, logits)
  features = {'payment_xf': np.array([b'Cash', b'Credit Card', b'Dispute', b'No Charge']),
              'fare_xf': np.linspace(-1, 1, 4).astype(np.float32)}
  # Each kept value has its own id (1 + its rank); one the vocabulary lacks gets 0.
  ids = model.get_layer('payment_xf_lookup')(tf.constant(features['payment_xf'])).numpy()
  assert ids.tolist() == [1, 2, 0, 3]
  predicted = model.predict(features, verbose=0)
  model.save(str(tmp_path / 'student'), save_format='tf')
  loaded = tf_keras.models.load_model(str(tmp_path / 'student'), compile=False)
  np.testing.assert_allclose(loaded.predict(features, verbose=0), predicted, rtol=1e-6)

  def representative():
    for index in range(4):
      yield {name: value[index:index + 1] for name, value in features.items()}

  # No hash op: EQUAL and ARG_MAX are TFLite builtins, so the int8 flatbuffer needs no Flex.
  flatbuffer = conversion.convert(model, 'full_integer', representative, strict_int8=False)
  interpreter = tf.lite.Interpreter(model_content=flatbuffer)
  assert not [op for op in interpreter._get_ops_details()  # pylint: disable=protected-access
              if op['op_name'].startswith('Flex')]
  runner = interpreter.get_signature_runner()
  served = runner(**{name: value[2:3] for name, value in features.items()})
  assert np.asarray(next(iter(served.values()))).shape == (1, 1)


def test_a_string_too_varied_for_a_vocabulary_is_refused_by_name(tmp_path):
  spec = {'comment_xf': tf.io.FixedLenFeature([], tf.string),
          'label': tf.io.FixedLenFeature([], tf.int64)}
  # Free text: every value is seen about once, so 1,000 kept values cover too little.
  statistics_uri = write_statistics(
      tmp_path / 'statistics', {},
      {'comment_xf': ({f'a comment number {index}': 1 for index in range(40)}, 100)})
  with pytest.raises(builtin_student.UnencodableFeature,
                     match=r"'comment_xf' is a string with 100 distinct values.*cover 40%"):
    builtin_student.feature_columns(_TransformOutput(spec), 'label', statistics_uri)
