"""AccuracyGate's executor: measure every candidate like the teacher, bless the smallest that passes.

Every model goes through `measuring`, on the same raw examples of the held-out split."""

import json
import os
from typing import Any, Dict, List, Optional

import numpy as np
import tensorflow_transform as tft
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.types import standard_component_specs

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import labels
from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import modeling
from tfx_distillery.components.common import progress
from tfx_distillery.components.gate import report
from tfx_distillery.components.gate import spec as gate_spec


def reasons_against(figures: Dict[str, Any], teacher_accuracy: float, majority: float,
                    max_drop: float, max_bytes: int) -> List[str]:
  """Why the gate refuses a candidate (none: it passes).

  Args:
    figures: The candidate's measurement, with `versus_majority` (its paired comparison
      with always guessing the commonest class, on the same examples).
    teacher_accuracy: The teacher's accuracy on the same examples.
    majority: The majority class's share.
    max_drop: The largest accuracy drop allowed against the teacher.
    max_bytes: The size limit; negative for none.
  """
  reasons = []
  drop = teacher_accuracy - figures['accuracy']
  against_majority = measuring.majority_reason(figures['accuracy'], majority,
                                              figures['versus_majority'])
  if against_majority:
    reasons.append(against_majority)
  if not measuring.within_drop(teacher_accuracy, figures['accuracy'], max_drop):
    reasons.append(f'accuracy {figures["accuracy"]:.4f} is {drop:.4f} below the teacher\'s '
                   f'{teacher_accuracy:.4f}; at most {max_drop:.4f} is allowed')
  if max_bytes >= 0 and figures['size_bytes'] > max_bytes:
    reasons.append(f'size {figures["size_bytes"]} bytes exceeds max_model_bytes '
                   f'{max_bytes}')
  return reasons


def lineage_depth(name: str, parents: Dict[str, str]) -> int:
  """How many candidates `name` was made through: 0 for one made from no other candidate."""
  depth, seen = 0, {name}
  while parents.get(name) and parents[name] not in seen:
    name = parents[name]
    seen.add(name)
    depth += 1
  return depth


def choose(candidates: List[Dict[str, Any]], parents: Dict[str, str]
           ) -> Optional[Dict[str, Any]]:
  """The candidate to bless among those that passed, or None.

  The smallest; among equal sizes the more accurate; among equal sizes and accuracies the
  one nearer the root of `parents` (the candidate the others were made from), then the
  first in `candidates`. Never the latency: measured under the machine's load, it would
  turn a tie between equals on luck.
  """
  order = {candidate['name']: index for index, candidate in enumerate(candidates)}
  passing = sorted((candidate for candidate in candidates if candidate['passed']),
                   key=lambda candidate: (candidate['size_bytes'], -candidate['accuracy'],
                                          lineage_depth(candidate['name'], parents),
                                          order[candidate['name']]))
  return passing[0] if passing else None


def apply_parent_rule(candidates: List[Dict[str, Any]], correct: Dict[str, np.ndarray],
                      parents: Dict[str, str]) -> None:
  """Passes a derived candidate whose only fault is the budget and that its parent explains.

  A candidate made from another (an int8 copy of the student, a pruned student) passes when
  its parent passed by the budget itself and the paired difference between the two, on the
  same examples, is within noise (McNemar at 5%, the test the gate uses against the
  majority class). One conversion's noise is forgiven once: a candidate whose parent itself
  passed by this rule is judged by the budget alone, so the teacher-to-shipped gap stays the
  budget plus at most one noise step. A candidate refused for anything else (the majority
  class, max_model_bytes) stays refused. Sets each candidate's `passed_by` ('budget',
  'parent' or None) and, for a derived one, `parent` and `versus_parent`.

  Args:
    candidates: The measured candidates, each with `name`, `passed`, `reasons` and
      `over_budget_only` (refused for the accuracy budget and nothing else).
    correct: Per candidate name, whether it was right on each example.
    parents: Candidate name to the name of the candidate it was made from.
  """
  by_name = {candidate['name']: candidate for candidate in candidates}
  for candidate in candidates:
    candidate['passed_by'] = 'budget' if candidate['passed'] else None
  for candidate in candidates:
    parent = by_name.get(parents.get(candidate['name'], ''))
    if parent is None:
      continue
    # Paired, parent first: is the parent better than the candidate beyond noise?
    comparison = measuring.paired_comparison(correct[parent['name']],
                                             correct[candidate['name']])
    candidate['parent'] = parent['name']
    candidate['versus_parent'] = {**comparison, 'difference': -comparison['difference'],
                                  'interval': [-comparison['interval'][1],
                                               -comparison['interval'][0]]}
    if (candidate['passed'] or not candidate['over_budget_only'] or
        parent['passed_by'] != 'budget' or
        not comparison['within_noise']):
      continue
    candidate['passed'], candidate['passed_by'] = True, 'parent'
    candidate['parent_rule'] = (
        f'{candidate["reasons"][0]}, but {parent["name"]}, which it was made from, passed and '
        f'the difference from it is within noise: '
        f'{candidate["versus_parent"]["difference"]:+.4f} (right on {comparison["losses"]} '
        f'examples {parent["name"]} misses, wrong on {comparison["wins"]} it gets, McNemar '
        f'p = {comparison["p_value"]:.3f})')
    candidate['reasons'] = []


class Executor(base_executor.BaseExecutor):
  """Writes a ModelBlessing, the chosen model, and the decision with its reasons."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    with progress.component_timer('AccuracyGate executor'):
      self._decide(input_dict, output_dict, exec_properties)

  def _decide(self, input_dict, output_dict, exec_properties) -> None:
    logger = progress.get_logger()
    examples = artifact_utils.get_single_instance(
        input_dict[standard_component_specs.EXAMPLES_KEY])
    tf_transform_output = tft.TFTransformOutput(artifact_utils.get_single_uri(
        input_dict[standard_component_specs.TRANSFORM_GRAPH_KEY]))
    max_drop = float(exec_properties[gate_spec.MAX_ACCURACY_DROP_KEY])
    max_bytes = int(exec_properties[gate_spec.MAX_MODEL_BYTES_KEY])
    latency_runs = int(exec_properties[gate_spec.LATENCY_RUNS_KEY])
    names = json.loads(exec_properties[gate_spec.CANDIDATE_NAMES_KEY])
    label_key = exec_properties.get(gate_spec.LABEL_KEY_KEY) or labels.DEFAULT_LABEL_KEY
    label_column = exec_properties.get(gate_spec.LABEL_COLUMN_KEY) or labels.DEFAULT_LABEL_KEY
    # The held-out test split decides; a two-split user pipeline falls back to eval.
    split = measuring.report_split(examples.uri)
    if split != measuring.REPORT_SPLIT:
      logger.warning('WARNING: AccuracyGate: the examples have no %r split; deciding on %r, '
                     'which the Pruner\'s search (and any tuning) also chose by.',
                     measuring.REPORT_SPLIT, split)
    evaluation_set = measuring.from_raw_examples(
        examples.uri, split, tf_transform_output, label_key, label_column,
        int(exec_properties[gate_spec.EVAL_EXAMPLES_KEY]))
    majority = measuring.majority_accuracy(evaluation_set.labels)

    baseline_dir = evaluation.serving_model_path(artifact_utils.get_single_uri(
        input_dict[gate_spec.BASELINE_MODEL_KEY]))
    baseline = {'model_dir': baseline_dir,
                **measuring.measure(baseline_dir, evaluation_set, latency_runs,
                                    keep_correct=True)}
    baseline_correct = baseline.pop(measuring.CORRECT_KEY)
    # Every candidate is compared with the teacher and with the constant majority guess on
    # the same examples (McNemar), so a lead of a few examples is seen as what it is.
    majority_correct = measuring.majority_correct(evaluation_set.labels)
    # The teacher too: one that learnt nothing beyond noise explains a gate that passes none.
    baseline['versus_majority'] = measuring.paired_comparison(baseline_correct, majority_correct)
    candidates, left_out = [], []
    candidate_artifacts, correct_by_name = {}, {}
    parents = json.loads(exec_properties.get(gate_spec.CANDIDATE_PARENTS_KEY) or '{}')
    for key, name in zip(gate_spec.CANDIDATE_MODEL_KEYS, names):
      if not input_dict.get(key):
        continue
      candidate_artifact = artifact_utils.get_single_instance(input_dict[key])
      reason = artifacts.not_a_candidate(candidate_artifact)
      if reason:
        # Marked by the Pruner (and carried by its Quantizer): a copy of another candidate,
        # or a model that ships no smaller. Measuring it would only list a duplicate.
        left_out.append({'name': name, 'reason': reason})
        logger.info('AccuracyGate: %s is not a candidate: %s', name, reason)
        continue
      candidate_artifacts[name] = candidate_artifact
      model_dir = evaluation.serving_model_path(candidate_artifact.uri)
      # The artifact says what it is (the Quantizer marks its TFLite folders).
      figures = measuring.measure(model_dir, evaluation_set, latency_runs,
                                  model_format=artifacts.model_format(candidate_artifact),
                                  keep_correct=True)
      if measuring.has_raw_flatbuffer(model_dir):
        # What ships to a device is the raw-input flatbuffer alone: the gate measures it (size
        # of the file, accuracy and batch-1 latency on raw columns); the folder's figures stay.
        folder_figures = figures
        figures = measuring.measure_raw_flatbuffer(model_dir, evaluation_set, latency_runs,
                                                   keep_correct=True)
        figures['output_kind'] = folder_figures['output_kind']
        figures['folder'] = {key: folder_figures[key]
                             for key in ('format', 'accuracy', 'size_bytes', 'latency_ms')}
      correct = correct_by_name[name] = figures.pop(measuring.CORRECT_KEY)
      figures['versus_teacher'] = measuring.paired_comparison(correct, baseline_correct)
      figures['versus_majority'] = measuring.paired_comparison(correct, majority_correct)
      drop = baseline['accuracy'] - figures['accuracy']
      reasons = reasons_against(figures, baseline['accuracy'], majority, max_drop, max_bytes)
      if candidate_artifact.has_custom_property(artifacts.QUANTIZATION_PROPERTY):
        figures['quantization'] = candidate_artifact.get_string_custom_property(
            artifacts.QUANTIZATION_PROPERTY)
      if candidate_artifact.has_custom_property(artifacts.FEATURE_PLAN_PROPERTY):
        figures['feature_plan'] = json.loads(candidate_artifact.get_string_custom_property(
            artifacts.FEATURE_PLAN_PROPERTY))
      if candidate_artifact.has_custom_property(artifacts.LAYER_SPARSITY_PROPERTY):
        figures['layer_sparsity'] = json.loads(candidate_artifact.get_string_custom_property(
            artifacts.LAYER_SPARSITY_PROPERTY))
      candidates.append({'name': name, 'model_dir': model_dir, **figures,
                         'accuracy_drop': drop, 'passed': not reasons, 'reasons': reasons,
                         # Nothing but the budget against it: the parent rule may apply.
                         'over_budget_only': bool(reasons) and not reasons_against(
                             figures, baseline['accuracy'], majority, 1.0, max_bytes)})
    apply_parent_rule(candidates, correct_by_name, parents)
    for candidate in candidates:
      if candidate['passed_by'] == 'parent':
        logger.info('AccuracyGate: %s passes by the parent rule: %s', candidate['name'],
                    candidate['parent_rule'])

    chosen = choose(candidates, parents)
    for candidate in candidates:
      if candidate['passed'] and candidate is not chosen:
        if candidate['size_bytes'] > chosen['size_bytes']:
          candidate['reasons'].append(f'passed, but {chosen["name"]} is smaller '
                                      f'({chosen["size_bytes"]} < {candidate["size_bytes"]} '
                                      'bytes)')
        else:
          candidate['reasons'].append(
              f'passed, but {chosen["name"]} is as small ({chosen["size_bytes"]} bytes) and '
              f'at least as accurate ({chosen["accuracy"]:.4f} >= {candidate["accuracy"]:.4f})')
    decision = {
        'blessed': chosen is not None,
        'chosen': chosen['name'] if chosen else None,
        'max_accuracy_drop': max_drop,
        'candidate_parents': parents,
        'max_model_bytes': max_bytes if max_bytes >= 0 else None,
        'teacher': baseline,
        'candidates': candidates,
        'left_out': left_out,
        'majority_accuracy': majority,
        'eval_examples': evaluation_set.size,
        'split': split,
        'label_key': label_key,
    }
    model_uri = artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_KEY])
    if chosen:
      modeling.copy_tree(chosen['model_dir'], os.path.join(model_uri, 'Format-Serving'))
      # The Pusher and the report read what the chosen model is from its artifact.
      artifacts.copy_model_format(
          candidate_artifacts[chosen['name']],
          artifact_utils.get_single_instance(output_dict[standard_component_specs.MODEL_KEY]))
      logger.info('AccuracyGate: blessed %s (%d bytes, accuracy %.4f vs teacher %.4f)',
                  chosen['name'], chosen['size_bytes'], chosen['accuracy'],
                  baseline['accuracy'])
    else:
      logger.warning('WARNING: AccuracyGate blessed no model, so nothing will be pushed: %s',
                     '; '.join(f'{candidate["name"]}: {", ".join(candidate["reasons"])}'
                               for candidate in candidates))
    for candidate in candidates:
      if candidate is not chosen:
        logger.info('AccuracyGate: %s not chosen: %s', candidate['name'],
                    '; '.join(candidate['reasons']))
    blessing = artifact_utils.get_single_instance(
        output_dict[standard_component_specs.BLESSING_KEY])
    # The custom properties Pusher (and Evaluator's users) read.
    blessing.set_int_custom_property('blessed', 1 if chosen else 0)
    if chosen:
      blessing.set_string_custom_property('current_model', chosen['model_dir'])
    report_dir = artifact_utils.get_single_uri(output_dict[gate_spec.REPORT_KEY])
    modeling.write_metrics(report_dir, decision)
    report.write(decision, report_dir, pushed_destination=None)
