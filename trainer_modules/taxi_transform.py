"""Transform module for the Chicago taxi data: the "big tipper" label (tip > 20% of fare).

Every step uses ops that TFLite has as builtins, so the Quantizer can ship this
transform and the model in one flatbuffer over raw columns (`model_raw.tflite`).
"""

import tensorflow as tf
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base

NUMERIC_FEATURE_KEYS = ('trip_miles', 'fare', 'trip_seconds')
LOCATION_FEATURE_KEYS = ('pickup_latitude', 'pickup_longitude', 'dropoff_latitude',
                         'dropoff_longitude')
# Integer codes (hours, areas, census tracts) whose values are labels, not amounts, and the
# ids each gets: one per code below the count (hours 0-23, days 1-7, months 1-12, areas
# 1-77); census tracts (11-digit codes) share ids by remainder, a prime count spreading them.
CATEGORICAL_FEATURE_BUCKETS = {'trip_start_hour': 25, 'trip_start_day': 9,
                               'trip_start_month': 14, 'pickup_census_tract': 1010,
                               'dropoff_census_tract': 1010, 'pickup_community_area': 80,
                               'dropoff_community_area': 80}
CATEGORICAL_FEATURE_KEYS = tuple(CATEGORICAL_FEATURE_BUCKETS)
STRING_FEATURE_KEYS = ('payment_type', 'company')
LABEL_COLUMN = 'tips'
LOCATION_BUCKETS = 10
VOCABULARY_SIZE = 1000


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
    outputs[base.transformed_name(key)] = base.quantile_buckets(
        tf.cast(base.fill_in_missing(inputs[key]), tf.float32), LOCATION_BUCKETS)
  for key, buckets in CATEGORICAL_FEATURE_BUCKETS.items():
    outputs[base.transformed_name(key)] = base.category_ids(inputs[key], buckets)
  for key in STRING_FEATURE_KEYS:
    outputs[base.transformed_name(key)] = base.vocabulary_ids(inputs[key], VOCABULARY_SIZE)

  fare = tf.cast(base.fill_in_missing(inputs['fare']), tf.float32)
  tips = tf.cast(base.fill_in_missing(inputs[LABEL_COLUMN]), tf.float32)
  big_tipper = tf.cast(tips > fare * 0.2, tf.int64)
  outputs[base.LABEL_KEY] = base.set_label_domain(big_tipper, 2)
  return outputs
