"""The transform modules: labels, class counts and feature shapes the trainers rely on."""

import numpy as np
import pytest
import tensorflow as tf

from tests import helpers
from tfx_distillery.trainer_modules import base
from tfx_distillery.trainer_modules import digits_transform
from tfx_distillery.trainer_modules import tabular_transform
from tfx_distillery.trainer_modules import taxi_transform


def read_all(tf_transform_output, pattern):
  from tfx_distillery.components.common import reading
  dataset = reading.make_dataset(pattern, tf_transform_output, 1000, label_key=None,
                                 num_epochs=1,
                                 options=reading.IngestionOptions(shuffle_buffer=0,
                                                                  deterministic=True,
                                                                  shuffle_files=False))
  return next(iter(dataset))


@pytest.mark.parametrize('labels, expected_classes', [
    (['setosa', 'virginica', 'versicolor'], 3),
    ([0, 1, 2, 3], 4),
])
def test_tabular_label_becomes_class_indices_for_string_and_integer_classes(
    tmp_path, labels, expected_classes):
  label_dtype = tf.string if isinstance(labels[0], str) else tf.int64
  raw_spec = {'size': tf.io.FixedLenFeature([], tf.float32),
              'colour': tf.io.FixedLenFeature([], tf.string),
              'species': tf.io.FixedLenFeature([], label_dtype)}
  rows = [{'size': float(index), 'colour': ['red', 'blue'][index % 2],
           'species': labels[index % len(labels)]} for index in range(40)]
  output, pattern = helpers.run_transform(
      lambda inputs: tabular_transform.preprocessing_fn(inputs, {'label_column': 'species'}),
      rows, raw_spec, str(tmp_path))
  assert base.num_classes(output) == expected_classes
  batch = read_all(output, pattern)
  assert set(batch) == {'size_xf', 'colour_xf', base.LABEL_KEY}
  assert set(batch[base.LABEL_KEY].numpy()) == set(range(expected_classes))
  assert abs(float(np.mean(batch['size_xf']))) < 1e-4  # z-scored
  assert batch['colour_xf'].dtype == tf.int64


def test_tabular_transform_names_a_missing_label_column():
  with pytest.raises(ValueError, match="label_column 'species' is not a column"):
    tabular_transform.preprocessing_fn({'size': tf.constant([[1.0]])},
                                       {'label_column': 'species'})


def test_digits_transform_stacks_64_pixels_scaled_to_unit_range(tmp_path):
  raw_spec = {key: tf.io.FixedLenFeature([], tf.int64) for key in digits_transform.PIXEL_KEYS}
  raw_spec['label'] = tf.io.FixedLenFeature([], tf.int64)
  rows = []
  for index in range(20):
    row = {key: (index + position) % 17 for position, key in enumerate(digits_transform.PIXEL_KEYS)}
    row['label'] = index % 10
    rows.append(row)
  output, pattern = helpers.run_transform(digits_transform.preprocessing_fn, rows, raw_spec,
                                          str(tmp_path))
  batch = read_all(output, pattern)
  assert batch[digits_transform.PIXELS_KEY].shape == (20, 64)
  assert float(tf.reduce_max(batch[digits_transform.PIXELS_KEY])) == 1.0
  assert base.num_classes(output) == 10


def test_taxi_label_is_big_tipper_and_missing_values_are_filled(tmp_path):
  raw_spec = {key: tf.io.VarLenFeature(tf.float32) for key in
              taxi_transform.NUMERIC_FEATURE_KEYS + taxi_transform.LOCATION_FEATURE_KEYS}
  raw_spec.update({key: tf.io.VarLenFeature(tf.int64)
                   for key in taxi_transform.CATEGORICAL_FEATURE_KEYS})
  raw_spec.update({key: tf.io.VarLenFeature(tf.string)
                   for key in taxi_transform.STRING_FEATURE_KEYS})
  raw_spec['tips'] = tf.io.FixedLenFeature([], tf.float32)
  rows = []
  for index in range(30):
    row = {key: [] for key in raw_spec}
    row.update({'fare': [10.0], 'trip_miles': [float(index)], 'payment_type': ['Cash'],
                'trip_start_hour': [index % 24], 'tips': 3.0 if index % 3 == 0 else 1.0})
    rows.append(row)
  output, pattern = helpers.run_transform(taxi_transform.preprocessing_fn, rows, raw_spec,
                                          str(tmp_path))
  batch = read_all(output, pattern)
  assert base.num_classes(output) == 2
  # Tip 3.0 on a 10.0 fare is above 20%, tip 1.0 is not.
  assert int(tf.reduce_sum(batch[base.LABEL_KEY])) == 10
  assert batch['company_xf'].shape == (30,)  # all missing, filled in
