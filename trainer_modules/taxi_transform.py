"""Transform module for the Chicago taxi data: the "big tipper" label (tip > 20% of fare)."""

import tensorflow as tf
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base

NUMERIC_FEATURE_KEYS = ('trip_miles', 'fare', 'trip_seconds')
LOCATION_FEATURE_KEYS = ('pickup_latitude', 'pickup_longitude', 'dropoff_latitude',
                         'dropoff_longitude')
# Integer codes (hours, areas, census tracts) whose values are labels, not amounts.
CATEGORICAL_FEATURE_KEYS = ('trip_start_hour', 'trip_start_day', 'trip_start_month',
                            'pickup_census_tract', 'dropoff_census_tract',
                            'pickup_community_area', 'dropoff_community_area')
STRING_FEATURE_KEYS = ('payment_type', 'company')
LABEL_COLUMN = 'tips'
LOCATION_BUCKETS = 10
VOCABULARY_SIZE = 1000
OOV_BUCKETS = 10


# Called by Transform (and IngestionTransform) once per batch of raw examples.
def preprocessing_fn(inputs):
  """Maps raw taxi columns to model features and the binary label.

  Args:
    inputs: Raw columns, dense or sparse where values are missing.

  Returns:
    Transformed features (`<column>_xf`) and `label`.
  """
  outputs = {}
  for key in NUMERIC_FEATURE_KEYS:
    outputs[base.transformed_name(key)] = tft.scale_to_z_score(
        tf.cast(base.fill_in_missing(inputs[key]), tf.float32))
  for key in LOCATION_FEATURE_KEYS:
    outputs[base.transformed_name(key)] = tft.bucketize(
        tf.cast(base.fill_in_missing(inputs[key]), tf.float32), LOCATION_BUCKETS)
  for key in CATEGORICAL_FEATURE_KEYS:
    outputs[base.transformed_name(key)] = tft.compute_and_apply_vocabulary(
        base.as_category_strings(inputs[key]),
        top_k=VOCABULARY_SIZE, num_oov_buckets=OOV_BUCKETS, vocab_filename=key)
  for key in STRING_FEATURE_KEYS:
    outputs[base.transformed_name(key)] = tft.compute_and_apply_vocabulary(
        base.fill_in_missing(inputs[key]), top_k=VOCABULARY_SIZE,
        num_oov_buckets=OOV_BUCKETS, vocab_filename=key)

  fare = tf.cast(base.fill_in_missing(inputs['fare']), tf.float32)
  tips = tf.cast(base.fill_in_missing(inputs[LABEL_COLUMN]), tf.float32)
  big_tipper = tf.cast(tips > fare * 0.2, tf.int64)
  outputs[base.LABEL_KEY] = base.set_label_domain(big_tipper, 2)
  return outputs
