"""Faults around a run: a full or read-only serving folder, Ctrl-C, a CSV folder that
changes between runs. Each leaves the served model intact and the next run whole."""

import errno
import filecmp
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
import tensorflow as tf
from tfx.dsl.io import fileio

from tests import helpers
from tests.pipelines.test_cli import distillery
from tests.reliability import messy_csv
from tests.reliability.test_kill_during_push import model_dir  # pylint: disable=unused-import
from tests.reliability.test_kill_during_push import push_arguments
from tests.reliability.test_kill_during_push import versions
from tfx_distillery.components.distributed_trainer import cluster
from tfx_distillery.components.pusher import executor as pusher_executor

FAULTS = {'full': (errno.ENOSPC, 'No space left on device'),
          'read-only': (errno.EROFS, 'Read-only file system')}

# `distillery run` with the serving folder's writes failing as a full or read-only disk would.
FAULTY_RUN = """
import os, sys
from tfx.dsl.io import fileio
from tests.reliability import test_faults
test_faults.inject(setattr, os.environ['FAULT_DIR'], os.environ['FAULT'])
from tfx_distillery.pipelines import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def inject(set_attribute, folder, fault):
  """Makes fileio calls that write under `folder` raise the OSError of `fault`.

  A full disk fails the copies (folders are still made, so a half-copied staging folder
  is left to clean up); a read-only one fails every write.
  """
  number, reason = FAULTS[fault]
  calls = (('copy', 1),) if fault == 'full' else (
      ('copy', 1), ('makedirs', 0), ('mkdir', 0), ('rename', 1))
  for name, position in calls:
    original = getattr(fileio, name)

    def call(*args, original=original, position=position, **kwargs):
      if str(args[position]).startswith(folder):
        raise OSError(number, reason, str(args[position]))
      return original(*args, **kwargs)
    set_attribute(fileio, name, call)


@pytest.mark.parametrize('fault', sorted(FAULTS))
def test_a_push_into_a_full_or_read_only_folder_fails_naming_it(tmp_path, model_dir, fault,
                                                                 monkeypatch):
  serving_dir = str(tmp_path / 'serving')
  pusher_executor.Executor().Do(*push_arguments(model_dir, serving_dir, str(tmp_path / 'p1')))
  [previous] = versions(serving_dir)
  time.sleep(1.1)  # Versions are seconds: the next push would take a new one.

  inject(monkeypatch.setattr, serving_dir, fault)
  with pytest.raises(pusher_executor.PushFailedError) as raised:
    pusher_executor.Executor().Do(*push_arguments(model_dir, serving_dir,
                                                  str(tmp_path / 'p2')))
  monkeypatch.undo()
  assert f'serving folder {serving_dir}: {FAULTS[fault][1]}' in str(raised.value)
  assert 'versions already there are untouched' in str(raised.value)
  # The previous version is whole and serves; nothing half-written is left beside it.
  assert versions(serving_dir) == [previous]
  assert sorted(os.listdir(serving_dir)) == [previous]
  comparison = filecmp.dircmp(os.path.join(model_dir, 'Format-Serving'),
                              os.path.join(serving_dir, previous))
  assert not (comparison.left_only or comparison.right_only or comparison.diff_files)
  loaded = tf.saved_model.load(os.path.join(serving_dir, previous))
  assert loaded.serve(tf.ones([1, 64])).numpy()[0, 0] == 64.0


class Console:
  """A `distillery run` in its own process group (as a terminal starts it), read live."""

  def __init__(self, arguments, home, cwd):
    command = os.path.join(os.path.dirname(sys.executable), 'distillery')
    environment = {key: value for key, value in os.environ.items()
                   if key not in ('TF_USE_LEGACY_KERAS', 'TF_CPP_MIN_LOG_LEVEL')}
    environment['DISTILLERY_HOME'] = str(home)
    self.process = subprocess.Popen([command, *arguments], cwd=str(cwd), env=environment,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True,
                                    preexec_fn=answer_control_c)
    self.lines = []
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  def _read(self):
    for line in self.process.stdout:
      self.lines.append(line)

  @property
  def text(self):
    return ''.join(self.lines)

  def wait_for(self, phrase, timeout=300):
    deadline = time.monotonic() + timeout
    while phrase not in self.text:
      assert self.process.poll() is None, f'the run ended before {phrase!r}:\n{self.text}'
      assert time.monotonic() < deadline, f'no {phrase!r} in {timeout} s:\n{self.text}'
      time.sleep(0.2)

  def wait_for_process(self, module, timeout=300):
    """Waits until a process under the run has `-m module` on its command line: the
    trainer's worker is up, however loaded the machine is."""
    def command_line(child):
      try:
        return child.cmdline()
      except psutil.Error:  # It ended while we looked (pip, a Beam worker).
        return []

    deadline = time.monotonic() + timeout
    while not any(module in command_line(child)
                  for child in psutil.Process(self.process.pid).children(recursive=True)):
      assert self.process.poll() is None, f'the run ended before {module} started:\n{self.text}'
      assert time.monotonic() < deadline, f'no {module} process in {timeout} s:\n{self.text}'
      time.sleep(0.2)

  def control_c(self, timeout=30):
    """Sends SIGINT to the process group, as Ctrl-C does; returns (exit status, seconds)."""
    children = psutil.Process(self.process.pid).children(recursive=True)
    start = time.monotonic()
    os.killpg(self.process.pid, signal.SIGINT)
    code = self.process.wait(timeout=timeout)
    seconds = time.monotonic() - start
    self._reader.join(timeout=10)
    return code, seconds, children


def answer_control_c():
  """In the child: SIGINT as a terminal leaves it. A suite started in the background (`make
  test-e2e &` from a script) has SIGINT ignored, every child inherits that, and a Python
  that starts with SIGINT ignored never raises KeyboardInterrupt: the run would go on."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope='module')
def messy_run(tmp_path_factory):
  """A pushed run on a folder with every kind of mess that runs, all in one folder.

  It also stands for the whole-pipeline run test_messy_csv_runs once had: one run serves
  every test here, and each whole run costs about 90 s of the suite.
  """
  tmp_path = tmp_path_factory.mktemp('faults')
  case = messy_csv.make_case(5, messy_csv.RUN_KINDS, rows=300)
  data = case.write(tmp_path / 'data')
  arguments = ['run', '--dataset', 'csv', '--data', data, '--label', messy_csv.LABEL,
               '--train-steps', '200', '--student-train-steps', '400',
               '--max-accuracy-drop', '1.0']
  result = distillery(*arguments, '--serving-dir', str(tmp_path / 'serving'),
                      home=tmp_path / 'home', cwd=tmp_path)
  assert result.returncode == 0, result.stdout + result.stderr
  return tmp_path, arguments, result


def raw_examples(case_header):
  """Two raw rows as a client sends them: the CSV's own column names, no label."""
  names = [name for name in case_header if name != messy_csv.LABEL]
  return [helpers.serialize({names[0]: [41.5], names[1]: [201.0], names[2]: ['Dream']}),
          helpers.serialize({names[0]: [36.0], names[1]: [190.0], names[2]: ['Biscoe']})]


@pytest.mark.e2e  # long: make test-e2e
def test_the_messy_folder_runs_and_its_model_serves_raw_rows_by_their_csv_names(messy_run):
  tmp_path, _, result = messy_run
  console = result.stdout + result.stderr
  assert 'Traceback' not in console
  assert 'byte-order mark removed' in console and 'decompressed (gzip)' in console
  assert 'data: b.csv.gz: ' in console and 'AccuracyGate: finished' in console
  # Counted per file, on the console: three non-finite cells, four pandas markers, two rows
  # without a label.
  assert sum(map(int, re.findall(
      r"(\d+) NaN, infinite or missing-marker value\(s\) in 'bill length' read as empty",
      console))) == 3
  assert sum(map(int, re.findall(
      r"(\d+) NaN, infinite or missing-marker value\(s\) in 'flipper mm' read as empty",
      console))) == 4
  assert sum(map(int, re.findall(r"(\d+) row\(s\) with no 'species' left out", console))) == 2
  pushed = sorted(glob.glob(str(tmp_path / 'serving' / '[0-9]*')))[0]
  from tfx_distillery import load_tflite  # pylint: disable=import-outside-toplevel
  header = messy_csv.make_case(5, ['spaces_in_names']).header
  predicted = load_tflite(pushed).predict_raw(raw_examples(header))
  assert set(predicted['labels']) <= set(messy_csv.CLASSES)


# The whole run takes the full disk only: how a run ends on a failed push does not depend on
# the error, and test_a_push_into_a_full_or_read_only_folder_fails_naming_it above gives the
# executor both. The full disk is the harder case: it leaves a half-copied staging folder.
@pytest.mark.e2e  # long: make test-e2e
def test_a_run_whose_serving_folder_fails_exits_1_and_keeps_the_served_model(
    messy_run, tmp_path):
  run_path, arguments, _ = messy_run
  fault = 'full'
  pushed = sorted(glob.glob(str(run_path / 'serving' / '[0-9]*')))[0]
  serving_dir = tmp_path / 'serving'
  previous = serving_dir / os.path.basename(pushed)
  shutil.copytree(pushed, previous)
  options = helpers.child_process_options()
  options['env'].update({'FAULT': fault, 'FAULT_DIR': str(serving_dir),
                         'DISTILLERY_HOME': str(run_path / 'home'),
                         'TF_USE_LEGACY_KERAS': '1'})
  result = subprocess.run([sys.executable, '-c', FAULTY_RUN, *arguments, '--serving-dir',
                           str(serving_dir)], capture_output=True, text=True, timeout=600,
                          check=False, **options)
  console = result.stdout + result.stderr
  assert result.returncode == 1, console
  assert 'Traceback' not in console
  assert (f'could not write the model into the serving folder {serving_dir}: '
          f'{FAULTS[fault][1]}') in result.stderr, console
  # Only the push ran again; the previous version is there, whole, and serves.
  assert 'DistributedTrainer: reused from the cache' in console
  assert os.listdir(serving_dir) == [previous.name]
  assert not filecmp.dircmp(pushed, previous).diff_files
  from tfx_distillery import load_tflite  # pylint: disable=import-outside-toplevel
  header = messy_csv.make_case(5, ['spaces_in_names']).header
  assert len(load_tflite(str(previous)).predict_raw(raw_examples(header))['classes']) == 2


@pytest.mark.e2e  # long: make test-e2e
def test_control_c_stops_within_seconds_and_the_next_run_reuses_what_finished(messy_run):
  run_path, arguments, _ = messy_run
  home = run_path / 'home'
  serving = ['--serving-dir', str(run_path / 'serving')]
  # A file added to the folder: ExampleGen reads again, never the cached examples.
  extra = messy_csv.make_case(6, ['spaces_in_names'])
  (run_path / 'data' / 'c.csv').write_bytes(extra.files['a.csv'])

  during_transform = Console([*arguments, *serving], home, run_path)
  during_transform.wait_for('IngestionTransform: started')
  time.sleep(3)  # Inside Beam's analysis.
  code, seconds, _ = during_transform.control_c()
  console = during_transform.text
  assert 'inputs changed since the last run (added c.csv)' in console
  assert 'CsvExampleGen: finished in' in console
  assert code == 130 and seconds < 30, (code, seconds, console)
  assert 'interrupted during IngestionTransform' in console
  assert 'Traceback' not in console

  # Two workers: the trainer runs them as processes (one trains in the pipeline's process).
  workers = ['--num-workers', '2']
  during_training = Console([*arguments, *serving, *workers], home, run_path)
  during_training.wait_for('DistributedTrainer: started')
  during_training.wait_for_process(cluster.WORKER_MODULE)
  code, seconds, children = during_training.control_c()
  console = during_training.text
  assert 'inputs unchanged since the last run' in console
  assert 'CsvExampleGen: reused from the cache' in console
  assert code == 130 and seconds < 30, (code, seconds, console)
  assert 'interrupted during DistributedTrainer' in console and 'Traceback' not in console
  assert children, 'the trainer had started no worker process'
  time.sleep(1)
  alive = [child for child in children
           if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]
  assert not alive, alive

  # One worker: what it checks is what the two interrupted runs left, and the examples are
  # new, so the trainer runs again however many workers it has.
  result = distillery(*arguments, *serving, home=home, cwd=run_path)
  console = result.stdout + result.stderr
  # It runs to the end: 0 when a candidate passes, 3 when none beats the majority class.
  assert result.returncode in (0, 3), console
  assert 'AccuracyGate: finished' in console and 'Traceback' not in console
  assert 'IngestionTransform: reused from the cache' in console
  assert ('reused from the cache: CsvExampleGen, StatisticsGen, SchemaGen, '
          'StrictExampleValidator, IngestionTransform') in console
  assert 'DistributedTrainer: finished in' in console and 'in use by' not in console
  with open(home / 'runs' / 'csv-data' / 'inputs' / 'inputs.json') as handle:
    assert 'c.csv' in json.load(handle)['files']


def test_the_documented_fault_messages_are_the_ones_the_tests_see():
  with open(os.path.join(helpers.REPOSITORY_ROOT, 'docs', 'bad-data-and-faults.md')) as handle:
    text = ' '.join(handle.read().split())
  for message in ('could not write the model into the serving folder <folder>: No space left '
                  'on device', 'interrupted during <component>: nothing was pushed',
                  'inputs changed since the last run (added c.csv)',
                  'CsvExampleGen: reused from the cache', 'reused from the cache:'):
    assert message in text, message
