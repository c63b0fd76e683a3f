"""A local engine that loses a process mid-run: the run fails within a bound, naming the
engine, the process and the stage; nothing is pushed, and the same command then completes."""

import glob
import os
import subprocess
import sys
import time

import psutil
import pytest

from tests.reliability import messy_csv

# Long: make test-e2e. Per engine, a run stopped at StatisticsGen, then a whole run.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2400)]

# From the kill to the run's exit: the watchdog polls each second, then the Beam stage and
# the cluster stop (each cluster process gets 30 s to end before it is killed).
FAILURE_BOUND_S = 120


def distillery_process(arguments, home, log):
  command = os.path.join(os.path.dirname(sys.executable), 'distillery')
  environment = {key: value for key, value in os.environ.items()
                 if key not in ('TF_USE_LEGACY_KERAS', 'TF_CPP_MIN_LOG_LEVEL')}
  environment['DISTILLERY_HOME'] = str(home)
  return subprocess.Popen([command, *arguments], env=environment, stdout=log,
                          stderr=subprocess.STDOUT, text=True, cwd=str(home))


def engine_processes(parent_pid, main_class):
  found = []
  for child in psutil.Process(parent_pid).children(recursive=True):
    try:  # Spark's worker starts and ends executors as jobs come and go.
      if main_class in ' '.join(child.cmdline()):
        found.append(child)
    except psutil.Error:
      continue
  return found


# The rerun is a whole run on the engine (about 8 minutes here): Flink's shows that a rerun
# completes from the cache; Spark's loss is checked up to the run's end, to keep make
# test-e2e within CI's time.
@pytest.mark.parametrize('engine, role, main_class, rerun', [
    ('flink', 'flink taskmanager', 'TaskManagerRunner', True),
    ('spark', 'spark worker', 'org.apache.spark.deploy.worker.Worker', False),
])
def test_a_lost_engine_process_fails_the_run_by_name_and_a_rerun_completes(
    tmp_path, engine, role, main_class, rerun):
  data = messy_csv.make_case(5, [], rows=300).write(tmp_path / 'data')
  arguments = ['run', '--dataset', 'csv', '--data', data, '--label', messy_csv.LABEL,
               '--beam-runner', engine, '--train-steps', '40', '--student-train-steps', '40',
               '--student-shares', '0.3', '--max-accuracy-drop', '1.0', '--seed', '1']
  home = tmp_path / 'home'
  home.mkdir()
  log_path = tmp_path / 'first.log'
  with open(log_path, 'w') as log:
    run = distillery_process(arguments, home, log)
    try:
      # Kill one of the engine's processes once StatisticsGen, a Beam stage, has started.
      deadline = time.monotonic() + 600
      while 'StatisticsGen: started' not in log_path.read_text():
        assert run.poll() is None, log_path.read_text()
        assert time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.5)
      cluster = engine_processes(run.pid, 'java')
      [victim, *_] = engine_processes(run.pid, main_class)
      victim.kill()
      killed = time.monotonic()
      status = run.wait(timeout=FAILURE_BOUND_S)
      took = time.monotonic() - killed
    finally:
      if run.poll() is None:
        run.kill()
  output = log_path.read_text()
  assert status == 1, output
  assert took < FAILURE_BOUND_S
  assert f'the local {engine} cluster lost its {role}' in output
  assert 'during StatisticsGen' in output or 'during IngestionTransform' in output, output
  assert 'fix its input' not in output  # The data is fine: the message says to rerun.
  # No cluster process outlives the run, and nothing was pushed.
  time.sleep(2)
  assert len(cluster) >= 3  # The engine's processes and Beam's job server.
  assert not [process for process in cluster
              if process.is_running() and process.status() != psutil.STATUS_ZOMBIE]
  assert not glob.glob(str(home / 'serving' / '*' / '[0-9]*'))
  if not rerun:
    return
  # The same command completes on a new cluster, finished components from the cache.
  with open(tmp_path / 'second.log', 'w') as log:
    rerun = distillery_process(arguments, home, log)
    status = rerun.wait(timeout=1500)
  output = (tmp_path / 'second.log').read_text()
  assert status == 0, output
  assert 'CsvExampleGen: reused from the cache' in output
  assert glob.glob(str(home / 'serving' / '*' / '[0-9]*'))
