"""The local pipeline on a small taxi sample: every component runs once, a rerun is all cache."""

import os

import pytest
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from pipelines import datasets
from pipelines import pipeline
from pipelines import summary
from tests import helpers

PIPELINE_NAME = 'e2e-taxi'
COMPONENTS = {'CsvExampleGen', 'StatisticsGen', 'SchemaGen', 'ExampleValidator', 'IngestionTransform',
              'DistributedTrainer', 'Distiller', 'Pusher'}


def run_pipeline(tmp_path, data_root):
  metadata_path = str(tmp_path / 'metadata.sqlite')
  taxi = datasets.resolve('taxi', str(tmp_path))
  tfx.orchestration.LocalDagRunner().run(pipeline.create_pipeline(
      pipeline_name=PIPELINE_NAME,
      pipeline_root=str(tmp_path / 'root'),
      data_root=data_root,
      transform_module_file=taxi.transform_module_file,
      teacher_module_file=taxi.teacher_module_file,
      student_module_file=taxi.student_module_file,
      label_column=taxi.label_column,
      serving_model_dir=str(tmp_path / 'serving'),
      train_steps=20,
      eval_steps=5,
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path),
      teacher_config={'epochs': 2},
      student_config={'epochs': 2},
      distillation={'train_baseline': False}))
  return metadata_path


@pytest.fixture(scope='module')
def first_run(tmp_path_factory):
  tmp_path = tmp_path_factory.mktemp('e2e')
  data_root = datasets.sample_csv(datasets.taxi_data_dir(), str(tmp_path / 'data'), rows=2000)
  return tmp_path, data_root, run_pipeline(tmp_path, data_root)


def test_every_component_runs_exactly_once(first_run):
  _, _, metadata_path = first_run
  by_node = helpers.executions_by_node(metadata_path)
  assert set(by_node) == COMPONENTS
  for node, executions in by_node.items():
    assert len(executions) == 1, node
    assert executions[0].last_known_state == metadata_store_pb2.Execution.COMPLETE, node


def test_the_distilled_student_is_pushed_and_serves_raw_examples(first_run):
  tmp_path, _, metadata_path = first_run
  run_summary = summary.summarize_run(metadata_path, PIPELINE_NAME, eval_limit=300)
  assert run_summary.pushed_destination
  assert run_summary.pushed_destination.startswith(str(tmp_path / 'serving'))
  assert os.path.isfile(os.path.join(run_summary.pushed_destination, 'saved_model.pb'))
  rows = {row.name: row for row in run_summary.models}
  assert set(rows) == {'DistributedTrainer', 'Distiller'}
  for row in rows.values():
    assert 0.0 < row.figures.accuracy <= 1.0 and row.figures.examples == 300
    assert row.figures.size_bytes > 0 and row.figures.latency_ms > 0
  assert rows['Distiller'].figures.size_bytes < rows['DistributedTrainer'].figures.size_bytes
  with open(os.path.join(run_summary.pushed_destination, 'variables',
                         'variables.index'), 'rb') as pushed, open(os.path.join(
                             rows['Distiller'].uri, 'Format-Serving', 'variables',
                             'variables.index'), 'rb') as student:
    assert pushed.read() == student.read()  # The student, not the teacher, was pushed.
  assert 'pushed to: ' + run_summary.pushed_destination in summary.format_table(run_summary)


def test_a_second_run_with_the_cache_on_executes_nothing(first_run):
  tmp_path, data_root, metadata_path = first_run
  run_pipeline(tmp_path, data_root)
  by_node = helpers.executions_by_node(metadata_path)
  for node, executions in by_node.items():
    states = [execution.last_known_state for execution in executions]
    assert states == [metadata_store_pb2.Execution.COMPLETE,
                      metadata_store_pb2.Execution.CACHED], node
