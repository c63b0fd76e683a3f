"""Progress beats from a training process, and the watch on them in the process that waits.

A process started by a DistributedTrainer (or a Distiller) writes its phase to a small
file named in `DISTILLERY_HEARTBEAT_FILE`: at set-up, at every training and validation
step (at most once a second), and at export. The waiting process reads each file's
last beat; a process whose beat is older than the component's bound is stuck, and the
file says in which phase.
"""

import json
import os
import time
from typing import Optional

import tf_keras

ENVIRONMENT_VARIABLE = 'DISTILLERY_HEARTBEAT_FILE'
# Phases a beat names; `collective` is told apart from the others by the stack dump.
SET_UP = 'set-up'
STEP = 'step'
VALIDATION = 'validation'
EXPORT = 'export'
# Beats within a phase are written at most this often: a step can take a millisecond.
MINIMUM_INTERVAL_SECONDS = 1.0

_last = {'phase': None, 'time': 0.0}


def beat(phase: str, detail: str = '') -> None:
  """Records that this process is alive in `phase`; does nothing outside a watched process."""
  path = os.environ.get(ENVIRONMENT_VARIABLE)
  if not path:
    return
  now = time.time()
  # Steps repeat a phase many times a second; any other beat is written at once.
  if (phase in (STEP, VALIDATION) and phase == _last['phase']
      and now - _last['time'] < MINIMUM_INTERVAL_SECONDS):
    return
  _last.update(phase=phase, time=now)
  temporary = f'{path}.tmp'
  with open(temporary, 'w') as handle:
    json.dump({'phase': phase, 'detail': detail, 'time': now}, handle)
  os.replace(temporary, path)  # The watcher never reads a half-written beat.


def read(path: str) -> Optional[dict]:
  """The last beat in `path`, or None before the first."""
  try:
    with open(path) as handle:
      return json.load(handle)
  except (OSError, ValueError):
    return None


class KerasEpochBeats(tf_keras.callbacks.Callback):
  """Beats at the start and end of a `fit`, of each epoch and of each validation.

  ParameterServerStrategy refuses batch-level callbacks, so under it this is all.
  """

  def on_train_begin(self, logs=None):
    beat(STEP, 'first training step (tracing the model)')

  def on_epoch_end(self, epoch, logs=None):
    beat(STEP, f'after epoch {epoch + 1}')

  def on_test_begin(self, logs=None):
    beat(VALIDATION, 'validation')

  def on_test_end(self, logs=None):
    beat(STEP, 'after validation')

  def on_train_end(self, logs=None):
    beat(EXPORT, 'training ended; saving')


class KerasBeats(tf_keras.callbacks.Callback):
  """Beats at every training and validation step of a `fit`, and at its end."""

  def __init__(self):
    super().__init__()
    self._step = 0

  def on_train_begin(self, logs=None):
    beat(STEP, 'first training step (tracing the model)')

  def on_train_batch_end(self, batch, logs=None):
    self._step += 1
    beat(STEP, f'training step {self._step}')

  def on_test_begin(self, logs=None):
    beat(VALIDATION, 'first validation step')

  def on_test_batch_end(self, batch, logs=None):
    beat(VALIDATION, f'validation step {batch + 1}')

  def on_test_end(self, logs=None):
    beat(STEP, f'after training step {self._step}')

  def on_train_end(self, logs=None):
    beat(EXPORT, f'training ended after step {self._step}; saving')


def beat_in_every_fit() -> None:
  """Adds `KerasBeats` to every Keras callback list of this process (a user's fit included).

  A `fit` without our `EpochProgress` gets one too, so a stock run_fn's worker prints a
  line per epoch like ours do.

  A user's run_fn builds its own callbacks, so the beats join at the one place every
  `fit`, `evaluate` and `predict` passes through.
  """
  callback_list = tf_keras.callbacks.CallbackList
  if getattr(callback_list, '_distillery_beats', False):
    return
  original_init = callback_list.__init__

  def init_with_beats(self, callbacks=None, *args, **kwargs):
    from tfx_distillery.components.common import callbacks as our_callbacks  # pylint: disable=g-import-not-at-top
    callbacks = list(callbacks or []) if not isinstance(callbacks, list) else callbacks
    added = []
    if not any(isinstance(callback, (KerasBeats, KerasEpochBeats)) for callback in callbacks):
      model = kwargs.get('model')
      strategy = getattr(model, 'distribute_strategy', None)
      added.append(KerasEpochBeats() if 'ParameterServer' in type(strategy).__name__
                   else KerasBeats())
    # A fit (it alone passes `epochs`) of a stock run_fn prints no line of ours per epoch.
    if 'epochs' in kwargs and not any(isinstance(callback, our_callbacks.EpochProgress)
                                      for callback in callbacks):
      added.append(our_callbacks.EpochProgress())
    original_init(self, callbacks + added, *args, **kwargs)

  callback_list.__init__ = init_with_beats
  callback_list._distillery_beats = True  # pylint: disable=protected-access
