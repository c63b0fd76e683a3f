"""A user's own preprocessing_fn: its label is `variety_xf`, from the string column `variety`."""

import tensorflow as tf
import tensorflow_transform as tft

LABEL_COLUMN = 'variety'


# Called by Transform.
def preprocessing_fn(inputs):
  """Z-scores the measurements and maps the variety names to class indices."""
  outputs = {f'{key}_xf': tft.scale_to_z_score(tf.reshape(value, [-1]))
             for key, value in inputs.items() if key != LABEL_COLUMN}
  outputs['variety_xf'] = tft.compute_and_apply_vocabulary(
      tf.reshape(inputs[LABEL_COLUMN], [-1]), vocab_filename=LABEL_COLUMN)
  return outputs
