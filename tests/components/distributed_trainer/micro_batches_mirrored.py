"""micro_batches under MirroredStrategy on two logical CPUs (run by test_micro_batches).

Prints one JSON line: the replicas, the cross-device reductions traced per fit with 1 and
with 4 micro-batches, and the largest weight difference after 50 SGD steps between the
mirrored run with 4 micro-batches and one device's run on the same global batches.
"""

import json
import os
import sys

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position
import tf_keras  # pylint: disable=g-import-not-at-top,wrong-import-position

from tfx_distillery.components.distributed_trainer import micro_batches  # pylint: disable=g-import-not-at-top,wrong-import-position

GLOBAL_BATCH = 20
STEPS = 50
LEARNING_RATE = 0.1


class CountingReduction(tf.distribute.ReductionToOneDevice):
  """ReductionToOneDevice that counts the batched reductions traced (gradient all-reduces)."""

  traced = 0

  def batch_reduce_implementation(self, reduce_op, value_destination_pairs, options):
    CountingReduction.traced += 1
    return super().batch_reduce_implementation(reduce_op, value_destination_pairs, options)


def model():
  built = tf_keras.Sequential([
      tf_keras.layers.Dense(8, activation='tanh', input_shape=(5,), kernel_regularizer='l2'),
      tf_keras.layers.Dense(3)])
  built.compile(tf_keras.optimizers.SGD(LEARNING_RATE),
                tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return built


def main() -> int:
  cpu = tf.config.list_physical_devices('CPU')[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
  generator = np.random.default_rng(0)
  features = generator.normal(size=(100, 5)).astype('float32')
  labels = generator.integers(0, 3, 100)

  def dataset():
    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(GLOBAL_BATCH).repeat()

  tf_keras.utils.set_random_seed(1)
  start = model().get_weights()
  one_device = model()
  one_device.set_weights(start)
  one_device.fit(dataset(), steps_per_epoch=STEPS, verbose=0)

  strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'],
                                            cross_device_ops=CountingReduction())
  reductions, weights = {}, None
  for count in (1, 4):
    CountingReduction.traced = 0
    with micro_batches.accumulating(count):
      with strategy.scope():
        mirrored = model()
        mirrored.set_weights(start)
      mirrored.fit(dataset(), steps_per_epoch=STEPS, verbose=0)
    reductions[count] = CountingReduction.traced
    weights = mirrored.get_weights()
  difference = max(float(np.abs(one - other).max())
                   for one, other in zip(one_device.get_weights(), weights))
  print(json.dumps({'replicas': strategy.num_replicas_in_sync, 'reductions': reductions,
                    'max_abs_difference': difference}))
  return 0


if __name__ == '__main__':
  sys.exit(main())
