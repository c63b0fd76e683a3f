"""Keras callbacks shared by every training loop of ours."""

import math
import time
from typing import Optional

import tensorflow as tf
import tf_keras

from tfx_distillery.components.common import progress

# Above this share of step time in all-reduce, a larger per-replica batch pays.
COMMUNICATION_WARNING_SHARE = 0.5
# Share of step time we aim for when suggesting a batch size.
COMMUNICATION_TARGET_SHARE = 0.2


class EpochProgress(tf_keras.callbacks.Callback):
  """One progress line per epoch; remembers which epochs ran (resumes start later)."""

  def __init__(self, description: str = 'train'):
    super().__init__()
    self._description = description
    self._epoch_start = 0.0
    self.first_epoch: Optional[int] = None
    self.epochs_run = 0
    self.epoch_seconds = []
    # Each epoch's numeric logs (loss, accuracy, val_*): the training curve in metrics.json.
    self.curve = []

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch_start = time.monotonic()
    if self.first_epoch is None:
      self.first_epoch = epoch + 1

  def on_epoch_end(self, epoch, logs=None):
    self.epochs_run += 1
    self.epoch_seconds.append(time.monotonic() - self._epoch_start)
    self.curve.append({name: float(value) for name, value in sorted((logs or {}).items())
                       if isinstance(value, (int, float))})
    metrics = ' '.join(f'{name}={value:.4f}' for name, value in sorted((logs or {}).items())
                       if isinstance(value, (int, float)))
    progress.get_logger().info('%s epoch %d/%s: %s (%.1f s)', self._description, epoch + 1,
                               self.params.get('epochs', '?'), metrics,
                               self.epoch_seconds[-1])


# Divergence: a loss this many times the first epoch's, or above MAX_LOSS. A constant guess
# costs log(classes) (2.3 for ten); distillation's soft term, scaled by temperature squared,
# stays within a few hundred for any student that learns. TFX's taxi with census tracts
# of 1.7e10 fed unscaled trained at 10^6 to 2*10^8.
DIVERGENCE_FACTOR = 10.0
MAX_LOSS = 1e4
# ... and only above this loss: a constant guess between two classes costs 0.69, so a rise
# from 0.01 to 0.2 is a worse fit, not a divergence.
RELATIVE_FLOOR = 1.0


class TrainingDiverged(RuntimeError):
  """A training run whose loss went non-finite or far up: its model must not be handed on."""


class DivergenceGuard(tf_keras.callbacks.Callback):
  """Stops a fit whose loss is NaN or infinite, above MAX_LOSS, or (with `relative`)
  DIVERGENCE_FACTOR times its first epoch's, raising TrainingDiverged with `explain()`
  (what the inputs look like).

  A fine-tune that starts from a trained model (pruning, QAT, a warm restart) begins near
  its lowest loss, so it is checked without `relative`. Every worker sees the same
  all-reduced loss, so every worker stops alike.
  """

  def __init__(self, description: str, explain=None, relative: bool = True):
    super().__init__()
    self._description = description
    self._explain = explain
    self._relative = relative
    self.first_loss: Optional[float] = None

  def _check(self, loss, where: str) -> None:
    if loss is None:
      return
    loss = float(loss)
    reason = None
    if not math.isfinite(loss):
      reason = f'its loss is {loss} {where}'
    elif loss > MAX_LOSS:
      reason = f'its loss is {loss:.3g} {where}, above {MAX_LOSS:g}'
    elif (self._relative and self.first_loss is not None and loss > RELATIVE_FLOOR
          and loss > DIVERGENCE_FACTOR * self.first_loss):
      reason = (f'its loss rose to {loss:.3g} {where}, over {DIVERGENCE_FACTOR:g} times the '
                f'first epoch\'s {self.first_loss:.3g}')
    if reason:
      self.model.stop_training = True
      explanation = self._explain() if self._explain else ''
      raise TrainingDiverged(f'{self._description} diverged: {reason}'
                             + (f'. {explanation}' if explanation else ''))

  def on_train_batch_end(self, batch, logs=None):
    loss = (logs or {}).get('loss')
    if loss is not None and not math.isfinite(float(loss)):
      self._check(loss, f'at step {batch + 1}')

  def on_epoch_end(self, epoch, logs=None):
    loss = (logs or {}).get('loss')
    self._check(loss, f'after epoch {epoch + 1}')
    if self.first_loss is None and loss is not None:
      self.first_loss = float(loss)


class EarlyStoppingOnEval(tf_keras.callbacks.EarlyStopping):
  """Keras' EarlyStopping on the eval loss, restoring the best epoch's weights at the end.

  The best weights are restored whether or not training stopped early, so the
  exported model is the epoch with the lowest eval loss.
  """

  MONITOR = 'val_loss'

  def __init__(self, patience: int, description: str = 'train'):
    super().__init__(monitor=self.MONITOR, patience=patience, restore_best_weights=True)
    self._description = description

  def on_train_end(self, logs=None):
    super().on_train_end(logs)
    if self.best_weights is not None:
      progress.get_logger().info(
          '%s: kept epoch %d (lowest %s %.4f)%s', self._description, self.best_epoch + 1,
          self.MONITOR, self.best,
          f', stopped after epoch {self.stopped_epoch + 1}' if self.stopped_epoch else '')

  def describe(self) -> dict:
    return {'monitor': self.MONITOR, 'patience': self.patience,
            'best_epoch': self.best_epoch + 1 if self.best_weights is not None else None,
            'stopped_after_epoch': self.stopped_epoch + 1 if self.stopped_epoch else None}


def suggested_batch_size(per_replica_batch_size: int, communication_seconds: float,
                         compute_seconds: float,
                         target_share: float = COMMUNICATION_TARGET_SHARE) -> int:
  """Per-replica batch at which all-reduce would take `target_share` of a step.

  Compute grows with the batch while the all-reduce (gradient bytes) does not.
  """
  compute_needed = communication_seconds * (1 - target_share) / target_share
  scale = compute_needed / max(compute_seconds, 1e-9)
  return max(per_replica_batch_size,
             2 ** round(math.log2(max(1.0, per_replica_batch_size * scale))))


class CommunicationProfile(tf_keras.callbacks.Callback):
  """After the second epoch (the first traces), splits the step into all-reduce and the rest.

  The communication is a timed all-reduce of tensors shaped like the gradients,
  by the strategy's own collective: what each step must pay to agree on the
  gradients. The rest of the measured step is compute, input and waiting. A
  replica's forward and backward pass on a batch of zeros, gradients left
  unreduced, is timed too, for the step profile. It logs the split and warns
  when the all-reduce dominates the step, with a per-replica batch size that
  would fix it.
  """

  def __init__(self, per_replica_batch_size: int, repeats: int = 10):
    super().__init__()
    self._per_replica_batch_size = per_replica_batch_size
    self._repeats = repeats
    self._epoch_start = 0.0
    self._train_seconds: Optional[float] = None
    self.step_seconds: Optional[float] = None
    self.compute_seconds: Optional[float] = None
    self.all_reduce_seconds: Optional[float] = None

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch_start = time.monotonic()
    self._train_seconds = None

  def on_test_begin(self, logs=None):
    # Validation starts when the epoch's training steps are done.
    if self._train_seconds is None:
      self._train_seconds = time.monotonic() - self._epoch_start

  def on_epoch_end(self, epoch, logs=None):
    # The first epoch pays for tracing; measure on the second when there is one.
    last_epoch = epoch + 1 >= (self.params.get('epochs') or 1)
    if self.step_seconds is not None or (epoch == 0 and not last_epoch):
      return
    train_seconds = self._train_seconds or (time.monotonic() - self._epoch_start)
    self.step_seconds = train_seconds / (self.params.get('steps') or 1)
    self.all_reduce_seconds = self._time_all_reduce()
    self.compute_seconds = self._time_local_step()
    share = self.communication_share()
    logger = progress.get_logger()
    logger.info('step %.1f ms: all-reduce %.1f ms (%.0f%%), forward and backward pass %.1f ms, '
                'the rest (input, waiting) %.1f ms', 1000 * self.step_seconds,
                1000 * self.all_reduce_seconds, 100 * share, 1000 * self.compute_seconds,
                1000 * max(0.0, self.step_seconds - self.all_reduce_seconds
                           - self.compute_seconds))
    if share > COMMUNICATION_WARNING_SHARE:
      logger.warning(
          'WARNING: the gradient all-reduce takes %.0f%% of the step. A per-replica batch of '
          'about %d (now %d) would bring it near %.0f%% of the step.', 100 * share,
          suggested_batch_size(self._per_replica_batch_size, self.all_reduce_seconds,
                               max(self.step_seconds - self.all_reduce_seconds, 1e-9)),
          self._per_replica_batch_size, 100 * COMMUNICATION_TARGET_SHARE)

  def communication_share(self) -> float:
    """The timed all-reduce as a share of the measured step (0 before the profile ran)."""
    if not self.step_seconds or self.all_reduce_seconds is None:
      return 0.0
    return min(1.0, self.all_reduce_seconds / self.step_seconds)

  def describe(self) -> dict:
    """The step profile for metrics.json (empty before the profile ran)."""
    if self.step_seconds is None:
      return {}
    return {'step_ms': 1000 * self.step_seconds,
            'all_reduce_ms': 1000 * self.all_reduce_seconds,
            'forward_backward_ms': 1000 * self.compute_seconds,
            'communication_share': self.communication_share(),
            'suggested_per_replica_batch': suggested_batch_size(
                self._per_replica_batch_size, self.all_reduce_seconds,
                max(self.step_seconds - self.all_reduce_seconds, 1e-9))}

  def _time_local_step(self) -> float:
    """One replica's forward and backward pass, gradients not reduced: no collective."""
    strategy = self.model.distribute_strategy
    batch = {tensor.name.split(':')[0]: tf.zeros(
        [self._per_replica_batch_size] + tensor.shape.as_list()[1:], tensor.dtype)
             for tensor in self.model.inputs}
    if not isinstance(self.model.input, dict):
      batch = list(batch.values())

    @tf.function
    def local_step():
      def replica_fn():
        with tf.GradientTape() as tape:
          loss = tf.reduce_mean(self.model(batch, training=True))
        return tape.gradient(loss, self.model.trainable_variables)
      return strategy.run(replica_fn)

    return self._average_seconds(local_step)

  def _time_all_reduce(self) -> float:
    strategy = self.model.distribute_strategy
    gradients_like = [tf.zeros_like(variable) for variable in self.model.trainable_variables]

    @tf.function
    def all_reduce():
      def replica_fn():
        context = tf.distribute.get_replica_context()
        return context.all_reduce(tf.distribute.ReduceOp.SUM, gradients_like)
      return strategy.run(replica_fn)

    return self._average_seconds(all_reduce)

  def _average_seconds(self, step) -> float:
    """Mean wall time of a strategy.run step, after one call that traces and warms up."""
    step()
    start = time.monotonic()
    for _ in range(self._repeats):
      result = step()
    # Waits for the last call to finish before the clock stops.
    tf.nest.map_structure(lambda tensor: tensor.numpy() if hasattr(tensor, 'numpy') else tensor,
                          self.model.distribute_strategy.experimental_local_results(result))
    return (time.monotonic() - start) / self._repeats
