"""Transform module for scikit-learn's 8x8 digits: one 64-pixel feature, ten classes."""

import tensorflow as tf

from tfx_distillery.trainer_modules import base

PIXEL_KEYS = tuple(f'pixel_{index:02d}' for index in range(64))
PIXELS_KEY = base.transformed_name('pixels')
LABEL_COLUMN = 'label'
NUM_CLASSES = 10
MAX_INTENSITY = 16.0


# Called by Transform (and IngestionTransform) once per batch of raw examples.
def preprocessing_fn(inputs):
  """Stacks the pixel columns into one [64] feature scaled to [0, 1]."""
  pixels = tf.stack(
      [tf.cast(base.fill_in_missing(inputs[key]), tf.float32) for key in PIXEL_KEYS], axis=1)
  label = tf.cast(base.fill_in_missing(inputs[LABEL_COLUMN]), tf.int64)
  return {
      PIXELS_KEY: pixels / MAX_INTENSITY,
      base.LABEL_KEY: base.set_label_domain(label, NUM_CLASSES),
  }
