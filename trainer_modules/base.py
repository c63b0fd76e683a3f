"""Shared pieces of every module file: feature helpers, model blocks, train and export.

Module files (taxi_*, digits_*, tabular_*) import this; nothing here is copied.
Every model outputs logits: one for a binary label, one per class otherwise.
"""

import copy
import re
from typing import Callable, Dict, Optional

import tensorflow as tf
import tf_keras
import tensorflow_transform as tft

from tfx_distillery.components.common import modeling
from tfx_distillery.components.common import progress
# Re-exported: module files reach every shared piece through this one module.
from tfx_distillery.components.common.modeling import (  # pylint: disable=unused-import
    LABEL_KEY, METRICS_FILE_NAME, SERVING_SIGNATURE, TRANSFORM_SIGNATURE, config_value,
    export_serving_model, loss_and_metrics, num_classes, output_units, outputs_from_logits,
    prepare_labels, serving_signatures, write_metrics)

# Vocabulary file of string labels; its order defines the class indices.
LABEL_VOCABULARY = 'label'

ModelBuilder = Callable[[tft.TFTransformOutput, Optional[dict]], tf_keras.Model]


def transformed_name(key: str) -> str:
  """Name of the transformed feature made from raw column `key`.

  TensorFlow names layers and signature inputs after features, and takes only
  `[A-Za-z0-9_.-]` there: a CSV column such as `bill length` becomes `bill_length_xf`.
  The raw column keeps its name, so serving requests use the CSV header as it is.
  """
  name = re.sub(r'[^A-Za-z0-9_.-]', '_', key)
  if not re.match(r'[A-Za-z0-9.]', name):
    name = 'f' + name
  return f'{name}_xf'


def transformed_names(keys) -> dict:
  """{raw column: transformed name}; raises ValueError when two columns get one name."""
  names = {}
  for key in sorted(keys):
    name = transformed_name(key)
    for other, taken in names.items():
      if taken == name:
        raise ValueError(f'columns {other!r} and {key!r} both become the feature {name!r} '
                         '(TensorFlow names take letters, digits, "_", "." and "-" only); '
                         'rename one of them.')
    names[key] = name
  return names


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


# Ids of `vocabulary_ids`: a missing value, then a value outside the vocabulary, then the
# vocabulary's own ids.
MISSING_ID = 0
OUT_OF_VOCABULARY_ID = 1


def _set_id_domain(ids: tf.Tensor, largest) -> tf.Tensor:
  """Records in the transformed schema that `ids` lie in [0, largest]: the embedding size."""
  tft.schema_inference.set_tensor_schema_override(
      ids, tf.constant(0, ids.dtype), tf.cast(largest, ids.dtype))
  return ids


def vocabulary_ids(values, top_k: int) -> tf.Tensor:
  """Strings to ids through a vocabulary held in the graph, with ops TFLite has as builtins.

  `tft.compute_and_apply_vocabulary` keeps its vocabulary in a file and looks it up
  in a hash table filled from that file, which the TFLite converter leaves empty;
  its out-of-vocabulary buckets hash (tf.StringToHashBucketFast), and filling a
  missing string in first needs SparseToDense on strings: none of these runs in
  one flatbuffer over raw columns. Here the analyzer (`tft.count_per_key`) puts the
  `top_k` most frequent values into the graph as a constant, and each value is
  compared with them (EQUAL, ARG_MAX). Ids are `MISSING_ID` for a missing value,
  `OUT_OF_VOCABULARY_ID` for one the vocabulary lacks, then 2 + the value's rank.

  Args:
    values: A raw string column: dense [batch] or [batch, 1], or sparse [batch, 1].
    top_k: The vocabulary keeps the `top_k` most frequent values.

  Returns:
    Dense int64 ids of shape [batch], with their domain in the schema.
  """
  sparse = isinstance(values, tf.sparse.SparseTensor)
  present = values.values if sparse else tf.reshape(values, [-1])
  keys, counts = tft.count_per_key(present)
  counts, order = tf.math.top_k(counts, k=tf.minimum(top_k, tf.size(counts)))
  keys = tf.gather(keys, order)
  matches = tf.equal(tf.expand_dims(present, -1), keys)
  # A column that never matches, so arg_max has an axis even when the vocabulary is empty.
  hits = tf.concat([tf.cast(matches, tf.int32), tf.zeros([tf.shape(matches)[0], 1], tf.int32)],
                   axis=1)
  ids = tf.where(tf.reduce_any(matches, -1),
                 tf.argmax(hits, -1, output_type=tf.int64) + 2,
                 tf.constant(OUT_OF_VOCABULARY_ID, tf.int64))
  if sparse:
    # Looked up where a value is present; a missing one gets its own id.
    ids = tf.reshape(tf.sparse.to_dense(
        tf.SparseTensor(values.indices, ids, [values.dense_shape[0], 1]), MISSING_ID), [-1])
  return _set_id_domain(ids, tf.cast(tf.size(keys), tf.int64) + 1)


def category_ids(values, num_buckets: int) -> tf.Tensor:
  """Integer codes (hours, areas, tracts) to ids in [0, num_buckets), without text.

  `MISSING_ID` for a missing or negative code, else 1 + the code modulo
  `num_buckets - 1` (codes below that keep one id each; larger ones share ids by
  remainder). TFLite has no op that writes numbers as text (tf.strings.as_string),
  so this keeps the flatbuffer over raw columns possible.
  """
  codes = fill_in_missing(values, tf.cast(-1, values.dtype))
  codes = tf.cast(codes, tf.int64)
  ids = tf.where(codes < 0, tf.constant(MISSING_ID, tf.int64),
                 tf.math.floormod(codes, num_buckets - 1) + 1)
  return _set_id_domain(ids, num_buckets - 1)


def quantile_buckets(values: tf.Tensor, num_buckets: int) -> tf.Tensor:
  """Bucket ids by quantiles, as `tft.bucketize` gives them, with TFLite builtins.

  tft.bucketize applies its boundaries with tf.UpperBound, which TFLite lacks; a
  comparison with each boundary, summed, gives the same ids.
  """
  boundaries = tft.quantiles(values, num_buckets, epsilon=0.01)
  ids = tf.reduce_sum(tf.cast(tf.expand_dims(values, -1) >= boundaries, tf.int64), axis=-1)
  return _set_id_domain(ids, num_buckets - 1)


def set_label_domain(label: tf.Tensor, num_classes: int) -> tf.Tensor:
  """Records in the transformed schema that the label lies in [0, num_classes)."""
  tft.schema_inference.set_tensor_schema_override(
      label, tf.constant(0, label.dtype), tf.constant(num_classes - 1, label.dtype))
  return label


def label_settings(hyperparameters) -> Dict[str, object]:
  """The label key and output units the caller resolved, for `build_mlp`.

  The Distiller (for `build_student`) and `train_and_export` (for a teacher)
  put `label_key` and `num_classes` into the hyperparameters they pass, so a
  module needs no label name of its own.
  """
  hyperparameters = hyperparameters if isinstance(hyperparameters, dict) else {}
  classes = hyperparameters.get('num_classes')
  return {'label_key': hyperparameters.get('label_key', LABEL_KEY),
          'num_outputs': (1 if classes == 2 else int(classes)) if classes else None}


def hyperparameter(hyperparameters, name: str, default):
  """One value from the hyperparameters a module is given, else `default`.

  Accepts a plain dict and a KerasTuner config (a Tuner's `best_hyperparameters`,
  whose values sit under `values`).
  """
  hyperparameters = hyperparameters if isinstance(hyperparameters, dict) else {}
  if name in hyperparameters:
    return hyperparameters[name]
  values = hyperparameters.get('values')
  return values.get(name, default) if isinstance(values, dict) else default


def feature_inputs(tf_transform_output: tft.TFTransformOutput,
                   label_key: str = LABEL_KEY) -> Dict[str, tf_keras.Input]:
  """One Keras input per transformed feature (the label excluded)."""
  inputs = {}
  for name, spec in sorted(tf_transform_output.transformed_feature_spec().items()):
    if name == label_key:
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


def build_mlp(tf_transform_output: tft.TFTransformOutput,
              hidden_units,
              dropout: float = 0.0,
              name: str = 'mlp',
              max_embedding_dim: int = 8,
              label_key: str = LABEL_KEY,
              num_outputs: Optional[int] = None) -> tf_keras.Model:
  """A dense network over all transformed features (but `label_key`) that outputs logits.

  `num_outputs` defaults to what the transformed schema says of the label.
  """
  inputs = feature_inputs(tf_transform_output, label_key)
  hidden = encode_features(inputs, tf_transform_output, max_embedding_dim)
  for units in hidden_units:
    hidden = tf_keras.layers.Dense(units, activation='relu')(hidden)
    if dropout:
      hidden = tf_keras.layers.Dropout(dropout)(hidden)
  num_outputs = num_outputs or output_units(tf_transform_output, label_key)
  logits = tf_keras.layers.Dense(num_outputs, name='logits')(hidden)
  return tf_keras.Model(inputs=inputs, outputs=logits, name=name)


def train_and_export(fn_args, build_model: ModelBuilder, model_name: str,
                     early_stopping_patience: Optional[int] = None,
                     defaults: Optional[Dict[str, object]] = None) -> tf_keras.Model:
  """The whole run_fn: read, train with progress lines, evaluate, export.

  Works under every DistributedTrainer strategy and under the stock Trainer. The
  `batch_size` setting is per replica; the global batch is that times the
  replicas in sync.

  Args:
    fn_args: The `FnArgs` TFX hands to `run_fn`.
    build_model: Builds the Keras model (logits out) from the transform output.
    model_name: Name used in progress lines and metrics.
    early_stopping_patience: The module's default for early stopping on eval
      (restoring the best epoch); hyperparameters' or custom_config's
      `early_stopping_patience` overrides it, and None there turns it off.
    defaults: The module's own settings (`epochs`, `learning_rate`, ...), used
      where neither hyperparameters nor custom_config give one.

  Returns:
    The trained Keras model.
  """
  if defaults:
    fn_args = copy.copy(fn_args)
    fn_args.custom_config = {**defaults, **(getattr(fn_args, 'custom_config', None) or {})}
  run = modeling.TrainingRun.from_fn_args(fn_args)
  with run.strategy.scope():
    hyperparameters = getattr(fn_args, 'hyperparameters', None)
    model = build_model(run.tf_transform_output, {
        **(hyperparameters if isinstance(hyperparameters, dict) else {}),
        'label_key': run.label_key, 'num_classes': run.classes.num_classes})
    loss, metrics = loss_and_metrics(run.units)
    model.compile(optimizer=run.optimizer(), loss=loss, metrics=metrics,
                  steps_per_execution=run.steps_per_execution)
    modeling.create_optimizer_slots(model)
  run.log_plan(model_name, model)
  epoch_progress, training_callbacks = run.callbacks(
      model_name, early_stopping_patience=config_value(
          fn_args, modeling.EARLY_STOPPING_PATIENCE_KEY, early_stopping_patience))
  model.fit(run.train_dataset(), epochs=run.epochs, steps_per_epoch=run.steps_per_epoch,
            validation_data=run.eval_dataset(), validation_steps=run.eval_steps, verbose=0,
            callbacks=training_callbacks)
  evaluation = model.evaluate(run.eval_dataset(), steps=run.eval_steps, verbose=0,
                              return_dict=True)
  write_metrics(fn_args.model_run_dir, {
      'model': model_name,
      'eval_accuracy': float(evaluation['accuracy']),
      'eval_loss': float(evaluation['loss']),
      'parameters': int(model.count_params()),
      **run.describe(epoch_progress),
  })
  export_serving_model(model, run.tf_transform_output, run.label_column,
                       fn_args.serving_model_dir)
  return model
