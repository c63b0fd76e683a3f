"""Shared pieces of every module file: feature helpers, model blocks, train and export.

Module files (taxi_*, digits_*, tabular_*) import this; nothing here is copied.
Every model outputs logits: one for a binary label, one per class otherwise.
"""

import json
import os
from typing import Callable, Dict, Optional

import tensorflow as tf
import tf_keras
import tensorflow_transform as tft

from components.common import callbacks
from components.common import evaluation
from components.common import progress
from components.common import reading
from components.distributed_trainer import strategy as distribution

LABEL_KEY = reading.DEFAULT_LABEL_KEY
# Vocabulary file of string labels; its order defines the class indices.
LABEL_VOCABULARY = 'label'
SERVING_SIGNATURE = evaluation.SERVING_SIGNATURE
TRANSFORM_SIGNATURE = evaluation.TRANSFORM_SIGNATURE
METRICS_FILE_NAME = 'metrics.json'
STEPS_PER_EXECUTION = 16

ModelBuilder = Callable[[tft.TFTransformOutput, Optional[dict]], tf_keras.Model]


def transformed_name(key: str) -> str:
  """Name of the transformed feature made from raw column `key`."""
  return f'{key}_xf'


def fill_in_missing(tensor, default_value=None):
  """Turns a raw column (dense [batch, 1] or sparse when values are missing) into [batch].

  Args:
    tensor: The raw input tensor.
    default_value: Fill value; '' for strings and 0 for numbers when None.

  Returns:
    A dense rank-1 tensor.
  """
  if default_value is None:
    default_value = '' if tensor.dtype == tf.string else tf.cast(0, tensor.dtype)
  if isinstance(tensor, tf.sparse.SparseTensor):
    tensor = tf.sparse.to_dense(
        tf.SparseTensor(tensor.indices, tensor.values, [tensor.dense_shape[0], 1]),
        default_value)
  return tf.reshape(tensor, [-1])


def as_category_strings(tensor):
  """Category codes (integers or strings) as strings, '' where the value is missing."""
  if tensor.dtype == tf.string:
    return fill_in_missing(tensor, '')
  if isinstance(tensor, tf.sparse.SparseTensor):
    tensor = tf.SparseTensor(tensor.indices, tf.strings.as_string(tensor.values),
                             tensor.dense_shape)
    return fill_in_missing(tensor, '')
  return tf.reshape(tf.strings.as_string(tensor), [-1])


def set_label_domain(label: tf.Tensor, num_classes: int) -> tf.Tensor:
  """Records in the transformed schema that the label lies in [0, num_classes)."""
  tft.schema_inference.set_tensor_schema_override(
      label, tf.constant(0, label.dtype), tf.constant(num_classes - 1, label.dtype))
  return label


def num_classes(tf_transform_output: tft.TFTransformOutput) -> int:
  """Number of label classes, read from the transformed schema's label domain."""
  return tf_transform_output.num_buckets_for_transformed_feature(LABEL_KEY)


def feature_inputs(tf_transform_output: tft.TFTransformOutput) -> Dict[str, tf_keras.Input]:
  """One Keras input per transformed feature (the label excluded)."""
  inputs = {}
  for name, spec in sorted(tf_transform_output.transformed_feature_spec().items()):
    if name == LABEL_KEY:
      continue
    inputs[name] = tf_keras.Input(shape=tuple(spec.shape), name=name, dtype=spec.dtype)
  return inputs


def encode_features(inputs: Dict[str, tf_keras.Input],
                    tf_transform_output: tft.TFTransformOutput,
                    max_embedding_dim: int = 8) -> tf.Tensor:
  """Concatenates numbers as they are and embeds integer (categorical) features."""
  columns = []
  for name, tensor in inputs.items():
    if tensor.dtype.is_integer:
      buckets = tf_transform_output.num_buckets_for_transformed_feature(name)
      embedding_dim = int(min(max_embedding_dim, max(2, round(buckets ** 0.5))))
      embedded = tf_keras.layers.Embedding(buckets, embedding_dim, name=f'{name}_embedding')(
          tf_keras.layers.Reshape((1,))(tensor) if tensor.shape.rank == 1 else tensor)
      columns.append(tf_keras.layers.Flatten()(embedded))
    else:
      columns.append(tf_keras.layers.Reshape((-1,))(
          tf.cast(tensor, tf.float32) if tensor.dtype != tf.float32 else tensor))
  if len(columns) == 1:
    return columns[0]
  return tf_keras.layers.Concatenate()(columns)


def output_units(tf_transform_output: tft.TFTransformOutput) -> int:
  """One logit for a binary label, one per class otherwise."""
  classes = num_classes(tf_transform_output)
  return 1 if classes == 2 else classes


def build_mlp(tf_transform_output: tft.TFTransformOutput,
              hidden_units,
              dropout: float = 0.0,
              name: str = 'mlp') -> tf_keras.Model:
  """A dense network over all transformed features that outputs logits."""
  inputs = feature_inputs(tf_transform_output)
  hidden = encode_features(inputs, tf_transform_output)
  for units in hidden_units:
    hidden = tf_keras.layers.Dense(units, activation='relu')(hidden)
    if dropout:
      hidden = tf_keras.layers.Dropout(dropout)(hidden)
  logits = tf_keras.layers.Dense(output_units(tf_transform_output), name='logits')(hidden)
  return tf_keras.Model(inputs=inputs, outputs=logits, name=name)


def loss_and_metrics(units: int):
  """Cross-entropy on logits and an accuracy that reads logits."""
  if units == 1:
    return (tf_keras.losses.BinaryCrossentropy(from_logits=True),
            [tf_keras.metrics.BinaryAccuracy(name='accuracy', threshold=0.0)])
  return (tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
          [tf_keras.metrics.SparseCategoricalAccuracy(name='accuracy')])


def prepare_labels(units: int):
  """Maps (features, label) batches to what the loss expects."""

  def prepare(features, label):
    label = tf.reshape(label, [-1])
    if units == 1:
      return features, tf.cast(tf.reshape(label, [-1, 1]), tf.float32)
    return features, label

  return prepare


def outputs_from_logits(logits: tf.Tensor) -> Dict[str, tf.Tensor]:
  """Serving outputs: logits, probabilities and the predicted class."""
  if logits.shape[-1] == 1:
    probabilities = tf.sigmoid(logits)
    classes = tf.cast(tf.reshape(logits, [-1]) > 0, tf.int64)
  else:
    probabilities = tf.nn.softmax(logits)
    classes = tf.argmax(logits, axis=-1)
  return {'logits': logits, 'probabilities': probabilities, 'classes': classes}


def serving_signatures(model: tf_keras.Model, tf_transform_output: tft.TFTransformOutput,
                       label_column: str) -> Dict[str, Callable]:
  """Signatures that take serialized raw tf.Examples and apply the transform inside.

  Args:
    model: Keras model over transformed features, emitting logits.
    tf_transform_output: The transform graph the model was trained on.
    label_column: Raw label column, which serving requests don't carry.

  Returns:
    `serving_default` (predictions) and `transform_features` (transformed inputs).
  """
  model.tft_layer = tf_transform_output.transform_features_layer()
  raw_feature_spec = dict(tf_transform_output.raw_feature_spec())
  raw_feature_spec.pop(label_column, None)

  @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name='examples')])
  def serve_examples(serialized_examples):
    raw_features = tf.io.parse_example(serialized_examples, raw_feature_spec)
    transformed = model.tft_layer(raw_features)
    features = {name: transformed[name] for name in model.input_names}
    return outputs_from_logits(model(features, training=False))

  full_raw_spec = tf_transform_output.raw_feature_spec()

  @tf.function(input_signature=[tf.TensorSpec(shape=[None], dtype=tf.string, name='examples')])
  def transform_examples(serialized_examples):
    raw_features = tf.io.parse_example(serialized_examples, full_raw_spec)
    return model.tft_layer(raw_features)

  return {SERVING_SIGNATURE: serve_examples, TRANSFORM_SIGNATURE: transform_examples}


def export_serving_model(model: tf_keras.Model, tf_transform_output: tft.TFTransformOutput,
                         label_column: str, serving_model_dir: str) -> None:
  """Saves a SavedModel with the serving signatures, written whole or not at all."""
  signatures = serving_signatures(model, tf_transform_output, label_column)
  temporary_dir = serving_model_dir.rstrip('/') + '.tmp'
  if tf.io.gfile.exists(temporary_dir):
    tf.io.gfile.rmtree(temporary_dir)
  model.save(temporary_dir, save_format='tf', signatures=signatures)
  if tf.io.gfile.exists(serving_model_dir):
    tf.io.gfile.rmtree(serving_model_dir)
  tf.io.gfile.rename(temporary_dir, serving_model_dir)


def write_metrics(directory: str, metrics: dict) -> None:
  """Writes `metrics.json` (eval accuracy, parameters, ...) into a run directory."""
  tf.io.gfile.makedirs(directory)
  with tf.io.gfile.GFile(os.path.join(directory, METRICS_FILE_NAME), 'w') as handle:
    handle.write(json.dumps(metrics, indent=2, sort_keys=True))


def config_value(fn_args, key: str, default):
  """A setting from hyperparameters, else custom_config, else the default."""
  for source in (getattr(fn_args, 'hyperparameters', None), getattr(fn_args, 'custom_config', None)):
    if isinstance(source, dict) and key in source:
      return source[key]
  return default


def train_and_export(fn_args, build_model: ModelBuilder, model_name: str) -> tf_keras.Model:
  """The whole run_fn: read, train with progress lines, evaluate, export.

  Works under every DistributedTrainer strategy and under the stock Trainer. The
  `batch_size` setting is per replica; the global batch is that times the
  replicas in sync.

  Args:
    fn_args: The `FnArgs` TFX hands to `run_fn`.
    build_model: Builds the Keras model (logits out) from the transform output.
    model_name: Name used in progress lines and metrics.

  Returns:
    The trained Keras model.
  """
  tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
  units = output_units(tf_transform_output)
  strategy = distribution.strategy_for(fn_args)
  per_replica_batch_size = int(config_value(fn_args, 'batch_size', 256))
  global_batch_size = per_replica_batch_size * strategy.num_replicas_in_sync
  epochs = max(1, min(int(config_value(fn_args, 'epochs', 5)), fn_args.train_steps))
  steps_per_epoch = max(1, fn_args.train_steps // epochs)
  eval_steps = max(1, fn_args.eval_steps or 1)
  label_column = config_value(fn_args, 'label_column', LABEL_KEY)
  options = reading.read_options(os.path.dirname(os.path.dirname(fn_args.train_files[0])))

  prepare = prepare_labels(units)
  # Whole batches only: workers must all-gather equally shaped (embedding) gradients.
  train_dataset = reading.make_dataset(fn_args.train_files, tf_transform_output,
                                       global_batch_size, options, batch_map_fn=prepare,
                                       drop_remainder=True)
  eval_dataset = reading.make_dataset(fn_args.eval_files, tf_transform_output,
                                      global_batch_size, options, batch_map_fn=prepare)

  # Several steps per call amortise the per-call cost of a step (Python, and for
  # several workers the collective launch and synchronisation), which dominates
  # small batches.
  steps_per_execution = max(1, min(steps_per_epoch, int(config_value(
      fn_args, 'steps_per_execution', STEPS_PER_EXECUTION))))
  with strategy.scope():
    model = build_model(tf_transform_output, getattr(fn_args, 'hyperparameters', None))
    loss, metrics = loss_and_metrics(units)
    model.compile(optimizer=tf_keras.optimizers.Adam(
        float(config_value(fn_args, 'learning_rate', 1e-3))), loss=loss, metrics=metrics,
                  steps_per_execution=steps_per_execution)
  progress.get_logger().info(
      '%s: %d parameters, %s x %d replicas, global batch %d = %d per replica x %d, '
      '%d epochs x %d steps, %d steps per call', model_name, model.count_params(),
      type(strategy).__name__, strategy.num_replicas_in_sync, global_batch_size,
      per_replica_batch_size, strategy.num_replicas_in_sync, epochs, steps_per_epoch,
      steps_per_execution)
  epoch_progress = callbacks.EpochProgress(model_name)
  training_callbacks = [epoch_progress, tf_keras.callbacks.TensorBoard(fn_args.model_run_dir)]
  if distribution.backup_dir(fn_args):
    training_callbacks.append(
        tf_keras.callbacks.BackupAndRestore(distribution.backup_dir(fn_args)))
  if distribution.uses_all_reduce(fn_args, strategy):
    training_callbacks.append(callbacks.CommunicationProfile(per_replica_batch_size))
  model.fit(train_dataset, epochs=epochs, steps_per_epoch=steps_per_epoch,
            validation_data=eval_dataset, validation_steps=eval_steps, verbose=0,
            callbacks=training_callbacks)
  evaluation = model.evaluate(eval_dataset, steps=eval_steps, verbose=0, return_dict=True)
  write_metrics(fn_args.model_run_dir, {
      'model': model_name,
      'eval_accuracy': float(evaluation['accuracy']),
      'eval_loss': float(evaluation['loss']),
      'parameters': int(model.count_params()),
      'train_steps': int(fn_args.train_steps),
      'epochs': epochs,
      'first_epoch': epoch_progress.first_epoch,
      'epochs_run': epoch_progress.epochs_run,
      'global_batch_size': global_batch_size,
      'steps_per_epoch': steps_per_epoch,
      'epoch_seconds': epoch_progress.epoch_seconds,
  })
  export_serving_model(model, tf_transform_output, label_column, fn_args.serving_model_dir)
  return model
