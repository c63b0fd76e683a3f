"""Student module for the taxi data: a narrow MLP, under a tenth of the teacher."""

import tf_keras
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base

HIDDEN_UNITS = (8,)
MAX_EMBEDDING_DIM = 2


# Called by the Distiller.
def build_student(tf_transform_output: tft.TFTransformOutput, hyperparameters=None
                 ) -> tf_keras.Model:
  """Small embeddings and one narrow hidden layer; outputs one logit."""
  return base.build_mlp(tf_transform_output, HIDDEN_UNITS, name='taxi_student',
                        max_embedding_dim=MAX_EMBEDDING_DIM,
                        **base.label_settings(hyperparameters))
