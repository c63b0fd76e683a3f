"""The `distillery` command's quick answers: help, a pipeline process's imports, a refused
unlabelled folder, a report with no run. A whole run as a user starts it (a clean console,
the report, a pushed folder that serves alone) is in tests/reliability/test_faults.py, on a
messy CSV folder with unlabelled logs: one whole run serves both."""

import os
import subprocess
import sys

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


def test_report_without_a_run_names_what_is_missing(tmp_path):
  result = distillery('report', home=tmp_path / 'empty', cwd=tmp_path, timeout=60)
  assert result.returncode == 2
  assert 'last_run.json is missing' in result.stderr and 'distillery run' in result.stderr
