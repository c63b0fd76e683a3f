"""TrainingRun's readers: validation that does not follow the machine's timing."""

import time
import types

import numpy as np
import pytest
import tensorflow as tf

from tfx_distillery.components.common import modeling
from tfx_distillery.components.common import reading
from tests import helpers

RAW_SPEC = {'x': tf.io.FixedLenFeature([], tf.float32),
            'label': tf.io.FixedLenFeature([], tf.int64)}


def preprocessing_fn(inputs):
  return {'x_xf': inputs['x'] * 2.0, 'label': inputs['label']}


@pytest.fixture(scope='module')
def transformed(tmp_path_factory):
  rows = [{'x': float(index), 'label': index % 3} for index in range(300)]
  return helpers.run_transform(preprocessing_fn, rows, RAW_SPEC,
                               str(tmp_path_factory.mktemp('training_run')), num_shards=3)


def training_run(transformed, options):
  tf_transform_output, pattern = transformed
  return modeling.TrainingRun(
      fn_args=types.SimpleNamespace(eval_files=[pattern]), tf_transform_output=tf_transform_output,
      classes=None, units=3, strategy=tf.distribute.get_strategy(), per_replica_batch_size=40,
      global_batch_size=40, epochs=1, steps_per_epoch=1, eval_steps=10, steps_per_execution=1,
      label_column='label', label_key='label', options=options)


@pytest.mark.parametrize('cache', ['none', 'memory'])
def test_every_validation_reads_the_same_batches_whatever_the_last_one_read_ahead(
    transformed, cache):
  # The stock reader settings shuffle; the seed is set, as a seeded run sets it.
  tf.keras.utils.set_random_seed(3)
  dataset = training_run(transformed, reading.IngestionOptions(cache=cache)).eval_dataset()

  def validation():
    # Keras makes a new iterator per validation and drops it after validation_steps;
    # 10 batches of 40 go past one pass of 300 rows, and the pause lets it read ahead.
    iterator = iter(dataset)
    values = np.concatenate([next(iterator)[0]['x_xf'].numpy() for _ in range(10)])
    time.sleep(0.3)
    return values

  first = validation()
  for _ in range(2):
    np.testing.assert_array_equal(validation(), first)
