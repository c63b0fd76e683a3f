"""The distillation loss: hard term, temperature, direction, and a frozen teacher."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from tfx_distillery.components.common import measuring
from tfx_distillery.components.distiller import loss as loss_lib
from tfx_distillery.components.distiller import training


def softmax(logits, temperature=1.0):
  scaled = np.asarray(logits, np.float64) / temperature
  scaled -= scaled.max(axis=-1, keepdims=True)
  exponent = np.exp(scaled)
  return exponent / exponent.sum(axis=-1, keepdims=True)


def kl(target, prediction):
  return np.sum(target * (np.log(target) - np.log(prediction)), axis=-1)


STUDENT = np.array([[2.0, -1.0, 0.5], [0.1, 0.3, -2.0]], np.float32)
TEACHER = np.array([[3.0, 0.0, -1.0], [-1.0, 2.5, 0.2]], np.float32)
LABELS = np.array([0, 1])


def test_alpha_one_is_plain_cross_entropy_multi_class():
  expected = tf_keras.losses.SparseCategoricalCrossentropy(
      from_logits=True, reduction='none')(LABELS, STUDENT)
  targets = loss_lib.soft_targets([TEACHER], 4.0)
  got = loss_lib.distillation_loss(LABELS, STUDENT, targets, 4.0, 1.0)
  np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_alpha_one_is_plain_binary_cross_entropy_for_one_logit():
  student = np.array([[1.5], [-0.7], [0.2]], np.float32)
  labels = np.array([[1.0], [1.0], [0.0]], np.float32)
  expected = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=student)[:, 0]
  targets = loss_lib.soft_targets([np.array([[0.3], [0.1], [-2.0]], np.float32)], 2.0)
  got = loss_lib.distillation_loss(labels, student, targets, 2.0, 1.0)
  np.testing.assert_allclose(got, expected, rtol=1e-5)


@pytest.mark.parametrize('temperature', [1.0, 2.0, 5.0])
def test_soft_term_is_temperature_squared_times_kl_of_tempered_distributions(temperature):
  targets = loss_lib.soft_targets([TEACHER], temperature)
  got = loss_lib.distillation_loss(LABELS, STUDENT, targets, temperature, 0.0).numpy()
  expected = temperature ** 2 * kl(softmax(TEACHER, temperature), softmax(STUDENT, temperature))
  np.testing.assert_allclose(got, expected, rtol=1e-4)


def test_a_transfer_row_enters_the_soft_term_only():
  # Row 1 is a transfer row: its label (a placeholder) must not count in the hard term.
  targets = loss_lib.soft_targets([TEACHER], 2.0)
  got = loss_lib.distillation_loss(np.array([0, 2]), STUDENT, targets, 2.0, 0.3,
                                   labelled_weights=np.array([1.0, 0.0]))
  hard = -np.log(softmax(STUDENT)[0, 0])  # The labelled row's cross-entropy, averaged over 1.
  soft = 4.0 * kl(softmax(TEACHER, 2.0), softmax(STUDENT, 2.0))  # Both rows.
  np.testing.assert_allclose(np.mean(got), 0.3 * hard + 0.7 * np.mean(soft), rtol=1e-5)


def test_teacher_is_the_target_and_student_the_prediction():
  targets = loss_lib.soft_targets([TEACHER], 3.0)
  got = loss_lib.distillation_loss(LABELS, STUDENT, targets, 3.0, 0.0).numpy()
  swapped = 9.0 * kl(softmax(STUDENT, 3.0), softmax(TEACHER, 3.0))
  assert not np.allclose(got, swapped, rtol=1e-3)
  # The gradient moves the student's tempered distribution toward the teacher's.
  student = tf.Variable(STUDENT)
  with tf.GradientTape() as tape:
    value = tf.reduce_sum(loss_lib.distillation_loss(LABELS, student, targets, 3.0, 0.0))
  stepped = STUDENT - 0.5 * tape.gradient(value, student).numpy()
  before = kl(softmax(TEACHER, 3.0), softmax(STUDENT, 3.0)).sum()
  after = kl(softmax(TEACHER, 3.0), softmax(stepped, 3.0)).sum()
  assert after < before


def test_equal_logits_cost_nothing_in_the_soft_term():
  targets = loss_lib.soft_targets([TEACHER], 2.0)
  got = loss_lib.distillation_loss(LABELS, TEACHER, targets, 2.0, 0.0).numpy()
  np.testing.assert_allclose(got, 0.0, atol=1e-5)


def test_weighted_teachers_average_their_tempered_distributions():
  other = np.array([[0.0, 0.0, 4.0], [1.0, 1.0, 1.0]], np.float32)
  got = loss_lib.soft_targets([TEACHER, other], 2.0, weights=[3.0, 1.0]).numpy()
  expected = 0.75 * softmax(TEACHER, 2.0) + 0.25 * softmax(other, 2.0)
  np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_logits_are_recovered_from_sigmoid_and_softmax_outputs():
  binary_logits = np.array([[2.0], [-3.0]], np.float32)
  np.testing.assert_allclose(
      loss_lib.logits_from_probabilities(tf.sigmoid(binary_logits)), binary_logits, rtol=1e-4)
  recovered = loss_lib.logits_from_probabilities(tf.nn.softmax(TEACHER)).numpy()
  np.testing.assert_allclose(softmax(recovered), softmax(TEACHER), rtol=1e-4)


def small_model(name, units=3, activation=None):
  inputs = {'x': tf_keras.Input(shape=(4,), name='x')}
  hidden = tf_keras.layers.Dense(8, activation='relu')(inputs['x'])
  return tf_keras.Model(inputs, tf_keras.layers.Dense(units, activation=activation)(hidden),
                        name=name)


def test_no_gradient_reaches_the_teacher_and_its_weights_never_change():
  teacher_model = small_model('teacher')
  teacher_model.trainable = False
  teacher = measuring.keras_scorer(teacher_model)
  assert teacher.output_kind == 'logits'
  student = small_model('student')
  distillation = training.DistillationModel(student, [teacher], temperature=2.0, alpha=0.3)
  distillation.compile(optimizer=tf_keras.optimizers.SGD(0.5))
  features = {'x': tf.random.stateless_normal([16, 4], seed=[1, 2])}
  labels = tf.constant(np.arange(16) % 3)
  with tf.GradientTape(persistent=True) as tape:
    value = distillation.compute_loss(features, labels, distillation(features))
  assert all(gradient is None for gradient in
             tape.gradient(value, teacher_model.weights))
  assert all(gradient is not None for gradient in
             tape.gradient(value, student.trainable_weights))
  assert {id(v) for v in distillation.trainable_variables} == {
      id(v) for v in student.trainable_variables}
  teacher_before = [weight.numpy().copy() for weight in teacher_model.weights]
  student_before = [weight.numpy().copy() for weight in student.weights]
  distillation.fit(features, labels, epochs=3, batch_size=8, verbose=0)
  for before, after in zip(teacher_before, teacher_model.weights):
    np.testing.assert_array_equal(before, after.numpy())
  assert any(not np.array_equal(before, after.numpy())
             for before, after in zip(student_before, student.weights))


def test_hard_teacher_targets_are_pseudo_labels_the_teachers_most_likely_class():
  teacher_model = small_model('teacher')
  teacher_model.trainable = False
  student = small_model('student')
  features = {'x': tf.random.stateless_normal([16, 4], seed=[3, 4])}
  labels = tf.constant(np.arange(16) % 3)
  teacher_logits = teacher_model(features['x']).numpy()
  student_logits = student(features['x']).numpy()
  losses = {}
  for targets in ('soft', 'hard'):
    distillation = training.DistillationModel(
        student, [measuring.keras_scorer(teacher_model)], temperature=1.0, alpha=0.0,
        teacher_targets=targets)
    losses[targets] = float(distillation.compute_loss(features, labels,
                                                      distillation(features)))
  # alpha 0, T 1: the mean cross-entropy against the teacher's argmax, not its distribution.
  pseudo_labels = teacher_logits.argmax(axis=-1)
  expected_hard = -np.mean(np.log(softmax(student_logits))[np.arange(16), pseudo_labels])
  expected_soft = np.mean(kl(softmax(teacher_logits), softmax(student_logits)))
  assert losses['hard'] == pytest.approx(expected_hard, rel=1e-4)
  assert losses['soft'] == pytest.approx(expected_soft, rel=1e-4)
  assert losses['hard'] != pytest.approx(losses['soft'], rel=1e-2)


def test_the_soft_term_reads_the_student_on_the_teachers_inputs_when_given():
  mixed_student = np.array([[0.0, 1.0, -1.0], [1.0, 1.0, 1.0]], np.float32)
  targets = loss_lib.soft_targets([TEACHER], 2.0)
  got = loss_lib.distillation_loss(LABELS, STUDENT, targets, 2.0, 0.25, mixed_student)
  hard = loss_lib.distillation_loss(LABELS, STUDENT, targets, 2.0, 1.0)
  soft = 4.0 * kl(softmax(TEACHER, 2.0), softmax(mixed_student, 2.0))
  np.testing.assert_allclose(got, 0.25 * hard + 0.75 * soft, rtol=1e-5)


def test_mixup_mixes_floats_convexly_and_takes_whole_categories_from_the_pair():
  batch = 64
  pixels = tf.constant(np.arange(batch * 3, dtype=np.float32).reshape(batch, 3))
  codes = tf.constant(np.arange(batch, dtype=np.int64).reshape(batch, 1) * 10)
  tf.random.set_seed(3)
  mixed = loss_lib.mix_features({'pixels': pixels, 'code': codes}, concentration=1.0)
  assert mixed['pixels'].shape == pixels.shape and mixed['pixels'].dtype == tf.float32
  assert mixed['code'].dtype == tf.int64
  # Every mixed row lies on the segment between its own row and one other row.
  original = pixels.numpy()
  for row in mixed['pixels'].numpy():
    fits = []
    for own in original:
      for other in original:
        direction = own - other
        weight = np.dot(row - other, direction) / max(np.dot(direction, direction), 1e-12)
        fits.append(np.abs(weight * direction + other - row).max() < 1e-3
                    and -1e-6 <= weight <= 1 + 1e-6)
    assert any(fits)
  # Integer codes are never averaged: every one is some example's own code.
  assert set(mixed['code'].numpy().ravel()) <= set(codes.numpy().ravel())
  # The batch really changes: mixup is not the identity.
  assert not np.allclose(mixed['pixels'].numpy(), original)


def test_mixup_trains_through_the_distillation_model_without_touching_the_teacher():
  teacher_model = small_model('teacher')
  teacher_model.trainable = False
  teacher = measuring.keras_scorer(teacher_model)
  assert teacher.output_kind == 'logits'
  student = small_model('student')
  distillation = training.DistillationModel(student, [teacher], temperature=2.0, alpha=0.5,
                                            mixup=1.0)
  distillation.compile(optimizer=tf_keras.optimizers.SGD(0.5))
  features = {'x': tf.random.stateless_normal([16, 4], seed=[1, 2])}
  labels = tf.constant(np.arange(16) % 3)
  teacher_before = [weight.numpy().copy() for weight in teacher_model.weights]
  student_before = [weight.numpy().copy() for weight in student.weights]
  history = distillation.fit(features, labels, epochs=2, batch_size=8, verbose=0)
  assert np.isfinite(history.history['loss']).all()
  for before, after in zip(teacher_before, teacher_model.weights):
    np.testing.assert_array_equal(before, after.numpy())
  assert any(not np.array_equal(before, after.numpy())
             for before, after in zip(student_before, student.weights))


def test_noise_perturbs_float_features_by_their_spread_and_leaves_ids_alone():
  batch = 4096
  rows = np.random.RandomState(0)
  wide = tf.constant(rows.normal(scale=10.0, size=(batch, 2)).astype(np.float32))
  narrow = tf.constant(rows.normal(scale=0.1, size=(batch,)).astype(np.float32))
  ids = tf.constant(rows.randint(0, 5, size=(batch, 1)).astype(np.int64))
  features = {'wide': wide, 'narrow': narrow, 'ids': ids}
  perturbed = loss_lib.perturb_features(features, 0.5, seed=4)
  assert {name: (value.shape, value.dtype) for name, value in perturbed.items()} == {
      name: (value.shape, value.dtype) for name, value in features.items()}
  np.testing.assert_array_equal(perturbed['ids'].numpy(), ids.numpy())
  # The noise is half of each column's own spread: 5 for the wide, 0.05 for the narrow.
  np.testing.assert_allclose(np.std(perturbed['wide'].numpy() - wide.numpy(), axis=0), [5, 5],
                             rtol=0.05)
  np.testing.assert_allclose(np.std(perturbed['narrow'].numpy() - narrow.numpy()), 0.05,
                             rtol=0.05)
  unchanged = loss_lib.perturb_features(features, 0.0)
  np.testing.assert_array_equal(unchanged['wide'].numpy(), wide.numpy())
