"""AccuracyGate: blesses the smallest candidate within an accuracy (and size) budget."""

import json
from typing import Dict, Optional, Sequence

from tfx import types
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_artifacts

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import labels
from tfx_distillery.components.common import measuring
from tfx_distillery.components.gate import executor
from tfx_distillery.components.gate import spec as gate_spec


class AccuracyGate(base_component.BaseComponent):
  """Compares each candidate with the teacher on the held-out split and blesses one.

  TFMA's Evaluator can not apply the transform graph in front of a TFLite model
  that reads transformed features, so the gate measures every candidate itself,
  through the one measuring path (`components.common.measuring`): the same raw
  examples of the `test` split (`eval` when the examples have no `test`),
  transformed by the transform graph; size is the folder the Pusher would push;
  batch-1 latency pays for parsing and the transform. A candidate passes when
  its accuracy is above the majority class, at most `max_accuracy_drop` below
  the teacher's, and it is at most `max_model_bytes` large; the smallest
  passing one is blessed and copied to `model`, and every other one gets its
  reason. A candidate made from another (`candidate_parents`: an int8 copy of
  the student, a pruned student) also passes when its only fault is the
  budget, its parent passed by the budget, and the paired difference from its
  parent is within noise (McNemar at 5%): one example in 2,000 should not
  decide between a 37 KB int8 file and a 730 KB float folder. The table and
  the report say which rule passed each candidate. `blessing` is a standard ModelBlessing, so the stock Pusher pushes
  only a blessed model; a gate that blesses nothing is a normal outcome. The
  `report` artifact holds the decision (metrics.json), report.html and report.png.

  Example:

    gate = AccuracyGate(
        examples=example_gen.outputs['examples'],
        transform_graph=transform.outputs['transform_graph'],
        baseline_model=trainer.outputs['model'],
        candidate_models=[distiller.outputs['model'], quantizer.outputs['quantized_model']],
        candidate_names=['student', 'int8'],
        candidate_parents={'int8': 'student'},
        label_key='species_xf', label_column='species',
        max_accuracy_drop=0.01)
    pusher = tfx.components.Pusher(model=gate.outputs['model'],
                                   model_blessing=gate.outputs['blessing'], ...)
  """

  SPEC_CLASS = gate_spec.AccuracyGateSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(self,
               examples: types.BaseChannel,
               transform_graph: types.BaseChannel,
               baseline_model: types.BaseChannel,
               candidate_models: Sequence[types.BaseChannel],
               candidate_names: Optional[Sequence[str]] = None,
               candidate_parents: Optional[Dict[str, str]] = None,
               max_accuracy_drop: float = 0.01,
               max_model_bytes: Optional[int] = None,
               eval_examples: int = measuring.GATE_EXAMPLES,
               latency_runs: int = 200,
               label_key: str = 'label',
               label_column: str = 'label'):
    """Constructs an AccuracyGate.

    Args:
      examples: Raw examples (ExampleGen's, as for TFX's Evaluator); the `test`
        split is scored, or `eval` when there is no `test`.
      transform_graph: The transform graph, applied to them.
      baseline_model: The teacher's Model channel.
      candidate_models: 1 to 8 Model channels (SavedModel or Quantizer TFLite).
      candidate_names: A distinct name per candidate (default candidate_1, ...).
      candidate_parents: A candidate's name to the name of the candidate it was
        made from (quantized or pruned), for the parent rule; None for none.
      max_accuracy_drop: Largest allowed accuracy drop against the teacher, as a
        fraction in [0, 1] (0.01 is one point).
      max_model_bytes: Largest allowed model size; None for no limit.
      eval_examples: At most this many examples of the test split (else eval) are scored
        (>= 1); each choice on eval keeps its margin for this many.
      latency_runs: Batch-1 calls timed per median latency (>= 1).
      label_key: The transformed label feature (TFMA's name).
      label_column: The raw label column, which serving requests lack.

    Raises:
      ValueError: naming the argument that is not allowed.
    """
    candidate_models = list(candidate_models or [])
    if not 1 <= len(candidate_models) <= gate_spec.MAX_CANDIDATES:
      raise ValueError(f'candidate_models takes 1 to {gate_spec.MAX_CANDIDATES} channels; got '
                       f'{len(candidate_models)}.')
    names = list(candidate_names or [f'candidate_{index + 1}'
                                     for index in range(len(candidate_models))])
    if len(names) != len(candidate_models) or len(set(names)) != len(names) or not all(
        isinstance(name, str) and name for name in names):
      raise ValueError(f'candidate_names needs one distinct, non-empty name per candidate '
                       f'({len(candidate_models)}); got {names!r}.')
    parents = dict(candidate_parents or {})
    for child, parent in parents.items():
      if child not in names or parent not in names or child == parent:
        raise ValueError(f'candidate_parents maps a candidate name to another candidate\'s '
                         f'name (of {names!r}); got {child!r}: {parent!r}.')
    if (not isinstance(max_accuracy_drop, (int, float)) or isinstance(max_accuracy_drop, bool)
        or not 0.0 <= max_accuracy_drop <= 1.0):
      raise ValueError('max_accuracy_drop must be a fraction in [0, 1] (0.01 is one point); '
                       f'got {max_accuracy_drop!r}.')
    if max_model_bytes is not None and (not isinstance(max_model_bytes, int) or isinstance(
        max_model_bytes, bool) or max_model_bytes < 1):
      raise ValueError(f'max_model_bytes must be an integer >= 1 or None; got '
                       f'{max_model_bytes!r}.')
    labels.validate_label_key(label_key)
    if not isinstance(label_column, str) or not label_column:
      raise ValueError(f'label_column must name the raw label column; got {label_column!r}.')
    for name, value in (('eval_examples', eval_examples), ('latency_runs', latency_runs)):
      if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f'{name} must be an integer >= 1; got {value!r}.')
    super().__init__(spec=gate_spec.AccuracyGateSpec(
        examples=examples, transform_graph=transform_graph, baseline_model=baseline_model,
        **dict(zip(gate_spec.CANDIDATE_MODEL_KEYS, candidate_models)),
        candidate_names=json.dumps(names), candidate_parents=json.dumps(parents),
        max_accuracy_drop=float(max_accuracy_drop),
        max_model_bytes=-1 if max_model_bytes is None else max_model_bytes,
        eval_examples=eval_examples, latency_runs=latency_runs, label_key=label_key,
        label_column=label_column,
        model=types.Channel(type=standard_artifacts.Model),
        blessing=types.Channel(type=standard_artifacts.ModelBlessing),
        report=types.Channel(type=artifacts.ModelMetrics)))
