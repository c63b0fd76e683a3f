"""Student module for the digits: a 610-parameter network, distilled from the CNN."""

import tf_keras
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base
from tfx_distillery.trainer_modules import digits_transform

HIDDEN_UNITS = 8


# Called by the Distiller.
def build_student(tf_transform_output: tft.TFTransformOutput, hyperparameters=None
                 ) -> tf_keras.Model:
  """64 pixels -> 8 hidden units -> 10 logits: 610 parameters, 0.4% of the teacher.

  The hyperparameter `hidden_units` (from a Tuner, or a HyperParameters artifact)
  changes the width.
  """
  pixels = tf_keras.Input(shape=(64,), name=digits_transform.PIXELS_KEY)
  width = int(base.hyperparameter(hyperparameters, 'hidden_units', HIDDEN_UNITS))
  hidden = tf_keras.layers.Dense(width, activation='relu')(pixels)
  logits = tf_keras.layers.Dense(
      base.label_settings(hyperparameters)['num_outputs'] or base.output_units(tf_transform_output),
      name='logits')(hidden)
  return tf_keras.Model(inputs={digits_transform.PIXELS_KEY: pixels}, outputs=logits,
                        name='digits_student')
