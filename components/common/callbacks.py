"""Keras callbacks shared by every training loop of ours."""

import time
from typing import Optional

import tf_keras

from components.common import progress


class EpochProgress(tf_keras.callbacks.Callback):
  """Keras callback printing one progress line per epoch."""

  def __init__(self, description: str = 'train', total_epochs: Optional[int] = None):
    super().__init__()
    self._description = description
    self._total_epochs = total_epochs
    self._epoch_start = 0.0

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch_start = time.monotonic()

  def on_epoch_end(self, epoch, logs=None):
    total = self._total_epochs or self.params.get('epochs') or '?'
    metrics = ' '.join(f'{name}={value:.4f}' for name, value in sorted((logs or {}).items())
                       if isinstance(value, (int, float)))
    progress.get_logger().info('%s%s epoch %d/%s: %s (%.1f s)', progress.worker_prefix(), self._description,
                      epoch + 1, total, metrics, time.monotonic() - self._epoch_start)
