"""Loads frozen teachers and makes sure what they emit is what the loss reads.

A teacher is any model over the transformed features: the `model` of our
DistributedTrainer, or of TFX's stock Trainer from an unchanged module file,
which saves with `tf.saved_model.save` (no Keras metadata, list or dict
inputs, outputs named as the module names them). `measuring.load_scorer`
reads every such kind. The loss needs logits: a teacher whose output layer is
a softmax or sigmoid (looking through Reshape, Flatten and other shape-only
layers) has its logits recovered, and a teacher whose declared output kind its
outputs contradict is refused. Reading probabilities as logits is the classic
mistake: it trains a student to chance.
"""

from typing import Dict

import tensorflow as tf

from tfx_distillery.components.common import measuring

TEACHER_OUTPUTS = ('auto',) + measuring.OUTPUT_KINDS
# A teacher of a binary label may emit one output per class; its logits are then made one
# (`frozen_logits`). No label needs two units: a binary one takes one, others one a class.
BINARY_AS_TWO_CLASSES = 2

# A teacher is a frozen Scorer: `logits(features)` (traceable), `num_outputs`,
# `output_kind`, `model_dir`.
Teacher = measuring.Scorer


def load_teacher(path: str, declared_output: str = 'auto') -> Teacher:
  """Loads a teacher SavedModel, frozen, and what its output layer says it emits.

  Args:
    path: SavedModel folder (a Model artifact's Format-Serving).
    declared_output: `auto`, `logits` or `probabilities`.

  Returns:
    The teacher. `auto` is settled by `check_teacher` on a batch when the
    output layer does not say.

  Raises:
    ValueError: when the folder holds no model the Distiller can call, or the
      declaration contradicts the output layer.
  """
  if declared_output not in TEACHER_OUTPUTS:
    raise ValueError(f'teacher_output must be one of {", ".join(TEACHER_OUTPUTS)}; got '
                     f'{declared_output!r}.')
  try:
    teacher = measuring.load_scorer(path)
  except ValueError as error:
    raise ValueError(f'teacher_model: {error}') from error
  if teacher.keras_model is not None:
    teacher.keras_model.trainable = False
  detected = teacher.output_kind
  if detected and declared_output != 'auto' and detected != declared_output:
    layer_says = 'a softmax or sigmoid' if detected == 'probabilities' else 'a linear'
    raise ValueError(
        f'teacher_output is "{declared_output}" but the teacher at {path} ends in {layer_says} '
        f'activation, so it emits {detected}. Set teacher_output="{detected}" (or "auto").')
  if declared_output != 'auto':
    teacher.output_kind = declared_output
  return teacher


def frozen_logits(teacher: Teacher, features: Dict[str, tf.Tensor]) -> tf.Tensor:
  """The teacher's logits for a batch; no gradient flows back into the teacher.

  A binary label's student emits one logit. A teacher with two outputs for it (a stock module
  that ends in one logit or probability per class, as TFX's penguin module does) gives the
  difference of its two logits: the sigmoid of z1 - z0 is the softmax's second column, at
  every temperature.
  """
  logits = teacher.logits(features)
  if teacher.num_outputs == BINARY_AS_TWO_CLASSES:
    logits = logits[:, 1:] - logits[:, :1]
  return tf.stop_gradient(logits)


def check_teacher(teacher: Teacher, features: Dict[str, tf.Tensor], units: int,
                  num_classes: int, declared_output: str = 'auto') -> None:
  """Checks one batch of the teacher's outputs against its kind and the labels.

  Args:
    teacher: The loaded teacher.
    features: One batch of transformed features.
    units: Outputs the labels need: 1 for binary (a teacher may emit 2), else the number
      of classes.
    num_classes: Classes of the label.
    declared_output: What the user declared (`auto` lets the batch decide).

  Raises:
    ValueError: naming the teacher and the mismatch.
  """
  # Refuses, by name, a feature no unit axis or cast brings to the teacher's signature.
  teacher.conform(features)
  if teacher.num_outputs != units and not (units == 1 and
                                           teacher.num_outputs == BINARY_AS_TWO_CLASSES):
    raise ValueError(
        f'The teacher at {teacher.model_dir} emits {teacher.num_outputs} outputs but the labels '
        f'have {num_classes} classes (expected {units} output(s)); teacher and labels '
        'disagree on the number of classes.')
  declared = declared_output if declared_output != 'auto' else (teacher.output_kind or 'auto')
  try:
    teacher.resolve_output_kind(features, declared)
  except ValueError as error:
    raise ValueError(f'teacher_output: {error}') from error
