"""The one shape rule: a unit axis added or dropped, then a cast; anything else refused by name."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import shapes
from tfx_distillery.components.quantizer import conversion

WANTS_COLUMN = shapes.InputSpec('fare_xf', (None, 1), 'float32')
WANTS_VECTOR = shapes.InputSpec('fare_xf', (None,), 'int32')


def test_a_unit_axis_is_added_or_dropped_then_cast():
  added = shapes.conform_one('fare_xf', np.array([1, 2, 3], np.int64), WANTS_COLUMN, 'here')
  assert added.shape == (3, 1) and added.dtype == np.float32
  dropped = shapes.conform_one('fare_xf', np.array([[1.0], [2.0]]), WANTS_VECTOR, 'here')
  assert dropped.shape == (2,) and dropped.dtype == np.int32
  tensor = shapes.conform_one('fare_xf', tf.constant([1, 2], tf.int64), WANTS_COLUMN, 'here')
  assert tensor.shape == (2, 1) and tensor.dtype == tf.float32


def test_another_length_is_refused_naming_feature_both_shapes_and_who():
  with pytest.raises(shapes.FeatureShapeError) as error:
    shapes.conform_one('fare_xf', np.zeros((4, 3)), WANTS_COLUMN, 'Distiller, the teacher')
  message = str(error.value)
  assert "'fare_xf'" in message and '(4, 3)' in message and '(None, 1)' in message
  assert message.startswith('Distiller, the teacher')


def test_sparse_where_the_model_wants_dense_is_refused():
  sparse = tf.sparse.SparseTensor([[0, 0]], [1.0], [2, 1])
  with pytest.raises(shapes.FeatureShapeError, match="'fare_xf' is a SparseTensor"):
    shapes.conform({'fare_xf': sparse}, {'fare_xf': WANTS_COLUMN}, 'Pruner')


def test_a_missing_feature_is_refused_naming_it():
  with pytest.raises(shapes.FeatureShapeError, match=r"reads \['fare_xf'\]"):
    shapes.conform({'other': np.zeros(2)}, {'fare_xf': WANTS_COLUMN}, 'AccuracyGate')


def test_numbers_written_as_text_are_read_and_other_text_refused():
  # TFX's taxi data has an always-empty column that infers as a string feature.
  read = shapes.conform_one('tract', np.array([b'', b'7']), WANTS_VECTOR, 'here')
  assert read.tolist() == [0, 7]
  tensor = shapes.conform_one('tract', tf.constant(['', '7']), WANTS_VECTOR, 'here')
  assert tensor.numpy().tolist() == [0, 7]
  with pytest.raises(shapes.FeatureShapeError, match="text such as 'north'"):
    shapes.conform_one('tract', np.array([b'north']), WANTS_VECTOR, 'here')


def stock_style_model():
  """A Keras model whose inputs are all (None, 1), as TFX's taxi module builds them."""
  inputs = {name: tf_keras.Input(shape=(1,), name=name, dtype=dtype)
            for name, dtype in (('fare_xf', tf.float32), ('company_xf', tf.int32))}
  joined = tf_keras.layers.Concatenate()([inputs['fare_xf'],
                                          tf.cast(inputs['company_xf'], tf.float32)])
  return tf_keras.Model(inputs, tf_keras.layers.Dense(1)(joined))


def test_a_model_saved_by_tf_saved_model_save_takes_mixed_ranks(tmp_path):
  # The stock Trainer's save: the traced call takes exactly (None, 1) and int32.
  model = stock_style_model()
  features = {'fare_xf': np.array([[0.5], [1.5]], np.float32),
              'company_xf': np.array([3, 4], np.int64)}  # (batch,) int64, as Transform emits.
  expected = model({'fare_xf': features['fare_xf'],
                    'company_xf': features['company_xf'].reshape(-1, 1).astype(np.int32)})
  tf.saved_model.save(model, str(tmp_path / 'stock'))
  scorer = measuring.load_scorer(str(tmp_path / 'stock'))
  assert scorer.format == 'saved_model'
  np.testing.assert_allclose(scorer.scores(features), expected, rtol=1e-5)
  with pytest.raises(shapes.FeatureShapeError, match="'company_xf' is \\(2, 2\\)"):
    scorer.scores({**features, 'company_xf': np.zeros((2, 2), np.int64)})


def test_tflite_calibration_gets_the_ranks_the_model_was_traced_with():
  # Fed at rank 1, the calibrator resized the (1, 1) inputs and CONCATENATION failed.
  model = stock_style_model()

  def representative_features():
    for value in range(8):
      yield {'fare_xf': np.array([value / 8], np.float32),
             'company_xf': np.array([value], np.int64)}

  flatbuffer = conversion.convert(model, 'full_integer', representative_features)
  assert conversion.tensor_dtypes(flatbuffer).get('int8', 0) > 0
