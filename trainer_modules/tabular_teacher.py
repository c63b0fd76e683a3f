"""Teacher module for any CSV: an MLP built from the transformed feature spec."""

import tf_keras
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base

HIDDEN_UNITS = (128, 64)

# A teacher that overfits teaches its overfitting: stop when the eval loss stops falling
# and keep the best epoch.
EARLY_STOPPING_PATIENCE = 3


# Called by run_fn below (the Distiller reads the exported teacher, not this).
def build_teacher(tf_transform_output: tft.TFTransformOutput, hyperparameters=None
                 ) -> tf_keras.Model:
  """Builds an MLP over every transformed feature, one logit per class."""
  return base.build_mlp(tf_transform_output, HIDDEN_UNITS, dropout=0.1, name='tabular_teacher',
                        **base.label_settings(hyperparameters))


# Called by Trainer / DistributedTrainer.
def run_fn(fn_args):
  """Trains the tabular teacher and exports it with raw-example serving signatures."""
  base.train_and_export(fn_args, build_teacher, 'tabular_teacher',
                        early_stopping_patience=EARLY_STOPPING_PATIENCE)
