"""`kill -9` of the pipeline process while the teacher trains: the rerun takes every
upstream output from the cache and resumes training from the last epoch backed up."""

import glob
import json
import os
import signal
import subprocess
import sys
import threading
import time

from ml_metadata.proto import metadata_store_pb2
import pytest

from tests import helpers
from tests.reliability import digits_pipeline

# Long: whole runs killed and rerun (make test-e2e).
pytestmark = pytest.mark.e2e

EPOCHS = 6
TRAIN_STEPS = 600  # 100 steps an epoch: three epochs are left to run when the kill lands
UPSTREAM = ('CsvExampleGen', 'StatisticsGen', 'ImportSchemaGen', 'StrictExampleValidator',
            'IngestionTransform')


def test_a_pipeline_killed_while_training_resumes_from_its_backup_on_rerun(tmp_path):
  workspace = str(tmp_path)
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
  assert process.returncode == -signal.SIGKILL
  assert helpers.latest_state(metadata_path, 'DistributedTrainer') == (
      metadata_store_pb2.Execution.RUNNING)  # Killed mid-training, as intended.

  digits_pipeline.run(workspace, TRAIN_STEPS, EPOCHS)

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
