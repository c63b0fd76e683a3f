"""`distillery run --dataset mnist1d`: the paper's split as ExampleGen's splits, and the pool
through its own ExampleGen into the Distiller's transfer set."""

import glob
import json
import os

import pytest
from google.protobuf import json_format
from kfp.client import client as kfp_client

from tests.pipelines.test_cli import distillery
from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import kubeflow_runner

# Long: whole MNIST-1D runs (make test-e2e).
pytestmark = pytest.mark.e2e


@pytest.fixture(scope='module')
def mnist1d_run(tmp_path_factory, monkeypatch_module, mnist1d_draw_cache):
  tmp_path = tmp_path_factory.mktemp('mnist1d')
  monkeypatch_module.setenv('DISTILLERY_CACHE', str(mnist1d_draw_cache))
  result = distillery('run', '--dataset', 'mnist1d', '--pool-rows', '500',
                      '--train-steps', '300', '--student-train-steps', '300', '--seed', '3',
                      # Few steps: any candidate above the majority class may pass.
                      '--max-accuracy-drop', '1.0', home=tmp_path / 'home', cwd=tmp_path)
  return tmp_path, result


@pytest.fixture(scope='module')
def monkeypatch_module():
  with pytest.MonkeyPatch.context() as patch:
    yield patch


def test_the_papers_split_reaches_the_transform_and_the_pool_the_distiller(mnist1d_run,
                                                                          mnist1d_draw_cache):
  tmp_path, result = mnist1d_run
  console = result.stdout + result.stderr
  assert result.returncode == 0, console
  # The paper's 4,000 / 1,000 split as it is, and the eval draw: no hash split.
  assert 'eval: 1000 rows, test: 1000 rows, train: 4000 rows' in console
  assert 'UnlabelledExampleGen: finished' in console
  root = tmp_path / 'home' / 'runs' / 'mnist1d'
  [metrics_path] = glob.glob(str(root / 'Distiller' / 'metrics' / '*' / 'metrics.json'))
  with open(metrics_path) as handle:
    metrics = json.load(handle)
  assert metrics['transfer_set']['splits'] == ['unlabelled']
  assert metrics['transfer_set']['examples'].startswith(str(root / 'UnlabelledExampleGen'))
  assert metrics['student_parameters'] == 480
  assert 'pushed to: ' + str(tmp_path / 'home' / 'serving' / 'mnist1d') in console
  # Drawn into the cache that DISTILLERY_CACHE names, for the next run to read.
  assert glob.glob(str(mnist1d_draw_cache / 'mnist1d-5000-seed42-*.npz'))


def test_pool_rows_is_for_mnist1d_only(tmp_path):
  result = distillery('run', '--dataset', 'taxi', '--pool-rows', '10', home=tmp_path,
                      cwd=tmp_path, timeout=60)
  assert result.returncode == 2
  assert '--pool-rows is for --dataset mnist1d only' in result.stderr
  result = distillery('run', '--dataset', 'mnist1d', '--pool-rows', '-1', home=tmp_path,
                      cwd=tmp_path, timeout=60)
  assert result.returncode == 2 and '--pool-rows must be >= 0' in result.stderr


def test_mnist1d_compiles_with_its_split_folders_and_its_pool_feeding_the_distiller(
    mnist1d_run, tmp_path, monkeypatch, mnist1d_draw_cache):
  # Here and not with the other compiles: it reads the draw the run above cached (the draw
  # alone takes 30 s), in the DISTILLERY_CACHE that the run's fixture set for this module.
  assert mnist1d_run and os.environ['DISTILLERY_CACHE'] == str(mnist1d_draw_cache)
  monkeypatch.setattr(datasets, 'MNIST1D_POOL_ROWS', 40)
  output = tmp_path / 'out' / 'pipeline.yaml'
  assert kubeflow_runner.main(['--output', str(output), '--image', 'example.com/distillery:1',
                               '--dataset', 'mnist1d',
                               '--pipeline-root', str(tmp_path / 'root')]) == 0
  document = kfp_client._extract_pipeline_yaml(str(output))  # pylint: disable=protected-access
  spec = json_format.MessageToDict(document.pipeline_spec)
  tasks = spec['root']['dag']['tasks']
  artifacts = tasks['Distiller']['inputs']['artifacts']
  assert artifacts['transfer_examples']['taskOutputArtifact']['producerTask'] == (
      'UnlabelledExampleGen')
  # ExampleGen reads the paper's split folders as they are: train/*, eval/*, test/*.
  example_gen = json.dumps(tasks['CsvExampleGen']['inputs']['parameters']['input_config'])
  for split in ('train', 'eval', 'test'):
    assert f'{split}/*' in example_gen, split
