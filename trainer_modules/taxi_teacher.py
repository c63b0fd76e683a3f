"""Teacher module for the taxi data: a wide MLP over embedded and scaled features."""

import tf_keras
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base

HIDDEN_UNITS = (256, 128, 64)
DROPOUT = 0.3

# A teacher that overfits teaches its overfitting: stop when the eval loss stops falling
# and keep the best epoch. Short epochs at a lower learning rate let it stop near the
# best point (chosen on eval: at 1e-3 and 5 epochs the eval loss was lowest after the
# first and rose from there).
EARLY_STOPPING_PATIENCE = 3
TRAINING_DEFAULTS = {'epochs': 15, 'learning_rate': 3e-4}


# Called by run_fn below (the Distiller reads the exported teacher, not this).
def build_teacher(tf_transform_output: tft.TFTransformOutput, hyperparameters=None
                 ) -> tf_keras.Model:
  """Builds the taxi teacher, which outputs one logit (big tipper or not)."""
  return base.build_mlp(tf_transform_output, HIDDEN_UNITS, name='taxi_teacher',
                        dropout=float(base.hyperparameter(hyperparameters, 'dropout', DROPOUT)),
                        **base.label_settings(hyperparameters))


# Called by Trainer / DistributedTrainer.
def run_fn(fn_args):
  """Trains the taxi teacher and exports it with raw-example serving signatures."""
  base.train_and_export(fn_args, build_teacher, 'taxi_teacher',
                        early_stopping_patience=EARLY_STOPPING_PATIENCE,
                        defaults=TRAINING_DEFAULTS)
