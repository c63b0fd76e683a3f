"""Shared callbacks: epoch progress bookkeeping and the batch-size suggestion."""

import numpy as np
import tf_keras

from tfx_distillery.components.common import callbacks


def test_suggested_batch_grows_until_all_reduce_is_a_fifth_of_the_step():
  # 30 ms all-reduce against 10 ms compute: compute must grow 12x to reach 80%.
  assert callbacks.suggested_batch_size(64, 0.030, 0.010) == 1024
  # Communication already small: keep the batch.
  assert callbacks.suggested_batch_size(512, 0.001, 0.050) == 512


def test_epoch_progress_records_the_epochs_that_ran():
  model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(2,))])
  model.compile('sgd', 'mse')
  progress = callbacks.EpochProgress('tiny')
  model.fit(np.zeros((8, 2)), np.zeros((8, 1)), epochs=5, initial_epoch=2, verbose=0,
            callbacks=[progress])
  assert progress.first_epoch == 3 and progress.epochs_run == 3
  assert len(progress.epoch_seconds) == 3 and all(seconds >= 0 for seconds in
                                                   progress.epoch_seconds)
