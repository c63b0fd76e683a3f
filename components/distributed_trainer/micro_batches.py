"""Gradient accumulation: K micro-batches per step, one optimizer update (one all-reduce).

tf_keras, which TFX needs, has no gradient accumulation (Keras 3's optimizers do). So
that a stock module file runs unchanged, the DistributedTrainer swaps Keras' own
`Model.train_step` for one that splits each batch into K micro-batches, runs the
forward and backward pass on each, weights micro-batch k's gradient by n_k / B and
applies the sum once. Under MirroredStrategy and MultiWorkerMirroredStrategy the
gradients are all-reduced inside that one `apply_gradients`, so once per step.

Why n_k / B: Keras' losses average over the micro-batch they see (its default
`SUM_OVER_BATCH_SIZE` reduction), so the mean over the whole batch is the micro-batch
means weighted by their sizes. That holds for a batch that does not split evenly;
micro-batch sizes differ by at most one. Regularization losses, added once per
micro-batch, are weighted the same way and so count once per step.

BatchNormalization computes its statistics per micro-batch, as GPipe's does: a model
with it trains slightly differently with K > 1 (smaller batches, noisier statistics).
A model without it gets the full batch's update, up to float rounding.
"""

import contextlib
from typing import Iterator, List, Optional

from tfx_distillery.components.common import progress

# The parameter's name, in the spec and in error messages.
MICRO_BATCHES_KEY = 'micro_batches'


def validate(micro_batches, batch_size: Optional[int] = None) -> None:
  """Raises ValueError naming `micro_batches` unless it is a whole number in [1, batch_size].

  Args:
    micro_batches: The DistributedTrainer's argument.
    batch_size: The batch size where it is known (custom_config's `batch_size`), else None.
  """
  if (isinstance(micro_batches, bool) or not isinstance(micro_batches, int)
      or micro_batches < 1):
    raise ValueError(f'{MICRO_BATCHES_KEY} must be a whole number >= 1 (micro-batches per '
                     f'training step; 1 for none); got {micro_batches!r}.')
  if batch_size is not None and micro_batches > batch_size:
    raise ValueError(f'{MICRO_BATCHES_KEY}={micro_batches} is above the batch size '
                     f'{batch_size}: every micro-batch needs at least one example.')


def micro_batch_bounds(batch_size, micro_batches: int):
  """Where each micro-batch starts and how many rows it has: sizes differ by at most one.

  Args:
    batch_size: Rows in the batch (an int or a scalar int tensor).
    micro_batches: K.

  Returns:
    K (start, size) pairs, of the same kind as `batch_size`.
  """
  base, extra = batch_size // micro_batches, batch_size % micro_batches
  bounds, start = [], 0
  for index in range(micro_batches):
    # The first `extra` micro-batches take one row more.
    if isinstance(batch_size, int):
      size = base + (1 if index < extra else 0)
    else:
      import tensorflow as tf  # pylint: disable=g-import-not-at-top
      size = base + tf.cast(index < extra, base.dtype)
    bounds.append((start, size))
    start = start + size
  return bounds


def _rows(value, start, size):
  """Rows [start, start + size) of a batch: a dense, ragged or sparse tensor."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if isinstance(value, tf.SparseTensor):
    rank = value.dense_shape.shape[0]
    begin = tf.concat([[tf.cast(start, tf.int64)], tf.zeros([rank - 1], tf.int64)], 0)
    extent = tf.concat([[tf.cast(size, tf.int64)], value.dense_shape[1:]], 0)
    return tf.sparse.slice(value, begin, extent)
  return value[start:start + size]


def _slice(structure, start, size):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if structure is None:
    return None
  return tf.nest.map_structure(lambda value: _rows(value, start, size), structure,
                               expand_composites=False)


def _batch_size(x):
  """The batch's rows: the first feature's leading dimension."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  first = tf.nest.flatten(x)[0]
  if isinstance(first, tf.SparseTensor):
    return tf.cast(first.dense_shape[0], tf.int32), None
  if isinstance(first, tf.RaggedTensor):
    return tf.cast(first.nrows(), tf.int32), None
  static = first.shape[0] if first.shape.rank else None
  return tf.shape(first)[0], static


def _dense(gradient):
  """An IndexedSlices gradient (an embedding's) as a dense tensor, so that sums are plain."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices) else gradient


def accumulating_train_step(model, data, micro_batches: int):
  """Keras' train_step over `micro_batches` micro-batches, with one optimizer update.

  Args:
    model: The tf_keras Model being fitted.
    data: One batch, as `fit` hands it to train_step.
    micro_batches: K >= 1.

  Returns:
    The metrics' results, as Keras' train_step returns them.

  Raises:
    ValueError: naming `micro_batches` when the batch is statically smaller than K.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_keras.src.engine import data_adapter  # pylint: disable=g-import-not-at-top
  x, y, sample_weight = data_adapter.unpack_x_y_sample_weight(data)
  batch_size, static_batch_size = _batch_size(x)
  if static_batch_size is not None and static_batch_size < micro_batches:
    raise ValueError(f'{MICRO_BATCHES_KEY}={micro_batches} is above the batch size '
                     f'{static_batch_size}: every micro-batch needs at least one example.')
  optimizer = model.optimizer
  # Mixed precision: the loss is scaled before the backward pass, the gradients unscaled.
  scales_loss = hasattr(optimizer, 'get_scaled_loss') and hasattr(
      optimizer, 'get_unscaled_gradients')
  variables = model.trainable_variables
  from tf_keras.src.engine import training  # pylint: disable=g-import-not-at-top
  keras_metrics = type(model).compute_metrics is training.Model.compute_metrics
  bounds = micro_batch_bounds(batch_size, micro_batches)
  whole = tf.cast(batch_size, tf.float32)

  def micro_batch_gradients(start, size, present: Optional[List[bool]] = None):
    micro_x = _slice(x, start, size)
    micro_y = _slice(y, start, size)
    micro_weight = _slice(sample_weight, start, size)
    with tf.GradientTape() as tape:
      prediction = model(micro_x, training=True)
      loss = model.compute_loss(micro_x, micro_y, prediction, micro_weight)
      scaled = optimizer.get_scaled_loss(loss) if scales_loss else loss
    gradients = tape.gradient(scaled, variables)
    if scales_loss:
      gradients = optimizer.get_unscaled_gradients(gradients)
    if keras_metrics:
      # What Keras' compute_metrics does, without reading the results: a result inside
      # tf.cond is a cross-replica merge_call, which tf.distribute refuses there.
      model.compiled_metrics.update_state(micro_y, prediction, micro_weight)
    else:
      model.compute_metrics(micro_x, micro_y, prediction, micro_weight)
    share = tf.cast(size, tf.float32) / whole
    weighted = [None if gradient is None else _dense(gradient) * tf.cast(share, gradient.dtype)
                for gradient in gradients]
    if present is not None:  # Inside tf.cond: the same structure in both branches.
      weighted = [gradient for gradient, kept in zip(weighted, present) if kept]
    return weighted, loss

  # The first micro-batch is never empty (B >= 1), and runs unconditionally so that a model
  # built on its first call creates its variables outside any tf.cond.
  start, size = bounds[0]
  accumulated, first_loss = micro_batch_gradients(start, size)
  model._validate_target_and_loss(y, first_loss)  # pylint: disable=protected-access
  present = [gradient is not None for gradient in accumulated]
  for start, size in bounds[1:]:
    zeros = [tf.zeros_like(gradient) for gradient in accumulated if gradient is not None]
    # A batch with fewer rows than K (a dataset's short last batch) leaves micro-batches
    # empty: they are skipped, since a forward pass on no rows makes BatchNormalization's
    # moving statistics NaN.
    gradients = tf.cond(
        size > 0,
        lambda start=start, size=size: micro_batch_gradients(start, size, present)[0],
        lambda zeros=zeros: zeros)
    gradients = iter(gradients if isinstance(gradients, (list, tuple)) else [gradients])
    accumulated = [None if gradient is None else gradient + next(gradients)
                   for gradient in accumulated]
  optimizer.apply_gradients(
      (gradient, variable) for gradient, variable in zip(accumulated, variables)
      if gradient is not None)
  return model.get_metrics_result()


@contextlib.contextmanager
def accumulating(micro_batches: int) -> Iterator[None]:
  """Within it, every tf_keras model's `fit` accumulates over `micro_batches` per step.

  Keras' own `Model.train_step` is swapped for `accumulating_train_step`; with
  `micro_batches` = 1 nothing changes. A model class with a train_step of its own is
  refused when it is fitted, by name: its step is not Keras', so it cannot be split.

  Args:
    micro_batches: K >= 1.

  Yields:
    Nothing; Keras is restored on exit.
  """
  if micro_batches == 1:
    yield
    return
  from tf_keras.src.engine import training  # pylint: disable=g-import-not-at-top
  keras_train_step = training.Model.train_step
  keras_make_train_function = training.Model.make_train_function

  def train_step(self, data):
    return accumulating_train_step(self, data, micro_batches)

  def make_train_function(self, force=False):
    own = type(self).train_step
    if own is not train_step:
      raise ValueError(
          f'{MICRO_BATCHES_KEY}={micro_batches}: {type(self).__name__} defines its own '
          'train_step, which the DistributedTrainer cannot split into micro-batches; use '
          f'{MICRO_BATCHES_KEY}=1, or accumulate in that train_step.')
    if self.train_function is None or force:
      progress.get_logger().info(
          '%s: %d micro-batches per step, gradients accumulated and applied once.',
          self.name, micro_batches)
    return keras_make_train_function(self, force=force)

  training.Model.train_step = train_step
  training.Model.make_train_function = make_train_function
  try:
    yield
  finally:
    training.Model.train_step = keras_train_step
    training.Model.make_train_function = keras_make_train_function


def training_step(training):
  """The context every fit of a training process runs in, from its TrainingSettings.

  GPipe's stages for strategy `pipeline` (gpipe.Pipelining), else gradient accumulation
  over `micro_batches` (`accumulating`, which changes nothing for 1).
  """
  if training.strategy == 'pipeline':
    from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
    return gpipe.Pipelining(training.stages, training.micro_batches, training.recompute,
                            training.plan_path or None)
  return accumulating(training.micro_batches)
