"""A multi-class CSV whose string label is not called `label`, through `create_pipeline`."""

import json
import os

import pytest
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import pipeline
from tfx_distillery.pipelines import summary
from tests import helpers

# Long: a whole pipeline on the user's label (make test-e2e).
pytestmark = pytest.mark.e2e

TRANSFORM_MODULE = os.path.join(os.path.dirname(__file__), 'modules', 'iris_transform.py')
PIPELINE_NAME = 'own-label'


@pytest.fixture(scope='module')
def run(tmp_path_factory):
  tmp_path = tmp_path_factory.mktemp('iris')
  metadata_path = str(tmp_path / 'metadata.sqlite')
  tfx.orchestration.LocalDagRunner().run(pipeline.create_pipeline(
      pipeline_name=PIPELINE_NAME,
      pipeline_root=str(tmp_path / 'root'),
      data_root=helpers.write_iris_csv(tmp_path / 'data'),
      transform_module_file=TRANSFORM_MODULE,
      teacher_module_file=datasets.module_file('tabular_teacher'),
      student_module_file=datasets.module_file('tabular_student'),
      label_column='variety',
      label_key='variety_xf',
      serving_model_dir=str(tmp_path / 'serving'),
      train_steps=150,
      eval_steps=2,
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path),
      teacher_config={'epochs': 3, 'batch_size': 32},
      student_config={'epochs': 3, 'batch_size': 32, 'learning_rate': 0.01},
      distillation={'train_baseline': False},
      pruning_steps=20,
      pruning={'sparsities': (0.5,)},
      max_accuracy_drop=0.2))
  return tmp_path, metadata_path


def test_every_component_completes_with_the_users_label_name(run):
  _, metadata_path = run
  for node, executions in helpers.executions_by_node(metadata_path).items():
    assert executions[-1].last_known_state == metadata_store_pb2.Execution.COMPLETE, node


def test_the_three_classes_come_from_the_schema_and_the_gate_reads_the_test_split(run):
  _, metadata_path = run
  store = summary.open_store(metadata_path)
  distiller_metrics = [artifact for artifact in summary.pipeline_artifacts(
      store, PIPELINE_NAME, 'distillery.ModelMetrics')
                       if summary.producer_node(store, artifact) == 'Distiller'][-1]
  with open(os.path.join(distiller_metrics.uri, 'metrics.json')) as handle:
    metrics = json.load(handle)
  assert (metrics['num_classes'], metrics['num_classes_source']) == (3, 'schema')
  assert metrics['label_key'] == 'variety_xf'
  decision = summary.summarize_run(metadata_path, PIPELINE_NAME).gate_decision
  assert decision['split'] == 'test' and decision['label_key'] == 'variety_xf'
  assert decision['teacher']['accuracy'] > decision['majority_accuracy']
  assert not decision['teacher']['versus_majority']['within_noise'], decision['teacher']
