"""The built wheel, installed as a user installs it: outside the repository, beside the
project's dependencies but not its editable install."""

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from tests import helpers

# Long: a wheel built and installed, then TensorFlow imported in fresh processes outside the
# repository (make test-e2e).
pytestmark = pytest.mark.e2e

REPOSITORY = helpers.REPOSITORY_ROOT
SOURCES = ('pyproject.toml', 'README.md', 'tfx_distillery', 'components', 'pipelines',
           'trainer_modules')
# The repository folders the wheel maps into the tfx_distillery namespace.
MAPPED = {'components': 'tfx_distillery/components', 'pipelines': 'tfx_distillery/pipelines',
          'trainer_modules': 'tfx_distillery/trainer_modules'}


def clean_environment():
  """The user's shell: none of the repository's path or Keras settings."""
  return {key: value for key, value in os.environ.items()
          if key not in ('PYTHONPATH', 'TF_USE_LEGACY_KERAS', 'TF_CPP_MIN_LOG_LEVEL')}


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
  """Builds the wheel from a copy of the sources and installs it into a fresh venv."""
  tmp_path = tmp_path_factory.mktemp('wheel')
  source = tmp_path / 'source'
  source.mkdir()
  for name in SOURCES:
    path = os.path.join(REPOSITORY, name)
    if os.path.isdir(path):
      shutil.copytree(path, source / name, ignore=shutil.ignore_patterns('__pycache__'))
    else:
      shutil.copy(path, source / name)
  subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--quiet', '--no-deps',
                  '--no-build-isolation', '--wheel-dir', str(tmp_path / 'dist'), str(source)],
                 check=True, capture_output=True)
  [wheel] = glob.glob(str(tmp_path / 'dist' / 'tfx_distillery-*.whl'))
  venv = tmp_path / 'venv'
  base_python = getattr(sys, '_base_executable', sys.executable)
  subprocess.run([base_python, '-m', 'venv', '--without-pip', str(venv)], check=True)
  [site_packages] = glob.glob(str(venv / 'lib' / 'python3*' / 'site-packages'))
  # Plain path lines: the project's dependencies, without running the .pth files there
  # (one of them is the editable install, which would bring the repository back).
  dependency_folders = dict.fromkeys(
      [sysconfig.get_paths()['purelib']] +
      [path for path in sys.path if os.path.basename(path) == 'site-packages'])
  with open(os.path.join(site_packages, 'project_dependencies.pth'), 'w') as handle:
    handle.write(''.join(folder + '\n' for folder in dependency_folders))
  subprocess.run([sys.executable, '-m', 'pip', '--python', str(venv / 'bin' / 'python'),
                  'install', '--quiet', '--no-deps', wheel], check=True, capture_output=True)
  outside = tmp_path / 'user_project'
  outside.mkdir()
  return wheel, venv, outside


def run_in(venv, outside, *command, timeout=300):
  return subprocess.run(command, cwd=str(outside), env=clean_environment(),
                        capture_output=True, text=True, timeout=timeout, check=False)


def test_the_wheel_puts_only_tfx_distillery_at_top_level_with_every_package(installed):
  wheel, _, _ = installed
  names = zipfile.ZipFile(wheel).namelist()
  assert {name.split('/')[0] for name in names} == {
      'tfx_distillery', os.path.basename(wheel).split('-py3')[0] + '.dist-info'}
  for folder, target in MAPPED.items():
    for init in glob.glob(os.path.join(REPOSITORY, folder, '**', '__init__.py'),
                          recursive=True):
      relative = os.path.relpath(init, os.path.join(REPOSITORY, folder))
      assert f'{target}/{relative}' in names, f'{folder}/{relative} is not in the wheel'
  for schema in ('taxi', 'digits'):
    assert f'tfx_distillery/pipelines/schemas/{schema}.pbtxt' in names
  # Compiled by the installed package's beam_cluster for a local Flink cluster.
  assert 'tfx_distillery/pipelines/java/NothingToStage.java' in names


def test_the_installed_package_imports_and_finds_its_schemas_outside_the_repository(installed):
  _, venv, outside = installed
  script = (
      'import importlib.util, sys\n'
      'import tfx_distillery\n'
      'from tfx_distillery.pipelines import datasets\n'
      'print(tfx_distillery.__file__)\n'
      'print(datasets.schema_file("taxi"))\n'
      'print(datasets.module_file("taxi_teacher"))\n'
      'print([name for name in ("components", "pipelines", "trainer_modules")\n'
      '       if importlib.util.find_spec(name)])\n'
      'from tfx_distillery import Distiller, Pruner, Quantizer, load_tflite\n')
  result = run_in(venv, outside, str(venv / 'bin' / 'python'), '-c', script)
  assert result.returncode == 0, result.stderr
  package, schema, module, old_names = result.stdout.strip().splitlines()[-4:]
  for path in (package, schema, module):
    assert path.startswith(str(venv)), path
  assert os.path.isfile(schema)
  assert old_names == '[]'


def test_the_installed_command_answers_help_and_compiles_the_pipeline(installed):
  _, venv, outside = installed
  command = str(venv / 'bin' / 'distillery')
  help_result = run_in(venv, outside, command, '--help')
  assert help_result.returncode == 0 and 'compile' in help_result.stdout
  result = run_in(venv, outside, command, 'compile', '--output', 'build/pipeline.yaml',
                  '--pipeline-root', str(outside / 'root'), timeout=600)
  assert result.returncode == 0, result.stdout + result.stderr
  assert (outside / 'build' / 'pipeline.yaml').is_file()
  # The curated schema came from the installed package, staged for the cluster.
  staged = (outside / 'root' / 'schema' / 'schema.pbtxt').read_text()
  [installed_schema] = glob.glob(str(venv / 'lib' / 'python3*' / 'site-packages' /
                                     'tfx_distillery' / 'pipelines' / 'schemas' / 'taxi.pbtxt'))
  assert staged == open(installed_schema).read()
