"""Reads a finished run back from ML Metadata and summarises its models."""

import dataclasses
import json
import os
from typing import List, Optional

import tensorflow as tf

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.common import artifacts
from components.common import evaluation
from components.common import modeling


@dataclasses.dataclass
class ModelRow:
  """One line of the summary table."""
  name: str
  uri: str
  figures: evaluation.ModelFigures


@dataclasses.dataclass
class RunSummary:
  """The models of the latest run and where the pushed one went."""
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


def summarize_run(metadata_path: str, pipeline_name: str, eval_limit: int = 2000) -> RunSummary:
  """Summarises the newest run: the gate's measurements, or each model's own evaluation.

  With a gate, its figures (every candidate and the teacher on the same eval
  examples) are the table. Without one, the newest SavedModel of each producing
  component is evaluated on raw eval examples through its serving signature.

  Args:
    metadata_path: SQLite ML Metadata file of the run.
    pipeline_name: The pipeline's name.
    eval_limit: At most this many eval examples are scored (no-gate runs).

  Returns:
    The `RunSummary`.
  """
  store = open_store(metadata_path)
  pushed_destination = None
  pushed = pipeline_artifacts(store, pipeline_name, 'PushedModel')
  if pushed and pushed[-1].custom_properties['pushed'].int_value == 1:
    pushed_destination = pushed[-1].custom_properties['pushed_destination'].string_value
  decision = latest_gate_decision(store, pipeline_name)
  if decision is not None:
    rows = []
    for name, figures in [('teacher', decision['teacher'])] + [
        (candidate['name'], candidate) for candidate in decision['candidates']]:
      rows.append(ModelRow(name, figures.get('model_dir', ''), evaluation.ModelFigures(
          accuracy=figures['accuracy'], majority_accuracy=decision['majority_accuracy'],
          size_bytes=figures['size_bytes'], latency_ms=figures['latency_ms'],
          examples=decision['eval_examples'])))
    return RunSummary(rows, pushed_destination, decision)

  examples = pipeline_artifacts(store, pipeline_name, 'Examples')
  raw_examples = [artifact for artifact in examples if producer_node(store, artifact)
                  .endswith('ExampleGen')][-1]
  serialized = evaluation.read_serialized_examples(
      os.path.join(raw_examples.uri, 'Split-eval', '*'), limit=eval_limit)
  newest_by_producer = {}
  for model in pipeline_artifacts(store, pipeline_name, 'Model'):
    newest_by_producer[producer_node(store, model)] = model
  rows = [ModelRow(name, model.uri, evaluation.evaluate_saved_model(
      evaluation.serving_model_path(model.uri), serialized))
          for name, model in newest_by_producer.items()]
  return RunSummary(rows, pushed_destination)


def format_table(summary: RunSummary) -> str:
  """The short table `make demo` prints."""
  decision = summary.gate_decision or {}
  gate = {candidate['name']: candidate for candidate in decision.get('candidates', [])}
  lines = [f'{"model":<22} {"accuracy":>9} {"majority":>9} {"size (KB)":>10} '
           f'{"latency (ms)":>13}  gate']
  for row in summary.models:
    figures = row.figures
    verdict = ''
    if row.name in gate:
      verdict = ('chosen' if row.name == decision.get('chosen') else
                 'passed' if gate[row.name]['passed'] else 'rejected')
    lines.append(f'{row.name:<22} {figures.accuracy:>9.4f} {figures.majority_accuracy:>9.4f} '
                 f'{figures.size_bytes / 1024:>10.1f} {figures.latency_ms:>13.3f}  {verdict}')
  lines.append(f'pushed to: {summary.pushed_destination or "nothing was pushed"}')
  return '\n'.join(lines)
