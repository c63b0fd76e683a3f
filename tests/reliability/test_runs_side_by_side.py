"""Two `distillery run`s at once under one DISTILLERY_HOME (#83): runs of different data both
go on, each writing the home's last-run record whole; a second run of the same data is
refused at once, naming the first. Never a raw errno, and exit 2 only for that refusal."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time

from tfx_distillery.pipelines import local_runner
from tests import helpers
from tests.reliability import messy_csv


def start(home, data, name):
  command = os.path.join(os.path.dirname(sys.executable), 'distillery')
  environment = {key: value for key, value in os.environ.items()
                 if key not in ('TF_USE_LEGACY_KERAS', 'TF_CPP_MIN_LOG_LEVEL')}
  environment['DISTILLERY_HOME'] = str(home)
  log = open(home / f'{name}.log', 'w')  # pylint: disable=consider-using-with
  return subprocess.Popen(
      [command, 'run', '--dataset', 'csv', '--data', str(data), '--label', messy_csv.LABEL],
      env=environment, stdout=log, stderr=subprocess.STDOUT, cwd=str(home),
      preexec_fn=helpers.answer_control_c), home / f'{name}.log'


def wait_for(log_path, text, process, timeout_s=240):
  deadline = time.monotonic() + timeout_s
  while text not in log_path.read_text():
    assert process.poll() is None, log_path.read_text()
    assert time.monotonic() < deadline, log_path.read_text()
    time.sleep(0.2)


def stop(process):
  if process.poll() is None:
    process.send_signal(signal.SIGINT)
  return process.wait(timeout=60)


def test_runs_of_other_data_both_go_on_and_a_second_run_of_the_same_data_is_refused_by_name(
    tmp_path):
  home = tmp_path / 'home'
  home.mkdir()
  folders = {name: messy_csv.make_case(5, [], rows=120).write(tmp_path / name)
             for name in ('first', 'other')}
  runs = {name: start(home, folder, name) for name, folder in folders.items()}
  try:
    for name in ('first', 'other'):
      wait_for(runs[name][1], 'CsvExampleGen: started', runs[name][0])
    # The same data as `first`, which holds its root's metadata: refused at once.
    runs['again'] = start(home, folders['first'], 'again')
    status = runs['again'][0].wait(timeout=240)
  finally:
    statuses = {name: stop(process) for name, (process, _) in runs.items()}
  refused = runs['again'][1].read_text()
  assert status == local_runner.EXIT_BAD_INPUT, refused
  assert 'is in use by pid' in refused and 'one pipeline run at a time' in refused
  for name in ('first', 'other'):
    text = runs[name][1].read_text()
    assert statuses[name] == local_runner.EXIT_INTERRUPTED, text
    assert 'Errno' not in text and 'Traceback' not in text
  with open(home / local_runner.LAST_RUN_FILE_NAME) as handle:
    last = json.load(handle)
  assert last['pipeline_name'] in ('distillery-csv-first', 'distillery-csv-other')
  assert not [name for name in os.listdir(home) if name.endswith('.tmp')]


def write_records(home, index, count):
  os.environ[local_runner.HOME_VARIABLE] = str(home)
  for number in range(count):
    local_runner.write_json_record(os.path.join(str(home), local_runner.LAST_RUN_FILE_NAME),
                                   {'writer': index, 'number': number})


def test_two_processes_writing_the_last_run_record_at_once_always_leave_a_whole_file(
    tmp_path):
  writers = [multiprocessing.get_context('fork').Process(target=write_records,
                                                          args=(tmp_path, index, 300))
             for index in range(2)]
  for writer in writers:
    writer.start()
  for writer in writers:
    writer.join(timeout=120)
  assert [writer.exitcode for writer in writers] == [0, 0]
  with open(tmp_path / local_runner.LAST_RUN_FILE_NAME) as handle:
    assert json.load(handle)['number'] == 299
  assert os.listdir(tmp_path) == [local_runner.LAST_RUN_FILE_NAME]
