"""A student that feeds its inputs at 10^12 times their size, as a census tract of about
1.7e10 goes in when nothing scales it: its loss runs away, and the Distiller must refuse it."""

import tf_keras

from tfx_distillery.trainer_modules import base


# Called by the Distiller.
def build_student(tf_transform_output, hyperparameters=None):
  inputs = base.feature_inputs(tf_transform_output)
  encoded = base.encode_features(inputs, tf_transform_output)
  unscaled = tf_keras.layers.Rescaling(1e12)(encoded)
  outputs = base.label_settings(hyperparameters)['num_outputs'] or 1
  return tf_keras.Model(inputs, tf_keras.layers.Dense(outputs)(unscaled))
