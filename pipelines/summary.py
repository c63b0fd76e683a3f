"""Reads a finished run back from ML Metadata and summarises its models."""

import dataclasses
import json
import math
import os
from typing import Dict, List, Optional

import tensorflow as tf

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import modeling
from tfx_distillery.components.gate import report


@dataclasses.dataclass
class ModelRow:
  """One line of the summary table: a model's figures from the gate's one measuring path.

  Attributes:
    name: `teacher` or the candidate's name.
    uri: Its model folder.
    figures: accuracy, size_bytes, latency_ms, format (and for candidates
      passed and reasons), as `measuring.measure` and the gate wrote them.
  """
  name: str
  uri: str
  figures: dict


@dataclasses.dataclass
class RunSummary:
  """The models of the latest run, the gate's decision and where the pushed one went."""
  models: List[ModelRow]
  pushed_destination: Optional[str]
  gate_decision: Optional[dict] = None


def open_store(metadata_path: str) -> metadata_store.MetadataStore:
  """Opens an existing SQLite ML Metadata file read-write."""
  config = metadata_store_pb2.ConnectionConfig()
  config.sqlite.filename_uri = metadata_path
  config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE
  return metadata_store.MetadataStore(config)


def pipeline_artifacts(store, pipeline_name: str, type_name: str):
  """Artifacts of one type attributed to a pipeline, newest last."""
  context = store.get_context_by_type_and_name('pipeline', pipeline_name)
  if context is None:
    raise ValueError(f'No pipeline named {pipeline_name!r} in this ML Metadata store.')
  artifacts = [artifact for artifact in store.get_artifacts_by_context(context.id)
               if store.get_artifact_types_by_id([artifact.type_id])[0].name == type_name
               and artifact.state == metadata_store_pb2.Artifact.LIVE]
  return sorted(artifacts, key=lambda artifact: artifact.id)


def producer_node(store, artifact) -> str:
  """Id of the pipeline node (component) whose execution emitted `artifact`."""
  events = store.get_events_by_artifact_ids([artifact.id])
  outputs = [event for event in events if event.type == metadata_store_pb2.Event.OUTPUT]
  execution = store.get_executions_by_id([outputs[-1].execution_id])[0]
  for context in store.get_contexts_by_execution(execution.id):
    if store.get_context_types_by_id([context.type_id])[0].name == 'node':
      return context.name.split('.')[-1]
  return 'unknown'


def latest_gate_decision(store, pipeline_name: str) -> Optional[dict]:
  """The newest AccuracyGate decision (its report's metrics.json), if the run has a gate."""
  reports = [artifact for artifact in pipeline_artifacts(store, pipeline_name,
                                                         artifacts.ModelMetrics.TYPE_NAME)
             if producer_node(store, artifact) == 'AccuracyGate']
  if not reports:
    return None
  with tf.io.gfile.GFile(os.path.join(reports[-1].uri, modeling.METRICS_FILE_NAME)) as handle:
    return json.load(handle)


def summarize_run(metadata_path: str, pipeline_name: str) -> RunSummary:
  """Summarises the newest run from its gate's decision (every model on the same examples).

  Args:
    metadata_path: SQLite ML Metadata file of the run.
    pipeline_name: The pipeline's name.

  Returns:
    The `RunSummary`; without a gate it lists no models.
  """
  store = open_store(metadata_path)
  pushed_destination = None
  pushed = pipeline_artifacts(store, pipeline_name, 'PushedModel')
  if pushed and pushed[-1].custom_properties['pushed'].int_value == 1:
    pushed_destination = pushed[-1].custom_properties['pushed_destination'].string_value
  return from_decision(latest_gate_decision(store, pipeline_name), pushed_destination)


def from_decision(decision: Optional[dict], pushed_destination: Optional[str]) -> RunSummary:
  """The `RunSummary` of a gate's decision (its report's metrics.json) and the push."""
  if decision is None:
    return RunSummary([], pushed_destination)
  rows = [ModelRow('teacher', decision['teacher'].get('model_dir', ''), decision['teacher'])]
  rows += [ModelRow(candidate['name'], candidate['model_dir'], candidate)
           for candidate in decision['candidates']]
  return RunSummary(rows, pushed_destination, decision)


def format_table(summary: RunSummary) -> str:
  """The table `make demo` prints, then one line per candidate the gate did not choose."""
  decision = summary.gate_decision or {}
  split = decision.get('split', 'eval')
  lines = [f'{"model":<26} {split + " accuracy":>13} {"95% interval":>15} '
           f'{"vs teacher (95% interval)":>27} {"size (KB)":>10} {"latency (ms)":>13}  gate']
  for row in summary.models:
    figures = row.figures
    verdict = ''
    if 'passed' in figures:
      verdict = ('chosen' if row.name == decision.get('chosen') else
                 'passed' if figures['passed'] else 'rejected')
      if figures.get('passed_by') == 'parent':
        verdict += f' (within noise of {figures["parent"]})'
    lines.append(f'{row.name:<26} {figures["accuracy"]:>13.4f} '
                 f'{report.interval_text(figures.get("accuracy_interval")):>15} '
                 f'{report.difference_text(figures.get("versus_teacher")):>27} '
                 f'{figures["size_bytes"] / 1024:>10.1f} {figures["latency_ms"]:>13.3f}  '
                 f'{verdict}')
  for left_out in decision.get('left_out', []):
    lines.append(f'{left_out["name"]:<26} {"-":>13} {"-":>15} {"-":>27} {"-":>10} {"-":>13}  '
                 'not a candidate')
  if decision:
    lines.append(f'majority class: {decision["majority_accuracy"]:.4f} on '
                 f'{decision["eval_examples"]} {split} examples; size is the folder pushed, '
                 'latency is one raw example through the transform and the model')
    for row in summary.models[1:]:
      if row.figures.get('passed_by') == 'parent':
        lines.append(f'  {row.name}: passed by the parent rule: {row.figures["parent_rule"]}')
      if row.name != decision.get('chosen'):
        lines.append(f'  {row.name}: accuracy {row.figures["accuracy"]:.4f}, '
                     f'{row.figures["size_bytes"]} bytes: {"; ".join(row.figures["reasons"])}')
    for left_out in decision.get('left_out', []):
      lines.append(f'  {left_out["name"]}: not measured: {left_out["reason"]}')
  if decision and not decision.get('blessed'):
    lines.append('no candidate passed the gate, so nothing was pushed (exit status 3)')
    lines.extend(what_to_change(decision))
  lines.append(f'pushed to: {summary.pushed_destination or "nothing was pushed"}')
  return '\n'.join(lines)


def what_to_change(decision: dict) -> List[str]:
  """When no candidate passed: which figure missed, by how much, and what moves it.

  Reads the gate's decision only, so `distillery report` prints the same lines later.
  """
  candidates = [candidate for candidate in decision.get('candidates', [])
                if not candidate.get('passed')]
  if not candidates:
    return []
  split = decision.get('split', 'eval')
  best = max(candidates, key=lambda candidate: candidate['accuracy'])
  teacher_accuracy = decision['teacher']['accuracy']
  budget = decision['max_accuracy_drop']
  drop = teacher_accuracy - best['accuracy']
  lines = []
  examples = decision.get('eval_examples')
  if examples and 1.0 / examples > budget:
    # One example is the smallest difference the gate can show: with fewer rows than
    # 1 / budget, a single miss more than the teacher's is over the budget.
    one = 1.0 / examples
    lines.append(f'what missed: resolution. The gate\'s {split} split has {examples} '
                 f'examples, so the smallest accuracy difference it can show is one example, '
                 f'{one:.4f}: more than max_accuracy_drop {budget:.4f}. A candidate that misses '
                 'a single example more than the teacher fails, so this split cannot resolve '
                 'the budget.')
    lines.append(f'what to change: more rows (at least {math.ceil(1 / budget)} in the '
                 f'{split} split for one example to fit in {budget:g}), a larger {split} '
                 f'share of the data, or a larger budget (--max-accuracy-drop {one:.4f} or '
                 'more).')
  if drop > budget:
    # The smallest budget, in whole tenths of a point, that the best candidate meets.
    needed = math.ceil(round(drop * 1000, 6)) / 1000
    lines.append(f'what missed: accuracy. The best candidate, {best["name"]}, is {drop:.4f} '
                 f'below the teacher\'s {teacher_accuracy:.4f} on {split}; the budget is '
                 f'{budget:.4f} (max_accuracy_drop).')
    lines.append(f'what to change: allow that drop (--max-accuracy-drop {needed:g}), train '
                 'the student longer (--student-train-steps), or let the size search try '
                 'larger students (--student-shares, e.g. 0.01,0.03,0.1,0.3,1).')
  if all(candidate['accuracy'] <= decision['majority_accuracy'] or
         candidate.get('versus_majority', {}).get('within_noise') for candidate in candidates):
    majority = decision['majority_accuracy']
    lines.append(f'what missed: the lead over the majority class ({majority:.4f}). No '
                 'candidate learnt clearly more than always guessing the commonest class.')
    lines.append('what to change: train longer (--train-steps for the teacher, '
                 '--student-train-steps for the student), or check that the label can be '
                 'learnt from the columns.')
  max_bytes = decision.get('max_model_bytes', -1)
  if max_bytes is not None and max_bytes >= 0 and all(
      candidate['size_bytes'] > max_bytes for candidate in candidates):
    smallest = min(candidates, key=lambda candidate: candidate['size_bytes'])
    lines.append(f'what missed: size. The smallest candidate, {smallest["name"]}, is '
                 f'{smallest["size_bytes"]} bytes; max_model_bytes is {max_bytes}.')
    lines.append('what to change: raise max_model_bytes, or quantize (the int8 candidates '
                 'are about a quarter of the float size).')
  return lines


def training_curves(model_run_dir: str) -> Dict[str, Dict[str, List[float]]]:
  """The per-epoch values Keras' TensorBoard callback logged under a `model_run` folder.

  Args:
    model_run_dir: A DistributedTrainer's or Distiller's `model_run` artifact folder.

  Returns:
    {run: {tag: values by epoch}}, where run is the log folder relative to
    `model_run_dir` (`train`, `validation`, `student/train`, `scratch/train`) and tag
    is `epoch_loss`, `epoch_accuracy` and the like.
  """
  curves = {}
  for folder, _, names in tf.io.gfile.walk(model_run_dir):
    for name in sorted(names):
      if not name.startswith('events.out.tfevents'):
        continue
      run = os.path.relpath(folder, model_run_dir)
      by_step = {}
      for event in tf.compat.v1.train.summary_iterator(os.path.join(folder, name)):
        for value in event.summary.value:
          if value.tag.startswith('epoch_'):
            by_step.setdefault(value.tag, {})[event.step] = float(
                tf.make_ndarray(value.tensor)) if value.HasField('tensor') else value.simple_value
      for tag, values in by_step.items():
        curves.setdefault(run, {})[tag] = [values[step] for step in sorted(values)]
  return curves
