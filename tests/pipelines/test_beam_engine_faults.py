"""A local engine that loses a process mid-run: the run fails within a bound of the line that
names the engine, the process and the stage; nothing is pushed, no cluster process outlives
it, and the same command then runs the Beam stages again on a new cluster."""

import concurrent.futures
import glob
import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tests import helpers
from tests.reliability import messy_csv

# Long: make test-e2e. For each engine, and the two at once: a run stopped at StatisticsGen,
# then a rerun through the stage it stopped in.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

# From the line that names the lost process to the run's exit: the job's cancel (5 s) and
# the cluster's stop (10 s), and the run ends within local_runner.LOST_PROCESS_EXIT_S (20 s)
# whatever its stage's thread is doing; the rest is slack for a loaded machine.
FAILURE_BOUND_S = 30


def distillery_process(arguments, home, log):
  command = os.path.join(os.path.dirname(sys.executable), 'distillery')
  environment = {key: value for key, value in os.environ.items()
                 if key not in ('TF_USE_LEGACY_KERAS', 'TF_CPP_MIN_LOG_LEVEL')}
  environment['DISTILLERY_HOME'] = str(home)
  # Ctrl-C reaches it, however the suite was started.
  return subprocess.Popen([command, *arguments], env=environment, stdout=log,
                          stderr=subprocess.STDOUT, text=True, cwd=str(home),
                          preexec_fn=helpers.answer_control_c)


def engine_processes(parent_pid, main_class):
  found = []
  for child in psutil.Process(parent_pid).children(recursive=True):
    try:  # Spark's worker starts and ends executors as jobs come and go.
      if main_class in ' '.join(child.cmdline()):
        found.append(child)
    except psutil.Error:
      continue
  return found


def wait_for_line(log_path, text, run, timeout_s):
  """Polls the run's log until a line holds `text`; fails if the run ends or time runs out."""
  deadline = time.monotonic() + timeout_s
  while text not in log_path.read_text():
    assert run.poll() is None, log_path.read_text()
    assert time.monotonic() < deadline, log_path.read_text()
    time.sleep(0.2)
  return time.monotonic()


def assert_no_process_outlives(cluster):
  time.sleep(2)
  assert len(cluster) >= 3  # The engine's processes and Beam's job server.
  assert not [process for process in cluster
              if process.is_running() and process.status() != psutil.STATUS_ZOMBIE]


ENGINES = [
    ('flink', 'flink taskmanager', 'TaskManagerRunner'),
    ('spark', 'spark worker', 'org.apache.spark.deploy.worker.Worker'),
]


@pytest.fixture(scope='module')
def lost_and_rerun(tmp_path_factory):
  """Each engine's case, both at once: {engine: the AssertionError (or other error) its case
  raised, or None}.

  A case mostly waits: on its JVMs' start, on the engine's scheduling of each Beam job, on a
  stopped run's exit. One after another the two took 226 s of the suite (125 s and 101 s,
  #82); side by side they share those waits. The bounds are the same: each case's run is
  timed from its own lines, and each outlives nothing of its own.
  """
  with concurrent.futures.ThreadPoolExecutor(len(ENGINES)) as pool:
    futures = {engine: pool.submit(lost_engine_process_case, tmp_path_factory.mktemp(engine),
                                   engine, role, main_class)
               for engine, role, main_class in ENGINES}
  return {engine: future.exception() for engine, future in futures.items()}


# The rerun stops (as Ctrl-C would) once the stage the loss stopped has finished on the new
# cluster. The other Beam stages' outputs on each engine are compared with DirectRunner's in
# tests/conformance/test_taxi_engines.py; what follows them runs in the run's own process,
# the same on every engine; and a whole run on an engine is 8 minutes here.
@pytest.mark.parametrize('engine', [engine for engine, _, _ in ENGINES])
def test_a_lost_engine_process_fails_the_run_by_name_and_a_rerun_runs_its_stage_on_a_new_cluster(
    lost_and_rerun, engine):
  error = lost_and_rerun[engine]
  if error is not None:
    raise error


def lost_engine_process_case(tmp_path, engine, role, main_class):
  """One engine's case: the run loses a process, fails by name; the rerun runs its stage."""
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
      wait_for_line(log_path, 'StatisticsGen: started', run, 600)
      cluster = engine_processes(run.pid, 'java')
      [victim, *_] = engine_processes(run.pid, main_class)
      victim.kill()
      named = wait_for_line(log_path, f'the local {engine} cluster lost its {role}', run, 30)
      status = run.wait(timeout=FAILURE_BOUND_S + 30)
      took = time.monotonic() - named
    finally:
      if run.poll() is None:
        run.kill()
  output = log_path.read_text()
  assert status == 1, output
  assert took < FAILURE_BOUND_S, (took, output)
  # "lost its flink taskmanager 0 (exit status -9) during StatisticsGen; stopping the run"
  [stage] = re.findall(f'lost its {role}[ 0-9]*\\(exit status -9\\) during (\\w+); stopping',
                       output)
  assert stage in ('StatisticsGen', 'IngestionTransform'), output
  assert f'error: the pipeline failed: the local {engine} cluster lost its {role}' in output
  assert 'Nothing was pushed: rerun the same command' in output
  assert 'fix its input' not in output  # The data is fine: the message says to rerun.
  # No cluster process outlives the run, and nothing was pushed.
  assert_no_process_outlives(cluster)
  assert not glob.glob(str(home / 'serving' / '*' / '[0-9]*'))
  # The same command runs the stage on a new cluster, finished components from the cache;
  # stopped as Ctrl-C would stop it, it stops that cluster too.
  rerun_log = tmp_path / 'second.log'
  with open(rerun_log, 'w') as log:
    rerun = distillery_process(arguments, home, log)
    try:
      wait_for_line(rerun_log, f'{stage}: finished', rerun, 900)
      cluster = engine_processes(rerun.pid, 'java')
      rerun.send_signal(signal.SIGINT)
      status = rerun.wait(timeout=FAILURE_BOUND_S + 30)
    finally:
      if rerun.poll() is None:
        rerun.kill()
  output = rerun_log.read_text()
  assert status == 130, output
  assert 'CsvExampleGen: reused from the cache' in output
  assert f'beam_cluster: {engine} up in' in output
  assert 'lost its' not in output
  assert_no_process_outlives(cluster)
