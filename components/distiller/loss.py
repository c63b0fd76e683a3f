"""The distillation loss, written once, and the conversions it needs.

A binary model emits one logit z; it is treated as the two-class logits [0, z],
whose softmax is [1 - sigmoid(z), sigmoid(z)]. Binary and multi-class then share
every formula below.
"""

from typing import Dict, Optional, Sequence

import tensorflow as tf

# Probabilities are clipped this far from 0 and 1 before logits are recovered.
PROBABILITY_EPSILON = 1e-7


def class_logits(logits: tf.Tensor) -> tf.Tensor:
  """[batch, 1] binary logits as [batch, 2] class logits; others unchanged."""
  logits = tf.convert_to_tensor(logits)
  if logits.shape[-1] == 1:
    return tf.concat([tf.zeros_like(logits), logits], axis=-1)
  return logits


def tempered_probabilities(logits: tf.Tensor, temperature: float) -> tf.Tensor:
  """softmax(logits / temperature) over the classes ([batch, 2] for binary)."""
  return tf.nn.softmax(class_logits(logits) / temperature, axis=-1)


def soft_targets(teacher_logits: Sequence[tf.Tensor], temperature: float,
                 weights: Optional[Sequence[float]] = None) -> tf.Tensor:
  """The (weighted) average of the teachers' tempered distributions.

  Args:
    teacher_logits: One [batch, units] logits tensor per teacher.
    temperature: Softening temperature T > 0.
    weights: One non-negative weight per teacher; equal weights when None.

  Returns:
    [batch, classes] probabilities that sum to 1 per example.
  """
  if weights is None:
    weights = [1.0] * len(teacher_logits)
  total = float(sum(weights))
  distributions = [weight / total * tempered_probabilities(logits, temperature)
                   for weight, logits in zip(weights, teacher_logits)]
  return tf.add_n(distributions)


def distillation_loss(labels: tf.Tensor, student_logits: tf.Tensor,
                      teacher_targets: tf.Tensor, temperature: float,
                      alpha: float,
                      student_soft_logits: Optional[tf.Tensor] = None,
                      labelled_weights: Optional[tf.Tensor] = None) -> tf.Tensor:
  """Per-example `alpha * CE(labels, student) + (1 - alpha) * T^2 * KL(teacher || student_T)`.

  The cross-entropy reads the student at T = 1; the KL term compares the
  teacher's tempered distribution (the target) with the student's at the same
  temperature. T^2 keeps the soft term's gradients on the scale of the hard
  term's as T changes (Hinton et al., 2015).

  Args:
    labels: Integer class indices, [batch] or [batch, 1].
    student_logits: [batch, units] student logits.
    teacher_targets: [batch, classes] soft targets from `soft_targets`.
    temperature: T > 0.
    alpha: Weight of the hard-label term, in [0, 1].
    student_soft_logits: The student's logits on the inputs the teacher saw,
      when those are not the labelled inputs (mixup); `student_logits` if None.
    labelled_weights: [batch] 1 for a labelled row, 0 for a transfer row (no
      label): the hard term then averages over the labelled rows only, the soft
      term over all. None: every row is labelled.

  Returns:
    [batch] losses, whose mean is the batch's loss.
  """
  student_class_logits = class_logits(student_logits)
  labels = tf.cast(tf.reshape(labels, [-1]), tf.int64)
  hard_loss = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=labels, logits=student_class_logits)
  if labelled_weights is not None:
    # Scaled so the batch mean is the mean over labelled rows: sum(w * CE) / sum(w).
    weights = tf.cast(tf.reshape(labelled_weights, [-1]), hard_loss.dtype)
    hard_loss = hard_loss * weights * (tf.cast(tf.size(weights), hard_loss.dtype)
                                       / tf.maximum(tf.reduce_sum(weights), 1.0))
  if alpha == 1.0:
    return hard_loss
  if student_soft_logits is not None:
    student_class_logits = class_logits(student_soft_logits)
  student_log_probabilities = tf.nn.log_softmax(student_class_logits / temperature, axis=-1)
  teacher_targets = tf.stop_gradient(teacher_targets)
  soft_loss = tf.reduce_sum(
      teacher_targets * (tf.math.log(tf.maximum(teacher_targets, PROBABILITY_EPSILON))
                         - student_log_probabilities), axis=-1)
  return alpha * hard_loss + (1.0 - alpha) * temperature ** 2 * soft_loss


def logits_from_probabilities(probabilities: tf.Tensor) -> tf.Tensor:
  """Recovers logits from a sigmoid ([batch, 1]) or softmax ([batch, K]) output.

  Softmax logits are recovered up to a per-example constant, which softmax
  ignores.
  """
  clipped = tf.clip_by_value(probabilities, PROBABILITY_EPSILON, 1.0 - PROBABILITY_EPSILON)
  if probabilities.shape[-1] == 1:
    return tf.math.log(clipped) - tf.math.log1p(-clipped)
  return tf.math.log(clipped)


def mix_features(features: Dict[str, tf.Tensor], concentration: float,
                 seed: Optional[int] = None) -> Dict[str, tf.Tensor]:
  """Mixes each example with a random partner from the same batch (mixup).

  Every example draws a weight w ~ Beta(concentration, concentration). Float
  features become `w * own + (1 - w) * partner's`; other features (vocabulary
  indices, strings) can't be averaged, so each takes the partner's value with
  probability 1 - w. Teacher and student are then shown the same mixed batch,
  which gives the student the teacher's answers on inputs between the training
  examples (function matching, Beyer et al., 2022).

  Args:
    features: Batched features, all with the same leading batch dimension.
    concentration: Beta concentration > 0; small values keep most examples near
      one of the pair.
    seed: Optional op seed, for tests.

  Returns:
    A new dict with the same keys, shapes and dtypes.
  """
  first = next(iter(features.values()))
  batch = tf.shape(first)[0]
  own = tf.random.gamma([batch], concentration, seed=seed)
  other = tf.random.gamma([batch], concentration, seed=None if seed is None else seed + 1)
  weight = own / tf.maximum(own + other, 1e-12)
  partner = tf.random.shuffle(tf.range(batch), seed=seed)
  keep_own = tf.random.uniform([batch], seed=seed) < weight
  mixed = {}
  for name, value in features.items():
    partner_value = tf.gather(value, partner)
    trailing = [1] * (len(value.shape) - 1)
    if value.dtype.is_floating:
      mix = tf.reshape(tf.cast(weight, value.dtype), [-1] + trailing)
      mixed[name] = mix * value + (1 - mix) * partner_value
    else:
      mixed[name] = tf.where(tf.reshape(keep_own, [-1] + trailing), value, partner_value)
  return mixed


def perturb_features(features: Dict[str, tf.Tensor], scale: float,
                     seed: Optional[int] = None) -> Dict[str, tf.Tensor]:
  """Adds Gaussian noise to float features, `scale` times each column's spread in the batch.

  The teacher labels the perturbed examples, so the student learns the teacher's
  answers on inputs the training set does not hold: the transfer set grows
  beyond the training examples (Hinton et al., 2015, trained on such a set).
  The spread is the batch's standard deviation per feature column, so the noise
  fits any scaling the transform chose; integer features (ids) are unchanged.

  Args:
    features: Batched features.
    scale: Noise standard deviation as a multiple of each column's; 0 returns
      `features` unchanged.
    seed: Optional op seed, for tests.

  Returns:
    A new dict with the same keys, shapes and dtypes.
  """
  if scale == 0:
    return dict(features)
  perturbed = {}
  for name, value in features.items():
    if value.dtype.is_floating:
      spread = tf.math.reduce_std(value, axis=0, keepdims=True)
      perturbed[name] = value + tf.random.normal(tf.shape(value), dtype=value.dtype,
                                                 seed=seed) * scale * spread
    else:
      perturbed[name] = value
  return perturbed
