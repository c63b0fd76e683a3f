"""A student with three logits, for a binary label: the Distiller must refuse it."""

import tf_keras

from tfx_distillery.trainer_modules import base


# Called by the Distiller.
def build_student(tf_transform_output, hyperparameters=None):
  del hyperparameters
  inputs = base.feature_inputs(tf_transform_output)
  logits = tf_keras.layers.Dense(3)(base.encode_features(inputs, tf_transform_output))
  return tf_keras.Model(inputs, logits)
