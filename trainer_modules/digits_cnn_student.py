"""The digits student that `distillery run --dataset digits` ships: a small CNN.

The 8-unit network of `digits_student.py` (610 parameters) is the smallest student of the
distillation experiments, and no student `distillery run` can push: on 363 test digits it
scores about 0.93 against the CNN teacher's 0.99, and the gate allows 0.01. A one-layer
network of any width the size search tries stops near 0.97. Two small convolutions see
the strokes as the teacher does, in about 4% of its parameters.
"""

import tf_keras
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base
from tfx_distillery.trainer_modules import digits_transform

FILTERS = 16


def build_student(tf_transform_output: tft.TFTransformOutput, hyperparameters=None
                 ) -> tf_keras.Model:
  """8x8 pixels -> two 3x3 convolutions (FILTERS, 2 x FILTERS) with pooling -> logits.

  At the default 16 filters: 6,090 parameters, 4% of the teacher's 151,306. The
  hyperparameter `filters` changes the width.
  """
  pixels = tf_keras.Input(shape=(64,), name=digits_transform.PIXELS_KEY)
  filters = int(base.hyperparameter(hyperparameters, 'filters', FILTERS))
  image = tf_keras.layers.Reshape((8, 8, 1))(pixels)
  hidden = tf_keras.layers.Conv2D(filters, 3, padding='same', activation='relu')(image)
  hidden = tf_keras.layers.MaxPooling2D()(hidden)
  hidden = tf_keras.layers.Conv2D(2 * filters, 3, padding='same', activation='relu')(hidden)
  hidden = tf_keras.layers.MaxPooling2D()(hidden)
  hidden = tf_keras.layers.Flatten()(hidden)
  logits = tf_keras.layers.Dense(
      base.label_settings(hyperparameters)['num_outputs'] or base.output_units(tf_transform_output),
      name='logits')(hidden)
  return tf_keras.Model(inputs={digits_transform.PIXELS_KEY: pixels}, outputs=logits,
                        name='digits_cnn_student')
