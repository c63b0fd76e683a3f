"""DistributedTrainer: one export from many workers, parameter servers, kill and resume."""

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import psutil
import pytest
import tensorflow as tf
from tfx import v1 as tfx
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs

from tfx_distillery.components import DistributedTrainer
from tfx_distillery.components.distributed_trainer import cluster
from tfx_distillery.components.distributed_trainer import executor as trainer_executor
from tfx_distillery.components.common import strategy as strategy_lib
from tfx_distillery.components.common import ports
from tfx_distillery.pipelines import datasets
from tests import helpers

TABULAR_TEACHER = datasets.module_file('tabular_teacher')
STOCK_STYLE_MODULE = os.path.join(os.path.dirname(__file__), 'stock_style_module.py')
EARLY_STOPPING_MODULE = os.path.join(os.path.dirname(__file__), 'early_stopping_module.py')


@pytest.fixture
def progress_lines():
  with helpers.ProgressLines() as lines:
    yield lines


def run_executor(data, output_dir, module_file=TABULAR_TEACHER, train_steps=40, epochs=2,
                 config=None, **settings):
  examples, graph, _ = data
  model = standard_artifacts.Model()
  model.uri = os.path.join(output_dir, 'model')
  model_run = standard_artifacts.ModelRun()
  model_run.uri = os.path.join(output_dir, 'model_run', str(time.monotonic_ns()))
  for artifact in (model, model_run):
    os.makedirs(artifact.uri, exist_ok=True)
  exec_properties = {
      'train_args': json.dumps({'num_steps': train_steps}),
      'eval_args': json.dumps({'num_steps': 2}),
      'module_file': module_file,
      'custom_config': json.dumps({'label_column': 'species', 'epochs': epochs,
                                   'batch_size': 32, **(config or {})}),
      'strategy': settings.get('strategy', 'multi_worker_mirrored'),
      'num_workers': settings.get('num_workers', 1),
      'num_parameter_servers': settings.get('num_parameter_servers', 0),
      'communication': settings.get('communication', 'auto'),
      'progress_timeout_seconds': settings.get('progress_timeout_seconds', 600.0),
      'random_seed': settings.get('random_seed'),
      'micro_batches': settings.get('micro_batches', 1),
      'stages': settings.get('stages'),
      'recompute': int(settings.get('recompute', False)),
      'logical_devices': int(settings.get('logical_devices', False)),
  }
  trainer_executor.Executor().Do(
      {standard_component_specs.EXAMPLES_KEY: [examples],
       standard_component_specs.TRANSFORM_GRAPH_KEY: [graph]},
      {standard_component_specs.MODEL_KEY: [model],
       standard_component_specs.MODEL_RUN_KEY: [model_run]}, exec_properties)
  return model.uri, model_run.uri


@pytest.fixture(scope='module')
def seeded_two_worker_run(data, tmp_path_factory):
  """One two-worker run with seed 5, with a temporary folder of its own (`private_temp_dir`):
  the export test reads it, and the seed test runs it again. Worker processes are most of a
  run's cost, so the two tests share it."""
  root = tmp_path_factory.mktemp('seeded')
  temporary = root / 'temporary'
  temporary.mkdir()
  with pytest.MonkeyPatch.context() as patch, helpers.ProgressLines() as lines:
    patch.setattr(tempfile, 'tempdir', str(temporary))
    patch.setenv('TMPDIR', str(temporary))
    model_uri, model_run_uri = run_executor(data, str(root / 'run'), num_workers=2,
                                            random_seed=5)
  return model_uri, model_run_uri, lines, temporary


@pytest.mark.e2e  # long: make test-e2e
def test_two_seeded_workers_train_the_same_weights_twice_and_record_the_seed(
    data, tmp_path, seeded_two_worker_run):
  first, first_run, _, _ = seeded_two_worker_run
  again, _ = run_executor(data, str(tmp_path / 'again'), num_workers=2, random_seed=5)
  first_weights, again_weights = helpers.model_weights(first), helpers.model_weights(again)
  assert first_weights.keys() == again_weights.keys()
  for name, value in first_weights.items():
    assert (value == again_weights[name]).all(), name
  with open(os.path.join(first_run, 'metrics.json')) as handle:
    assert json.load(handle)['random_seed'] == 5


def serves_predictions(model_uri, raw_rows):
  loaded = tf.saved_model.load(os.path.join(model_uri, 'Format-Serving'))
  serialized = [helpers.serialize({key: value for key, value in row.items()
                                   if key != 'species'}) for row in raw_rows]
  outputs = loaded.signatures['serving_default'](examples=tf.constant(serialized))
  classes = outputs['classes'].numpy()
  return len(classes) == len(raw_rows) and set(classes) <= {0, 1}


@pytest.fixture
def private_temp_dir(tmp_path, monkeypatch):
  """The executor's temporary folder, this test's alone: what another test running beside it
  leaves in the shared one (a worker killed on purpose) can not be mistaken for ours."""
  folder = tmp_path / 'temporary'
  folder.mkdir()
  monkeypatch.setattr(tempfile, 'tempdir', str(folder))  # The executor's, in this process.
  monkeypatch.setenv('TMPDIR', str(folder))  # The workers'.
  return folder


def left_behind(folder):
  """Our folders left in `folder`: a job's (its heartbeats, the other workers' scratch) or a
  worker's own."""
  return [name for name in os.listdir(folder) if name.startswith('distillery-')]


@pytest.mark.e2e  # long: make test-e2e
def test_two_workers_export_exactly_one_model_and_it_serves(data, seeded_two_worker_run):
  model_uri, model_run_uri, progress_lines, temporary = seeded_two_worker_run
  assert os.listdir(model_uri) == ['Format-Serving']
  assert serves_predictions(model_uri, data[2][:50])
  with open(os.path.join(model_run_uri, 'metrics.json')) as handle:
    metrics = json.load(handle)
  assert metrics['global_batch_size'] == 64  # 32 per replica x 2 workers
  assert glob.glob(os.path.join(model_run_uri, 'train', 'events.out.tfevents*'))
  assert any(line.startswith('[worker 1] ') for line in progress_lines)
  assert any('global batch 64 = 32 per replica x 2' in line for line in progress_lines)
  assert any('all-reduce' in line and 'forward and backward pass' in line
             for line in progress_lines)
  # The communication share is the timed gradient all-reduce over the measured step.
  profile = metrics['step_profile']
  assert profile['all_reduce_ms'] > 0 and profile['step_ms'] > 0
  assert profile['communication_share'] == pytest.approx(
      min(1.0, profile['all_reduce_ms'] / profile['step_ms']))
  assert profile['suggested_per_replica_batch'] >= 32
  # Worker 1 saved a copy of the model into scratch under the job's folder: all gone.
  assert not left_behind(temporary)


@pytest.mark.e2e  # long: make test-e2e
def test_parameter_server_with_two_workers_trains(data, tmp_path, progress_lines):
  model_uri, _ = run_executor(data, str(tmp_path), strategy='parameter_server', num_workers=2,
                              num_parameter_servers=1)
  assert serves_predictions(model_uri, data[2][:20])
  assert any('ParameterServerStrategy' in line for line in progress_lines)


def test_a_stock_style_module_runs_unchanged_with_one_worker(data, tmp_path):
  model_uri, _ = run_executor(data, str(tmp_path), module_file=STOCK_STYLE_MODULE, train_steps=5)
  assert tf.io.gfile.exists(os.path.join(model_uri, 'Format-Serving', 'saved_model.pb'))


def what_run_fn_saw(model_run_uri):
  with open(os.path.join(model_run_uri, 'seen.json')) as handle:
    return json.load(handle)


def test_a_users_run_fn_gets_early_stopping_from_the_helper(data, tmp_path):
  """The README's run_fn: patience 1 stops it and keeps the epoch of lowest eval loss."""
  _, model_run_uri = run_executor(data, str(tmp_path), module_file=EARLY_STOPPING_MODULE,
                                  train_steps=80, config={'early_stopping_patience': 1})
  seen = what_run_fn_saw(model_run_uri)
  losses = seen['val_loss']
  assert seen['stopping']['patience'] == 1
  # It stopped before its 8 epochs, one epoch after the best, whose weights it kept.
  assert len(losses) < 8
  assert seen['stopping']['best_epoch'] == losses.index(min(losses)) + 1 == len(losses) - 1
  assert seen['final_eval_loss'] == pytest.approx(min(losses), rel=1e-4)


def test_a_users_run_fn_trains_as_before_without_early_stopping(data, tmp_path):
  _, model_run_uri = run_executor(data, str(tmp_path), module_file=EARLY_STOPPING_MODULE,
                                  train_steps=80)
  seen = what_run_fn_saw(model_run_uri)
  assert seen['stopping'] is None and len(seen['val_loss']) == 8


def training_processes():
  """Worker processes started by this test process (not by other runs on the machine)."""
  processes = []
  for process in psutil.Process().children(recursive=True):
    try:
      command = process.cmdline()
    except psutil.NoSuchProcess:
      continue
    if 'tfx_distillery.components.distributed_trainer.worker' in ' '.join(command):
      processes.append((process, command))
  return processes


@pytest.mark.serial  # a bound on time: alone, after the rest
@pytest.mark.e2e  # long: make test-e2e
def test_a_killed_worker_fails_the_run_fast_and_a_rerun_resumes(data, tmp_path, progress_lines,
                                                                private_temp_dir):
  errors = []

  def train():
    try:
      run_executor(data, str(tmp_path), num_workers=2, train_steps=600, epochs=6)
    except RuntimeError as error:
      errors.append(error)

  thread = threading.Thread(target=train)
  thread.start()
  deadline = time.monotonic() + 240
  while not any('epoch 2/6' in line for line in progress_lines):
    assert time.monotonic() < deadline and thread.is_alive(), progress_lines[-5:]
    time.sleep(0.2)
  [victim] = [process for process, command in training_processes()
              if command[-2:] == ['worker', '1']]
  victim.send_signal(signal.SIGKILL)
  killed_at = time.monotonic()
  thread.join(timeout=60)
  assert not thread.is_alive()
  assert time.monotonic() - killed_at < 30
  assert errors and 'worker 1 was killed by signal 9' in str(errors[0])
  assert not training_processes()
  # Killed, worker 1 cleaned nothing up; its scratch was in the job's folder, removed with it.
  assert not left_behind(private_temp_dir)

  _, model_run_uri = run_executor(data, str(tmp_path), num_workers=2, train_steps=600,
                                  epochs=6)
  with open(os.path.join(model_run_uri, 'metrics.json')) as handle:
    metrics = json.load(handle)
  # It resumes after the last backed-up epoch: epoch 1 at least. Epoch 2's progress line can
  # come before its backup is written, so the kill may leave only epoch 1 backed up.
  assert metrics['first_epoch'] >= 2
  assert metrics['epochs_run'] == 6 - metrics['first_epoch'] + 1
  assert not glob.glob(os.path.join(tmp_path, 'model_run', 'backup-*'))


def make(**kwargs):
  return DistributedTrainer(examples=helpers.channel(standard_artifacts.Examples),
                            transform_graph=helpers.channel(standard_artifacts.TransformGraph),
                            module_file=TABULAR_TEACHER, **kwargs)


def test_it_has_every_input_and_output_of_trainer():
  component = make(num_workers=2)
  stock = tfx.components.Trainer(examples=helpers.channel(standard_artifacts.Examples),
                                 transform_graph=helpers.channel(standard_artifacts.TransformGraph),
                                 module_file=TABULAR_TEACHER)
  assert set(component.outputs) == set(stock.outputs) == {'model', 'model_run'}
  assert set(component.spec.INPUTS) == set(stock.spec.INPUTS)
  assert component.exec_properties['strategy'] == 'multi_worker_mirrored'
  assert component.exec_properties['num_workers'] == 2


@pytest.mark.parametrize('kwargs, message', [
    ({'num_workers': 0}, 'num_workers must be an integer >= 1; got 0'),
    ({'strategy': 'horovod'}, 'strategy must be one of one_device, mirrored, '
                              'multi_worker_mirrored, parameter_server'),
    ({'strategy': 'parameter_server'}, "strategy 'parameter_server' needs "
                                       'num_parameter_servers >= 1'),
    ({'num_parameter_servers': 1}, 'num_parameter_servers is only used by'),
    ({'communication': 'mpi'}, 'communication must be one of auto, ring, nccl, '
                               'reduce_to_one_device'),
    ({'strategy': 'mirrored', 'communication': 'ring'},
     "communication 'ring' is a multi-worker collective"),
    ({'communication': 'reduce_to_one_device'},
     "communication 'reduce_to_one_device' is strategy 'mirrored''s"),
    ({'strategy': 'mirrored', 'num_workers': 2}, "strategy 'mirrored' runs on one machine"),
])
def test_bad_arguments_fail_at_construction_naming_the_parameter(kwargs, message):
  with pytest.raises(ValueError, match=message):
    make(**kwargs)


@pytest.mark.parametrize('patience', [0, -1, 1.5, True, '2'])
def test_early_stopping_patience_must_be_a_whole_number_of_epochs(patience):
  with pytest.raises(ValueError, match='early_stopping_patience must be an integer >= 1'):
    make(early_stopping_patience=patience)


def test_early_stopping_patience_reaches_run_fn_through_custom_config():
  component = make(early_stopping_patience=3, custom_config={'epochs': 9})
  assert json.loads(component.exec_properties['custom_config']) == {
      'epochs': 9, 'early_stopping_patience': 3}
  assert 'early_stopping_patience' not in (json.loads(
      make().exec_properties['custom_config'] or 'null') or {})
  with pytest.raises(ValueError, match='early_stopping_patience=3 and custom_config'):
    make(early_stopping_patience=3, custom_config={'early_stopping_patience': 5})


def test_no_free_port_is_a_clear_error(monkeypatch):
  def refuse(self, address):
    raise OSError(98, 'Address already in use')
  monkeypatch.setattr(ports.socket.socket, 'bind', refuse)
  with pytest.raises(RuntimeError, match='no free port on 127.0.0.1: num_workers'):
    cluster.pick_free_ports(3)


def test_tasks_are_laid_out_per_strategy():
  mwms = strategy_lib.TrainingSettings(num_workers=3)
  assert [task.label for task in cluster.plan_tasks(mwms, [1, 2, 3])] == [
      'worker 0', 'worker 1', 'worker 2']
  ps = strategy_lib.TrainingSettings(strategy='parameter_server', num_workers=2,
                                     num_parameter_servers=1)
  tasks = cluster.plan_tasks(ps, [1, 2, 3, 4])
  assert [(task.label, task.trains) for task in tasks] == [
      ('chief 0', True), ('worker 0', False), ('worker 1', False), ('ps 0', False)]
  assert cluster.cluster_spec(tasks)['ps'] == ['127.0.0.1:4']


def test_vertex_training_compiles_to_worker_pools_in_a_kubeflow_dag(tmp_path):
  example_gen = tfx.components.CsvExampleGen(input_base=str(tmp_path / 'data'))
  trainer = DistributedTrainer(
      examples=example_gen.outputs['examples'], module_file=TABULAR_TEACHER,
      strategy='multi_worker_mirrored', num_workers=4,
      vertex_training={'project': 'my-project', 'region': 'europe-west4',
                       'image': 'europe-docker.pkg.dev/my-project/distillery:latest',
                       'accelerator_type': 'NVIDIA_TESLA_T4', 'accelerator_count': 2})
  output = tmp_path / 'pipeline.json'
  runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
      config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
          default_image='distillery:test'),
      output_filename=str(output))
  runner.run(tfx.dsl.Pipeline(pipeline_name='vertex-compile', pipeline_root=str(tmp_path / 'root'),
                              components=[example_gen, trainer]))
  compiled = json.loads(output.read_text())
  parameters = compiled['pipelineSpec']['root']['dag']['tasks']['DistributedTrainer']['inputs'][
      'parameters']
  vertex = json.loads(
      parameters['vertex_training']['runtimeValue']['constantValue']['stringValue'])
  pools = vertex['worker_pool_specs']
  assert [pool['replica_count'] for pool in pools] == [1, 3]
  assert pools[0]['machine_spec']['accelerator_count'] == 2
  assert vertex['region'] == 'europe-west4'


def test_vertex_training_without_an_image_is_rejected():
  with pytest.raises(ValueError, match='vertex_training needs image'):
    make(vertex_training={'project': 'p', 'region': 'r'})


def test_parameter_server_pools_put_servers_in_pool_two():
  pools = strategy_lib.worker_pool_specs('parameter_server', 3, 2, 'image')
  assert [pool['replica_count'] for pool in pools] == [1, 3, 2]


def test_settings_follow_tf_config_on_a_cluster_backend(monkeypatch):
  monkeypatch.delenv(strategy_lib.ENVIRONMENT_VARIABLE, raising=False)
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'chief': ['a:1'], 'worker': ['b:1', 'c:1']},
      'task': {'type': 'worker', 'index': 1}}))
  settings = strategy_lib.settings()
  assert settings.strategy == 'multi_worker_mirrored' and settings.num_workers == 3
  assert not settings.is_chief
  monkeypatch.delenv('TF_CONFIG')
  assert strategy_lib.settings().strategy == 'one_device'


def test_a_worker_loads_the_executors_it_runs_and_not_all_of_tfx():
  # A worker process runs the Trainer's or the Distiller's executor; TFX's public API
  # (tfx.v1, with its cloud extensions) would add seconds to each worker's start-up.
  # Serving a pushed folder loads neither TFX nor TensorFlow.
  code = ('import sys\n'
          'from tfx_distillery import load_tflite\n'
          'if "tensorflow" in sys.modules:\n'
          '  sys.exit("load_tflite loaded TensorFlow")\n'
          'import tfx_distillery.components.distributed_trainer.worker\n'
          'import tfx_distillery.components.distiller.executor\n'
          'import tfx_distillery.components.distributed_trainer.executor\n'
          'from tfx_distillery.components.distributed_trainer import strategy_for\n'
          'loaded = sorted(name for name in sys.modules if name.startswith("tfx.v1"))\n'
          'if loaded:\n'
          '  sys.exit("loaded: " + " ".join(loaded))\n')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=300, check=False, **helpers.child_process_options())
  assert result.returncode == 0, result.stderr[-2000:]
