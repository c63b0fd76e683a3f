"""The Kubeflow Pipelines compile: every component is a task, wired as the chain is."""

import json

import pytest

from tfx_distillery.pipelines import kubeflow_runner
from tfx_distillery.pipelines import datasets

# Each task and the upstream tasks whose outputs it reads.
EXPECTED_DEPENDENCIES = {
    'CsvExampleGen': set(),
    'StatisticsGen': {'CsvExampleGen'},
    'ImportSchemaGen': set(),
    'StrictExampleValidator': {'StatisticsGen', 'ImportSchemaGen'},
    # The validator edge is control only: Transform waits for the data to pass.
    'IngestionTransform': {'CsvExampleGen', 'ImportSchemaGen', 'StrictExampleValidator'},
    'DistributedTrainer': {'IngestionTransform', 'ImportSchemaGen'},
    'Distiller': {'DistributedTrainer', 'IngestionTransform', 'ImportSchemaGen'},
    # The teacher is the Pruner's baseline: its budget is the gate's.
    'Pruner': {'Distiller', 'IngestionTransform', 'DistributedTrainer'},
    # Both the student and the pruned model are quantized.
    'Quantizer_student_full_integer': {'Distiller', 'IngestionTransform'},
    'Quantizer_pruned_full_integer': {'Pruner', 'IngestionTransform'},
    # The gate reads raw examples (the held-out test split) and the transform graph.
    'AccuracyGate': {'CsvExampleGen', 'DistributedTrainer', 'Distiller', 'Pruner',
                     'Quantizer_student_full_integer', 'Quantizer_pruned_full_integer',
                     'IngestionTransform'},
    'AtomicPusher': {'AccuracyGate'},
}


def test_the_compiled_dag_has_every_component_as_a_task_in_chain_order(tmp_path):
  output = tmp_path / 'out' / 'pipeline.json'
  assert kubeflow_runner.main(['--output', str(output), '--image', 'example.com/distillery:1',
                               '--pipeline-root', str(tmp_path / 'root')]) == 0
  spec = json.loads(output.read_text())['pipelineSpec']
  tasks = spec['root']['dag']['tasks']
  assert set(tasks) == set(EXPECTED_DEPENDENCIES)
  for name, task in tasks.items():
    assert set(task.get('dependentTasks', [])) == EXPECTED_DEPENDENCIES[name], name
  images = {executor['container']['image']
            for executor in spec['deploymentSpec']['executors'].values()}
  assert images == {'example.com/distillery:1'}


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
