"""Transform module for MNIST-1D: one 40-step signal feature, ten classes."""

import tensorflow as tf

from tfx_distillery.trainer_modules import base

SIGNAL_LENGTH = 40
SIGNAL_KEYS = tuple(f'x_{index:02d}' for index in range(SIGNAL_LENGTH))
SIGNAL_KEY = base.transformed_name('signal')
LABEL_COLUMN = 'label'
NUM_CLASSES = 10


# Called by Transform (and IngestionTransform) once per batch of raw examples.
def preprocessing_fn(inputs):
  """Stacks the 40 columns into one [40] signal; the package already standardized it."""
  signal = tf.stack(
      [tf.cast(base.fill_in_missing(inputs[key]), tf.float32) for key in SIGNAL_KEYS], axis=1)
  label = tf.cast(base.fill_in_missing(inputs[LABEL_COLUMN]), tf.int64)
  return {SIGNAL_KEY: signal, base.LABEL_KEY: base.set_label_domain(label, NUM_CLASSES)}
