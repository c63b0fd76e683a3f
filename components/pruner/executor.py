"""Pruner's executor: prune_low_magnitude, fine-tune, strip, export, measure."""

import json
import os
from typing import Any, Dict, List

import numpy as np
import tensorflow as tf
import tf_keras
import tensorflow_model_optimization as tfmot
# The public API has no "is this layer prunable?"; the registry it consults does.
from tensorflow_model_optimization.python.core.sparsity.keras import prune_registry
from tensorflow_model_optimization.python.core.sparsity.keras import pruning_wrapper
import tensorflow_transform as tft
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.types import standard_component_specs
from tfx.utils import proto_utils
from tfx.proto import trainer_pb2

from tfx_distillery.components.common import callbacks
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import labels
from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import modeling
from tfx_distillery.components.common import progress
from tfx_distillery.components.common import reading
from tfx_distillery.components.pruner import spec as pruner_spec
from tfx_distillery.components.quantizer import conversion

# Layers that take an m-by-n (e.g. 2:4) structured pattern in tfmot.
M_BY_N_LAYERS = (tf_keras.layers.Dense, tf_keras.layers.Conv2D)
PRUNED_WEIGHTS = ('kernel', 'embeddings', 'depthwise_kernel')
EVAL_EXAMPLES = 5000
# Where the polynomial schedule starts, as in tfmot's pruning guide (capped by the target).
INITIAL_SPARSITY = 0.5
# Mask updates between begin_step and end_step.
SCHEDULE_UPDATES = 10


def layer_sparsity(model: tf_keras.Model) -> Dict[str, float]:
  """Fraction of exact zeros in each pruned weight (kernels and embeddings)."""
  sparsity = {}
  for layer in model.layers:
    for weight in layer.weights:
      if any(weight.name.split('/')[-1].startswith(kind) for kind in PRUNED_WEIGHTS):
        values = weight.numpy()
        sparsity[f'{layer.name}/{weight.name.split("/")[-1].split(":")[0]}'] = float(
            np.mean(values == 0))
  return sparsity


def overall_sparsity(model: tf_keras.Model) -> float:
  zeros = total = 0
  for layer in model.layers:
    for weight in layer.weights:
      if any(weight.name.split('/')[-1].startswith(kind) for kind in PRUNED_WEIGHTS):
        values = weight.numpy()
        zeros += int(np.sum(values == 0))
        total += values.size
  return zeros / max(1, total)


class SearchSchedule(tfmot.sparsity.keras.PruningSchedule):
  """tfmot's PolynomialDecay (cubic, from an initial to a final sparsity), with both
  sparsities held in variables: a search sets a new target without a new model.

  With `end_step` -1 the final sparsity holds from `begin_step` on (ConstantSparsity).
  """

  def __init__(self, begin_step: int, end_step: int, frequency: int):
    self.begin_step, self.end_step, self.frequency = begin_step, end_step, frequency
    self.initial_sparsity = tf.Variable(0.0, trainable=False, name='initial_sparsity')
    self.final_sparsity = tf.Variable(0.0, trainable=False, name='final_sparsity')

  def set_sparsities(self, initial: float, final: float) -> None:
    self.initial_sparsity.assign(initial)
    self.final_sparsity.assign(final)

  def __call__(self, step):
    if self.end_step < 0:
      sparsity = tf.identity(self.final_sparsity)
    else:
      progress_made = tf.clip_by_value(
          tf.cast(step - self.begin_step, tf.float32) / (self.end_step - self.begin_step),
          0.0, 1.0)
      sparsity = ((self.initial_sparsity - self.final_sparsity) * (1.0 - progress_made) ** 3
                  + self.final_sparsity)
    return (self._should_prune_in_step(step, self.begin_step, self.end_step, self.frequency),
            sparsity)

  def get_config(self):
    return {'begin_step': self.begin_step, 'end_step': self.end_step,
            'frequency': self.frequency}


class Executor(base_executor.BaseExecutor):
  """Prunes to a target sparsity, or to the highest one within an accuracy budget."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    with progress.component_timer('Pruner executor'):
      self._run(input_dict, output_dict, exec_properties)

  def _run(self, input_dict, output_dict, exec_properties) -> None:
    logger = progress.get_logger()
    self.properties = exec_properties
    examples = artifact_utils.get_single_instance(
        input_dict[standard_component_specs.EXAMPLES_KEY])
    self.graph_uri = artifact_utils.get_single_uri(
        input_dict[standard_component_specs.TRANSFORM_GRAPH_KEY])
    self.tf_transform_output = tft.TFTransformOutput(self.graph_uri)
    self.input_model_dir = evaluation.serving_model_path(artifact_utils.get_single_uri(
        input_dict[standard_component_specs.MODEL_KEY]))
    output_dir = os.path.join(artifact_utils.get_single_uri(
        output_dict[pruner_spec.PRUNED_MODEL_KEY]), 'Format-Serving')
    metrics_dir = artifact_utils.get_single_uri(output_dict[pruner_spec.METRICS_KEY])
    custom_config = json.loads(exec_properties.get('custom_config') or 'null') or {}
    self.batch_size = int(custom_config.get('batch_size', 64))
    self.learning_rate = float(custom_config.get('learning_rate', 1e-4))
    self.label_key = exec_properties.get(pruner_spec.LABEL_KEY_KEY) or labels.DEFAULT_LABEL_KEY
    train_args = trainer_pb2.TrainArgs()
    proto_utils.json_to_proto(exec_properties['train_args'], train_args)
    self.train_steps = max(1, train_args.num_steps)
    self.compression = reading.read_options(examples.uri).compression
    self.train_pattern = os.path.join(artifact_utils.get_split_uri([examples], 'train'), '*')
    # What the Pruner chooses by is measured on eval; the gate reports on test.
    self.eval_set = measuring.from_examples_artifact(
        examples.uri, measuring.CHOOSE_SPLIT, self.tf_transform_output, self.label_key,
        EVAL_EXAMPLES)

    dense_scorer = measuring.load_scorer(self.input_model_dir)
    if dense_scorer.keras_model is None:
      raise ValueError(
          f'The Pruner found nothing to prune: the model at {self.input_model_dir} was saved '
          f'without Keras metadata ({dense_scorer.format}), so its layers can not be wrapped. '
          'Export it with model.save() (our DistributedTrainer and Distiller do).')
    # Loaded once: each sparsity tried clones it, and nothing writes into it.
    self.dense_model = modeling.graph_model(dense_scorer.keras_model)
    self.output_kind = dense_scorer.output_kind or dense_scorer.resolve_output_kind(
        next(self.eval_set.batches(64)))
    dense_accuracy = measuring.accuracy(dense_scorer, self.eval_set)
    baseline = input_dict.get(pruner_spec.BASELINE_MODEL_KEY)
    baseline_accuracy, baseline_name = dense_accuracy, 'input model'
    if baseline:
      baseline_accuracy = measuring.accuracy(measuring.load_scorer(
          evaluation.serving_model_path(artifact_utils.get_single_uri(baseline))), self.eval_set)
      baseline_name = 'baseline (teacher)'
    max_drop = exec_properties.get(pruner_spec.MAX_ACCURACY_DROP_KEY)
    trials = []
    if max_drop is None:
      sparsity = float(exec_properties[pruner_spec.TARGET_SPARSITY_KEY])
      self._prune(sparsity)
      pruned = self._stripped()
    else:
      sparsity, pruned, trials = self._search(float(max_drop), baseline_accuracy,
                                              dense_accuracy, baseline_name)
    pruned_accuracy = measuring.accuracy(self._scorer(pruned), self.eval_set)
    modeling.export_serving_model(pruned, self.tf_transform_output,
                                  exec_properties[pruner_spec.LABEL_COLUMN_KEY], output_dir)
    dense_flatbuffer = conversion.convert(self._load())
    pruned_flatbuffer = conversion.convert(pruned)
    metrics = {
        'target_sparsity': sparsity,
        'sparsity': overall_sparsity(pruned),
        'layer_sparsity': layer_sparsity(pruned),
        'pruned_layers': self.pruned_layers,
        'skipped_layers': self.skipped_layers,
        'dense_accuracy': dense_accuracy,
        'pruned_accuracy': pruned_accuracy,
        'accuracy_drop': dense_accuracy - pruned_accuracy,
        'baseline_accuracy': baseline_accuracy,
        'budget_against': baseline_name,
        'majority_accuracy': measuring.majority_accuracy(self.eval_set.labels),
        'dense_gzip_bytes': measuring.gzip_bytes(dense_flatbuffer),
        'pruned_gzip_bytes': measuring.gzip_bytes(pruned_flatbuffer),
        'dense_tflite_bytes': len(dense_flatbuffer),
        'size_bytes': measuring.size_bytes(output_dir),
        'schedule': exec_properties[pruner_spec.SCHEDULE_KEY],
        'train_steps': self.train_steps,
        'trials': trials,
        'eval_split': self.eval_set.split,
        'eval_examples': self.eval_set.size,
        'label_key': self.label_key,
    }
    metrics['gzip_ratio'] = metrics['dense_gzip_bytes'] / metrics['pruned_gzip_bytes']
    logger.info('Pruner: sparsity %.3f, gzip %.2fx smaller, accuracy %.4f -> %.4f (majority '
                '%.4f); pruned %d layer(s), left %d dense', metrics['sparsity'],
                metrics['gzip_ratio'], dense_accuracy, pruned_accuracy,
                metrics['majority_accuracy'], len(self.pruned_layers), len(self.skipped_layers))
    modeling.write_metrics(metrics_dir, metrics)

  def _scorer(self, model: tf_keras.Model) -> measuring.Scorer:
    scorer = measuring.keras_scorer(model)
    scorer.output_kind = self.output_kind
    return scorer

  def _load(self) -> tf_keras.Model:
    return self.dense_model

  def _steps(self):
    """begin_step, end_step and the mask update frequency of each fine-tune."""
    begin_step = int(self.properties[pruner_spec.BEGIN_STEP_KEY])
    end_step = int(self.properties[pruner_spec.END_STEP_KEY])
    if end_step < 0:  # Leave the last 30% of the steps to recover at full sparsity.
      end_step = max(begin_step + 1, int(0.7 * self.train_steps))
    # Masks are updated every `frequency` steps (tfmot's default of 100 would never
    # fire in a short fine-tune); end_step lands on an update so the target is reached.
    frequency = max(1, (end_step - begin_step) // SCHEDULE_UPDATES)
    return begin_step, begin_step + frequency * SCHEDULE_UPDATES, frequency

  def _wrapped(self) -> tf_keras.Model:
    """The input model with each prunable layer wrapped, built, compiled and traced once.

    Every sparsity tried reuses it: the schedule's sparsities are variables, so a new
    target needs no new model, and Keras' traced training step is kept.
    """
    if getattr(self, 'wrapped', None) is not None:
      return self.wrapped
    model = self._load()
    begin_step, end_step, frequency = self._steps()
    constant = self.properties[pruner_spec.SCHEDULE_KEY] == 'constant'
    self.schedule = SearchSchedule(begin_step, -1 if constant else end_step, frequency)
    pruning = {'pruning_schedule': self.schedule}
    block_size = self.properties.get(pruner_spec.BLOCK_SIZE_KEY)
    if block_size:
      pruning['block_size'] = tuple(json.loads(block_size))
    m_by_n = self.properties.get(pruner_spec.M_BY_N_KEY)
    if m_by_n:
      pruning['sparsity_m_by_n'] = tuple(json.loads(m_by_n))

    pruned_layers, skipped_layers = [], []

    def wrap(layer):
      supported = (isinstance(layer, M_BY_N_LAYERS) if m_by_n else
                   prune_registry.PruneRegistry.supports(layer))
      if supported and any(weight.name.split('/')[-1].startswith(PRUNED_WEIGHTS)
                           for weight in layer.weights):
        pruned_layers.append(layer.name)
        # A copy: the wrapper prunes the layer it wraps in place, and the input model
        # stays dense (copy_layer_weights fills the copy in).
        return tfmot.sparsity.keras.prune_low_magnitude(
            layer.__class__.from_config(layer.get_config()), **pruning)
      if layer.weights:  # Weightless layers (inputs, reshapes) have nothing to skip.
        skipped_layers.append(f'{layer.name} ({type(layer).__name__})')
      return layer.__class__.from_config(layer.get_config())

    if modeling.nests_models(model):
      raise ValueError('The Pruner needs a flat functional model; this one nests models (an '
                       'ensemble?).')
    wrapped = tf_keras.models.clone_model(model, clone_function=wrap)
    if not pruned_layers:
      raise ValueError(
          f'The Pruner found nothing to prune in the model at {self.input_model_dir}: no layer '
          f'that tfmot supports{" for m_by_n (Dense, Conv2D)" if m_by_n else ""} has weights. '
          f'Layers with weights: {skipped_layers or "none"}.')
    self.pruned_layers, self.skipped_layers = pruned_layers, skipped_layers
    modeling.copy_layer_weights(model, wrapped)
    units = int(model.outputs[0].shape[-1])
    loss, metrics = modeling.loss_and_metrics(units, from_logits=self.output_kind == 'logits')
    wrapped.compile(optimizer=tf_keras.optimizers.Adam(self.learning_rate), loss=loss,
                    metrics=metrics)
    modeling.create_optimizer_slots(wrapped)
    self.train_dataset = reading.make_dataset(
        self.train_pattern, self.tf_transform_output, self.batch_size,
        reading.IngestionOptions(compression=self.compression), label_key=self.label_key,
        batch_map_fn=modeling.prepare_labels(units))
    self.wrapped, self.wrapped_scorer = wrapped, self._scorer(wrapped)
    self.reached_sparsity = 0.0
    return wrapped

  def _prune(self, sparsity: float) -> tf_keras.Model:
    """Fine-tunes the wrapped model from where it is to `sparsity`; returns it, wrapped.

    The first call starts from the input model; each later one from the last
    sparsity reached (the search only goes on from one that kept the budget), as
    gradual pruning does. Each gets the same number of steps.
    """
    wrapped = self._wrapped()
    start = self.reached_sparsity or min(INITIAL_SPARSITY, sparsity)
    constant = self.properties[pruner_spec.SCHEDULE_KEY] == 'constant'
    self.schedule.set_sparsities(sparsity if constant else min(start, sparsity), sparsity)
    for layer in wrapped.layers:
      if isinstance(layer, pruning_wrapper.PruneLowMagnitude):
        layer.pruning_step.assign(0)  # Each fine-tune runs the schedule from its start.
    epochs = max(1, min(10, self.train_steps // 50))
    wrapped.fit(self.train_dataset, epochs=epochs,
                steps_per_epoch=max(1, self.train_steps // epochs), verbose=0,
                callbacks=[tfmot.sparsity.keras.UpdatePruningStep(),
                           callbacks.EpochProgress(f'pruning to {sparsity:.2f}')])
    self.reached_sparsity = sparsity
    return wrapped

  def _stripped(self, weights=None) -> tf_keras.Model:
    """The wrapped model (at `weights`, when given) without its wrappers."""
    if weights is not None:
      self.wrapped.set_weights(weights)
    return tfmot.sparsity.keras.strip_pruning(self.wrapped)

  def _search(self, max_drop: float, baseline_accuracy: float, dense_accuracy: float,
              baseline_name: str):
    """Highest sparsity whose eval accuracy stays within `max_drop` of the baseline's."""
    logger = progress.get_logger()
    sparsities = sorted(json.loads(self.properties[pruner_spec.SPARSITIES_KEY]))
    if baseline_accuracy - dense_accuracy > max_drop:
      # Nothing can pass the budget; the lowest sparsity costs least.
      logger.warning(
          'WARNING: Pruner: the input model (eval accuracy %.4f) has already used the budget: '
          'it is %.4f below the %s (%.4f), more than %.4f. Keeping the lowest sparsity tried, '
          '%.2f.', dense_accuracy, baseline_accuracy - dense_accuracy, baseline_name,
          baseline_accuracy, max_drop, sparsities[0])
      self._prune(sparsities[0])
      accuracy = measuring.accuracy(self.wrapped_scorer, self.eval_set)
      return sparsities[0], self._stripped(), [{
          'sparsity': sparsities[0], 'eval_accuracy': accuracy,
          'baseline_accuracy': baseline_accuracy, 'within_budget': False,
          'note': 'the input model had already used the budget'}]
    trials, best = [], (0.0, None)
    for sparsity in sparsities:
      self._prune(sparsity)
      # The wrapped model applies its masks when called: it scores as the stripped one.
      accuracy = measuring.accuracy(self.wrapped_scorer, self.eval_set)
      within = baseline_accuracy - accuracy <= max_drop
      trials.append({'sparsity': sparsity, 'eval_accuracy': accuracy,
                     'baseline_accuracy': baseline_accuracy, 'within_budget': within})
      logger.info('Pruner search: sparsity %.2f eval accuracy %.4f (%s %.4f): %s',
                  sparsity, accuracy, baseline_name, baseline_accuracy,
                  'kept' if within else 'over budget')
      if not within:
        break  # Accuracy only falls as sparsity rises; higher ones would fail too.
      best = (sparsity, self.wrapped.get_weights())
    if best[1] is None:
      logger.warning('WARNING: no sparsity in %s stays within %.4f of the %s\'s accuracy; '
                     'exporting the dense model.', sparsities, max_drop, baseline_name)
      self.pruned_layers = []
      return 0.0, self._load(), trials
    return best[0], self._stripped(best[1]), trials
