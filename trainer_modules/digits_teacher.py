"""Teacher module for the digits: a small CNN over the 8x8 image."""

import tf_keras
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base
from tfx_distillery.trainer_modules import digits_transform

# A teacher that overfits teaches its overfitting: stop when the eval loss stops falling
# and keep the best epoch.
EARLY_STOPPING_PATIENCE = 3
DROPOUT = 0.2
TRAINING_DEFAULTS = {'epochs': 15}


# Called by run_fn below (the Distiller reads the exported teacher, not this).
def build_teacher(tf_transform_output: tft.TFTransformOutput, hyperparameters=None
                 ) -> tf_keras.Model:
  """Builds a CNN (about 150k parameters) that outputs ten logits."""
  pixels = tf_keras.Input(shape=(64,), name=digits_transform.PIXELS_KEY)
  image = tf_keras.layers.Reshape((8, 8, 1))(pixels)
  hidden = tf_keras.layers.Conv2D(32, 3, padding='same', activation='relu')(image)
  hidden = tf_keras.layers.Conv2D(64, 3, padding='same', activation='relu')(hidden)
  hidden = tf_keras.layers.MaxPooling2D()(hidden)
  hidden = tf_keras.layers.Flatten()(hidden)
  hidden = tf_keras.layers.Dense(128, activation='relu')(hidden)
  hidden = tf_keras.layers.Dropout(
      float(base.hyperparameter(hyperparameters, 'dropout', DROPOUT)))(hidden)
  logits = tf_keras.layers.Dense(
      base.label_settings(hyperparameters)['num_outputs'] or base.output_units(tf_transform_output),
      name='logits')(hidden)
  return tf_keras.Model(inputs={digits_transform.PIXELS_KEY: pixels}, outputs=logits,
                        name='digits_teacher')


# Called by Trainer / DistributedTrainer.
def run_fn(fn_args):
  """Trains the digits teacher and exports it with raw-example serving signatures."""
  base.train_and_export(fn_args, build_teacher, 'digits_teacher',
                        early_stopping_patience=EARLY_STOPPING_PATIENCE,
                        defaults=TRAINING_DEFAULTS)
