"""Student module for MNIST-1D: a 480-parameter CNN (default) or a 128-unit MLP."""

import tf_keras
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base
from tfx_distillery.trainer_modules import mnist1d_transform

ARCHITECTURES = ('cnn', 'mlp')
CNN_FILTERS = 10
MLP_HIDDEN_UNITS = 128


# Called by the Distiller.
def build_student(tf_transform_output: tft.TFTransformOutput, hyperparameters=None
                 ) -> tf_keras.Model:
  """The hyperparameter `architecture` picks the student; `filters`/`hidden_units` size it.

  - `cnn`: two strided convolutions of 10 filters, a global max over time, ten logits
    (480 parameters, 1.7% of the teacher).
  - `mlp`: 40 -> 128 -> 10 (6,538 parameters), the paper's weak baseline.

  Raises:
    ValueError: naming `architecture` when it is not one of `ARCHITECTURES`.
  """
  architecture = base.hyperparameter(hyperparameters, 'architecture', 'cnn')
  if architecture not in ARCHITECTURES:
    raise ValueError(f'architecture must be one of {", ".join(ARCHITECTURES)}; got '
                     f'{architecture!r}.')
  signal = tf_keras.Input(shape=(mnist1d_transform.SIGNAL_LENGTH,),
                          name=mnist1d_transform.SIGNAL_KEY)
  if architecture == 'cnn':
    filters = int(base.hyperparameter(hyperparameters, 'filters', CNN_FILTERS))
    hidden = tf_keras.layers.Reshape((mnist1d_transform.SIGNAL_LENGTH, 1))(signal)
    hidden = tf_keras.layers.Conv1D(filters, 5, strides=2, padding='same',
                                    activation='relu')(hidden)
    hidden = tf_keras.layers.Conv1D(filters, 3, strides=2, padding='same',
                                    activation='relu')(hidden)
    hidden = tf_keras.layers.GlobalMaxPooling1D()(hidden)
  else:
    width = int(base.hyperparameter(hyperparameters, 'hidden_units', MLP_HIDDEN_UNITS))
    hidden = tf_keras.layers.Dense(width, activation='relu')(signal)
  logits = tf_keras.layers.Dense(
      base.label_settings(hyperparameters)['num_outputs'] or base.output_units(tf_transform_output),
      name='logits')(hidden)
  return tf_keras.Model(inputs={mnist1d_transform.SIGNAL_KEY: signal}, outputs=logits,
                        name=f'mnist1d_{architecture}_student')
