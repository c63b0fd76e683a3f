"""Bad data stops the pipeline at the validator, is recorded as FAILED, and a fixed rerun
goes through: one test per case of issue #8, on a 300-row digits sample and the curated
digits schema."""

import csv
import os
import shutil

import pytest
from ml_metadata.proto import metadata_store_pb2

from tfx_distillery.components.example_validator import DataAnomaliesError
from tests import helpers
from tests.reliability import digits_pipeline

# Long: pipelines stopped by bad data, then rerun (make test-e2e).
pytestmark = pytest.mark.e2e

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
  digits_pipeline.run(str(workspace))


def latest_state(workspace, node):
  return helpers.latest_state(str(workspace / 'metadata.sqlite'), node)


def pushed_versions(workspace):
  serving = workspace / 'serving'
  return sorted(os.listdir(serving)) if serving.exists() else []


@pytest.fixture(scope='module')
def workspace(tmp_path_factory):
  """A pipeline that has run once on good data; `good.csv` keeps that file for restores."""
  workspace = tmp_path_factory.mktemp('bad_data')
  digits_pipeline.write_data(str(workspace), rows=300)
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
