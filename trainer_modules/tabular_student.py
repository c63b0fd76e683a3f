"""Student module for any CSV: one narrow hidden layer over the transformed features."""

import tf_keras
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base

HIDDEN_UNITS = (8,)
MAX_EMBEDDING_DIM = 2


# Called by the Distiller.
def build_student(tf_transform_output: tft.TFTransformOutput, hyperparameters=None
                 ) -> tf_keras.Model:
  """A small MLP, one logit per class (one for a binary label)."""
  return base.build_mlp(tf_transform_output, HIDDEN_UNITS, name='tabular_student',
                        max_embedding_dim=MAX_EMBEDDING_DIM,
                        **base.label_settings(hyperparameters))
