"""Model pieces every training loop of ours shares: heads, losses, export.

Teachers (trainer_modules.base), the Distiller and the optimizers all use these,
so every model they export serves the same way: serialized raw tf.Examples in,
the transform graph applied inside, logits, probabilities and classes out.
"""

import dataclasses
import json
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf
import tf_keras
import tensorflow_transform as tft

from tfx_distillery.components.common import callbacks as keras_callbacks
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import labels
from tfx_distillery.components.common import progress
from tfx_distillery.components.common import reading
from tfx_distillery.components.common import strategy as distribution
from tfx_distillery.components.common import tracing

LABEL_KEY = reading.DEFAULT_LABEL_KEY
SERVING_SIGNATURE = evaluation.SERVING_SIGNATURE
TRANSFORM_SIGNATURE = evaluation.TRANSFORM_SIGNATURE
METRICS_FILE_NAME = 'metrics.json'

# Before any model of ours is traced: a training's first step costs seconds, not tens.
tracing.trace_keras_as_written()


def num_classes(tf_transform_output: tft.TFTransformOutput, label_key: str = LABEL_KEY,
                explicit: Optional[int] = None) -> int:
  """Number of label classes (explicit, else the transformed schema's label domain)."""
  return labels.resolve(tf_transform_output, label_key, explicit).num_classes


def output_units(tf_transform_output: tft.TFTransformOutput, label_key: str = LABEL_KEY,
                 explicit: Optional[int] = None) -> int:
  """One logit for a binary label, one per class otherwise."""
  return labels.resolve(tf_transform_output, label_key, explicit).units


def loss_and_metrics(units: int, from_logits: bool = True):
  """Cross-entropy and accuracy, on logits (or on probabilities for such a model)."""
  if units == 1:
    return (tf_keras.losses.BinaryCrossentropy(from_logits=from_logits),
            [tf_keras.metrics.BinaryAccuracy(name='accuracy',
                                             threshold=0.0 if from_logits else 0.5)])
  return (tf_keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits),
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


def copy_tree(source: str, destination: str) -> None:
  """Copies a folder through a temporary name, then renames it into place."""
  temporary = destination.rstrip('/') + '.tmp'
  if tf.io.gfile.exists(temporary):
    tf.io.gfile.rmtree(temporary)
  for folder, _, files in tf.io.gfile.walk(source):
    target = os.path.join(temporary, os.path.relpath(folder, source))
    tf.io.gfile.makedirs(target)
    for name in files:
      tf.io.gfile.copy(os.path.join(folder, name), os.path.join(target, name), overwrite=True)
  if tf.io.gfile.exists(destination):
    tf.io.gfile.rmtree(destination)
  tf.io.gfile.rename(temporary, destination)


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


STEPS_PER_EXECUTION = 16
EARLY_STOPPING_PATIENCE_KEY = 'early_stopping_patience'


def validate_patience(patience) -> int:
  """Returns `patience` as an int; raises ValueError unless it is an integer >= 1."""
  if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
    raise ValueError(f'{EARLY_STOPPING_PATIENCE_KEY} must be an integer >= 1 (epochs without a '
                     f'lower eval loss) or None (off); got {patience!r}.')
  return patience


def early_stopping_callback(fn_args, model_name: str = 'train'
                           ) -> Optional[keras_callbacks.EarlyStoppingOnEval]:
  """The early stopping a DistributedTrainer's `early_stopping_patience` asks for, or None.

  For a user's run_fn: add it to `fit`'s callbacks (with validation data) and the
  model ends at its epoch of lowest eval loss.
  """
  patience = config_value(fn_args, EARLY_STOPPING_PATIENCE_KEY, None)
  if patience is None:
    return None
  return keras_callbacks.EarlyStoppingOnEval(validate_patience(patience), model_name)


@dataclasses.dataclass
class TrainingRun:
  """What every training loop of ours derives from `fn_args`: data, strategy, budget.

  Settings come from hyperparameters, then custom_config: `batch_size` (per
  replica, default 256), `epochs` (5), `learning_rate` (1e-3),
  `steps_per_execution` (16), `label_column` ('label'), `label_key` ('label'),
  `num_classes` (from the schema when absent), `seed` (the component's `random_seed`).
  """
  fn_args: Any
  tf_transform_output: tft.TFTransformOutput
  classes: labels.ClassCount
  units: int
  strategy: tf.distribute.Strategy
  per_replica_batch_size: int
  global_batch_size: int
  epochs: int
  steps_per_epoch: int
  eval_steps: int
  steps_per_execution: int
  label_column: str
  label_key: str
  options: reading.IngestionOptions
  # Set by callbacks() under all-reduce strategies; its step profile goes to metrics.json.
  communication_profile: Optional[keras_callbacks.CommunicationProfile] = None
  # Set by callbacks() when early stopping is on; what it kept goes to metrics.json.
  early_stopping: Optional[keras_callbacks.EarlyStoppingOnEval] = None

  @classmethod
  def from_fn_args(cls, fn_args, train_steps: Optional[int] = None,
                   label_key: Optional[str] = None, label_column: Optional[str] = None,
                   resolve_classes: Optional[Callable[[tf.distribute.Strategy],
                                                      labels.ClassCount]] = None
                   ) -> 'TrainingRun':
    """Plans a run of `train_steps` (fn_args.train_steps when None) steps.

    Args:
      fn_args: TFX's FnArgs.
      train_steps: Steps of this run; fn_args.train_steps when None.
      label_key: The transformed label; custom_config's `label_key` when None.
      label_column: The raw label column; custom_config's `label_column` when None.
      resolve_classes: Called with the strategy (teachers load inside its scope)
        to resolve the class count; else custom_config's `num_classes`, else
        the transformed schema.
    """
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    label_key = label_key or config_value(fn_args, 'label_key', LABEL_KEY)
    strategy = distribution.strategy_for(fn_args)
    seed = config_value(fn_args, 'seed', None)
    if seed is None:  # The component's random_seed, which every process of the run has.
      seed = distribution.settings().random_seed
    if seed is not None:  # Same seed on every worker: replicas start from equal weights.
      tf_keras.utils.set_random_seed(int(seed))
    if resolve_classes is not None:
      classes = resolve_classes(strategy)
    else:
      classes = labels.resolve(tf_transform_output, label_key,
                               config_value(fn_args, 'num_classes', None))
    train_steps = int(train_steps or fn_args.train_steps)
    per_replica_batch_size = int(config_value(fn_args, 'batch_size', 256))
    epochs = max(1, min(int(config_value(fn_args, 'epochs', 5)), train_steps))
    steps_per_epoch = max(1, train_steps // epochs)
    # Several steps per call amortise the per-call cost of a step (Python, and for
    # several workers the collective launch and synchronisation), which dominates
    # small batches.
    steps_per_execution = max(1, min(steps_per_epoch, int(config_value(
        fn_args, 'steps_per_execution', STEPS_PER_EXECUTION))))
    return cls(
        fn_args=fn_args, tf_transform_output=tf_transform_output,
        classes=classes, units=classes.units, strategy=strategy,
        per_replica_batch_size=per_replica_batch_size,
        global_batch_size=per_replica_batch_size * strategy.num_replicas_in_sync,
        epochs=epochs, steps_per_epoch=steps_per_epoch,
        eval_steps=max(1, fn_args.eval_steps or 1),
        steps_per_execution=steps_per_execution,
        label_column=label_column or config_value(fn_args, 'label_column', LABEL_KEY),
        label_key=label_key,
        options=reading.read_options(
            os.path.dirname(os.path.dirname(fn_args.train_files[0]))))

  def optimizer(self, schedule: str = 'constant') -> tf_keras.optimizers.Optimizer:
    """Adam at the configured learning rate (create it inside the strategy scope).

    Its gradients are all-reduced dense, in one packed collective: see
    `all_reduce_dense_gradients`.

    Args:
      schedule: `constant`, or `cosine`: from the learning rate down to 0 over
        the run's steps (a small model keeps improving late in a long run when
        its steps shrink).
    """
    learning_rate = float(config_value(self.fn_args, 'learning_rate', 1e-3))
    if schedule == 'cosine':
      learning_rate = tf_keras.optimizers.schedules.CosineDecay(
          learning_rate, decay_steps=self.epochs * self.steps_per_epoch)
    elif schedule != 'constant':
      raise ValueError(f"schedule must be 'constant' or 'cosine'; got {schedule!r}.")
    return all_reduce_dense_gradients(tf_keras.optimizers.Adam(learning_rate))

  def train_dataset(self, record_dataset_fn=None) -> tf.data.Dataset:
    """Shuffled, repeated training batches of the global batch size."""
    # Whole batches only: workers must all-gather equally shaped (embedding) gradients.
    return reading.make_dataset(self.fn_args.train_files, self.tf_transform_output,
                                self.global_batch_size, self._options(record_dataset_fn),
                                label_key=self.label_key,
                                batch_map_fn=prepare_labels(self.units), drop_remainder=True,
                                record_dataset_fn=record_dataset_fn)

  def eval_dataset(self, file_pattern=None, record_dataset_fn=None) -> tf.data.Dataset:
    """Batches of the eval split (or of `file_pattern`), repeated, in file order.

    Unshuffled, and in a fixed order with or without a seed: Keras makes a new
    iterator for every validation, and a shuffle's seeds are shared by its
    iterators, so a dropped iterator that had read ahead would move the next
    validation's rows by however far it got: early stopping would then follow
    the machine's timing, not the seed.
    """
    options = dataclasses.replace(self._options(record_dataset_fn), shuffle_buffer=0,
                                  shuffle_files=False, deterministic=True)
    return reading.make_dataset(file_pattern or self.fn_args.eval_files,
                                self.tf_transform_output, self.global_batch_size,
                                options, label_key=self.label_key,
                                batch_map_fn=prepare_labels(self.units),
                                record_dataset_fn=record_dataset_fn)

  def _options(self, record_dataset_fn) -> reading.IngestionOptions:
    # A file cache is keyed by path alone, so a filtered slice must not share it.
    if record_dataset_fn is not None and self.options.cache == 'file':
      return dataclasses.replace(self.options, cache='memory')
    return self.options

  def log_plan(self, model_name: str, model: tf_keras.Model,
               epochs: Optional[int] = None) -> None:
    progress.get_logger().info(
        '%s: %d parameters, %s x %d replicas, global batch %d = %d per replica x %d, '
        '%d epochs x %d steps, %d steps per call', model_name, model.count_params(),
        type(self.strategy).__name__, self.strategy.num_replicas_in_sync,
        self.global_batch_size, self.per_replica_batch_size,
        self.strategy.num_replicas_in_sync, epochs or self.epochs, self.steps_per_epoch,
        self.steps_per_execution)

  def callbacks(self, model_name: str, run_name: str = '', profile: bool = True,
                early_stopping_patience: Optional[int] = None
               ) -> Tuple[keras_callbacks.EpochProgress, List[tf_keras.callbacks.Callback]]:
    """Progress lines, TensorBoard, BackupAndRestore, early stopping, communication profile.

    Args:
      model_name: Name shown in the progress lines.
      run_name: Subfolder of the TensorBoard logs and the backup, for a run_fn
        that trains several models one after the other.
      profile: Add the communication profile under all-reduce strategies (it
        needs a functional model, whose inputs it can fake).
      early_stopping_patience: Stop after this many epochs without a lower eval
        loss and restore the best epoch (fit must be given validation data);
        None trains every epoch.
    """
    epoch_progress = keras_callbacks.EpochProgress(model_name)
    training_callbacks = [epoch_progress, tf_keras.callbacks.TensorBoard(
        os.path.join(self.fn_args.model_run_dir, run_name))]
    if early_stopping_patience is not None:
      self.early_stopping = keras_callbacks.EarlyStoppingOnEval(
          validate_patience(early_stopping_patience), model_name)
      training_callbacks.append(self.early_stopping)
    # Keras' BackupAndRestore refuses OneDeviceStrategy; the other strategies resume.
    if distribution.backup_dir(self.fn_args) and not isinstance(
        self.strategy, tf.distribute.OneDeviceStrategy):
      training_callbacks.append(tf_keras.callbacks.BackupAndRestore(
          os.path.join(distribution.backup_dir(self.fn_args), run_name)))
    if profile and distribution.uses_all_reduce(self.fn_args, self.strategy):
      self.communication_profile = keras_callbacks.CommunicationProfile(
          self.per_replica_batch_size)
      training_callbacks.append(self.communication_profile)
    return epoch_progress, training_callbacks

  def describe(self, epoch_progress: keras_callbacks.EpochProgress) -> Dict[str, Any]:
    """The run's budget and progress, for metrics.json."""
    return {
        'random_seed': distribution.settings().random_seed,
        'train_steps': self.epochs * self.steps_per_epoch,
        'epochs': self.epochs,
        'first_epoch': epoch_progress.first_epoch,
        'epochs_run': epoch_progress.epochs_run,
        'global_batch_size': self.global_batch_size,
        'steps_per_epoch': self.steps_per_epoch,
        'epoch_seconds': epoch_progress.epoch_seconds,
        'curve': epoch_progress.curve,
        'early_stopping': self.early_stopping.describe() if self.early_stopping else None,
        'step_profile': (self.communication_profile.describe()
                         if self.communication_profile else {}),
    }


# A sparse gradient with more elements than this stays sparse (all-gathered) across
# replicas: beyond it, its dense form would cost more bytes than the round trips it saves.
MAX_DENSE_GRADIENT_ELEMENTS = 4 * 1024 * 1024


def all_reduce_dense_gradients(optimizer: tf_keras.optimizers.Optimizer
                              ) -> tf_keras.optimizers.Optimizer:
  """Makes `optimizer` all-reduce embedding (sparse) gradients as dense tensors.

  Across replicas, TensorFlow all-gathers each sparse gradient on its own: two
  collectives per embedding table, plus their shape checks, every step. The
  taxi teacher's 13 embeddings made about 40 round trips a step, most of a
  two-worker step on one machine. Dense, they join the other gradients in
  the single packed all-reduce. Adam's update is the same either way (its
  moments decay on every row). Only the instance's `aggregate_gradients` (the
  hook Keras documents for this) changes, so the saved optimizer stays Adam.
  """
  aggregate = optimizer.aggregate_gradients

  def aggregate_dense(grads_and_vars):
    if optimizer._distribution_strategy.num_replicas_in_sync > 1:  # pylint: disable=protected-access
      grads_and_vars = [
          (tf.convert_to_tensor(gradient) if isinstance(gradient, tf.IndexedSlices)
           and variable.shape.num_elements() <= MAX_DENSE_GRADIENT_ELEMENTS else gradient,
           variable) for gradient, variable in grads_and_vars]
    return aggregate(grads_and_vars)

  optimizer.aggregate_gradients = aggregate_dense
  return optimizer


def create_optimizer_slots(model: tf_keras.Model) -> None:
  """Creates the compiled optimizer's variables (Adam's moments) before the first fit.

  Keras otherwise creates them while tracing the first training step, and a
  `tf.function` that creates variables is traced a second time: about 1 s of a
  training's time to its first step (taxi teacher, 2 cores). Call it where the
  model was compiled, inside the same strategy scope.
  """
  model.optimizer.build(model.trainable_variables)


@tf_keras.utils.register_keras_serializable(package='tfx_distillery')
class ClipIds(tf_keras.layers.Layer):
  """Integer ids clipped into [0, num_ids): unknown (-1) and unseen ids reuse an edge bucket.

  A plain layer (not a Lambda) so that saved students reload, clone for tfmot and
  convert to TFLite (MINIMUM and MAXIMUM are builtins).
  """

  def __init__(self, num_ids: int, **kwargs):
    super().__init__(**kwargs)
    self.num_ids = int(num_ids)

  def call(self, inputs):
    return tf.clip_by_value(inputs, tf.cast(0, inputs.dtype),
                            tf.cast(self.num_ids - 1, inputs.dtype))

  def get_config(self):
    return {**super().get_config(), 'num_ids': self.num_ids}


@tf_keras.utils.register_keras_serializable(package='tfx_distillery')
class HashIds(tf_keras.layers.Layer):
  """Integer ids hashed into [0, num_buckets) by their value modulo `num_buckets`.

  For ids with no vocabulary or domain (TFX's taxi passes census tracts through as 11-digit
  numbers). A prime `num_buckets` spreads ids that share trailing digits. FLOOR_MOD is a
  TFLite builtin, so the int8 flatbuffer stays builtin-only.
  """

  def __init__(self, num_buckets: int, **kwargs):
    super().__init__(**kwargs)
    self.num_buckets = int(num_buckets)

  def call(self, inputs):
    return tf.math.floormod(inputs, tf.cast(self.num_buckets, inputs.dtype))

  def get_config(self):
    return {**super().get_config(), 'num_buckets': self.num_buckets}


@tf_keras.utils.register_keras_serializable(package='tfx_distillery')
class StringIds(tf_keras.layers.Layer):
  """Strings to ids by a vocabulary the layer holds: 0 for a value it lacks, 1 + rank for one
  it has.

  For a string a transform passes through with no vocabulary. A hash of a string
  (tf.strings.to_hash_bucket_fast) has no TFLite builtin, so the int8 flatbuffer could not
  take it; EQUAL against constant keys and ARG_MAX are builtins (as in
  `trainer_modules/base.vocabulary_ids`).
  """

  def __init__(self, vocabulary: Sequence[str], **kwargs):
    super().__init__(**kwargs)
    self.vocabulary = [str(value) for value in vocabulary]

  def call(self, inputs):
    keys = tf.constant(self.vocabulary, tf.string)
    matches = tf.cast(tf.equal(tf.expand_dims(inputs, -1), keys), tf.int32)
    # A leading column that never matches: no match leaves every column at 0, and ARG_MAX
    # takes the first, which is id 0.
    hits = tf.concat([tf.zeros_like(matches[..., :1]), matches], axis=-1)
    return tf.argmax(hits, axis=-1, output_type=tf.int64)

  def get_config(self):
    return {**super().get_config(), 'vocabulary': list(self.vocabulary)}


def nests_models(model: tf_keras.Model) -> bool:
  """Whether the model's graph holds whole models (an ensemble) rather than plain layers.

  Only layers called in the graph count: the transform layer an exported model
  carries for serving is tracked beside the graph and has no inbound node.
  """
  return any(isinstance(layer, tf_keras.Model) and getattr(layer, '_inbound_nodes', None)
             for layer in model.layers)


def graph_model(model: tf_keras.Model) -> tf_keras.Model:
  """The same layers and weights as a plain functional model, without the serving extras.

  A loaded export also tracks its transform layer, which Keras' cloning (used
  by tfmot's pruning and quantization wrappers) can not copy.
  """
  return tf_keras.Model(inputs=model.input, outputs=model.output, name=model.name)


def copy_layer_weights(source: tf_keras.Model, target: tf_keras.Model) -> None:
  """Copies weights layer by layer, by name, into a clone whose layers may be wrapped.

  tfmot's wrappers (pruning, quantization) keep the wrapped layer in `.layer`
  and add variables of their own, so whole-model set_weights does not line up.
  """
  by_name = {layer.name: layer for layer in source.layers}
  for target_layer in target.layers:
    inner = getattr(target_layer, 'layer', target_layer)
    source_layer = by_name.get(inner.name)
    if source_layer is not None and source_layer.weights:
      inner.set_weights(source_layer.get_weights())
