"""micro_batches under MultiWorkerMirroredStrategy: one worker of two (run by test_micro_batches).

Usage: python micro_batches_workers.py TF_CONFIG_JSON OUTPUT_NPZ START_NPZ

Each worker reads its half of every global batch of `GLOBAL_BATCH` rows (the chief the first
half), trains `STEPS` SGD steps with `MICRO_BATCHES` micro-batches, and the chief saves its
weights to OUTPUT_NPZ. The test compares them with one process's run on the whole batches.
"""

import os
import sys

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

GLOBAL_BATCH = 20
STEPS = 50
MICRO_BATCHES = 4
ROWS = 100


def rows():
  generator = np.random.default_rng(0)
  return (generator.normal(size=(ROWS, 5)).astype('float32'), generator.integers(0, 3, ROWS))


def model():
  import tf_keras  # pylint: disable=g-import-not-at-top
  built = tf_keras.Sequential([
      tf_keras.layers.Dense(8, activation='tanh', input_shape=(5,), kernel_regularizer='l2'),
      tf_keras.layers.Dense(3)])
  built.compile(tf_keras.optimizers.SGD(0.1),
                tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return built


def main(tf_config: str, output_path: str, start_path: str) -> int:
  os.environ['TF_CONFIG'] = tf_config
  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  from tfx_distillery.components.distributed_trainer import micro_batches  # pylint: disable=g-import-not-at-top
  features, labels = rows()
  half = GLOBAL_BATCH // 2

  def worker_dataset(context):
    # Global batch t is rows [t * 20, t * 20 + 20); worker i reads its i-th half.
    index = context.input_pipeline_id
    mine = np.concatenate([np.arange(start + index * half, start + (index + 1) * half)
                           for start in range(0, ROWS, GLOBAL_BATCH)])
    return tf.data.Dataset.from_tensor_slices(
        (features[mine], labels[mine])).batch(half).repeat()

  with strategy.scope():
    trained = model()
  with np.load(start_path) as start:
    trained.set_weights([start[f'weight_{index}'] for index in range(len(start.files))])
  with micro_batches.accumulating(MICRO_BATCHES):
    trained.fit(strategy.distribute_datasets_from_function(worker_dataset),
                steps_per_epoch=STEPS, verbose=0)
  if strategy.cluster_resolver.task_id == 0:
    np.savez(output_path, **{f'weight_{index}': weight
                             for index, weight in enumerate(trained.get_weights())})
  return 0


if __name__ == '__main__':
  sys.exit(main(*sys.argv[1:4]))
