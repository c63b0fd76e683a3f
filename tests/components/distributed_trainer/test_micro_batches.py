"""micro_batches: K micro-batches per step give the whole batch's update, applied once."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tfx.types import standard_artifacts

from tfx_distillery.components import DistributedTrainer
from tfx_distillery.components.common import ports
from tfx_distillery.components.distributed_trainer import micro_batches
from tests import helpers
from tests.components.distributed_trainer import micro_batches_workers
from tests.components.distributed_trainer import test_distributed_trainer as trainer_tests

BATCH = 10
FEATURES = 5
CLASSES = 3
LEARNING_RATE = 0.1
MIRRORED_SCRIPT = os.path.join(os.path.dirname(__file__), 'micro_batches_mirrored.py')
WORKERS_SCRIPT = os.path.join(os.path.dirname(__file__), 'micro_batches_workers.py')


def rows_of(rows=50, seed=0):
  generator = np.random.default_rng(seed)
  return (generator.normal(size=(rows, FEATURES)).astype('float32'),
          generator.integers(0, CLASSES, rows))


def chain_model(batch_normalization=False):
  """A small chain with an L2 penalty (a regularization loss, counted once per step)."""
  layers = [tf_keras.layers.Dense(8, activation='tanh', input_shape=(FEATURES,),
                                  kernel_regularizer='l2')]
  if batch_normalization:
    layers.append(tf_keras.layers.BatchNormalization())
  layers.append(tf_keras.layers.Dense(CLASSES))
  model = tf_keras.Sequential(layers)
  model.compile(tf_keras.optimizers.SGD(LEARNING_RATE),
                tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=['accuracy'])
  return model


def fitted(initial_weights, count, steps, rows=50, batch_normalization=False):
  """Weights and history after `steps` SGD steps of batch BATCH with `count` micro-batches."""
  features, labels = rows_of(rows)
  with micro_batches.accumulating(count):
    model = chain_model(batch_normalization)
    model.set_weights(initial_weights)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(BATCH).repeat()
    history = model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0)
  return model.get_weights(), history.history


@pytest.fixture(scope='module')
def initial_weights():
  tf_keras.utils.set_random_seed(3)
  return chain_model().get_weights()


@pytest.mark.parametrize('count', [2, 3, 4, 8])
def test_one_step_and_fifty_steps_equal_the_whole_batchs(initial_weights, count):
  """10 rows in 3, 4 or 8 micro-batches do not split evenly: the weighting must be n_k / B."""
  whole_step, _ = fitted(initial_weights, 1, 1)
  split_step, _ = fitted(initial_weights, count, 1)
  for start, whole, split in zip(initial_weights, whole_step, split_step):
    whole_gradient = (start - whole) / LEARNING_RATE
    split_gradient = (start - split) / LEARNING_RATE
    relative = np.abs(whole_gradient - split_gradient).max() / np.abs(whole_gradient).max()
    assert relative <= 1e-5
  whole_run, whole_history = fitted(initial_weights, 1, 50)
  split_run, split_history = fitted(initial_weights, count, 50)
  assert max(np.abs(whole - split).max() for whole, split in zip(whole_run, split_run)) <= 1e-4
  # The loss and metrics Keras reports are the whole batch's too.
  assert split_history['loss'][0] == pytest.approx(whole_history['loss'][0], rel=1e-5)
  assert split_history['accuracy'] == whole_history['accuracy']


def test_sizes_differ_by_at_most_one_and_cover_the_batch():
  for batch in range(1, 30):
    for count in range(1, 9):
      bounds = micro_batches.micro_batch_bounds(batch, count)
      sizes = [size for _, size in bounds]
      assert sum(sizes) == batch and max(sizes) - min(sizes) <= 1
      assert [start for start, _ in bounds] == list(np.cumsum([0] + sizes[:-1]))


def test_a_short_last_batch_skips_its_empty_micro_batches(initial_weights):
  """23 rows in batches of 10: the last has 3 rows for 4 micro-batches. BatchNormalization on
  an empty micro-batch would make its moving statistics NaN."""
  weights, _ = fitted(initial_weights[:2] + [np.ones(8), np.zeros(8), np.zeros(8), np.ones(8)]
                      + initial_weights[2:], 4, 3, rows=23, batch_normalization=True)
  assert all(np.isfinite(weight).all() for weight in weights)
  whole, _ = fitted(initial_weights, 1, 3, rows=23)
  split, _ = fitted(initial_weights, 4, 3, rows=23)
  assert max(np.abs(one - other).max() for one, other in zip(whole, split)) <= 1e-5


def test_keras_is_restored_after_the_run():
  keras_step = tf_keras.Model.train_step
  with micro_batches.accumulating(4):
    assert tf_keras.Model.train_step is not keras_step
  assert tf_keras.Model.train_step is keras_step


def test_a_model_with_its_own_train_step_is_refused_by_name():

  class OwnStep(tf_keras.Model):

    def __init__(self):
      super().__init__()
      self.dense = tf_keras.layers.Dense(1)

    def call(self, inputs):
      return self.dense(inputs)

    def train_step(self, batch):
      return super().train_step(batch)

  model = OwnStep()
  model.compile('sgd', 'mse')
  with micro_batches.accumulating(2), pytest.raises(
      ValueError, match='micro_batches=2: OwnStep defines its own train_step'):
    model.fit(np.ones((4, 2)), np.ones((4, 1)), verbose=0)


def test_a_batch_known_to_be_smaller_than_the_count_is_refused_by_name(initial_weights):
  features, labels = rows_of(8)
  dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(4, drop_remainder=True)
  with micro_batches.accumulating(5):
    model = chain_model()
    with pytest.raises(ValueError, match='micro_batches=5 is above the batch size 4'):
      model.fit(dataset, verbose=0)


@pytest.mark.parametrize('bad, message', [
    (0, 'micro_batches must be a whole number >= 1'),
    (-2, 'micro_batches must be a whole number >= 1'),
    (2.5, 'micro_batches must be a whole number >= 1'),
    (True, 'micro_batches must be a whole number >= 1'),
    ('four', 'micro_batches must be a whole number >= 1'),
])
def test_bad_micro_batches_are_refused_at_construction(bad, message):
  with pytest.raises(ValueError, match=message):
    DistributedTrainer(examples=helpers.channel(standard_artifacts.Examples),
                       module_file=trainer_tests.TABULAR_TEACHER, micro_batches=bad)


def test_micro_batches_above_the_configured_batch_size_are_refused_at_construction():
  with pytest.raises(ValueError, match='micro_batches=64 is above the batch size 32'):
    DistributedTrainer(examples=helpers.channel(standard_artifacts.Examples),
                       module_file=trainer_tests.TABULAR_TEACHER, micro_batches=64,
                       custom_config={'batch_size': 32})


def test_the_trainer_trains_with_micro_batches_in_its_process(data, tmp_path):
  model_uri, _ = trainer_tests.run_executor(data, str(tmp_path), train_steps=6, epochs=1,
                                            micro_batches=4)
  assert trainer_tests.serves_predictions(model_uri, data[2][:5])


def test_under_mirrored_strategy_one_all_reduce_per_step_and_the_whole_batchs_weights():
  """Two logical CPUs (a child process: they must be set before TensorFlow starts)."""
  finished = subprocess.run([sys.executable, MIRRORED_SCRIPT], capture_output=True, text=True,
                            timeout=300, check=False)
  assert finished.returncode == 0, finished.stderr[-3000:]
  result = json.loads(finished.stdout.strip().splitlines()[-1])
  assert result['replicas'] == 2
  # Keras' step all-reduces once per trace; so does the accumulating step, not once per
  # micro-batch.
  assert result['reductions'][str(1)] == result['reductions'][str(4)] >= 1
  assert result['max_abs_difference'] <= 1e-4


@pytest.mark.e2e  # long: two TensorFlow worker processes (make test-e2e)
def test_under_multi_worker_mirrored_two_workers_train_one_workers_weights(tmp_path):
  """Two worker processes, 4 micro-batches each, against one process on the same global
  batches: the same weights after 50 SGD steps."""
  tf_keras.utils.set_random_seed(2)
  reference = micro_batches_workers.model()
  start = reference.get_weights()
  start_path = str(tmp_path / 'start.npz')
  np.savez(start_path, **{f'weight_{index}': weight for index, weight in enumerate(start)})
  features, labels = micro_batches_workers.rows()
  reference.fit(tf.data.Dataset.from_tensor_slices((features, labels))
                .batch(micro_batches_workers.GLOBAL_BATCH).repeat(),
                steps_per_epoch=micro_batches_workers.STEPS, verbose=0)
  addresses = [f'127.0.0.1:{port}' for port in ports.free_ports(2)]
  output_path = str(tmp_path / 'chief.npz')
  workers = [subprocess.Popen(
      [sys.executable, WORKERS_SCRIPT,
       json.dumps({'cluster': {'worker': addresses}, 'task': {'type': 'worker', 'index': index}}),
       output_path, start_path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for index in range(2)]
  try:
    errors = [worker.communicate(timeout=300)[1] for worker in workers]
  finally:
    for worker in workers:
      worker.kill()
  assert [worker.returncode for worker in workers] == [0, 0], errors[0][-3000:]
  with np.load(output_path) as chief:
    trained = [chief[f'weight_{index}'] for index in range(len(chief.files))]
  assert max(np.abs(one - other).max()
             for one, other in zip(reference.get_weights(), trained)) <= 1e-4
