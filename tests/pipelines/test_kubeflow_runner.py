"""The Kubeflow Pipelines and Vertex AI compile: every component is a task, wired as the
chain is; the KFP package loads through kfp's own client loader, pipeline root included."""

import json
import os

import pytest
from google.protobuf import json_format
from kfp.client import client as kfp_client

from tfx_distillery.pipelines import kubeflow_runner
from tfx_distillery.pipelines import datasets

# Each task and the upstream tasks whose outputs it reads.
EXPECTED_DEPENDENCIES = {
    'CsvExampleGen': set(),
    'StatisticsGen': {'CsvExampleGen'},
    'ImportSchemaGen': set(),
    'StrictExampleValidator': {'StatisticsGen', 'ImportSchemaGen'},
    # The validator edge is control only: Transform waits for the data to pass. It reads
    # StatisticsGen's output as its pre-transform statistics.
    'IngestionTransform': {'CsvExampleGen', 'StatisticsGen', 'ImportSchemaGen',
                           'StrictExampleValidator'},
    'DistributedTrainer': {'IngestionTransform', 'ImportSchemaGen'},
    'Distiller': {'DistributedTrainer', 'IngestionTransform', 'ImportSchemaGen'},
    # The teacher is the Pruner's baseline: its budget is the gate's.
    'Pruner': {'Distiller', 'IngestionTransform', 'DistributedTrainer'},
    # Both the student and the pruned model are quantized; raw rows calibrate model_raw.tflite.
    'Quantizer_student_full_integer': {'Distiller', 'IngestionTransform', 'CsvExampleGen'},
    'Quantizer_pruned_full_integer': {'Pruner', 'IngestionTransform', 'CsvExampleGen'},
    # The gate reads raw examples (the held-out test split) and the transform graph.
    'AccuracyGate': {'CsvExampleGen', 'DistributedTrainer', 'Distiller', 'Pruner',
                     'Quantizer_student_full_integer', 'Quantizer_pruned_full_integer',
                     'IngestionTransform'},
    'AtomicPusher': {'AccuracyGate'},
}


def assert_chain_order(spec):
  tasks = spec['root']['dag']['tasks']
  assert set(tasks) == set(EXPECTED_DEPENDENCIES)
  for name, task in tasks.items():
    assert set(task.get('dependentTasks', [])) == EXPECTED_DEPENDENCIES[name], name
  images = {executor['container']['image']
            for executor in spec['deploymentSpec']['executors'].values()}
  assert images == {'example.com/distillery:1'}


def test_the_vertex_job_has_every_component_as_a_task_in_chain_order(tmp_path):
  output = tmp_path / 'out' / 'pipeline.json'
  assert kubeflow_runner.main(['--output', str(output), '--image', 'example.com/distillery:1',
                               '--pipeline-root', str(tmp_path / 'root')]) == 0
  job = json.loads(output.read_text())
  assert job['runtimeConfig']['gcsOutputDirectory'] == str(tmp_path / 'root')
  assert_chain_order(job['pipelineSpec'])


def test_the_kfp_package_loads_through_the_kfp_client_with_its_pipeline_root(tmp_path):
  output = tmp_path / 'out' / 'pipeline.yaml'
  assert kubeflow_runner.main(['--output', str(output), '--image', 'example.com/distillery:1',
                               '--pipeline-root', str(tmp_path / 'root')]) == 0
  # The loader create_run_from_pipeline_package uses; it refuses TFX's JSON envelope.
  document = kfp_client._extract_pipeline_yaml(str(output))  # pylint: disable=protected-access
  assert document.pipeline_spec.default_pipeline_root == str(tmp_path / 'root')
  assert_chain_order(json_format.MessageToDict(document.pipeline_spec))


def test_an_output_that_is_neither_yaml_nor_json_is_refused(tmp_path, capsys):
  with pytest.raises(SystemExit):
    kubeflow_runner.main(['--output', str(tmp_path / 'pipeline.tar.gz')])
  assert '--output must end in .yaml' in capsys.readouterr().err
  assert not list(tmp_path.iterdir())


def test_the_curated_schema_is_staged_under_the_pipeline_root_for_the_cluster(tmp_path):
  root = tmp_path / 'root'
  output = tmp_path / 'pipeline.json'
  assert kubeflow_runner.main(['--output', str(output), '--pipeline-root', str(root)]) == 0
  staged = root / 'schema' / 'schema.pbtxt'
  assert staged.read_text() == open(datasets.schema_file('taxi')).read()
  assert str(staged) in output.read_text()


def test_csv_without_its_label_is_refused_before_compiling(tmp_path, capsys):
  with pytest.raises(SystemExit):
    kubeflow_runner.main(['--output', str(tmp_path / 'p.json'), '--dataset', 'csv'])
  assert '--dataset csv needs --data-root and --label' in capsys.readouterr().err


def test_default_roots_are_under_the_distillery_home_not_the_current_folder(
    tmp_path, monkeypatch):
  monkeypatch.setenv('DISTILLERY_HOME', str(tmp_path / 'home'))
  monkeypatch.chdir(tmp_path)
  output = tmp_path / 'pipeline.json'
  assert kubeflow_runner.main(['--output', str(output)]) == 0
  job = json.loads(output.read_text())
  assert job['runtimeConfig']['gcsOutputDirectory'] == str(tmp_path / 'home' / 'runs' /
                                                          'kubeflow-taxi')
  assert str(tmp_path / 'home' / 'serving' / 'kubeflow-taxi') in output.read_text()
  assert sorted(os.listdir(tmp_path)) == ['home', 'pipeline.json']


def test_an_unlabelled_folder_compiles_as_a_second_example_gen_feeding_the_distiller(tmp_path):
  output = tmp_path / 'out' / 'pipeline.yaml'
  assert kubeflow_runner.main([
      '--output', str(output), '--image', 'example.com/distillery:1', '--dataset', 'csv',
      '--data-root', 'gs://bucket/labelled', '--label', 'species',
      '--unlabelled-root', 'gs://bucket/logs', '--pipeline-root', str(tmp_path / 'root')]) == 0
  document = kfp_client._extract_pipeline_yaml(str(output))  # pylint: disable=protected-access
  spec = json_format.MessageToDict(document.pipeline_spec)
  tasks = spec['root']['dag']['tasks']
  assert tasks['UnlabelledExampleGen'].get('dependentTasks', []) == []
  assert 'UnlabelledExampleGen' in tasks['Distiller']['dependentTasks']
  artifacts = tasks['Distiller']['inputs']['artifacts']
  assert artifacts['transfer_examples']['taskOutputArtifact']['producerTask'] == (
      'UnlabelledExampleGen')
  assert 'gs://bucket/logs' in json.dumps(tasks['UnlabelledExampleGen'])


def test_an_unlabelled_folder_needs_the_csv_dataset(tmp_path, capsys):
  with pytest.raises(SystemExit):
    kubeflow_runner.main(['--output', str(tmp_path / 'p.yaml'), '--unlabelled-root', 'logs'])
  assert '--unlabelled-root is for --dataset csv only' in capsys.readouterr().err
