"""Bad data stops the pipeline at the validator, is recorded as FAILED, and a fixed rerun
goes through: one test per case of issue #8, on a 300-row digits sample and the curated
digits schema."""

import csv
import os
import shutil

import pytest
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from components.example_validator import DataAnomaliesError
from pipelines import datasets
from pipelines import pipeline
from tests import helpers

PIPELINE_NAME = 'bad-data-digits'
VALIDATOR = 'StrictExampleValidator'


def corrupt(rows, case):
  """The good rows (header first) turned into one kind of bad data."""
  header, body = rows[0], [list(row) for row in rows[1:]]
  if case == 'missing_label_column':
    return [header[:-1]] + [row[:-1] for row in body]
  if case == 'non_numeric_value':
    body[4][10] = 'twelve'
  if case == 'empty_file':
    return []
  if case == 'unseen_label':
    body[4][-1] = '12'
  if case == 'type_mismatch':
    body[4][20] = '3.5'
  return [header] + body


# Each case, and what the message must say: the column (or split) and the problem.
CASES = {
    'missing_label_column': ["column 'label'", 'Column dropped'],
    'non_numeric_value': ["column 'pixel_10'", 'Expected data of type: INT but got STRING'],
    'empty_file': ["splits 'train', 'eval'", 'no examples'],
    'unseen_label': ["column 'label'", 'Out-of-range values', 'large value: 12'],
    'type_mismatch': ["column 'pixel_20'", 'Expected data of type: INT but got FLOAT'],
}


def run(workspace):
  digits = datasets.resolve('digits', str(workspace / 'unused'))
  tfx.orchestration.LocalDagRunner().run(pipeline.create_pipeline(
      pipeline_name=PIPELINE_NAME,
      pipeline_root=str(workspace / 'root'),
      data_root=str(workspace / 'data'),
      transform_module_file=digits.transform_module_file,
      teacher_module_file=digits.teacher_module_file,
      label_column=digits.label_column,
      schema_path=digits.schema_file,
      serving_model_dir=str(workspace / 'serving'),
      train_steps=10,
      eval_steps=2,
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          str(workspace / 'metadata.sqlite')),
      teacher_config={'epochs': 1},
      num_shards=2,
      prune=False,
      quantization_modes=(),
      max_accuracy_drop=1.0))


def latest_state(workspace, node):
  executions = helpers.executions_by_node(str(workspace / 'metadata.sqlite')).get(node, [])
  return executions[-1].last_known_state if executions else None


def pushed_versions(workspace):
  serving = workspace / 'serving'
  return sorted(os.listdir(serving)) if serving.exists() else []


@pytest.fixture(scope='module')
def workspace(tmp_path_factory):
  """A pipeline that has run once on good data; `good.csv` keeps that file for restores."""
  workspace = tmp_path_factory.mktemp('bad_data')
  source = datasets.write_digits_csv(str(workspace / 'full'))
  (workspace / 'data').mkdir()
  with open(os.path.join(source, 'data.csv'), newline='') as handle:
    rows = list(csv.reader(handle))[:301]
  with open(workspace / 'good.csv', 'w', newline='') as handle:
    csv.writer(handle).writerows(rows)
  # copy2 keeps the modification time, so the restored file is the same input to
  # ExampleGen's fingerprint and a rerun after the fix may take the cache.
  shutil.copy2(workspace / 'good.csv', workspace / 'data' / 'data.csv')
  run(workspace)
  assert latest_state(workspace, 'AtomicPusher') == metadata_store_pb2.Execution.COMPLETE
  return workspace


@pytest.mark.parametrize('case', sorted(CASES))
def test_bad_data_stops_at_the_validator_and_a_fixed_rerun_goes_through(workspace, case):
  with open(workspace / 'good.csv', newline='') as handle:
    rows = list(csv.reader(handle))
  with open(workspace / 'data' / 'data.csv', 'w', newline='') as handle:
    csv.writer(handle).writerows(corrupt(rows, case))
  pushed_before = pushed_versions(workspace)
  executions_before = helpers.executions_by_node(str(workspace / 'metadata.sqlite'))

  with pytest.raises(DataAnomaliesError) as raised:
    run(workspace)

  message = str(raised.value)
  for expected in CASES[case]:
    assert expected in message, message
  assert 'nothing is pushed' in message
  assert latest_state(workspace, VALIDATOR) == metadata_store_pb2.Execution.FAILED
  executions_after = helpers.executions_by_node(str(workspace / 'metadata.sqlite'))
  for node in ('IngestionTransform', 'DistributedTrainer', 'AccuracyGate', 'AtomicPusher'):
    assert len(executions_after[node]) == len(executions_before[node]), node
  assert pushed_versions(workspace) == pushed_before

  shutil.copy2(workspace / 'good.csv', workspace / 'data' / 'data.csv')
  run(workspace)
  assert latest_state(workspace, VALIDATOR) in (metadata_store_pb2.Execution.COMPLETE,
                                                metadata_store_pb2.Execution.CACHED)
  assert latest_state(workspace, 'AtomicPusher') in (metadata_store_pb2.Execution.COMPLETE,
                                               metadata_store_pb2.Execution.CACHED)
