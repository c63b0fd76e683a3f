"""One SQLite ML Metadata file, two pipelines at once: SQLite can not take concurrent
writers safely, so the second run is refused at once, naming the holder, and a killed
run leaves no stale lock behind."""

import os
import signal
import subprocess
import sys
import time

from tfx_distillery.pipelines import local_runner
from tests import helpers

HOLD_SCRIPT = """
import sys, time
from tfx_distillery.pipelines import local_runner
from tests import helpers
with local_runner.exclusive_metadata(sys.argv[1]):
  print('holding', flush=True)
  time.sleep(300)
"""


def hold_metadata_in_another_process(metadata_path):
  process = subprocess.Popen([sys.executable, '-c', HOLD_SCRIPT, metadata_path],
                             stdout=subprocess.PIPE, text=True,
                             **helpers.child_process_options())
  assert process.stdout.readline().strip() == 'holding'
  return process


def test_a_second_pipeline_on_the_same_metadata_is_refused_naming_the_holder(tmp_path, capsys):
  metadata_path = str(tmp_path / 'metadata.sqlite')
  holder = hold_metadata_in_another_process(metadata_path)
  try:
    # Another pipeline (digits, not the holder's) against the same root and file.
    started = time.monotonic()
    code = local_runner.main(['--dataset', 'digits', '--pipeline-root', str(tmp_path)])
    assert time.monotonic() - started < 30  # Refused before any component ran.
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
  assert code == 2
  error = capsys.readouterr().err
  assert f'{metadata_path} is in use by pid {holder.pid}' in error
  assert 'one pipeline run at a time' in error
  assert not os.path.exists(metadata_path)  # The refused run wrote nothing to it.


def test_a_run_killed_with_sigkill_leaves_no_stale_lock(tmp_path):
  metadata_path = str(tmp_path / 'metadata.sqlite')
  holder = hold_metadata_in_another_process(metadata_path)
  holder.send_signal(signal.SIGKILL)
  holder.wait()
  with local_runner.exclusive_metadata(metadata_path):
    pass
