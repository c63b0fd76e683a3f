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


def test_early_stopping_keeps_the_epoch_with_the_lowest_eval_loss():
  # Eval labels are the opposite of the training labels: every epoch of training makes the
  # eval loss worse, so the best epoch is the first and training stops after 1 + patience.
  features = np.random.RandomState(0).normal(size=(64, 3)).astype(np.float32)
  labels = (features[:, 0] > 0).astype(np.float32)
  tf_keras.utils.set_random_seed(1)
  model = tf_keras.Sequential([tf_keras.layers.Dense(1, input_shape=(3,))])
  model.compile(tf_keras.optimizers.SGD(0.5),
                tf_keras.losses.BinaryCrossentropy(from_logits=True))
  weights_after_epoch = []
  record = tf_keras.callbacks.LambdaCallback(
      on_epoch_end=lambda epoch, logs: weights_after_epoch.append(model.get_weights()))
  stopping = callbacks.EarlyStoppingOnEval(patience=2, description='tiny')
  progress = callbacks.EpochProgress('tiny')
  model.fit(features, labels, validation_data=(features, 1 - labels), epochs=10, verbose=0,
            callbacks=[progress, record, stopping])
  assert progress.epochs_run == 3
  assert stopping.describe() == {'monitor': 'val_loss', 'patience': 2, 'best_epoch': 1,
                                 'stopped_after_epoch': 3}
  for kept, first in zip(model.get_weights(), weights_after_epoch[0]):
    np.testing.assert_array_equal(kept, first)
  assert not np.array_equal(model.get_weights()[0], weights_after_epoch[-1][0])
  # The curve holds every epoch's logs, eval loss rising.
  losses = [epoch['val_loss'] for epoch in progress.curve]
  assert len(losses) == 3 and losses[0] < losses[1] < losses[2]
