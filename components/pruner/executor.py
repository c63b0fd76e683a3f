"""Pruner's executor: prune_low_magnitude, fine-tune, strip, export, measure."""

import json
import os
import time
from typing import Any, Dict, List, Optional, Sequence

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

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import callbacks
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import labels
from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import modeling
from tfx_distillery.components.common import progress
from tfx_distillery.components.common import reading
from tfx_distillery.components.common import seeding
from tfx_distillery.components.pruner import sensitivity
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
# Levels the budgeted search also tries when the lowest of `sparsities` is over budget.
LOWER_SPARSITIES = (0.1, 0.2, 0.3, 0.4)
# What the search's sizes are: the full integer file the chain's Quantizer ships.
SIZE_MODE = 'full_integer'
SIZE_CALIBRATION_EXAMPLES = 16
# Pruning pays only when the shipped int8 file shrinks by a real amount: at least 1% and
# 256 bytes. A converted file moves by a few bytes with its buffers' alignment (12,048
# against 12,056 bytes was once called a win), and a pruned model is a second model to
# ship and trust for nothing.
PAYS_SHARE = 0.01
PAYS_BYTES = 256


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


class Outcome:
  """What the Pruner hands on: a pruned model, or its input unchanged, and why."""

  def __init__(self, model: Optional[tf_keras.Model], level: float,
               targets: Dict[str, float], reason: Optional[str] = None,
               not_a_candidate: Optional[str] = None, shipped_bytes: Optional[int] = None):
    self.model = model  # None: the input model, handed on unchanged.
    self.level = level
    self.targets = targets
    self.reason = reason
    self.shipped_bytes = shipped_bytes
    # Set when the handed-on model should not go to the gate (the reason why).
    self.not_a_candidate = not_a_candidate if model is not None else reason

  @property
  def pruned(self) -> bool:
    return self.model is not None


class Executor(base_executor.BaseExecutor):
  """Prunes layer by layer by sensitivity, to a target or within an accuracy budget.

  Never hands on a model over the budget, nor one whose shipped int8 file is no
  smaller than the unpruned one's: then it hands on its input unchanged, marked so
  that the Quantizer and the gate leave it out.
  """

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    self.random_seed, deterministic = seeding.from_properties(exec_properties)
    with progress.component_timer('Pruner executor'), \
        seeding.seeded(self.random_seed, deterministic, 'Pruner'):
      self._run(input_dict, output_dict, exec_properties)
    seeding.record([artifact for artifacts in output_dict.values() for artifact in artifacts],
                   self.random_seed)

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
    pruned_artifact = artifact_utils.get_single_instance(
        output_dict[pruner_spec.PRUNED_MODEL_KEY])
    input_artifact = artifact_utils.get_single_instance(
        input_dict[standard_component_specs.MODEL_KEY])
    # Pruning keeps the student's inputs: the report still says what each feature became.
    artifacts.carry_properties(input_artifact, pruned_artifact, artifacts.FEATURE_PLAN_PROPERTY)
    output_dir = os.path.join(pruned_artifact.uri, 'Format-Serving')
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
    # The rows the gate will judge the pruned model on: the search keeps a margin for them.
    self.test_examples = measuring.test_split_size(
        measuring.split_pattern(examples.uri, measuring.CHOOSE_SPLIT),
        compression=self.compression)
    # A few training rows calibrate the int8 conversions whose sizes the search compares
    # (a file's size does not depend on its calibration ranges).
    self.calibration = measuring.from_examples_artifact(
        examples.uri, 'train', self.tf_transform_output, self.label_key,
        SIZE_CALIBRATION_EXAMPLES)

    dense_scorer = measuring.load_scorer(self.input_model_dir)
    if dense_scorer.keras_model is None:
      raise ValueError(
          f'The Pruner found nothing to prune: the model at {self.input_model_dir} was saved '
          f'without Keras metadata ({dense_scorer.format}), so its layers can not be wrapped. '
          'Export it with model.save() (our DistributedTrainer and Distiller do).')
    if modeling.nests_models(dense_scorer.keras_model):
      raise ValueError('The Pruner needs a flat functional model; this one nests models (an '
                       'ensemble?).')
    # Loaded once: the sensitivity pass writes into it and restores it; pruning wraps a copy.
    self.dense_model = modeling.graph_model(dense_scorer.keras_model)
    self.output_kind = dense_scorer.output_kind or dense_scorer.resolve_output_kind(
        next(self.eval_set.batches(64)))
    self.dense_scorer = self._scorer(self.dense_model)
    dense_correct = measuring.correct_predictions(self.dense_scorer, self.eval_set)
    dense_accuracy = float(np.mean(dense_correct))
    # Per example, so that every comparison below is paired on the same eval examples.
    self.majority_correct = measuring.majority_correct(self.eval_set.labels)
    majority = self.majority = float(np.mean(self.majority_correct))
    baseline = input_dict.get(pruner_spec.BASELINE_MODEL_KEY)
    self.baseline_correct, baseline_name = dense_correct, 'input model'
    if baseline:
      self.baseline_correct = measuring.correct_predictions(measuring.load_scorer(
          evaluation.serving_model_path(artifact_utils.get_single_uri(baseline))), self.eval_set)
      baseline_name = 'baseline (teacher)'
    baseline_accuracy = float(np.mean(self.baseline_correct))
    self.prunable = self._prunable_weights()
    layer_allowance = exec_properties.get(pruner_spec.MAX_LAYER_ACCURACY_DROP_KEY)
    # By default a layer may go as far as pruning it alone leaves the model above the
    # majority class: past that, it has erased what the model learnt.
    self.allowance = (float(layer_allowance) if layer_allowance is not None
                      else max(0.0, dense_accuracy - majority))
    max_drop = exec_properties.get(pruner_spec.MAX_ACCURACY_DROP_KEY)
    self.trials, self.losses = [], {}
    self.dense_int8_bytes = None
    sparsities = sorted(json.loads(exec_properties[pruner_spec.SPARSITIES_KEY]))
    m_by_n = self.properties.get(pruner_spec.M_BY_N_KEY)
    if m_by_n:
      outcome = self._structured(json.loads(m_by_n))
    else:
      target = exec_properties.get(pruner_spec.TARGET_SPARSITY_KEY)
      levels = (sorted(set(LOWER_SPARSITIES) | set(sparsities)) if max_drop is not None
                else sorted(set(sparsities) | {float(target)}))
      if max_drop is not None and baseline_accuracy - dense_accuracy > float(max_drop):
        outcome = Outcome(None, 0.0, {}, (
            f'the input model (eval accuracy {dense_accuracy:.4f}) is already '
            f'{baseline_accuracy - dense_accuracy:.4f} below the {baseline_name} '
            f'({baseline_accuracy:.4f}), more than max_accuracy_drop {float(max_drop):.4f}: '
            'pruning can only lose more'))
      else:
        started = time.time()
        self.losses = sensitivity.measure(
            self.prunable, levels,
            lambda: measuring.accuracy(self.dense_scorer, self.eval_set), dense_accuracy)
        logger.info('Pruner: sensitivity of %d layer(s) at %d sparsities on eval in %.1f s '
                    '(a layer may lose at most %.4f pruned alone)', len(self.losses),
                    len(levels), time.time() - started, self.allowance)
        outcome = (self._fixed(float(target)) if max_drop is None else
                   self._search(levels, sparsities[0], float(max_drop), baseline_accuracy,
                                baseline_name))

    if outcome.pruned:
      pruned_correct = measuring.correct_predictions(self._scorer(outcome.model), self.eval_set)
      pruned_accuracy = float(np.mean(pruned_correct))
      modeling.export_serving_model(outcome.model, self.tf_transform_output,
                                    exec_properties[pruner_spec.LABEL_COLUMN_KEY], output_dir)
      dense_gzip = measuring.gzip_bytes(conversion.convert(self.dense_model))
      pruned_gzip = measuring.gzip_bytes(conversion.convert(outcome.model))
      handed_on = outcome.model
    else:
      # The input as it came: a copy of its folder, so the gate and the Pusher see its bytes.
      modeling.copy_tree(self.input_model_dir, output_dir)
      pruned_correct, dense_gzip, pruned_gzip = dense_correct, None, None
      pruned_accuracy = dense_accuracy
      handed_on = self.dense_model
      logger.warning('WARNING: Pruner: pruning did not pay, so the input model is handed on '
                     'unchanged (the Quantizer and the gate leave it out): %s', outcome.reason)
    if outcome.not_a_candidate:
      pruned_artifact.set_string_custom_property(artifacts.NOT_A_CANDIDATE_PROPERTY,
                                                 f'pruning did not pay: {outcome.not_a_candidate}')
    per_layer = layer_sparsity(handed_on)
    pruned_artifact.set_string_custom_property(artifacts.LAYER_SPARSITY_PROPERTY,
                                               json.dumps(per_layer, sort_keys=True))
    metrics = {
        'pruning_paid': outcome.pruned and not outcome.not_a_candidate,
        'handed_on': 'pruned model' if outcome.pruned else 'input model, unchanged',
        'reason': outcome.reason,
        'not_a_candidate': outcome.not_a_candidate,
        'target_sparsity': outcome.level,
        'layer_targets': outcome.targets,
        'sensitivity': {name: {f'{level:g}': loss for level, loss in by_level.items()}
                        for name, by_level in self.losses.items()},
        'max_layer_accuracy_drop': self.allowance,
        'sparsity': overall_sparsity(handed_on),
        'layer_sparsity': per_layer,
        'pruned_layers': sorted(name for name, value in outcome.targets.items() if value > 0),
        'skipped_layers': self.skipped_layers + sorted(
            f'{name} (dense under the sensitivity rule)' for name in self.prunable
            if not outcome.targets.get(name)),
        'dense_accuracy': dense_accuracy,
        'pruned_accuracy': pruned_accuracy,
        'accuracy_drop': dense_accuracy - pruned_accuracy,
        'baseline_accuracy': baseline_accuracy,
        'budget_against': baseline_name,
        'max_accuracy_drop': max_drop,
        'majority_accuracy': majority,
        # What was handed on against the majority class and the baseline, paired on eval.
        'versus_majority': measuring.paired_comparison(pruned_correct, self.majority_correct),
        'versus_baseline': measuring.paired_comparison(pruned_correct, self.baseline_correct),
        'dense_gzip_bytes': dense_gzip,
        'pruned_gzip_bytes': pruned_gzip,
        'gzip_ratio': dense_gzip / pruned_gzip if pruned_gzip else 1.0,
        'dense_int8_bytes': self.dense_int8_bytes,
        'shipped_int8_bytes': outcome.shipped_bytes or self.dense_int8_bytes,
        'shipped_int8_mode': SIZE_MODE,
        'size_bytes': measuring.size_bytes(output_dir),
        'schedule': exec_properties[pruner_spec.SCHEDULE_KEY],
        'train_steps': self.train_steps,
        'trials': self.trials,
        'eval_split': self.eval_set.split,
        'eval_examples': self.eval_set.size,
        'label_key': self.label_key,
    }
    logger.info('Pruner: handed on the %s: sparsity %.3f, accuracy %.4f -> %.4f (majority '
                '%.4f) on eval; pruned %d layer(s), left %d dense', metrics['handed_on'],
                metrics['sparsity'], dense_accuracy, pruned_accuracy, majority,
                len(metrics['pruned_layers']), len(metrics['skipped_layers']))
    if outcome.pruned and outcome.not_a_candidate:
      logger.warning('WARNING: Pruner: the pruned model is not put to the gate: %s',
                     outcome.not_a_candidate)
    metrics['random_seed'] = self.random_seed
    modeling.write_metrics(metrics_dir, metrics)

  def _scorer(self, model: tf_keras.Model) -> measuring.Scorer:
    scorer = measuring.keras_scorer(model)
    scorer.output_kind = self.output_kind
    return scorer

  def _prunable_weights(self) -> Dict[str, tf.Variable]:
    """{layer name: the weight tfmot would prune} for each layer it can prune."""
    m_by_n = self.properties.get(pruner_spec.M_BY_N_KEY)
    prunable, self.skipped_layers = {}, []
    for layer in self.dense_model.layers:
      supported = (isinstance(layer, M_BY_N_LAYERS) if m_by_n else
                   prune_registry.PruneRegistry.supports(layer))
      weights = [weight for weight in layer.weights
                 if weight.name.split('/')[-1].startswith(PRUNED_WEIGHTS)]
      if supported and weights:
        prunable[layer.name] = weights[0]
      elif layer.weights:  # Weightless layers (inputs, reshapes) have nothing to skip.
        self.skipped_layers.append(f'{layer.name} ({type(layer).__name__})')
    if not prunable:
      raise ValueError(
          f'The Pruner found nothing to prune in the model at {self.input_model_dir}: no layer '
          f'that tfmot supports{" for m_by_n (Dense, Conv2D)" if m_by_n else ""} has weights. '
          f'Layers with weights: {self.skipped_layers or "none"}.')
    return prunable

  def _sizes(self) -> Dict[str, int]:
    return {name: int(np.prod(variable.shape)) for name, variable in self.prunable.items()}

  def _representative_features(self):
    for index in range(self.calibration.size):
      yield {name: values[index:index + 1]
             for name, values in self.calibration.features.items()}

  def _int8_bytes(self, model: tf_keras.Model, sparse: bool) -> int:
    return len(conversion.convert(model, SIZE_MODE, self._representative_features,
                                  sparse=sparse))

  def _unpruned_int8_bytes(self) -> int:
    """The input model's int8 file (dense encoding), converted once."""
    if self.dense_int8_bytes is None:
      self.dense_int8_bytes = self._int8_bytes(self.dense_model, sparse=False)
    return self.dense_int8_bytes

  def _shipped_bytes(self, model: tf_keras.Model) -> int:
    """The int8 file the Quantizer would ship: the sparse encoding where it is smaller.

    The dense encoding of a pruned model is as large as the unpruned model's (zeros are
    stored like any weight), so that is its size.
    """
    return min(self._unpruned_int8_bytes(), self._int8_bytes(model, sparse=True))

  def _one_shot_shipped_bytes(self, targets: Dict[str, float]) -> int:
    """`_shipped_bytes` of the input model with `targets` applied at once (no fine-tuning).

    Fine-tuning moves which weights are zero, not how many, so this is the file's size
    before any fine-tuning is paid for.
    """
    self._unpruned_int8_bytes()  # Before any weight is zeroed.
    originals = {name: variable.numpy() for name, variable in self.prunable.items()}
    try:
      for name, level in targets.items():
        self.prunable[name].assign(sensitivity.one_shot(originals[name], level))
      return self._shipped_bytes(self.dense_model)
    finally:
      for name, values in originals.items():
        self.prunable[name].assign(values)

  def _nothing_prunable(self) -> Outcome:
    return Outcome(None, 0.0, {}, sensitivity.nothing_prunable_message(self.losses,
                                                                       self.allowance))

  def _fixed(self, target: float) -> Outcome:
    """`target` of the prunable weights removed, tolerant layers first; no budget."""
    targets = sensitivity.allocate(self.losses, self._sizes(), target, self.allowance)
    if not any(targets.values()):
      return self._nothing_prunable()
    self._prune(targets, target)
    correct = measuring.correct_predictions(self.wrapped_scorer, self.eval_set)
    versus_majority = self._versus_majority(correct)
    if versus_majority['within_noise']:
      return Outcome(None, 0.0, {}, (
          f'pruned to {target:g}, its eval accuracy {np.mean(correct):.4f} is within noise of '
          f'the majority class ({self.majority:.4f} on {self.eval_set.size} examples; '
          f'{versus_majority["wins"]} wins, {versus_majority["losses"]} losses, McNemar '
          f'p = {versus_majority["p_value"]:.3f}): a constant predictor in all but name'))
    return self._checked(self._stripped(), target, targets)

  def _structured(self, m_by_n) -> Outcome:
    """Every Dense and Conv2D layer at m of every n weights zero (tfmot's m_by_n)."""
    level = m_by_n[0] / m_by_n[1]
    targets = {name: level for name in self.prunable}
    self._prune(targets, level)
    pruned = self._stripped()
    return self._checked(pruned, level, targets)

  def _checked(self, pruned: tf_keras.Model, level: float, targets: Dict[str, float]
               ) -> Outcome:
    """A model pruned to a fixed target, kept from the gate when it ships no smaller."""
    shipped_bytes = self._shipped_bytes(pruned)
    return Outcome(pruned, level, targets, shipped_bytes=shipped_bytes,
                   not_a_candidate=(self._no_smaller(shipped_bytes)
                                    if not self._pays(shipped_bytes) else None))

  def _versus_majority(self, correct: np.ndarray) -> Dict:
    """A pruned model against always guessing the majority class, on the same examples."""
    return measuring.paired_comparison(correct, self.majority_correct)

  def _pays(self, shipped_bytes: int) -> bool:
    """Whether a pruned int8 file of `shipped_bytes` is smaller by PAYS_SHARE and PAYS_BYTES."""
    saving = max(PAYS_BYTES, PAYS_SHARE * self.dense_int8_bytes)
    return shipped_bytes <= self.dense_int8_bytes - saving

  def _no_smaller(self, shipped_bytes: int) -> str:
    return (f'its int8 file would be {shipped_bytes} bytes (dense or sparse encoding, whichever '
            f'is smaller), not smaller than the unpruned model\'s {self.dense_int8_bytes} by '
            f'the {PAYS_SHARE:.0%} and {PAYS_BYTES} bytes that pruning must save to pay')

  def _search(self, levels: Sequence[float], first_level: float, max_drop: float,
              baseline_accuracy: float, baseline_name: str) -> Outcome:
    """The smallest shipped file whose eval accuracy stays within `max_drop` of the baseline.

    Each level is an overall sparsity, reached tolerant layers first. The search
    starts at `first_level`, rises while the budget holds (each fine-tune going on from
    the last level kept), and, when the first level is over budget, tries the lower
    levels from the input model. Before any fine-tuning, the most the search could
    prune is converted: when even that ships no smaller, nothing is fine-tuned.
    """
    logger = progress.get_logger()
    sizes = self._sizes()
    candidates = []
    for level in levels:
      targets = sensitivity.allocate(self.losses, sizes, level, self.allowance)
      if any(targets.values()) and (not candidates or targets != candidates[-1][1]):
        candidates.append((level, targets))
    if not candidates:
      return self._nothing_prunable()
    most_level, most_targets = candidates[-1]
    best_case = self._one_shot_shipped_bytes(most_targets)
    logger.info('Pruner: at the most the search could prune (%.2f overall), the int8 file '
                'would be %d bytes; unpruned %d', most_level, best_case, self.dense_int8_bytes)
    if not self._pays(best_case):
      return Outcome(None, 0.0, {}, (
          f'even at the most the search could prune ({most_level:.2f} of the prunable weights, '
          f'layer by layer), {self._no_smaller(best_case)}; nothing was fine-tuned'))

    def try_level(index: int) -> bool:
      level, targets = candidates[index]
      self._prune(targets, level)
      # The wrapped model applies its masks when called: it scores as the stripped one.
      correct = measuring.correct_predictions(self.wrapped_scorer, self.eval_set)
      accuracy = float(np.mean(correct))
      # The budget is the user's stated tolerance, as at the gate, with the margin the
      # gate's noise on test asks for (it then passes in at least 97.5% of runs); the lead
      # over the majority class must hold beyond noise (McNemar, paired on eval).
      versus_majority = self._versus_majority(correct)
      versus_baseline = measuring.paired_comparison(correct, self.baseline_correct)
      gate = measuring.gate_margin(correct, self.baseline_correct, self.test_examples)
      learnt = not versus_majority['within_noise']
      within = measuring.within_budget_with_margin(gate, max_drop) and learnt
      self.trials.append({'sparsity': level,
                          'overall_sparsity': sensitivity.removed_share(targets, sizes),
                          'layer_targets': targets, 'eval_accuracy': accuracy,
                          'baseline_accuracy': baseline_accuracy,
                          'versus_baseline': versus_baseline, 'gate_margin': gate,
                          'versus_majority': versus_majority,
                          'above_majority': learnt, 'within_budget': within})
      interval = versus_baseline['interval']
      logger.info('Pruner search: sparsity %.2f (%d layer(s) pruned) eval accuracy %.4f '
                  '(%s %.4f; difference %+.4f, 95%% interval [%+.4f, %+.4f]; the gate\'s '
                  'margin %.4f): %s', level,
                  sum(1 for value in targets.values() if value), accuracy, baseline_name,
                  baseline_accuracy, versus_baseline['difference'], interval[0], interval[1],
                  gate['margin'],
                  'within budget' if within else
                  'within noise of the majority class' if not learnt else 'over budget')
      if within:
        kept.append((self.wrapped.get_weights(), level, targets, accuracy, self.trials[-1]))
      return within

    kept = []
    start = next((index for index, (level, _) in enumerate(candidates) if level >= first_level),
                 len(candidates) - 1)
    if try_level(start):
      for index in range(start + 1, len(candidates)):
        if not try_level(index):
          break  # Accuracy only falls as sparsity rises; higher levels would fail too.
    else:
      for index in range(start - 1, -1, -1):
        self._reset()  # Lower than what failed: start again from the input model.
        if try_level(index):
          break
    if not kept:
      tried = ', '.join(f'{trial["sparsity"]:g}' for trial in self.trials)
      return Outcome(None, 0.0, {}, (
          f'no sparsity tried ({tried}) stays within {max_drop:.4f} of the {baseline_name}\'s '
          f'eval accuracy ({baseline_accuracy:.4f}), with the margin the gate\'s noise on test '
          f'asks for, and clearly above the majority class ({self.majority:.4f})'))
    for weights, level, targets, accuracy, trial in kept:
      trial['shipped_int8_bytes'] = self._shipped_bytes(self._stripped(weights))
    weights, level, targets, accuracy, trial = min(
        kept, key=lambda entry: (entry[4]['shipped_int8_bytes'], -entry[3]))
    if not self._pays(trial['shipped_int8_bytes']):
      smallest = self._no_smaller(trial['shipped_int8_bytes'])
      return Outcome(None, 0.0, {}, f'at every sparsity within the budget, {smallest}')
    logger.info('Pruner search: kept sparsity %.2f, the smallest int8 file within the budget '
                '(%d bytes, unpruned %d)', level, trial['shipped_int8_bytes'],
                self.dense_int8_bytes)
    return Outcome(self._stripped(weights), level, targets,
                   shipped_bytes=trial['shipped_int8_bytes'])

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

    Every trial reuses it: each layer's schedule holds its sparsities in variables,
    so a new target needs no new model, and Keras' traced training step is kept.
    Layers that no trial prunes are wrapped too, at sparsity 0 (their masks stay ones).
    """
    if getattr(self, 'wrapped', None) is not None:
      return self.wrapped
    model = self.dense_model
    begin_step, end_step, frequency = self._steps()
    constant = self.properties[pruner_spec.SCHEDULE_KEY] == 'constant'
    block_size = self.properties.get(pruner_spec.BLOCK_SIZE_KEY)
    m_by_n = self.properties.get(pruner_spec.M_BY_N_KEY)
    self.schedules = {}

    def wrap(layer):
      if layer.name in self.prunable:
        schedule = SearchSchedule(begin_step, -1 if constant else end_step, frequency)
        self.schedules[layer.name] = schedule
        pruning = {'pruning_schedule': schedule}
        if block_size:
          pruning['block_size'] = tuple(json.loads(block_size))
        if m_by_n:
          pruning['sparsity_m_by_n'] = tuple(json.loads(m_by_n))
        # A copy: the wrapper prunes the layer it wraps in place, and the input model
        # stays dense (copy_layer_weights fills the copy in).
        return tfmot.sparsity.keras.prune_low_magnitude(
            layer.__class__.from_config(layer.get_config()), **pruning)
      return layer.__class__.from_config(layer.get_config())

    wrapped = tf_keras.models.clone_model(model, clone_function=wrap)
    modeling.copy_layer_weights(model, wrapped)
    units = int(model.outputs[0].shape[-1])
    loss, metrics = modeling.loss_and_metrics(units, from_logits=self.output_kind == 'logits')
    wrapped.compile(optimizer=tf_keras.optimizers.Adam(self.learning_rate), loss=loss,
                    metrics=metrics)
    modeling.create_optimizer_slots(wrapped)
    self.units = units
    self.wrapped, self.wrapped_scorer = wrapped, self._scorer(wrapped)
    # Where `_reset` goes back to: the input model's weights, all masks ones, fresh slots.
    self.initial_weights = wrapped.get_weights()
    self.initial_optimizer = [variable.numpy() for variable in wrapped.optimizer.variables()]
    self.reached = {}
    return wrapped

  def _reset(self) -> None:
    self.wrapped.set_weights(self.initial_weights)
    for variable, value in zip(self.wrapped.optimizer.variables(), self.initial_optimizer):
      variable.assign(value)
    self.reached = {}

  def _prune(self, targets: Dict[str, float], level: float) -> tf_keras.Model:
    """Fine-tunes the wrapped model from where it is to `targets`; returns it, wrapped.

    Each layer goes from the sparsity it last reached (the search only goes on from a
    level that kept the budget), or from min(0.5, its target) at first, as gradual
    pruning does. Each trial gets the same number of steps.
    """
    wrapped = self._wrapped()
    constant = self.properties[pruner_spec.SCHEDULE_KEY] == 'constant'
    for name, schedule in self.schedules.items():
      target = targets.get(name, 0.0)
      start = self.reached.get(name) or min(INITIAL_SPARSITY, target)
      schedule.set_sparsities(target if constant else min(start, target), target)
    for layer in wrapped.layers:
      if isinstance(layer, pruning_wrapper.PruneLowMagnitude):
        layer.pruning_step.assign(0)  # Each fine-tune runs the schedule from its start.
    epochs = max(1, min(10, self.train_steps // 50))
    # A new dataset per fine-tune: a shuffle's seeds are shared by the iterators of
    # one dataset, so the last fit's read-ahead would move this one's order by
    # however far it got, and the search would follow the machine's timing.
    train_dataset = reading.make_dataset(
        self.train_pattern, self.tf_transform_output, self.batch_size,
        reading.IngestionOptions(compression=self.compression), label_key=self.label_key,
        batch_map_fn=modeling.prepare_labels(self.units))
    wrapped.fit(train_dataset, epochs=epochs,
                steps_per_epoch=max(1, self.train_steps // epochs), verbose=0,
                callbacks=[tfmot.sparsity.keras.UpdatePruningStep(),
                           callbacks.EpochProgress(f'pruning to {level:.2f}'),
                           # A fine-tune that runs away fails the Pruner by name: no
                           # diverged model is handed on.
                           callbacks.DivergenceGuard(f'Pruner: fine-tuning to {level:.2f}',
                                                    relative=False)])
    self.reached = dict(targets)
    return wrapped

  def _stripped(self, weights=None) -> tf_keras.Model:
    """The wrapped model (at `weights`, when given) without its wrappers."""
    if weights is not None:
      self.wrapped.set_weights(weights)
    return tfmot.sparsity.keras.strip_pruning(self.wrapped)
