"""Loads frozen teachers and makes sure what they emit is what the loss reads.

A teacher is any Keras SavedModel over the transformed features, such as the
`model` of a Trainer or DistributedTrainer. The loss needs logits; a teacher
ending in softmax or sigmoid has its logits recovered, and a teacher whose
declared output kind does not match what it emits is refused. (Reading
probabilities as logits is the classic mistake: it trains a student to chance.)
"""

import dataclasses
from typing import Dict, Optional

import numpy as np
import tensorflow as tf
import tf_keras

from components.distiller import loss as loss_lib

TEACHER_OUTPUTS = ('auto', 'logits', 'probabilities')
PROBABILITY_ACTIVATIONS = ('sigmoid', 'softmax')
# Rows of a softmax output sum to 1 within this tolerance.
SUM_TOLERANCE = 1e-3


@dataclasses.dataclass
class Teacher:
  """A frozen teacher model and how to read logits from it.

  Attributes:
    model: The Keras model, with `trainable` False.
    output_kind: `logits` or `probabilities` (after `auto` was resolved).
    path: Where it was loaded from, for messages.
  """
  model: tf_keras.Model
  output_kind: str
  path: str

  def logits(self, features: Dict[str, tf.Tensor]) -> tf.Tensor:
    """The teacher's logits for a batch; no gradient flows back into the teacher."""
    outputs = self.model({name: features[name] for name in self.model.input_names},
                         training=False)
    if isinstance(outputs, dict):
      outputs = outputs.get('logits', next(iter(outputs.values())))
    if self.output_kind == 'probabilities':
      outputs = loss_lib.logits_from_probabilities(outputs)
    return tf.stop_gradient(tf.cast(outputs, tf.float32))

  @property
  def num_outputs(self) -> int:
    return int(self.model.outputs[0].shape[-1])


def output_activation(model: tf_keras.Model) -> Optional[str]:
  """Name of the activation that produces the model's (first) output, if known."""
  try:
    layer = model.outputs[0]._keras_history.layer  # pylint: disable=protected-access
  except (AttributeError, IndexError, TypeError):
    return None
  activation = getattr(layer, 'activation', None)
  return getattr(activation, '__name__', None)


def load_teacher(path: str, declared_output: str = 'auto') -> Teacher:
  """Loads a teacher SavedModel, frozen, and resolves what its output is.

  Args:
    path: Keras SavedModel folder (a Model artifact's Format-Serving).
    declared_output: `auto`, `logits` or `probabilities`.

  Returns:
    The `Teacher`.

  Raises:
    ValueError: when the folder holds no Keras model, or the declared output
      contradicts the model's output activation.
  """
  if declared_output not in TEACHER_OUTPUTS:
    raise ValueError(f'teacher_output must be one of {", ".join(TEACHER_OUTPUTS)}; got '
                     f'{declared_output!r}.')
  try:
    model = tf_keras.models.load_model(path, compile=False)
  except (OSError, ValueError, IOError) as error:
    raise ValueError(f'teacher_model at {path} is not a Keras SavedModel the Distiller can '
                     f'call: {error}') from error
  if not getattr(model, 'outputs', None):
    raise ValueError(f'teacher_model at {path} has no functional outputs; export the teacher '
                     'as a functional or Sequential tf_keras model.')
  model.trainable = False
  activation = output_activation(model)
  if declared_output == 'logits' and activation in PROBABILITY_ACTIVATIONS:
    raise ValueError(
        f'teacher_output is "logits" but the teacher at {path} ends in a {activation} '
        'activation, so it emits probabilities. Set teacher_output="probabilities" (or '
        '"auto") so logits are recovered from them.')
  if declared_output == 'probabilities' and activation not in (None,) + PROBABILITY_ACTIVATIONS:
    raise ValueError(
        f'teacher_output is "probabilities" but the teacher at {path} ends in a '
        f'{activation} activation, so it emits logits. Set teacher_output="logits" (or "auto").')
  kind = declared_output
  if kind == 'auto':
    kind = 'probabilities' if activation in PROBABILITY_ACTIVATIONS else 'logits'
  return Teacher(model=model, output_kind=kind, path=path)


def check_teacher(teacher: Teacher, features: Dict[str, tf.Tensor], units: int,
                  num_classes: int) -> None:
  """Checks one batch of the teacher's raw outputs against its kind and the labels.

  Args:
    teacher: The loaded teacher.
    features: One batch of transformed features.
    units: Outputs the labels need: 1 for binary, else the number of classes.
    num_classes: Classes in the label domain.

  Raises:
    ValueError: naming the teacher and the mismatch.
  """
  if teacher.num_outputs != units:
    raise ValueError(
        f'The teacher at {teacher.path} emits {teacher.num_outputs} outputs but the labels '
        f'have {num_classes} classes (expected {units} output(s)); teacher and labels '
        'disagree on the number of classes.')
  outputs = teacher.model({name: features[name] for name in teacher.model.input_names},
                          training=False)
  if isinstance(outputs, dict):
    outputs = outputs.get('logits', next(iter(outputs.values())))
  values = np.asarray(outputs, dtype=np.float64)
  in_unit_range = bool(np.all((values >= 0.0) & (values <= 1.0)))
  sums_to_one = units > 1 and bool(np.all(np.abs(values.sum(axis=-1) - 1.0) < SUM_TOLERANCE))
  if teacher.output_kind == 'probabilities' and not in_unit_range:
    raise ValueError(
        f'teacher_output is "probabilities" but the teacher at {teacher.path} emits values '
        f'from {values.min():.3g} to {values.max():.3g}, outside [0, 1]: it emits logits. '
        'Set teacher_output="logits".')
  if teacher.output_kind == 'probabilities' and units > 1 and not sums_to_one:
    raise ValueError(
        f'teacher_output is "probabilities" but the rows the teacher at {teacher.path} emits '
        'do not sum to 1: they are not softmax probabilities. Set teacher_output="logits".')
  if teacher.output_kind == 'logits' and sums_to_one and in_unit_range:
    raise ValueError(
        f'The teacher at {teacher.path} is read as logits but every row it emits is a '
        'probability distribution (values in [0, 1] summing to 1). Set '
        'teacher_output="probabilities" so logits are recovered from them.')
