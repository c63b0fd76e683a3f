"""Teacher module for the taxi data: a wide MLP over embedded and scaled features."""

import tf_keras
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base

HIDDEN_UNITS = (256, 128, 64)


# Called by run_fn below (the Distiller reads the exported teacher, not this).
def build_teacher(tf_transform_output: tft.TFTransformOutput, hyperparameters=None
                 ) -> tf_keras.Model:
  """Builds the taxi teacher, which outputs one logit (big tipper or not)."""
  return base.build_mlp(tf_transform_output, HIDDEN_UNITS, dropout=0.1, name='taxi_teacher',
                        **base.label_settings(hyperparameters))


# Called by Trainer / DistributedTrainer.
def run_fn(fn_args):
  """Trains the taxi teacher and exports it with raw-example serving signatures."""
  base.train_and_export(fn_args, build_teacher, 'taxi_teacher')
