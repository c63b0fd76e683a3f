"""The `distillery` command as a user runs it: a run on their CSV with a clean console, the
report of the last run, and a pushed TFLite folder that serves after the run is deleted."""

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests import helpers

# What the libraries print at import time; it belongs in the log file, never the console.
NOISE = ('FutureWarning', 'google.api_core', 'Unable to register', 'cuda_')


def distillery(*arguments, home, cwd, timeout=900):
  """Runs the installed console script as a user would: no Keras setting of our own."""
  command = os.path.join(os.path.dirname(sys.executable), 'distillery')
  environment = {key: value for key, value in os.environ.items()
                 if key not in ('TF_USE_LEGACY_KERAS', 'TF_CPP_MIN_LOG_LEVEL')}
  environment['DISTILLERY_HOME'] = str(home)
  return subprocess.run([command, *arguments], cwd=str(cwd), env=environment,
                        capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope='module')
def iris_run(tmp_path_factory):
  tmp_path = tmp_path_factory.mktemp('cli')
  data = helpers.write_iris_csv(tmp_path / 'iris')
  # Rows without the label, as serving logs hold them: the Distiller's transfer set.
  logs = helpers.write_iris_csv(tmp_path / 'logs', label=False)
  workdir = tmp_path / 'elsewhere'
  workdir.mkdir()
  result = distillery('run', '--dataset', 'csv', '--data', data, '--label', 'variety',
                      '--unlabelled', logs,
                      '--train-steps', '200', '--student-train-steps', '1000',
                      # Any candidate clearly above the majority class passes (the gate's
                      # McNemar test: on 20 test rows a 200-step student at 0.60 against a
                      # majority of 0.55 is within noise), so the smallest (an int8 TFLite
                      # folder) is pushed.
                      '--max-accuracy-drop', '1.0', home=tmp_path / 'home', cwd=workdir)
  return tmp_path, result


def test_help_answers_for_every_subcommand_without_loading_tensorflow(tmp_path):
  for arguments in ((), ('run',), ('compile',), ('report',)):
    result = distillery(*arguments, '--help', home=tmp_path, cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert 'usage: distillery' in result.stdout
  assert '--output' in distillery('compile', '--help', home=tmp_path, cwd=tmp_path).stdout


# What builds and runs a pipeline; checked in a fresh process, after building the whole chain.
PIPELINE_PROCESS = '''
import sys
from tfx.orchestration import metadata
from tfx.orchestration.local import local_dag_runner
from tfx_distillery.pipelines import datasets, local_runner, pipeline
taxi = datasets.resolve('taxi', sys.argv[1])
built = pipeline.create_pipeline(
    pipeline_name='p', pipeline_root=sys.argv[1], data_root=taxi.data_root,
    transform_module_file=taxi.transform_module_file,
    teacher_module_file=taxi.teacher_module_file, student_module_file=taxi.student_module_file,
    label_column=taxi.label_column,
    serving_model_dir=sys.argv[1], train_steps=1, schema_path=taxi.schema_file,
    metadata_connection_config=metadata.sqlite_metadata_connection_config(sys.argv[1] + '/m'))
ids = {component.id for component in built.components}
assert {'IngestionTransform', 'DistributedTrainer', 'Distiller', 'AtomicPusher'} <= ids, ids
loaded = sorted(name for name in sys.modules
                if name.split('.')[:2] == ['tfx', 'v1'] or name.split('.')[0] == 'kfp'
                or name.startswith('google.cloud.aiplatform'))
print(' '.join(loaded[:10]) or 'none')
'''


def test_a_pipeline_process_loads_tfx_modules_and_not_tfx_v1_kfp_or_its_cloud_clients(tmp_path):
  # TFX's public API `tfx.v1` loads kfp and Vertex's client library as well: 9 s of every
  # `distillery run`'s start, for a compile the local run never does.
  result = subprocess.run([sys.executable, '-c', PIPELINE_PROCESS, str(tmp_path)],
                          capture_output=True, text=True, timeout=300, check=False,
                          **helpers.child_process_options())
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.split() == ['none'], result.stdout


@pytest.mark.e2e  # long: make test-e2e
def test_a_run_pushes_under_the_home_and_the_console_holds_no_library_noise(iris_run):
  tmp_path, result = iris_run
  console = result.stdout + result.stderr
  assert result.returncode == 0, console
  root = tmp_path / 'home' / 'runs' / 'csv-iris'
  # Outputs under DISTILLERY_HOME, not the current directory.
  assert (root / 'metadata.sqlite').is_file() and not os.listdir(tmp_path / 'elsewhere')
  assert 'CsvExampleGen: started' in console and 'AtomicPusher: finished' in console
  assert 'pushed to: ' + str(tmp_path / 'home' / 'serving' / 'csv-iris') in console
  for noise in NOISE:
    assert noise not in console, noise
  # It went to the full log instead.
  assert 'FutureWarning' in (root / 'pipeline.log').read_text()


@pytest.mark.e2e  # long: make test-e2e
def test_unlabelled_rows_go_through_the_preflight_and_their_own_example_gen_to_the_distiller(
    iris_run):
  tmp_path, result = iris_run
  assert result.returncode == 0, result.stdout + result.stderr
  assert 'unlabelled: iris.csv: 150 rows' in result.stdout
  assert 'UnlabelledExampleGen: finished' in result.stdout
  root = tmp_path / 'home' / 'runs' / 'csv-iris'
  [metrics] = glob.glob(str(root / 'Distiller' / 'metrics' / '*' / 'metrics.json'))
  with open(metrics) as handle:
    metrics = json.load(handle)
  transfer_set = metrics['transfer_set']
  assert transfer_set['splits'] == ['unlabelled']
  assert transfer_set['examples'].startswith(str(root / 'UnlabelledExampleGen'))
  # No student module file: the Distiller sized its built-in student (#36 item 3); with the
  # budget at 1.0 the first, smallest share already fits.
  assert metrics['student']['builder'] == 'tfx_distillery.trainer_modules.builtin_student'
  assert metrics['size_search']['shares'] == [0.01, 0.03, 0.1, 0.3]
  assert metrics['size_search']['chosen_share'] == 0.01


def test_an_unlabelled_column_the_labelled_rows_lack_is_refused_before_anything_runs(tmp_path):
  data = helpers.write_iris_csv(tmp_path / 'iris')
  logs = tmp_path / 'logs'
  logs.mkdir()
  (logs / 'day1.csv').write_text('sepal_length,sepal_width,petal_length,petal_width,visitor\n'
                                 '5.1,3.5,1.4,0.2,7\n')
  result = distillery('run', '--dataset', 'csv', '--data', data, '--label', 'variety',
                      '--unlabelled', str(logs), home=tmp_path / 'home', cwd=tmp_path,
                      timeout=120)
  assert result.returncode == 2, result.stdout + result.stderr
  assert "day1.csv, line 1, column 'visitor'" in result.stdout + result.stderr
  assert not (tmp_path / 'home' / 'runs').exists() or not list(
      (tmp_path / 'home' / 'runs').glob('*/metadata.sqlite'))


@pytest.mark.e2e  # long: make test-e2e
def test_report_prints_the_last_runs_gate_table_and_report_path(iris_run):
  tmp_path, _ = iris_run
  result = distillery('report', home=tmp_path / 'home', cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  root = tmp_path / 'home' / 'runs' / 'csv-iris'
  assert 'chosen' in result.stdout and 'teacher' in result.stdout
  assert f'report: {root / "report.html"}' in result.stdout
  for noise in NOISE:
    assert noise not in result.stdout + result.stderr, noise


def test_report_without_a_run_names_what_is_missing(tmp_path):
  result = distillery('report', home=tmp_path / 'empty', cwd=tmp_path, timeout=60)
  assert result.returncode == 2
  assert 'last_run.json is missing' in result.stderr and 'distillery run' in result.stderr


@pytest.mark.e2e  # long: make test-e2e
def test_the_pushed_tflite_folder_serves_alone_after_the_run_is_deleted(iris_run, tmp_path):
  run_path, result = iris_run
  assert result.returncode == 0, result.stdout + result.stderr
  [pushed] = glob.glob(str(run_path / 'home' / 'serving' / 'csv-iris' / '[0-9]*'))
  with open(os.path.join(pushed, 'serving.json')) as handle:
    manifest = json.load(handle)
  assert manifest['format'] == 'tflite' and manifest['mode'] == 'full_integer'
  assert manifest['label_vocabulary'] and sorted(manifest['label_vocabulary']) == [
      'setosa', 'versicolor', 'virginica']
  assert manifest['input_names'] and manifest['num_classes'] == 3
  served = tmp_path / 'server' / 'model'
  shutil.copytree(pushed, served)
  # Raw rows as a client sends them: no label column.
  examples = [helpers.serialize({'sepal_length': [5.1], 'sepal_width': [3.5],
                                 'petal_length': [1.4], 'petal_width': [0.2]}),
              helpers.serialize({'sepal_length': [6.7], 'sepal_width': [3.0],
                                 'petal_length': [5.2], 'petal_width': [2.3]})]
  from tfx_distillery import load_tflite  # pylint: disable=import-outside-toplevel
  before = load_tflite(pushed).predict_raw(examples)
  shutil.rmtree(run_path / 'home')
  after = load_tflite(str(served)).predict_raw(examples)
  assert (before['classes'] == after['classes']).all()
  assert (before['logits'] == after['logits']).all()
  assert set(after['labels']) <= {'setosa', 'versicolor', 'virginica'}
  # The same rows as raw columns through model_raw.tflite (strings and all, no TensorFlow
  # path): the label vocabulary in serving.json names the classes.
  from tfx_distillery import load_raw_flatbuffer  # pylint: disable=import-outside-toplevel
  rows = [{'sepal_length': 5.1, 'sepal_width': 3.5, 'petal_length': 1.4, 'petal_width': 0.2},
          {'sepal_length': 6.7, 'sepal_width': 3.0, 'petal_length': 5.2, 'petal_width': 2.3}]
  raw = load_raw_flatbuffer(str(served)).predict_rows(rows)
  assert list(raw['labels']) == list(after['labels'])
