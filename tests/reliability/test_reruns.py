"""The teacher-only digits pipeline broken and run again, in one workspace.

First `kill -9` of the pipeline process while the teacher trains: the rerun takes every
upstream output from the cache and resumes training from the last epoch backed up. Then, on
the workspace that rerun completed, bad data: it stops the pipeline at the validator, is
recorded as FAILED, and a fixed rerun goes through, one test per case of issue #8, on a
600-row digits sample and the curated digits schema.

One module, so that the bad data cases start from the run the kill test completed rather
than a whole run of their own (#82: about 30 s of the long suite).
"""

import csv
import glob
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time

from ml_metadata.proto import metadata_store_pb2
import pytest

from tfx_distillery.components.example_validator import DataAnomaliesError
from tests import helpers
from tests.reliability import digits_pipeline

# Long: whole runs killed, stopped by bad data, and rerun (make test-e2e).
pytestmark = pytest.mark.e2e

EPOCHS = 6
TRAIN_STEPS = 600  # 100 steps an epoch: three epochs are left to run when the kill lands
UPSTREAM = ('CsvExampleGen', 'StatisticsGen', 'ImportSchemaGen', 'StrictExampleValidator',
            'IngestionTransform')
VALIDATOR = 'StrictExampleValidator'


def run(workspace):
  """The pipeline as the kill test runs it, so that a rerun on good data is all cache."""
  digits_pipeline.run(str(workspace), TRAIN_STEPS, EPOCHS)


@pytest.fixture(scope='module')
def killed_and_rerun(tmp_path_factory):
  """A pipeline killed while its teacher trains, then run again to the end.

  Returns the workspace, the killed process's exit status and the trainer's state in ML
  Metadata right after the kill, which the rerun then changes.
  """
  workspace = str(tmp_path_factory.mktemp('reruns'))
  metadata_path = os.path.join(workspace, 'metadata.sqlite')
  digits_pipeline.write_data(workspace, rows=600)
  with open(os.path.join(workspace, 'killed-run.log'), 'w') as log:
    process = subprocess.Popen(
        [sys.executable, '-m', 'tests.reliability.digits_pipeline', workspace,
         '--train-steps', str(TRAIN_STEPS), '--epochs', str(EPOCHS)],
        **helpers.child_process_options(),
        stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True)
  lines = []
  reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
  reader.start()
  deadline = time.monotonic() + 300
  # Epoch 3's line comes after epoch 2's backup was written (the line of an epoch is
  # logged just before its own backup).
  while not any(f'epoch 3/{EPOCHS}' in line for line in lines):
    assert process.poll() is None, lines[-5:]
    assert time.monotonic() < deadline, lines[-5:]
    time.sleep(0.2)
  os.killpg(process.pid, signal.SIGKILL)  # The pipeline and anything it started.
  process.wait()
  trainer_state_after_kill = helpers.latest_state(metadata_path, 'DistributedTrainer')
  run(workspace)
  return workspace, process.returncode, trainer_state_after_kill


def test_a_pipeline_killed_while_training_resumes_from_its_backup_on_rerun(killed_and_rerun):
  workspace, returncode, trainer_state_after_kill = killed_and_rerun
  metadata_path = os.path.join(workspace, 'metadata.sqlite')
  assert returncode == -signal.SIGKILL
  assert trainer_state_after_kill == (
      metadata_store_pb2.Execution.RUNNING)  # Killed mid-training, as intended.

  for node in UPSTREAM:
    assert helpers.latest_state(metadata_path, node) == metadata_store_pb2.Execution.CACHED, node
  assert helpers.latest_state(metadata_path, 'DistributedTrainer') == (
      metadata_store_pb2.Execution.COMPLETE)
  assert helpers.latest_state(metadata_path, 'AtomicPusher') == (
      metadata_store_pb2.Execution.COMPLETE)
  model_runs = glob.glob(os.path.join(workspace, 'root', 'DistributedTrainer', 'model_run', '*'))
  latest_model_run = max(model_runs, key=lambda path: int(os.path.basename(path))
                         if os.path.basename(path).isdigit() else -1)
  with open(os.path.join(latest_model_run, 'metrics.json')) as handle:
    metrics = json.load(handle)
  assert metrics['first_epoch'] >= 3  # Epochs 1 and 2 were backed up before the kill.
  assert metrics['epochs_run'] == EPOCHS - metrics['first_epoch'] + 1
  assert not glob.glob(os.path.join(workspace, 'root', 'DistributedTrainer', 'model_run',
                                    'backup-*'))


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


def latest_state(workspace, node):
  return helpers.latest_state(str(workspace / 'metadata.sqlite'), node)


def pushed_versions(workspace):
  serving = workspace / 'serving'
  return sorted(os.listdir(serving)) if serving.exists() else []


@pytest.fixture(scope='module')
def workspace(killed_and_rerun):
  """A pipeline that has run to the end on good data; `good.csv` keeps that file for
  restores."""
  workspace = pathlib.Path(killed_and_rerun[0])
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
