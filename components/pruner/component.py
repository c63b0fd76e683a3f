"""Pruner: magnitude pruning with tfmot, to a target sparsity or an accuracy budget."""

import json
from typing import Any, Dict, Optional, Sequence

from tfx import types
from tfx.proto import trainer_pb2
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_artifacts
from tfx.utils import json_utils

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import labels
from tfx_distillery.components.common import parameters
from tfx_distillery.components.common import seeding
from tfx_distillery.components.pruner import executor
from tfx_distillery.components.pruner import spec as pruner_spec

SCHEDULES = ('polynomial', 'constant')
DEFAULT_SPARSITIES = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)
# The budget when neither a target nor a pattern is given: one point of eval accuracy.
DEFAULT_MAX_ACCURACY_DROP = 0.01


def _is_fraction(value, low_open: bool = False) -> bool:
  if not isinstance(value, (int, float)) or isinstance(value, bool):
    return False
  return (0.0 < value < 1.0) if low_open else (0.0 <= value < 1.0)


def _pair(name: str, value) -> None:
  if (not isinstance(value, (tuple, list)) or len(value) != 2
      or any(not isinstance(item, int) or isinstance(item, bool) or item < 1 for item in value)):
    raise ValueError(f'{name} must be a pair of integers >= 1; got {value!r}.')


def _is_drop(value) -> bool:
  return (isinstance(value, (int, float)) and not isinstance(value, bool)
          and 0.0 <= value <= 1.0)


def validate(target_sparsity, schedule, begin_step, end_step, block_size, m_by_n,
             max_accuracy_drop, sparsities, max_layer_accuracy_drop=None) -> None:
  """Raises ValueError naming the first argument that is not allowed."""
  if target_sparsity is not None and not _is_fraction(target_sparsity, low_open=True):
    raise ValueError(f'target_sparsity must be a number in (0, 1); got {target_sparsity!r}.')
  if schedule not in SCHEDULES:
    raise ValueError(f'schedule must be one of {", ".join(SCHEDULES)}; got {schedule!r}.')
  if not isinstance(begin_step, int) or isinstance(begin_step, bool) or begin_step < 0:
    raise ValueError(f'begin_step must be an integer >= 0; got {begin_step!r}.')
  if end_step is not None and (not isinstance(end_step, int) or isinstance(end_step, bool)
                               or end_step <= begin_step):
    raise ValueError(f'end_step must be an integer > begin_step ({begin_step}); got '
                     f'{end_step!r}.')
  if block_size is not None and m_by_n is not None:
    raise ValueError('block_size and m_by_n exclude each other: give one pruning pattern.')
  if block_size is not None:
    _pair('block_size', block_size)
  if m_by_n is not None:
    _pair('m_by_n', m_by_n)
    if m_by_n[0] >= m_by_n[1]:
      raise ValueError(f'm_by_n (m, n) needs m < n (e.g. (2, 4)); got {tuple(m_by_n)}.')
  if max_accuracy_drop is not None and not _is_drop(max_accuracy_drop):
    raise ValueError('max_accuracy_drop must be a fraction in [0, 1] (0.01 is one point); got '
                     f'{max_accuracy_drop!r}.')
  if max_layer_accuracy_drop is not None and not _is_drop(max_layer_accuracy_drop):
    raise ValueError('max_layer_accuracy_drop must be a fraction in [0, 1] (0.01 is one '
                     f'point); got {max_layer_accuracy_drop!r}.')
  if not sparsities or any(not _is_fraction(value, low_open=True) for value in sparsities):
    raise ValueError(f'sparsities must be numbers in (0, 1); got {sparsities!r}.')
  if max_accuracy_drop is not None and m_by_n is not None:
    raise ValueError('max_accuracy_drop searches sparsity levels; m_by_n fixes the sparsity '
                     'at m/n. Give one of them.')


class Pruner(base_component.BaseComponent):
  """Prunes a Keras model layer by layer with tfmot, only where it shrinks what ships.

  First a sensitivity pass: each layer tfmot can prune is pruned alone, at each
  level, with no fine-tuning, and its eval accuracy loss is recorded. An overall
  level is then reached by pruning the most tolerant layers hardest; a layer never
  goes where pruning it alone costs more than `max_layer_accuracy_drop`, so a
  small vocabulary's embedding or the output layer stays dense unless it passes.
  Each layer gets its own `prune_low_magnitude` target, fine-tuning runs with
  `UpdatePruningStep` on the training split, then `strip_pruning` and a
  SavedModel with the input model's signatures.

  With `max_accuracy_drop`, levels are tried on the eval split (rising from the
  lowest of `sparsities`, and below it, down to 0.1, when that is over budget)
  and the one whose int8 file (dense or sparse encoding, whichever is smaller)
  is smallest within the budget is kept. When no level fits the budget, or none
  ships a smaller file than the unpruned model, the input model is handed on
  unchanged and marked, so that the Quantizer and the AccuracyGate leave it out;
  when even the most the search could prune would ship no smaller, nothing is
  fine-tuned. `metrics.json` records every trial, the sensitivity table and the
  per-layer sparsities.

  Example:

    pruner = Pruner(model=distiller.outputs['model'],
                    examples=transform.outputs['transformed_examples'],
                    transform_graph=transform.outputs['transform_graph'],
                    max_accuracy_drop=0.01, baseline_model=trainer.outputs['model'],
                    label_key='tips_xf', label_column='tips',
                    train_args=trainer_pb2.TrainArgs(num_steps=500))
  """

  SPEC_CLASS = pruner_spec.PrunerSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(self,
               model: types.BaseChannel,
               examples: types.BaseChannel,
               transform_graph: types.BaseChannel,
               target_sparsity: Optional[float] = None,
               schedule: str = 'polynomial',
               begin_step: int = 0,
               end_step: Optional[int] = None,
               block_size: Optional[Sequence[int]] = None,
               m_by_n: Optional[Sequence[int]] = None,
               max_accuracy_drop: Optional[float] = None,
               sparsities: Sequence[float] = DEFAULT_SPARSITIES,
               max_layer_accuracy_drop: Optional[float] = None,
               label_column: str = 'label',
               label_key: str = 'label',
               baseline_model: Optional[types.BaseChannel] = None,
               train_args: Optional[trainer_pb2.TrainArgs] = None,
               eval_args: Optional[trainer_pb2.EvalArgs] = None,
               custom_config: Optional[Dict[str, Any]] = None,
               random_seed: Optional[int] = None):
    """Constructs a Pruner.

    Args:
      model: Model channel of a Keras SavedModel over transformed features.
      examples: Transformed examples: fine-tuning on `train`, figures on `eval`.
      transform_graph: The transform graph, applied inside the exported model.
      target_sparsity: The share of the prunable weights to remove, in (0, 1),
        tolerant layers first, with no budget (ignored with `max_accuracy_drop`).
        With neither, nor `m_by_n`, the Pruner searches within a budget of
        `DEFAULT_MAX_ACCURACY_DROP` (0.01), so by default it never hands on a
        model more than a point worse.
      schedule: `polynomial` (from min(0.5, target) at begin_step to the target
        at end_step) or `constant`.
      begin_step: Step where pruning starts (>= 0).
      end_step: Step where the polynomial schedule reaches the target; None is
        70% of the training steps.
      block_size: Prune (rows, columns) blocks together, e.g. (1, 4).
      m_by_n: Structured sparsity, e.g. (2, 4): 2 zeros in every 4 weights.
      max_accuracy_drop: Search the levels for the smallest int8 file whose eval
        accuracy is within this drop (0.01 = one point) of `baseline_model`'s
        (of the input model's without one).
      sparsities: Levels tried by the search (and by the sensitivity pass).
      max_layer_accuracy_drop: The most eval accuracy a layer may cost when it
        alone is pruned to its level, with no fine-tuning; None is the input
        model's lead over the majority class (a layer is never pruned so far
        that, alone, it erases what the model learnt).
      label_column: Raw label column, absent from serving requests.
      label_key: The transformed label feature (TFMA's name).
      baseline_model: The gate's baseline (the teacher). With it, the budget is
        the gate's own, so what the Pruner keeps also passes the gate.
      train_args: Fine-tuning steps (default 500).
      eval_args: Kept for symmetry with Trainer; the eval split is scored whole
        (up to 5,000 examples).
      custom_config: `batch_size` (64) and `learning_rate` (1e-4) of fine-tuning.
      random_seed: Seeds the search's and each fine-tuning's draws, with op
        determinism on: the same seed gives the same pruned model. None draws a
        seed, used without op determinism; `metrics.json` and ML Metadata record it.

    Raises:
      ValueError: naming the argument that is not allowed.
    """
    parameters.refuse_secrets('custom_config', custom_config)
    seeding.validate(random_seed)
    validate(target_sparsity, schedule, begin_step, end_step, block_size, m_by_n,
             max_accuracy_drop, sparsities, max_layer_accuracy_drop)
    labels.validate_label_key(label_key)
    if target_sparsity is None and m_by_n is None and max_accuracy_drop is None:
      max_accuracy_drop = DEFAULT_MAX_ACCURACY_DROP
    super().__init__(spec=pruner_spec.PrunerSpec(
        model=model, examples=examples, transform_graph=transform_graph,
        target_sparsity=None if target_sparsity is None else float(target_sparsity),
        schedule=schedule, begin_step=begin_step,
        end_step=-1 if end_step is None else end_step,
        block_size=json.dumps(list(block_size)) if block_size is not None else None,
        m_by_n=json.dumps(list(m_by_n)) if m_by_n is not None else None,
        max_accuracy_drop=(float(max_accuracy_drop) if max_accuracy_drop is not None
                           else None),
        sparsities=json.dumps([float(value) for value in sparsities]),
        max_layer_accuracy_drop=(float(max_layer_accuracy_drop)
                                 if max_layer_accuracy_drop is not None else None),
        label_column=label_column,
        label_key=label_key,
        baseline_model=baseline_model,
        train_args=train_args or trainer_pb2.TrainArgs(num_steps=500),
        eval_args=eval_args or trainer_pb2.EvalArgs(num_steps=100),
        custom_config=json_utils.dumps(custom_config),
        random_seed=random_seed,
        pruned_model=types.Channel(type=standard_artifacts.Model),
        metrics=types.Channel(type=artifacts.ModelMetrics)))
