"""The one measuring path: accuracy, majority baseline, size and latency of any model we meet.

Every model kind goes through here: a Keras SavedModel (ours), a SavedModel that
the stock Trainer wrote with `tf.saved_model.save` (no Keras metadata), and a
Quantizer's TFLite folder. The Distiller, Pruner, Quantizer, AccuracyGate and
the benchmarks all call it, so their figures are comparable:

- Accuracy and the majority baseline come from one deterministic pass over a
  fixed `EvaluationSet` (the first `max_examples` of a split, in file order).
- Batch-1 latency starts from one raw serialized example and pays for parsing
  and the transform graph, then the model, whatever the model's kind.
- Size is the folder the Pusher would push (a TFLite folder carries its
  transform graph, a SavedModel has it inside).

Whatever chooses (tuning, the sparsity search) measures the `eval` split; what
is reported and gated measures `test`, when the examples have one.
"""

import dataclasses
import gzip
import json
import math
import os
import statistics
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf

from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import progress
from tfx_distillery.components.common import reading
from tfx_distillery.components.common import shapes
from tfx_distillery.components.common import tracing

OUTPUT_KINDS = ('logits', 'probabilities')
# Rows of a softmax output sum to 1 within this tolerance.
SUM_TOLERANCE = 1e-3
DEFAULT_MAX_EXAMPLES = 5000
# The test rows the AccuracyGate scores by default, and what each choice on eval keeps a margin
# for: all of the split up to DEFAULT_MAX_EXAMPLES. At 2,000 of taxi's 3,021 test rows its
# paired error was a fifth larger, and the margin with it.
GATE_EXAMPLES = DEFAULT_MAX_EXAMPLES
DEFAULT_BATCH_SIZE = 256
# The same names as quantizer/predict.py, which is copied alone into every TFLite folder
# and so imports nothing of ours.
SERVING_MANIFEST_FILE_NAME = 'serving.json'
TFLITE_FORMAT = 'tflite'
SAVED_MODEL_FORMAT = 'saved_model'
# The split that reports and gates, and the one that chooses.
REPORT_SPLIT = 'test'
CHOOSE_SPLIT = 'eval'

# Loading and scoring trace models too; the gate and the Quantizer import no modeling.
tracing.trace_keras_as_written()


@dataclasses.dataclass
class EvaluationSet:
  """Transformed examples of one split, and raw ones for latency: what every model is scored on.

  Attributes:
    features: Transformed features (label removed), numpy arrays of equal length.
    labels: Class indices, shape [examples].
    split: The split's name.
    raw_examples: A few raw serialized examples, label column removed, for latency.
    transform: Serialized raw examples -> transformed features (None: no raw examples).
    every_raw_example: Every example of the set, serialized raw, in the order of
      `labels` (what a raw-input flatbuffer is scored on); None for a set read from
      transformed examples.
  """
  features: Dict[str, np.ndarray]
  labels: np.ndarray
  split: str
  raw_examples: Optional[List[bytes]] = None
  transform: Optional[Callable] = None
  every_raw_example: Optional[List[bytes]] = None

  @property
  def size(self) -> int:
    return int(len(self.labels))

  def batches(self, batch_size: int = DEFAULT_BATCH_SIZE):
    for start in range(0, self.size, batch_size):
      yield {name: values[start:start + batch_size] for name, values in self.features.items()}

  def one_example(self) -> Dict[str, np.ndarray]:
    return {name: values[:1] for name, values in self.features.items()}


def report_split(examples_uri: str) -> str:
  """`test` when the examples have that split, else `eval` (a two-split user pipeline)."""
  splits = [name.rstrip('/') for name in tf.io.gfile.listdir(examples_uri)]
  return REPORT_SPLIT if f'Split-{REPORT_SPLIT}' in splits else CHOOSE_SPLIT


def split_pattern(examples_uri: str, split: str) -> str:
  folder = os.path.join(examples_uri, f'Split-{split}')
  if not tf.io.gfile.exists(folder):
    raise ValueError(f'The examples at {examples_uri} have no {split!r} split; they have '
                     f'{sorted(name.rstrip("/") for name in tf.io.gfile.listdir(examples_uri))}.')
  return os.path.join(folder, '*')


def from_transformed_examples(file_pattern, split: str, tf_transform_output, label_key: str,
                              max_examples: int = DEFAULT_MAX_EXAMPLES,
                              compression: str = 'GZIP',
                              record_dataset_fn=None) -> EvaluationSet:
  """The first `max_examples` transformed examples of `file_pattern` (one split), in file order.

  Args:
    file_pattern: The split's shards (a glob, or TFX's list of globs).
    split: The split's name, recorded with the figures.
    tf_transform_output: Its transform output.
    label_key: The transformed label feature.
    max_examples: A fixed prefix of the split is measured; its size is recorded.
    compression: The shards' TFRecord compression.
    record_dataset_fn: Opens a shard; a filter here measures a fixed slice.

  Returns:
    The `EvaluationSet` (no raw examples: latency times the model alone).
  """
  options = reading.IngestionOptions(shuffle_files=False, deterministic=True, cache='none',
                                     shuffle_buffer=0, compression=compression, packed=False)
  dataset = reading.make_dataset(file_pattern, tf_transform_output, DEFAULT_BATCH_SIZE, options,
                                 num_epochs=1, label_key=label_key,
                                 record_dataset_fn=record_dataset_fn)
  features, labels = _collect(dataset.as_numpy_iterator(), max_examples)
  return EvaluationSet(features, labels, split)


def from_examples_artifact(examples_uri: str, split: str, tf_transform_output, label_key: str,
                           max_examples: int = DEFAULT_MAX_EXAMPLES,
                           record_dataset_fn=None) -> EvaluationSet:
  """`from_transformed_examples` on one split of a transformed Examples artifact."""
  return from_transformed_examples(
      split_pattern(examples_uri, split), split, tf_transform_output, label_key, max_examples,
      reading.read_options(examples_uri).compression, record_dataset_fn)


def from_raw_examples(raw_examples_uri: str, split: str, tf_transform_output, label_key: str,
                      label_column: str, max_examples: int = DEFAULT_MAX_EXAMPLES,
                      latency_examples: int = 16) -> EvaluationSet:
  """The first `max_examples` raw examples of a split, transformed by the transform graph.

  Labels are the transform's own `label_key`; the kept raw examples lose the
  label column, as serving requests do.
  """
  serialized = evaluation.read_serialized_examples(split_pattern(raw_examples_uri, split),
                                                   limit=max_examples)
  if not serialized:
    raise ValueError(f'The {split!r} split at {raw_examples_uri} holds no examples.')
  raw_spec = dict(tf_transform_output.raw_feature_spec())
  layer = tf_transform_output.transform_features_layer()

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def transform_with_label(examples):
    return layer(tf.io.parse_example(examples, raw_spec))

  def batches():
    for start in range(0, len(serialized), DEFAULT_BATCH_SIZE):
      transformed = transform_with_label(tf.constant(serialized[start:start + DEFAULT_BATCH_SIZE]))
      if label_key not in transformed:
        raise ValueError(f'label_key {label_key!r} is not a transformed feature; the transform '
                         f'emits {", ".join(sorted(transformed))}.')
      transformed = {name: dense_numpy(value) for name, value in transformed.items()}
      yield transformed, transformed.pop(label_key)

  features, labels = _collect(batches(), max_examples)
  serving_spec = {name: spec for name, spec in raw_spec.items() if name != label_column}

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def transform(examples):
    return layer(tf.io.parse_example(examples, serving_spec))

  raw_examples = [strip_feature(example, label_column) for example in serialized[:latency_examples]]
  return EvaluationSet(features, labels, split, raw_examples, transform,
                       every_raw_example=serialized[:len(labels)])


def dense_numpy(value) -> np.ndarray:
  if isinstance(value, tf.sparse.SparseTensor):
    value = tf.sparse.to_dense(value)
  return value.numpy()


def strip_feature(serialized: bytes, name: str) -> bytes:
  example = tf.train.Example.FromString(serialized)
  if name in example.features.feature:
    del example.features.feature[name]
  return example.SerializeToString()


def _collect(batches, max_examples: int):
  features, labels, seen = {}, [], 0
  for batch_features, batch_labels in batches:
    remaining = max_examples - seen
    if remaining <= 0:
      break
    batch_labels = np.reshape(batch_labels, [-1])[:remaining]
    for name, values in batch_features.items():
      features.setdefault(name, []).append(values[:remaining])
    labels.append(batch_labels)
    seen += len(batch_labels)
  if not labels:
    raise ValueError('No examples to measure on: the split is empty.')
  return ({name: np.concatenate(values) for name, values in features.items()},
          np.concatenate(labels).astype(np.int64))


# ---- Models of every kind, as one interface: transformed features in, scores out.

SHAPE_ONLY_LAYERS = ('Reshape', 'Flatten', 'Permute', 'Dropout', 'ActivityRegularization',
                     'SpatialDropout1D', 'GaussianNoise', 'Identity')
PROBABILITY_ACTIVATIONS = ('sigmoid', 'softmax')


def output_activation(model) -> Optional[str]:
  """The activation that makes a Keras model's first output, looking through shape-only layers.

  The stock taxi model ends in Dense(sigmoid) then Reshape: the activation is
  the Dense layer's, two layers before the output.
  """
  try:
    layer = model.outputs[0]._keras_history.layer  # pylint: disable=protected-access
  except (AttributeError, IndexError, TypeError):
    return None
  for _ in range(len(model.layers) + 1):
    kind = type(layer).__name__
    if kind == 'Softmax':
      return 'softmax'
    if kind not in SHAPE_ONLY_LAYERS:
      break
    inbound = getattr(layer, '_inbound_nodes', None)
    parents = inbound[0].inbound_layers if inbound else None
    if isinstance(parents, (list, tuple)):
      parents = parents[0] if len(parents) == 1 else None
    if parents is None:
      return None
    layer = parents
  activation = getattr(layer, 'activation', None)
  return getattr(activation, '__name__', None)


def looks_like_probabilities(scores: np.ndarray) -> bool:
  """Values in [0, 1] that, for several outputs, sum to 1 per row."""
  scores = np.asarray(scores, dtype=np.float64)
  in_unit_range = bool(np.all((scores >= 0.0) & (scores <= 1.0)))
  if scores.shape[-1] == 1:
    return in_unit_range
  return in_unit_range and bool(np.all(np.abs(scores.sum(axis=-1) - 1.0) < SUM_TOLERANCE))


class Scorer:
  """A model over transformed features: `scores(features)` gives logits or probabilities.

  Attributes:
    model_dir: Where it was loaded from.
    format: `keras` (a Keras SavedModel), `saved_model` (tf.saved_model.save, as
      the stock Trainer's module files write) or `tflite`.
    input_names: The transformed features the model reads.
    num_outputs: Width of its output.
    output_kind: `logits` or `probabilities` (None until resolved on a batch).
    keras_model: The Keras model, for the `keras` format.
  """

  def __init__(self, model_dir: str, scores_fn: Callable, format_name: str,
               input_names: List[str], num_outputs: int, output_kind: Optional[str],
               keras_model=None, trackable=None,
               input_specs: Optional[Dict[str, shapes.InputSpec]] = None):
    self.model_dir = model_dir
    self._scores_fn = scores_fn
    self.format = format_name
    self.input_names = list(input_names)
    # The rank and dtype each input was traced with (shapes.conform brings features to them).
    self.input_specs = dict(input_specs or {})
    self.num_outputs = int(num_outputs)
    self.output_kind = output_kind
    self.keras_model = keras_model
    # Keeps a restored SavedModel (and its variables) alive.
    self.trackable = trackable

  def count_params(self) -> int:
    """Weights of the model (0 for a TFLite folder)."""
    if self.keras_model is not None:
      return int(self.keras_model.count_params())
    variables = getattr(self.trackable, 'variables', None) or []
    return int(sum(np.prod(variable.shape) for variable in variables))

  def who(self) -> str:
    """The component and the model, as refusals name them."""
    return f'{progress.current_component()}, the model at {self.model_dir}'

  def conform(self, features):
    """The model's inputs from `features`, each at the rank and dtype of its signature.

    Raises:
      shapes.FeatureShapeError: naming the feature, both shapes and the component.
    """
    if not self.input_specs:
      return {name: features[name] for name in self.input_names}
    return shapes.conform(features, self.input_specs, self.who())

  def scores(self, features):
    """Raw outputs for a batch of transformed features (tensors or numpy)."""
    return self._scores_fn(self.conform(features))

  def logits(self, features) -> tf.Tensor:
    """Logits, recovered from probabilities when the model emits those (TF ops, traceable)."""
    outputs = tf.cast(self.scores(features), tf.float32)
    if self.output_kind == 'probabilities':
      clipped = tf.clip_by_value(outputs, 1e-7, 1.0 - 1e-7)
      if outputs.shape[-1] == 1:
        return tf.math.log(clipped) - tf.math.log1p(-clipped)
      return tf.math.log(clipped)
    return outputs

  def classes(self, features) -> np.ndarray:
    """Predicted class indices for a batch."""
    scores = np.asarray(self.scores(features))
    if scores.shape[-1] == 1:
      threshold = 0.5 if self.output_kind == 'probabilities' else 0.0
      return (scores[:, 0] > threshold).astype(np.int64)
    return scores.argmax(axis=-1).astype(np.int64)

  def resolve_output_kind(self, features, declared: str = 'auto') -> str:
    """Settles `auto` on a batch, and refuses a declaration the batch contradicts.

    Raises:
      ValueError: naming the model and what its outputs show.
    """
    scores = np.asarray(self.scores(features))
    probabilities = looks_like_probabilities(scores)
    detected = self.output_kind
    if declared == 'auto':
      kind = detected or ('probabilities' if probabilities else 'logits')
    else:
      kind = declared
      if detected and detected != declared:
        raise ValueError(
            f'The model at {self.model_dir} is declared to emit {declared} but its output layer '
            f'makes {detected}; declare "{detected}" or "auto".')
    if kind == 'probabilities' and not looks_like_probabilities(scores):
      raise ValueError(
          f'The model at {self.model_dir} is read as probabilities, but it emits values from '
          f'{scores.min():.3g} to {scores.max():.3g}'
          f'{"" if scores.shape[-1] == 1 else " in rows that do not sum to 1"}: those are '
          'logits. Declare "logits".')
    if kind == 'logits' and probabilities and scores.shape[-1] == 1 and len(scores) >= 16:
      # One output between 0 and 1 on a whole batch may be a sigmoid the layers hide.
      progress.get_logger().warning(
          'WARNING: the model at %s is read as logits, but all %d of its outputs on a batch '
          'lie in [0, 1], as a sigmoid\'s would; declare "probabilities" if it ends in one.',
          self.model_dir, len(scores))
    if kind == 'logits' and probabilities and scores.shape[-1] > 1:
      raise ValueError(
          f'The model at {self.model_dir} is read as logits, but every row it emits is a '
          'probability distribution (values in [0, 1] summing to 1). Declare "probabilities" '
          'so logits are recovered from them.')
    self.output_kind = kind
    return kind


def keras_scorer(model, model_dir: str = '') -> Scorer:
  """A `Scorer` over an in-memory Keras model (a student being trained, a pruned model)."""
  return _keras_scorer(model_dir or model.name, model)


def _keras_scorer(model_dir: str, model) -> Scorer:
  activation = output_activation(model)
  kind = 'probabilities' if activation in PROBABILITY_ACTIVATIONS else None
  if kind is None and activation is not None:
    kind = 'logits'

  # Traced once (shapes generalised): an eager Keras call costs tens of milliseconds,
  # which would swamp a batch-1 latency.
  @tf.function(reduce_retracing=True)
  def scores(features):
    outputs = model(features, training=False)
    if isinstance(outputs, dict):
      outputs = outputs.get('logits', next(iter(outputs.values())))
    if isinstance(outputs, (list, tuple)):
      outputs = outputs[0]
    return outputs

  return Scorer(model_dir, scores, 'keras', model.input_names,
                int(model.outputs[0].shape[-1]), kind, keras_model=model,
                input_specs=shapes.keras_specs(model))


def _restored_scorer(model_dir: str, restored) -> Scorer:
  """A SavedModel written by tf.saved_model.save: call its traced Keras `__call__`."""
  call = getattr(restored, '__call__', None)
  functions = list(getattr(call, 'concrete_functions', None) or [])
  inference = [function for function in functions
               if len(function.structured_input_signature[0]) < 2
               or function.structured_input_signature[0][1] is False] or functions
  if not inference:
    raise ValueError(
        f'The SavedModel at {model_dir} has no traced call on transformed features (only '
        f'signatures {sorted(restored.signatures)}). Export the model with model.save(), or '
        'with tf.saved_model.save after it has been called (trained) on its features.')
  structure = inference[0].structured_input_signature[0][0]
  input_specs = shapes.function_specs(structure)
  input_names = list(input_specs)
  if isinstance(structure, dict):

    def arrange(features):
      return {name: features[name] for name in input_names}
  else:

    def arrange(features):
      ordered = [features[name] for name in input_names]
      return ordered if isinstance(structure, (list, tuple)) else ordered[0]

  def scores(features):
    # `features` are already conformed to the traced signature's ranks and dtypes.
    outputs = restored(arrange(features), training=False)
    if isinstance(outputs, dict):
      outputs = outputs.get('logits', next(iter(outputs.values())))
    if isinstance(outputs, (list, tuple)):
      outputs = outputs[0]
    return outputs

  output = inference[0].structured_outputs
  output = tf.nest.flatten(output)[0]
  return Scorer(model_dir, scores, 'saved_model', input_names, int(output.shape[-1]), None,
                trackable=restored, input_specs=input_specs)


def folder_format(model_dir: str) -> str:
  """What a folder says it is: its manifest's `format` (a Quantizer's folder), else a SavedModel."""
  manifest_path = os.path.join(model_dir, SERVING_MANIFEST_FILE_NAME)
  if tf.io.gfile.exists(manifest_path):
    with tf.io.gfile.GFile(manifest_path) as handle:
      return json.load(handle).get('format', TFLITE_FORMAT)
  return SAVED_MODEL_FORMAT


def load_scorer(model_dir: str, model_format: Optional[str] = None) -> Scorer:
  """Loads any model kind we meet as a `Scorer`.

  Args:
    model_dir: The model folder (a SavedModel, or a Quantizer's TFLite folder).
    model_format: What the Model artifact says it is (its `model_format` property:
      `tflite` or `saved_model`); None asks the folder's manifest.

  Raises:
    ValueError: when the folder holds no model we can call on transformed features.
  """
  model_format = model_format or folder_format(model_dir)
  if model_format == TFLITE_FORMAT:
    from tfx_distillery.components.quantizer import predict  # pylint: disable=g-import-not-at-top
    predictor = predict.TFLitePredictor(model_dir)
    # The predictor conforms features to its interpreter's inputs itself.
    return Scorer(model_dir, predictor.logits, 'tflite', predictor.input_names,
                  predictor.num_outputs, predictor.output_kind, trackable=predictor)
  import tf_keras  # pylint: disable=g-import-not-at-top
  try:
    model = tf_keras.models.load_model(model_dir, compile=False)
  except (OSError, IOError) as error:
    raise ValueError(f'{model_dir} holds no SavedModel: {error}') from error
  except ValueError as error:
    if 'lacks the TF-Keras metadata' not in str(error) and 'tf.saved_model.save' not in str(
        error):
      raise ValueError(f'The model at {model_dir} can not be loaded: {error}') from error
    return _restored_scorer(model_dir, tf.saved_model.load(model_dir))
  if not getattr(model, 'outputs', None):
    raise ValueError(f'The model at {model_dir} has no functional outputs; export it as a '
                     'functional or Sequential tf_keras model.')
  return _keras_scorer(model_dir, model)


# ---- The figures.

def correct_predictions(scorer: Scorer, evaluation_set: EvaluationSet) -> np.ndarray:
  """Whether each of the set's examples gets its label as the predicted class (one pass)."""
  predicted = np.concatenate([scorer.classes(batch) for batch in evaluation_set.batches()])
  return predicted == evaluation_set.labels


def accuracy(scorer: Scorer, evaluation_set: EvaluationSet) -> float:
  """Fraction of the set's examples whose predicted class is the label (one pass)."""
  return float(np.mean(correct_predictions(scorer, evaluation_set)))


# Two-sided 95%: the normal quantile every interval below uses.
# Accuracies are counts over a few hundred examples: 0.985 - 0.98 is 0.0050000000000000044 in
# floating point, and a drop of exactly the budget (one example of 200 at 0.005) must pass.
DROP_TOLERANCE = 1e-9


def within_drop(baseline_accuracy: float, accuracy: float, max_drop: float) -> bool:
  """Whether `accuracy` is at most `max_drop` below `baseline_accuracy` (a drop equal to the
  budget passes, whatever floating point makes of the subtraction)."""
  return baseline_accuracy - accuracy <= max_drop + DROP_TOLERANCE


INTERVAL_Z = 1.959963984540054
# A lead whose one-sided paired p-value is at or above this is within noise.
SIGNIFICANCE_LEVEL = 0.05


def accuracy_interval(correct: np.ndarray) -> List[float]:
  """Wilson's 95% interval of an accuracy measured on `len(correct)` examples."""
  examples = max(1, len(correct))
  share = float(np.mean(correct)) if len(correct) else 0.0
  z_squared = INTERVAL_Z**2
  centre = (share + z_squared / (2 * examples)) / (1 + z_squared / examples)
  half = (INTERVAL_Z * np.sqrt(share * (1 - share) / examples + z_squared / (4 * examples**2))
          / (1 + z_squared / examples))
  # At none or all right, a bound is the accuracy itself, which rounding can put a hair on
  # the wrong side of it (1 - 1e-16 for 66 of 66): the interval holds its own accuracy.
  return [float(min(share, max(0.0, centre - half))),
          float(max(share, min(1.0, centre + half)))]


def majority_correct(labels: np.ndarray) -> np.ndarray:
  """Per example, whether always guessing the commonest class gets it right."""
  labels = np.asarray(labels, dtype=np.int64)
  values, counts = np.unique(labels, return_counts=True)
  return labels == values[np.argmax(counts)]


def paired_comparison(correct: np.ndarray, other_correct: np.ndarray) -> Dict[str, Any]:
  """A model against another on the same examples: McNemar's exact test and a 95% interval.

  Only the examples where exactly one of the two is right carry information. Under
  "equally accurate" the first one wins each of them with probability 1/2, so the
  one-sided p-value is a binomial tail; the interval of the accuracy difference is
  the paired (Wald) one.

  Args:
    correct: Per example, whether the model is right.
    other_correct: The same for the model it is compared with, on the same examples.

  Returns:
    `difference` (accuracy minus the other's), `interval` (95%), `standard_error` (of the
    difference), `wins` and `losses`
    (examples only this one, or only the other, gets right), `p_value` (one-sided:
    this one is no better) and `within_noise` (p_value >= 0.05).
  """
  correct = np.asarray(correct, dtype=bool)
  other_correct = np.asarray(other_correct, dtype=bool)
  examples = max(1, len(correct))
  wins = int(np.sum(correct & ~other_correct))
  losses = int(np.sum(~correct & other_correct))
  discordant = wins + losses
  difference = (wins - losses) / examples
  spread = np.sqrt(max(0.0, discordant - (wins - losses)**2 / examples)) / examples
  # P(at least `wins` of `discordant` fair coin flips): exact, in integers.
  p_value = (sum(math.comb(discordant, count) for count in range(wins, discordant + 1))
             / 2**discordant) if discordant else 1.0
  return {'difference': float(difference),
          'interval': [float(difference - INTERVAL_Z * spread),
                       float(difference + INTERVAL_Z * spread)],
          'standard_error': float(spread), 'wins': wins, 'losses': losses,
          'p_value': float(p_value),
          'within_noise': bool(p_value >= SIGNIFICANCE_LEVEL)}


# What a choice made on eval leaves the gate: when eval and test agree in expectation, the
# chosen model passes the gate's budget on test in at least this share of runs.
GATE_PASS_CHANCE = 0.975


def gate_margin(correct: np.ndarray, baseline_correct: np.ndarray,
                test_examples: Optional[int]) -> Dict[str, Any]:
  """A model's drop below a baseline on eval, and the margin its choice keeps for the gate.

  The gate will measure the same drop on `test_examples` other rows (the test split). What
  it sees there differs from eval's figure by the noise of both: a paired difference of
  two models that disagree on a share d of the rows has a standard error of about
  sqrt(d / n) on n rows. The margin is the normal quantile of GATE_PASS_CHANCE times the
  two splits' combined error: a model whose eval drop plus the margin is within the
  budget passes the gate in at least that share of runs. d comes from eval with one
  disagreement added, so that a model that matched the baseline on every eval row still
  keeps room. Without a test split the gate decides on eval itself: no margin.

  Args:
    correct: Per eval example, whether the model is right.
    baseline_correct: The same for the baseline (the teacher), on the same examples.
    test_examples: The rows the gate will judge on (None: it judges on these).

  Returns:
    `drop` (on eval), `margin`, `standard_error` (eval and test combined),
    `test_examples` and `eval_examples`.
  """
  correct = np.asarray(correct, dtype=bool)
  baseline_correct = np.asarray(baseline_correct, dtype=bool)
  examples = max(1, len(correct))
  drop = float(np.mean(baseline_correct) - np.mean(correct)) if len(correct) else 0.0
  figures = {'drop': drop, 'margin': 0.0, 'standard_error': 0.0,
             'test_examples': test_examples, 'eval_examples': int(len(correct))}
  if not test_examples:
    return figures
  disagreeing = (int(np.sum(correct != baseline_correct)) + 1) / (examples + 1)
  variance = max(disagreeing - drop**2, 0.0)
  standard_error = math.sqrt(variance / examples + variance / test_examples)
  figures.update(standard_error=standard_error,
                 margin=statistics.NormalDist().inv_cdf(GATE_PASS_CHANCE) * standard_error)
  return figures


def within_budget_with_margin(figures: Dict[str, Any], max_drop: float) -> bool:
  """Whether `gate_margin`'s drop plus its margin is within `max_drop`."""
  return figures['drop'] + figures['margin'] <= max_drop + DROP_TOLERANCE


def chance_of_passing(figures: Dict[str, Any], max_drop: float) -> float:
  """The chance that the gate finds `gate_margin`'s model within `max_drop` on test."""
  if not figures['standard_error']:
    return 1.0 if figures['drop'] <= max_drop + DROP_TOLERANCE else 0.0
  return statistics.NormalDist().cdf((max_drop - figures['drop']) / figures['standard_error'])


def test_split_size(eval_file_pattern, cap: int = GATE_EXAMPLES,
                    compression: str = 'GZIP') -> Optional[int]:
  """The rows the gate will judge on: the test split beside `eval_file_pattern`'s eval split
  (at most `cap`, what it scores), or None when there is none (it judges on eval)."""
  patterns = [eval_file_pattern] if isinstance(eval_file_pattern, str) else list(eval_file_pattern)
  marker = os.sep + f'Split-{CHOOSE_SPLIT}' + os.sep
  test_patterns = [pattern.replace(marker, os.sep + f'Split-{REPORT_SPLIT}' + os.sep)
                   for pattern in patterns if marker in pattern]
  files = sorted({name for pattern in test_patterns for name in tf.io.gfile.glob(pattern)})
  if not files:
    return None
  dataset = tf.data.TFRecordDataset(files, compression_type=compression or None).take(cap)
  return int(dataset.reduce(np.int64(0), lambda count, _: count + 1).numpy())


def majority_reason(accuracy: float, majority: float, lead: Dict[str, Any]) -> Optional[str]:
  """Why a model is no better than always guessing the commonest class (None: it is).

  The gate and the Distiller's size search judge this one way: the model must be above
  the majority class, and beyond noise on the same examples (McNemar at 5%).

  Args:
    accuracy: The model's accuracy.
    majority: The majority class's share of the same examples.
    lead: `paired_comparison` of the model against the constant majority guess.
  """
  if accuracy <= majority:
    return (f'accuracy {accuracy:.4f} is at or below the majority class ({majority:.4f}): it '
            'learnt less than always guessing the commonest class')
  if lead['within_noise']:
    return (f'its lead over the majority class is within noise: {lead["difference"]:+.4f} '
            f'(95% interval {lead["interval"][0]:+.4f} to {lead["interval"][1]:+.4f}; right '
            f'on {lead["wins"]} examples the constant guess misses, wrong on {lead["losses"]} '
            f'it gets, McNemar p = {lead["p_value"]:.3f}): no better than always guessing the '
            'commonest class')
  return None


def versus_majority_reason(correct: np.ndarray, majority_correct: np.ndarray
                           ) -> Optional[str]:
  """`majority_reason` from per-example correctness (the model's and the constant guess's)."""
  return majority_reason(float(np.mean(correct)), float(np.mean(majority_correct)),
                         paired_comparison(correct, majority_correct))


def majority_accuracy(labels: np.ndarray) -> float:
  """Accuracy of always predicting the most common class."""
  return float(np.mean(majority_correct(labels))) if len(labels) else 0.0


def median_latency_ms(call: Callable[[], object], runs: int) -> float:
  """Median wall time of `call` in milliseconds, after one untimed warm-up call."""
  call()
  timings = []
  for _ in range(runs):
    start = time.perf_counter()
    call()
    timings.append(time.perf_counter() - start)
  return 1000.0 * statistics.median(timings)


def latency_ms(scorer: Scorer, evaluation_set: EvaluationSet, runs: int) -> float:
  """Median batch-1 latency: parse and transform one raw example, then the model.

  Without raw examples (a set read from transformed examples) only the model is timed.
  """
  if evaluation_set.transform is not None and evaluation_set.raw_examples:
    example = tf.constant(evaluation_set.raw_examples[:1])

    def call():
      transformed = evaluation_set.transform(example)
      return scorer.scores({name: dense_numpy(transformed[name])
                            for name in scorer.input_names})
  else:
    one = evaluation_set.one_example()

    def call():
      return scorer.scores(one)
  return median_latency_ms(call, runs)


def size_bytes(model_dir: str) -> int:
  """Bytes of the folder the Pusher would push (transform graph included)."""
  return evaluation.directory_bytes(model_dir)


# Where measure() puts per-example correctness (a numpy array, for paired tests) when
# asked; the caller pops it before writing JSON.
CORRECT_KEY = 'correct'


def measure(model_dir: str, evaluation_set: EvaluationSet, latency_runs: int = 100,
            scorer: Optional[Scorer] = None,
            model_format: Optional[str] = None,
            keep_correct: bool = False) -> Dict[str, object]:
  """Every figure of one model: format, accuracy (and its 95% interval), majority, size,
  latency, examples, split.

  `model_format` is the Model artifact's `model_format` property, when there is one;
  `keep_correct` adds each example's correctness under `CORRECT_KEY`, for paired tests.
  """
  scorer = scorer or load_scorer(model_dir, model_format)
  if scorer.output_kind is None:
    scorer.resolve_output_kind(next(evaluation_set.batches(64)))
  correct = correct_predictions(scorer, evaluation_set)
  measured = _figures(scorer.format, correct, evaluation_set, size_bytes(model_dir),
                      latency_ms(scorer, evaluation_set, latency_runs), keep_correct)
  measured['output_kind'] = scorer.output_kind
  return measured


def _figures(model_format: str, correct: np.ndarray, evaluation_set: EvaluationSet,
             size: int, latency: float, keep_correct: bool) -> Dict[str, object]:
  """The figures every kind of model reports, in one place."""
  measured = {'format': model_format,
              'accuracy': float(np.mean(correct)),
              'accuracy_interval': accuracy_interval(correct),
              'majority_accuracy': majority_accuracy(evaluation_set.labels),
              'size_bytes': size,
              'latency_ms': latency,
              'examples': evaluation_set.size,
              'split': evaluation_set.split}
  if keep_correct:
    measured[CORRECT_KEY] = correct
  return measured


def has_raw_flatbuffer(model_dir: str) -> bool:
  """Whether a folder's manifest names a raw-input flatbuffer (`model_raw.tflite`)."""
  manifest_path = os.path.join(model_dir, SERVING_MANIFEST_FILE_NAME)
  if not tf.io.gfile.exists(manifest_path):
    return False
  with tf.io.gfile.GFile(manifest_path) as handle:
    return bool(json.load(handle).get('raw_model'))


def raw_flatbuffer_classes(model_dir: str, evaluation_set: EvaluationSet) -> np.ndarray:
  """Classes of a folder's raw-input flatbuffer on every raw example of the set."""
  from tfx_distillery.components.quantizer import predict  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.quantizer import raw_model  # pylint: disable=g-import-not-at-top
  if evaluation_set.every_raw_example is None:
    raise ValueError('a raw-input flatbuffer is scored on raw examples; this evaluation set '
                     'was read from transformed ones.')
  predictor = predict.load_raw_flatbuffer(model_dir)
  rows = raw_model.raw_rows(evaluation_set.every_raw_example, predictor.inputs)
  scores = np.concatenate([predictor.scores_one(row) for row in rows])
  return predictor.classes_of(scores)


def measure_raw_flatbuffer(model_dir: str, evaluation_set: EvaluationSet,
                           latency_runs: int = 100, classes: Optional[np.ndarray] = None,
                           keep_correct: bool = False) -> Dict[str, object]:
  """What a device gets: the raw-input flatbuffer alone, on raw columns, in a TFLite runtime.

  Size is the flatbuffer's file (a device downloads it alone); latency is one raw
  row (columns as numpy values) made into inputs and run; accuracy is every raw
  example of the set through the flatbuffer (`classes`, when the caller has them).
  """
  from tfx_distillery.components.quantizer import predict  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.quantizer import raw_model  # pylint: disable=g-import-not-at-top
  predictor = predict.load_raw_flatbuffer(model_dir)
  if classes is None:
    classes = raw_flatbuffer_classes(model_dir, evaluation_set)
  one = raw_model.raw_rows(evaluation_set.every_raw_example[:1], predictor.inputs)[0]
  # Each column's values as a list: [] where missing, one value or several.
  row = {entry['column']: list(np.ravel(one[entry['name']])) for entry in predictor.inputs}

  def call():
    return predictor.scores_one(predictor.row_inputs(row))

  return _figures('tflite_raw', classes == evaluation_set.labels, evaluation_set,
                  int(tf.io.gfile.stat(predictor.path).length),
                  median_latency_ms(call, latency_runs), keep_correct)


def gzip_bytes(content: bytes) -> int:
  """Size of `content` gzipped at the highest level (how sparse weights pay off on disk)."""
  return len(gzip.compress(content, compresslevel=9))


def write_atomically(path: str, content) -> None:
  """Writes a file through a temporary name, so readers never see half of it."""
  temporary = path + '.tmp'
  mode = 'wb' if isinstance(content, bytes) else 'w'
  with tf.io.gfile.GFile(temporary, mode) as handle:
    handle.write(content)
  tf.io.gfile.rename(temporary, path, overwrite=True)
