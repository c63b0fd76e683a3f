"""Why the 8-unit digits student resists distillation (issue #24): plain Keras, no TFX.

Not a benchmark: a diagnosis the next session can re-run. It rebuilds the
distillation benchmark's digits folds (same shuffle, same train/eval/test cut,
pixels / 16), builds the teacher CNN and the 64 -> 8 -> 10 student from their module
files (the teacher early-stopped on eval), trains the student as the benchmark trains
it (batch 64, 6,000 steps in 4 epochs, Adam 3e-3), with the Distiller's own loss
(components/distiller/loss.py).

  dead-units  scratch and distilled (the Distiller's defaults) students at the
              benchmark's seeds: test accuracy and how many of the 8 hidden ReLUs
              never fire on the training set.
  data        scratch students on 50%, 75%, 100% of train, and on train + eval: is
              the student short of capacity or of data?
  transfer    on eval (seed 20 + fold): scratch, the Distiller's defaults, and transfer
              sets that carry the teacher's invariances (pixel shifts, pixel masks) or
              its input gradients (Jacobian matching); then the student's activation.
  affine      on eval (seed 20 + fold): a transfer set of sub-pixel turns, scalings,
              shears and moves (bilinear), against the defaults and against scratch
              trained on the same perturbed images with their labels.
  unlabelled  on test (seed FIRST_SEED + fold, 20 unless given): eval's inputs, without
              their labels, added to the transfer set (Hinton's unlabelled transfer set),
              against scratch trained on train + eval with the labels. Chooses nothing.

Usage:
  TF_USE_LEGACY_KERAS=1 python -m experiments.digits_small_student \
      dead-units|data|transfer|affine|unlabelled [FIRST_SEED]
"""

import os
import random
import sys

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

import numpy as np
import tensorflow as tf
import tf_keras
from sklearn import datasets as sklearn_datasets

from tfx_distillery.components.common import measuring
from tfx_distillery.components.distiller import loss as loss_lib
from tfx_distillery.trainer_modules import digits_student
from tfx_distillery.trainer_modules import digits_teacher
from tfx_distillery.trainer_modules import digits_transform

PIXELS = digits_transform.PIXELS_KEY

STEPS, EPOCHS, BATCH, LEARNING_RATE = 6000, 4, 64, 3e-3


def folds(count=5):
  """The benchmark's cut: rows shuffled with Random(0); fold k is test, every 4th other row eval."""
  digits = sklearn_datasets.load_digits()
  rows = list(zip(digits.data.astype('float32') / 16.0, digits.target))
  random.Random(0).shuffle(rows)
  stack = lambda part: (np.stack([row[0] for row in part]), np.array([row[1] for row in part]))
  cut = []
  for fold in range(count):
    rest = [row for index, row in enumerate(rows) if index % count != fold]
    cut.append((stack([row for index, row in enumerate(rest) if index % 4]), stack(rest[::4]),
                stack(rows[fold::count])))
  return cut


def train_teacher(train, evaluation, seed):
  """The benchmark's teacher (trainer_modules/digits_teacher.py), early-stopped on eval."""
  tf_keras.utils.set_random_seed(seed)
  teacher = digits_teacher.build_teacher(None, {'num_classes': 10})
  teacher.compile(tf_keras.optimizers.Adam(1e-3),
                  tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  teacher.fit(batches(train, seed), epochs=15, steps_per_epoch=100,
              validation_data=({PIXELS: evaluation[0]}, evaluation[1]), verbose=0,
              callbacks=[tf_keras.callbacks.EarlyStopping(
                  'val_loss', patience=digits_teacher.EARLY_STOPPING_PATIENCE,
                  restore_best_weights=True)])
  return teacher


def batches(data, seed):
  return tf.data.Dataset.from_tensor_slices(({PIXELS: data[0]}, data[1].astype('int64'))).shuffle(
      4096, seed=seed).repeat().batch(BATCH)


def accuracy(model, data):
  """Through the one measuring module, as every benchmark measures."""
  return measuring.accuracy(measuring.keras_scorer(model),
                            measuring.EvaluationSet({PIXELS: data[0]}, data[1], 'fold'))


def dead_units(student, pixels):
  """Hidden units that output 0 on every one of `pixels` (ReLU students)."""
  dense = student.layers[1]
  active = np.maximum(pixels @ dense.kernel.numpy() + dense.bias.numpy(), 0)
  return int(np.sum(np.all(active == 0, axis=0)))


def identity(pixels):
  return pixels


def mixup(pixels):
  return loss_lib.mix_features({'pixels': pixels}, 1.0)['pixels']


def shifted(pixels):
  """Each image moved by up to one pixel in each direction (what the CNN teacher is robust to)."""
  padded = tf.pad(tf.reshape(pixels, [-1, 8, 8]), [[0, 0], [1, 1], [1, 1]])
  versions = tf.stack([padded[:, row:row + 8, column:column + 8]
                       for row in range(3) for column in range(3)], 1)
  choice = tf.random.uniform([tf.shape(pixels)[0]], 0, 9, dtype=tf.int32)
  return tf.reshape(tf.gather(versions, choice, batch_dims=1), [-1, 64])


def affine(pixels):
  """Each image turned (up to 11 degrees), scaled, sheared and moved by under a pixel.

  Bilinear at 8 x 8: the sub-pixel variation of the 32 x 32 bitmaps these images
  were counted from, where a whole-pixel shift at 8 x 8 is four pixels there.
  """
  count = tf.shape(pixels)[0]
  uniform = lambda low, high: tf.random.uniform([count], low, high)
  angle, scale, shear = uniform(-0.2, 0.2), uniform(0.9, 1.1), uniform(-0.15, 0.15)
  cosine, sine = tf.cos(angle) / scale, tf.sin(angle) / scale
  # Output (x, y) reads input (a0 x + a1 y + a2, b0 x + b1 y + b2), about the centre 3.5.
  a0, a1, b0, b1 = cosine, -sine + shear, sine, cosine
  a2 = 3.5 - 3.5 * (a0 + a1) + uniform(-0.6, 0.6)
  b2 = 3.5 - 3.5 * (b0 + b1) + uniform(-0.6, 0.6)
  zeros = tf.zeros([count])
  images = tf.raw_ops.ImageProjectiveTransformV3(
      images=tf.reshape(pixels, [-1, 8, 8, 1]),
      transforms=tf.stack([a0, a1, a2, b0, b1, b2, zeros, zeros], 1),
      output_shape=[8, 8], fill_value=0.0, interpolation='BILINEAR', fill_mode='CONSTANT')
  return tf.reshape(images, [-1, 64])


def masked(pixels):
  return mixup(pixels) * tf.cast(tf.random.uniform(tf.shape(pixels)) > 0.2, pixels.dtype)


class Student(tf_keras.Model):
  """The Distiller's loss: hard labels on the batch, soft targets on `transfer(batch)`."""

  def __init__(self, student, teacher, temperature, alpha, transfer, jacobian_weight=0.0,
               augment=identity):
    super().__init__()
    self.augment = augment
    self.student, self._teacher = student, teacher
    self.temperature, self.alpha, self.transfer = temperature, alpha, transfer
    self.jacobian_weight = jacobian_weight

  def train_step(self, data):
    features, labels = data
    pixels = features[PIXELS]
    transfer = self.transfer(pixels) if self.alpha < 1 else pixels
    if self.jacobian_weight:
      # A random projection of the tempered probabilities, differentiated by the input.
      direction = tf.random.normal([tf.shape(pixels)[0], 10])
      with tf.GradientTape() as tape:
        tape.watch(transfer)
        projected = tf.reduce_sum(tf.nn.softmax(
            self._teacher({PIXELS: transfer}, training=False) / self.temperature) * direction)
      teacher_gradient = tf.stop_gradient(tape.gradient(projected, transfer))
    with tf.GradientTape() as tape:
      logits = self.student({PIXELS: self.augment(pixels)}, training=True)
      if self.alpha == 1:
        loss = tf.reduce_mean(loss_lib.distillation_loss(labels, logits, None, 1.0, 1.0))
      else:
        with tf.GradientTape() as inner:
          inner.watch(transfer)
          soft_logits = self.student({PIXELS: transfer}, training=True)
          if self.jacobian_weight:
            projected = tf.reduce_sum(tf.nn.softmax(soft_logits / self.temperature) * direction)
        targets = loss_lib.soft_targets([self._teacher({PIXELS: transfer}, training=False)],
                                        self.temperature)
        loss = tf.reduce_mean(loss_lib.distillation_loss(
            labels, logits, targets, self.temperature, self.alpha,
            None if self.transfer is identity else soft_logits))
        if self.jacobian_weight:
          student_gradient = inner.gradient(projected, transfer)
          loss += self.jacobian_weight * tf.reduce_mean(
              tf.reduce_sum(tf.square(student_gradient - teacher_gradient), -1))
    variables = self.student.trainable_variables
    self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return {'loss': loss}


def train_student(train, seed, teacher=None, temperature=1.0, alpha=1.0, transfer=identity,
                  activation='relu', jacobian_weight=0.0, augment=identity):
  tf_keras.utils.set_random_seed(seed)
  if activation == 'relu':  # The benchmark's student, from its module file.
    student = digits_student.build_student(None, {'num_classes': 10})
  else:
    pixels = tf_keras.Input((64,), name=PIXELS)
    student = tf_keras.Model(pixels, tf_keras.layers.Dense(10)(tf_keras.layers.Dense(
        digits_student.HIDDEN_UNITS, activation=activation)(pixels)))
  model = Student(student, teacher, temperature, alpha, transfer, jacobian_weight, augment)
  model.compile(tf_keras.optimizers.Adam(LEARNING_RATE))
  model.fit(batches(train, seed), epochs=EPOCHS, steps_per_epoch=STEPS // EPOCHS, verbose=0)
  return student


def report(name, values, teacher=None, scratch=None):
  mean = float(np.mean(values))
  closed = ('' if teacher is None or scratch is None
            else f'  gap_closed {(mean - scratch) / (teacher - scratch):+.2f}')
  print(f'{name:28s} {mean:.4f} (per fold {", ".join(f"{value:.4f}" for value in values)})'
        f'{closed}', flush=True)
  return mean


def main(command, first_seed=20):
  cut = folds()
  if command == 'dead-units':
    # The benchmark's seeds, to explain its table; nothing here chooses a setting.
    scores, dead = {}, {}
    for fold, (train, evaluation, test) in enumerate(cut):
      teacher = train_teacher(train, evaluation, 101 + fold)
      for name, student in (
          ('scratch', train_student(train, seed=101 + fold)),
          ('defaults', train_student(train, 101 + fold, teacher, 2.0, 0.5, mixup))):
        scores.setdefault(name, []).append(accuracy(student, test))
        dead.setdefault(name, []).append(dead_units(student, train[0]))
    for name in scores:
      report(f'{name} test, seeds 101-105', scores[name])
      print(f'  dead hidden units of 8, per fold: {dead[name]}')
  elif command == 'data':
    for share in (0.5, 0.75, 1.0):
      report(f'scratch test, {share:.0%} of train',
             [accuracy(train_student((train[0][:int(len(train[1]) * share)],
                                      train[1][:int(len(train[1]) * share)]), seed=3), test)
              for train, _, test in cut])
    report('scratch test, train + eval',
           [accuracy(train_student((np.concatenate([train[0], evaluation[0]]),
                                    np.concatenate([train[1], evaluation[1]])), seed=3), test)
            for train, evaluation, test in cut])
  elif command == 'transfer':
    variants = {
        'defaults (T 2, alpha 0.5, mixup)': dict(temperature=2.0, alpha=0.5, transfer=mixup),
        'pixel shifts': dict(temperature=2.0, alpha=0.5, transfer=shifted),
        'mixup + 20% pixels masked': dict(temperature=2.0, alpha=0.5, transfer=masked),
        'mixup + Jacobian matching': dict(temperature=2.0, alpha=0.5, transfer=mixup,
                                          jacobian_weight=10.0)}
    activations = ('relu', 'elu', 'tanh', 'gelu', 'swish')
    scores = {}
    for fold, (train, evaluation, _) in enumerate(cut):
      seed = 20 + fold
      teacher = train_teacher(train, evaluation, seed)
      scores.setdefault('teacher', []).append(accuracy(teacher, evaluation))
      for activation in activations:
        scores.setdefault(f'{activation}: scratch', []).append(
            accuracy(train_student(train, seed, activation=activation), evaluation))
        scores.setdefault(f'{activation}: defaults', []).append(accuracy(train_student(
            train, seed, teacher, activation=activation,
            **variants['defaults (T 2, alpha 0.5, mixup)']), evaluation))
      for name, settings in variants.items():
        if not name.startswith('defaults'):
          scores.setdefault(name, []).append(
              accuracy(train_student(train, seed, teacher, **settings), evaluation))
      print(f'fold {fold} done', flush=True)
    teacher = report('teacher (eval)', scores.pop('teacher'))
    for activation in activations:
      scratch = report(f'{activation}: scratch', scores.pop(f'{activation}: scratch'))
      report(f'{activation}: defaults', scores.pop(f'{activation}: defaults'), teacher, scratch)
    relu_scratch = float(np.mean([accuracy(train_student(train, 20 + fold), evaluation)
                                  for fold, (train, evaluation, _) in enumerate(cut)]))
    for name, values in scores.items():
      report(f'relu: {name}', values, teacher, relu_scratch)
  elif command == 'affine':
    variants = {
        'scratch': {},
        'scratch, hard labels on affine': dict(augment=affine),
        'defaults (T 2, alpha 0.5, mixup)': dict(temperature=2.0, alpha=0.5, transfer=mixup),
        'affine, T 2, alpha 0.5': dict(temperature=2.0, alpha=0.5, transfer=affine),
        'affine, T 2, alpha 0.1': dict(temperature=2.0, alpha=0.1, transfer=affine),
        'affine, T 4, alpha 0.1': dict(temperature=4.0, alpha=0.1, transfer=affine)}
    scores = {}
    for fold, (train, evaluation, _) in enumerate(cut):
      seed = 20 + fold
      teacher = train_teacher(train, evaluation, seed)
      scores.setdefault('teacher', []).append(accuracy(teacher, evaluation))
      for name, settings in variants.items():
        scores.setdefault(name, []).append(accuracy(train_student(
            train, seed, teacher if settings.get('alpha') else None, **settings), evaluation))
      print(f'fold {fold} done', flush=True)
    teacher = report('teacher (eval)', scores.pop('teacher'))
    scratch = report('scratch', scores.pop('scratch'))
    for name, values in scores.items():
      report(name, values, teacher, scratch)
  elif command == 'unlabelled':
    # Real inputs without labels: eval's inputs join train's as the transfer set, and the
    # teacher labels them (Hinton's transfer set). Measured on test; this chooses nothing.
    scores = {}
    for fold, (train, evaluation, test) in enumerate(cut):
      seed = first_seed + fold
      teacher = train_teacher(train, evaluation, seed)
      pool = tf.constant(np.concatenate([train[0], evaluation[0]]))

      def from_pool(pixels, pool=pool):
        return tf.gather(pool, tf.random.uniform([tf.shape(pixels)[0]], 0, pool.shape[0],
                                                 dtype=tf.int32))

      def pool_mixup(pixels, pool=pool):
        return mixup(from_pool(pixels, pool))

      scores.setdefault('teacher', []).append(accuracy(teacher, test))
      for name, settings in {
          'scratch': {},
          'defaults (T 2, alpha 0.5, mixup)': dict(temperature=2.0, alpha=0.5, transfer=mixup),
          'train + eval inputs, T 2, alpha 0.5': dict(temperature=2.0, alpha=0.5,
                                                      transfer=from_pool),
          'train + eval inputs mixed up': dict(temperature=2.0, alpha=0.5,
                                               transfer=pool_mixup)}.items():
        scores.setdefault(name, []).append(accuracy(train_student(
            train, seed, teacher if settings else None, **settings), test))
      scores.setdefault('scratch on train + eval labels', []).append(accuracy(train_student(
          (np.concatenate([train[0], evaluation[0]]), np.concatenate([train[1], evaluation[1]])),
          seed), test))
      print(f'fold {fold} done', flush=True)
    print(f'seeds {first_seed}-{first_seed + len(cut) - 1}')
    teacher = report('teacher (test)', scores.pop('teacher'))
    scratch = report('scratch', scores.pop('scratch'))
    for name, values in scores.items():
      report(name, values, teacher, scratch)
  else:
    raise SystemExit(f'command must be dead-units, data, transfer, affine or unlabelled; got '
                     f'{command!r}')


if __name__ == '__main__':
  main(sys.argv[1] if len(sys.argv) > 1 else '', *[int(seed) for seed in sys.argv[2:3]])
