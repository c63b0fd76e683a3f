"""The local Flink/Spark cluster's refusals: engine, endpoint, Java, job server version."""

import json
import logging
import os
import socket
import stat
import subprocess
import sys
import time
import zipfile

import grpc

import pytest

from tfx_distillery.components.common import ports
from tfx_distillery.pipelines import beam_cluster
from tfx_distillery.pipelines import cli
from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import kubeflow_runner
from tfx_distillery.pipelines import local_runner
from tfx_distillery.pipelines import pipeline


def test_an_unknown_engine_is_refused_naming_the_ones_we_support(capsys):
  with pytest.raises(SystemExit) as exit_info:
    cli.main(['run', '--dataset', 'taxi', '--beam-runner', 'dataflow'])
  assert exit_info.value.code == 2
  error = capsys.readouterr().err
  assert "--beam-runner: invalid choice: 'dataflow'" in error
  assert "'direct', 'flink', 'spark'" in error
  with pytest.raises(ValueError, match='--beam-runner must be one of flink, spark'):
    beam_cluster.check_engine('samza')


def test_an_endpoint_needs_an_engine_and_host_port(capsys):
  for arguments, message in (
      (['--beam-endpoint', 'localhost:8099'], "--beam-endpoint is for --beam-runner='flink' "
       "or 'spark'"),
      (['--beam-runner', 'flink', '--beam-endpoint', 'localhost'], 'must be HOST:PORT'),
      (['--beam-runner', 'flink', '--beam-environment-type', 'DOCKER'],
       '--beam-environment-type is for --beam-endpoint (your cluster)'),
      (['--beam-runner', 'spark', '--beam-endpoint', 'h:8099', '--beam-environment-type',
        'EXTERNAL'], '--beam-environment-type EXTERNAL needs --beam-environment-config')):
    with pytest.raises(SystemExit):
      cli.main(['run', '--dataset', 'taxi', *arguments])
    assert message in capsys.readouterr().err


def test_an_endpoint_that_does_not_answer_is_refused_within_the_bound_naming_it():
  with socket.socket() as handle:  # A port that nothing listens on once closed.
    handle.bind(('127.0.0.1', 0))
    port = handle.getsockname()[1]
  start = time.monotonic()
  with pytest.raises(beam_cluster.ClusterError,
                     match=f'--beam-endpoint 127.0.0.1:{port}: no job server answered within 2 s'):
    beam_cluster.check_endpoint(f'127.0.0.1:{port}', timeout_s=2)
  assert time.monotonic() - start < 10


def test_an_endpoint_where_something_else_listens_is_refused_as_not_a_job_server():
  """A TCP connection is not a job server: Flink's REST port (8081) given for the job
  server's (8099) accepts one, and every Beam stage would then fail on its first job."""
  with socket.socket() as listener:
    listener.bind(('127.0.0.1', 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    with pytest.raises(beam_cluster.ClusterError,
                       match=f'--beam-endpoint 127.0.0.1:{port}: something listens there, but '
                             'it is not a Beam job server .*by default 8099'):
      beam_cluster.check_endpoint(f'127.0.0.1:{port}', timeout_s=2)


def test_a_start_whose_ports_are_taken_every_time_stops_after_its_attempts(tmp_path, monkeypatch):
  """The retry on new ports is bounded: a start that finds a port taken each time fails,
  naming the port and the attempts, with the logs kept."""
  monkeypatch.setattr(beam_cluster, 'check_java', lambda: 17)
  monkeypatch.setattr(beam_cluster, 'fetch_job_server', lambda engine, log: str(tmp_path))
  monkeypatch.setattr(beam_cluster, 'check_job_server_version', lambda lib_dir, engine: None)
  monkeypatch.setattr(beam_cluster, 'fetch_engine', lambda engine, log: str(tmp_path))
  attempts = []

  def taken_each_time(*unused):
    attempts.append(len(attempts) + 1)
    raise beam_cluster._PortTaken(f'another process took port {1000 + len(attempts)}')  # pylint: disable=protected-access
  monkeypatch.setattr(beam_cluster, '_start_once', taken_each_time)
  lines = []
  with pytest.raises(beam_cluster.ClusterError,
                     match='took port 1003; the same on each of 3 starts, on new ports each '
                           'time. Logs in '):
    beam_cluster.start('spark', str(tmp_path / 'cluster'), log=lines.append)
  assert attempts == [1, 2, 3]
  assert [line.split(';')[-1] for line in lines] == [' starting again on new ports (2 of 3)',
                                                      ' starting again on new ports (3 of 3)']


def _fake_cluster(tmp_path, monkeypatch, job_server_exit_status):
  """Starts through `start`'s real path with stand-in processes: an engine that sleeps and a
  job server that exits at once with `job_server_exit_status`. Returns the starts made."""
  monkeypatch.setattr(beam_cluster, 'check_java', lambda: 17)
  monkeypatch.setattr(beam_cluster, 'fetch_job_server', lambda engine, log: str(tmp_path))
  monkeypatch.setattr(beam_cluster, 'check_job_server_version', lambda lib_dir, engine: None)
  monkeypatch.setattr(beam_cluster, 'fetch_engine', lambda engine, log: str(tmp_path))
  starts = []

  def processes(engine_home, job_server, work_dir, log, slots):
    starts.append(work_dir)
    logs = os.path.join(work_dir, 'logs')
    engine = beam_cluster.Process('spark master', ['sleep', '60'],
                                  os.path.join(logs, 'master.log'))

    def job_server_process(job_port, artifact_port, expansion_port):
      return beam_cluster.Process('spark job server',
                                  ['sh', '-c', f'exit {job_server_exit_status}'],
                                  os.path.join(logs, 'job-server.log'))
    return [engine], job_server_process, 'http://127.0.0.1:1', lambda: True, []
  monkeypatch.setattr(beam_cluster, '_spark_processes', processes)
  return starts


def test_a_job_server_that_exits_without_a_word_is_started_again_on_new_ports(
    tmp_path, monkeypatch):
  """Beam's job server exits with status 0, logging nothing, when it cannot open a port: in
  CI one was held for a moment by another process, free again when the failed start looked.
  That start is made again on new ports (bounded), not failed at once."""
  starts = _fake_cluster(tmp_path, monkeypatch, job_server_exit_status=0)
  lines = []
  with pytest.raises(beam_cluster.ClusterError,
                     match=r"Beam's spark job server exited with status 0 before it answered "
                           r'on 127\.0\.0\.1:\d+: it does so when it cannot open its ports.*'
                           'the same on each of 3 starts, on new ports each time'):
    beam_cluster.start('spark', str(tmp_path / 'cluster'), log=lines.append)
  assert len(starts) == 3
  assert [line.rsplit(';', 1)[-1] for line in lines] == [
      ' starting again on new ports (2 of 3)', ' starting again on new ports (3 of 3)']


def test_a_job_server_that_fails_is_not_started_again(tmp_path, monkeypatch):
  """A job server that fails with an error status failed for its own reason: one start, and
  the error names the process and its status."""
  starts = _fake_cluster(tmp_path, monkeypatch, job_server_exit_status=3)
  with pytest.raises(beam_cluster.ClusterError,
                     match='spark job server exited with status 3 before Beam'):
    beam_cluster.start('spark', str(tmp_path / 'cluster'), log=lambda line: None)
  assert len(starts) == 1


@pytest.mark.e2e  # starts a local Spark cluster (make engines)
def test_a_port_taken_between_its_choice_and_the_start_is_chosen_again(tmp_path, monkeypatch):
  """Ports are chosen free, then released for the cluster's processes to bind: another
  process can take one in between. In make test-e2e Flink's JobManager took the port chosen
  for Spark's job server; Spark's start saw something answer on it and called itself up,
  and its first job failed with grpc.FutureTimeoutError. Here this test takes the port: the
  start must see that no job server answers Beam's Job API there, and start again on new
  ports."""
  choose = beam_cluster.free_ports
  calls = []
  taken = []

  def take_the_job_port(count):
    chosen = choose(count)
    calls.append(count)
    # The second choice is the job server's ports, made once the engine is up.
    if len(calls) == 2 and not taken:
      listener = socket.socket()
      listener.bind(('127.0.0.1', chosen[0]))
      listener.listen(4)
      taken.append(listener)
    return chosen
  monkeypatch.setattr(beam_cluster, 'free_ports', take_the_job_port)
  lines = []
  try:
    with beam_cluster.start('spark', str(tmp_path / 'cluster'), log=lines.append) as cluster:
      taken_port = taken[0].getsockname()[1]
      assert cluster.endpoint != f'127.0.0.1:{taken_port}'
      assert beam_cluster.job_server_answers(cluster.endpoint)
      assert all(process.alive() for process in cluster.processes)
  finally:
    for listener in taken:
      listener.close()
  retries = [line for line in lines if 'starting again on new ports' in line]
  assert len(retries) == 1, lines
  assert (f'another process took port {taken_port} between its choice and the spark '
          "cluster's start (spark job server exited" in retries[0]), retries
  assert retries[0].endswith('starting again on new ports (2 of 3)')


def _fake_java(tmp_path, version_line: str) -> str:
  path = tmp_path / 'java'
  path.write_text(f'#!/bin/sh\necho \'{version_line}\' >&2\n')
  path.chmod(path.stat().st_mode | stat.S_IEXEC)
  return str(path)


@pytest.mark.parametrize('line, major', [('openjdk version "17.0.9" 2023-10-17', 17),
                                         ('java version "1.8.0_392"', 8),
                                         ('openjdk version "11.0.21" 2023-10-17', 11)])
def test_the_java_version_is_read_as_its_major(tmp_path, line, major):
  assert beam_cluster.java_major_version(_fake_java(tmp_path, line)) == major


def test_a_java_too_old_or_missing_is_refused_naming_what_is_needed(tmp_path):
  with pytest.raises(beam_cluster.ClusterError, match='Java 11 or newer is needed .* is Java 8'):
    beam_cluster.check_java(_fake_java(tmp_path, 'java version "1.8.0_392"'))
  with pytest.raises(beam_cluster.ClusterError, match='Java 11 or newer is needed .* could not '
                     'be run'):
    beam_cluster.check_java(str(tmp_path / 'no-java-here'))


def test_a_job_server_of_another_beam_version_is_refused_naming_both(tmp_path):
  lib = tmp_path / 'lib'
  lib.mkdir()
  (lib / 'beam-runners-flink-1.19-2.61.0.jar').write_bytes(b'')
  with pytest.raises(beam_cluster.ClusterError) as error:
    beam_cluster.check_job_server_version(str(lib), 'flink')
  assert 'job server is version 2.61.0' in str(error.value)
  assert f'the Beam SDK is {beam_cluster.beam_sdk_version()}' in str(error.value)
  (lib / 'beam-runners-flink-1.19-2.61.0.jar').rename(
      lib / f'beam-runners-flink-1.19-{beam_cluster.beam_sdk_version()}.jar')
  beam_cluster.check_job_server_version(str(lib), 'flink')


def test_the_portable_runner_runs_the_sdk_harness_in_the_stages_own_process():
  assert beam_cluster.portable_runner_args('flink', '127.0.0.1:8099') == [
      '--runner=PortableRunner', '--job_endpoint=127.0.0.1:8099',
      '--environment_type=LOOPBACK', '--parallelism=2']


def test_the_portable_runner_takes_the_harness_environment_a_remote_cluster_needs():
  assert beam_cluster.portable_runner_args('spark', 'spark-jobs:8099', 'EXTERNAL',
                                           'localhost:50000', parallelism=8) == [
      '--runner=PortableRunner', '--job_endpoint=spark-jobs:8099',
      '--environment_type=EXTERNAL', '--environment_config=localhost:50000',
      '--parallelism=8']


def taxi_pipeline(tmp_path, **beam):
  dataset = datasets.resolve('taxi', str(tmp_path))
  return pipeline.create_pipeline(
      pipeline_name='engines', pipeline_root=str(tmp_path / 'root'),
      data_root=dataset.data_root, transform_module_file=dataset.transform_module_file,
      teacher_module_file=dataset.teacher_module_file,
      student_module_file=dataset.student_module_file, label_column=dataset.label_column,
      label_key=dataset.label_key, serving_model_dir=str(tmp_path / 'serving'),
      schema_path=dataset.schema_file, **beam)


def test_create_pipeline_sends_the_beam_stages_to_the_engines_job_server(tmp_path):
  built = taxi_pipeline(tmp_path, beam_runner='flink', beam_endpoint='flink-jobs:8099',
                        beam_environment_type='EXTERNAL',
                        beam_environment_config='localhost:50000',
                        beam_pipeline_args=['--max_bundle_size=100'])
  # The engine's arguments come first and the user's own after them; no DirectRunner.
  assert built.beam_pipeline_args == [
      '--runner=PortableRunner', '--job_endpoint=flink-jobs:8099',
      '--environment_type=EXTERNAL', '--environment_config=localhost:50000',
      '--parallelism=2', '--max_bundle_size=100']
  direct = taxi_pipeline(tmp_path)
  assert direct.beam_pipeline_args[0].endswith('beam_runner.SwitchingDirectRunner')


@pytest.mark.parametrize('beam, message', [
    ({'beam_runner': 'samza'}, 'beam_runner must be one of flink, spark'),
    ({'beam_runner': 'flink'}, "beam_runner='flink' needs beam_endpoint"),
    ({'beam_endpoint': 'h:8099'}, "beam_endpoint is for beam_runner='flink' or 'spark'"),
    ({'beam_runner': 'spark', 'beam_endpoint': 'h'}, 'beam_endpoint must be HOST:PORT'),
    ({'beam_runner': 'spark', 'beam_endpoint': 'h:1', 'beam_environment_type': 'K8S'},
     'beam_environment_type must be one of LOOPBACK, PROCESS, EXTERNAL, DOCKER'),
    ({'beam_runner': 'flink', 'beam_endpoint': 'h:1',
      'beam_pipeline_args': ['--runner=DataflowRunner']},
     r'beam_pipeline_args name a runner \(--runner=DataflowRunner\) and beam_runner is'),
])
def test_create_pipeline_refuses_a_bad_engine_by_parameter_name(tmp_path, beam, message):
  with pytest.raises(ValueError, match=message):
    taxi_pipeline(tmp_path, **beam)


def test_a_compiled_pipeline_runs_its_beam_stages_on_the_cluster_with_a_worker_pool(tmp_path):
  output = tmp_path / 'pipeline.json'
  assert kubeflow_runner.main(['--output', str(output), '--pipeline-root',
                               str(tmp_path / 'root'), '--beam-runner', 'spark',
                               '--beam-endpoint', 'spark-jobs:8099']) == 0
  executors = json.loads(output.read_text())['pipelineSpec']['deploymentSpec']['executors']
  for stage in ('CsvExampleGen', 'StatisticsGen', 'IngestionTransform', 'AccuracyGate'):
    arguments = executors[f'{stage}_executor']['container']['args']
    for expected in ('--runner=PortableRunner', '--job_endpoint=spark-jobs:8099',
                     '--environment_type=EXTERNAL', '--environment_config=localhost:50000'):
      assert expected in arguments, (stage, expected)
    assert not [argument for argument in arguments if 'SwitchingDirectRunner' in argument]


def test_compile_refuses_an_engine_without_its_endpoint(tmp_path, capsys):
  with pytest.raises(SystemExit):
    kubeflow_runner.main(['--output', str(tmp_path / 'p.json'), '--beam-runner', 'flink'])
  assert "--beam-runner='flink' needs --beam-endpoint" in capsys.readouterr().err


def _record(name, error):
  try:
    raise error
  except Exception:  # pylint: disable=broad-except
    return logging.LogRecord(name, logging.ERROR, __file__, 1,
                             'Failed to read inputs in the data plane.', None, sys.exc_info())


class _Cancelled(grpc.RpcError):

  def __init__(self, code):
    super().__init__()
    self._code = code

  def code(self):
    return self._code


def test_the_console_hides_the_engines_data_plane_hang_ups_only():
  hides = local_runner.HidesDataPlaneHangUps()
  data_plane = 'apache_beam.runners.worker.data_plane'
  assert not hides.filter(_record(data_plane, _Cancelled(grpc.StatusCode.CANCELLED)))
  # Anything else still reaches the console: another status, another logger, no exception.
  assert hides.filter(_record(data_plane, _Cancelled(grpc.StatusCode.UNAVAILABLE)))
  assert hides.filter(_record(data_plane, RuntimeError('boom')))
  assert hides.filter(_record('apache_beam.runners.worker.sdk_worker',
                              _Cancelled(grpc.StatusCode.CANCELLED)))


def test_beam_parallelism_sets_the_engines_ways_and_the_direct_runners_processes(tmp_path):
  assert '--parallelism=1' in taxi_pipeline(
      tmp_path, beam_runner='spark', beam_endpoint='h:1', beam_parallelism=1).beam_pipeline_args
  direct = taxi_pipeline(tmp_path, beam_parallelism=2).beam_pipeline_args
  assert direct[1:] == ['--direct_running_mode=multi_processing', '--direct_num_workers=2']
  assert taxi_pipeline(tmp_path, beam_parallelism=1).beam_pipeline_args[1:] == [
      '--direct_running_mode=in_memory', '--direct_num_workers=1']
  with pytest.raises(ValueError, match='beam_parallelism must be an integer >= 1; got 0'):
    taxi_pipeline(tmp_path, beam_parallelism=0)


def test_run_refuses_a_parallelism_below_one(capsys):
  with pytest.raises(SystemExit):
    cli.main(['run', '--dataset', 'taxi', '--beam-runner', 'flink', '--beam-parallelism', '0'])
  assert '--beam-parallelism must be >= 1; got 0' in capsys.readouterr().err


def test_the_images_beam_boot_is_the_locked_sdks_version():
  # A worker pool whose boot is of another Beam version than the submitting SDK fails.
  repository = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  with open(os.path.join(repository, 'Dockerfile')) as handle:
    dockerfile = handle.read()
  with open(os.path.join(repository, 'requirements', 'lock.txt')) as handle:
    [locked] = [line.split('==')[1].split()[0] for line in handle
                if line.startswith('apache-beam==')]
  assert f'FROM apache/beam_python3.10_sdk:{locked} AS beam_sdk' in dockerfile
  assert locked == beam_cluster.beam_sdk_version()


def test_a_placeholder_endpoint_keeps_the_pipeline_the_same_whatever_the_port(tmp_path):
  # A local cluster's job server gets a new port each run; through an environment variable
  # that TFX resolves when the stage runs, the pipeline (and so its cache key) stays the same.
  from tfx.dsl.placeholder import runtime_placeholders  # pylint: disable=g-import-not-at-top
  endpoint = runtime_placeholders.environment_variable(beam_cluster.ENDPOINT_VARIABLE)
  arguments = taxi_pipeline(tmp_path, beam_runner='flink',
                            beam_endpoint=endpoint).beam_pipeline_args
  assert arguments[0] == '--runner=PortableRunner'
  assert not isinstance(arguments[1], str)
  assert 'DISTILLERY_BEAM_JOB_ENDPOINT' in str(arguments[1].encode())
  assert '--job_endpoint=' in str(arguments[1].encode())
  assert arguments[2:] == ['--environment_type=LOOPBACK', '--parallelism=2']


def test_no_free_port_for_the_cluster_is_a_clear_error(monkeypatch):
  def refuse(self, address):
    raise OSError(98, 'Address already in use')
  monkeypatch.setattr(ports.socket.socket, 'bind', refuse)
  with pytest.raises(beam_cluster.ClusterError, match="no free port on 127.0.0.1 for the "
                     "cluster's 5 listeners"):
    beam_cluster.free_ports(5)


def test_checking_the_engine_arguments_loads_no_beam_before_the_console_is_redirected():
  # Importing apache_beam loads its Google Cloud modules, whose FutureWarnings would reach the
  # console: the arguments are checked before the run sends library output to its log.
  checked = subprocess.run(
      [sys.executable, '-W', 'error::FutureWarning', '-c',
       'import sys\n'
       'from tfx_distillery.pipelines import local_runner\n'
       "local_runner.parse_args(['--dataset', 'taxi', '--beam-runner', 'flink', "
       "'--beam-parallelism', '1'])\n"
       "print(sorted(name for name in sys.modules if name.split('.')[0] in "
       "('apache_beam', 'tensorflow') or name.startswith(('google.auth', 'google.api_core'))))"],
      capture_output=True, text=True, timeout=120, check=False)
  assert checked.returncode == 0, checked.stderr
  assert checked.stdout.strip() == '[]'


@pytest.mark.e2e  # needs Flink's jars (make engines), as the engine tests do
def test_the_flink_taskmanager_has_memory_for_beams_data_plane_and_heap(tmp_path):
  """Flink caps a TaskManager's direct memory at its off-heap budget; Beam's gRPC data plane
  needs room there beside the network buffers, or a 1.5-million-row Transform fails with
  "OutOfMemoryError: Direct buffer memory" (benchmarks/beam_engines.py, 100x)."""
  engine_home = beam_cluster.fetch_engine('flink', log=lambda line: None)
  job_server = beam_cluster.fetch_job_server('flink', log=lambda line: None)
  processes, *_ = beam_cluster._flink_processes(  # pylint: disable=protected-access
      engine_home, job_server, str(tmp_path), lambda line: None, 2)
  taskmanagers = [process for process in processes
                  if process.role.startswith('flink taskmanager')]
  assert len(taskmanagers) == 2
  for process in taskmanagers:
    direct = [option for option in process.command
              if option.startswith('-XX:MaxDirectMemorySize=')]
    assert len(direct) == 1, process.command
    limit = int(direct[0].split('=', 1)[1])
    # Flink's own share: 256 MB of network buffers and 128 MB for the framework.
    assert limit >= (256 + 128 + 512) * 2**20, direct
    # And the tasks' heap: "Java heap space" at 1.5 million rows with 205 MB of it.
    heap = [option for option in process.command if option.startswith('-Xmx')]
    assert len(heap) == 1 and int(heap[0][len('-Xmx'):]) >= 1800 * 2**20, heap


def _scratch_cluster(work_dir, owns_work_dir):
  """A cluster whose processes have ended, with what Flink and Spark leave in a work folder."""
  for name in ('conf', 'logs', 'tmp', 'work/app-0/0'):
    os.makedirs(os.path.join(work_dir, name), exist_ok=True)
  with open(os.path.join(work_dir, 'work', 'app-0', '0', 'beam-job-server.jar'), 'wb') as jar:
    jar.write(b'0' * 1024)
  with open(os.path.join(work_dir, 'logs', 'worker.log'), 'w') as log:
    log.write('started\n')
  return beam_cluster.Cluster('spark', str(work_dir), [], '127.0.0.1:1', 'http://127.0.0.1:2',
                              owns_work_dir=owns_work_dir)


def test_a_stopped_cluster_removes_its_scratch_and_its_own_folder(tmp_path):
  """Flink's blob store and Spark's application folders are hundreds of MB a job: a full
  /tmp after a few runs failed CI. A folder start() made goes whole; a given one keeps its
  configuration and logs; a lost process's logs stay, since the error names them."""
  own = tmp_path / 'distillery-spark-own'
  _scratch_cluster(own, owns_work_dir=True).stop()
  assert not own.exists()

  given = tmp_path / 'given'
  _scratch_cluster(given, owns_work_dir=False).stop()
  assert sorted(os.listdir(given)) == ['conf', 'logs']
  assert os.listdir(given / 'logs') == ['worker.log']

  lost_folder = tmp_path / 'distillery-spark-lost'
  lost = _scratch_cluster(lost_folder, owns_work_dir=True)
  lost._lost = beam_cluster.Process('spark worker', ['true'], str(lost_folder / 'logs' / 'w'))  # pylint: disable=protected-access
  lost.stop()
  assert sorted(os.listdir(lost_folder)) == ['conf', 'logs']


def test_a_local_spark_cluster_stages_no_jars_its_executors_load_from_the_job_server(tmp_path):
  """Beam's Spark runner staged the job server's 420 MB classpath to every executor for every
  job (4-5 s a job): the executors take it from the job server's folder, and the jobs stage
  one empty jar, which Beam's runner accepts."""
  engine_home = beam_cluster.fetch_engine('spark', log=lambda line: None)
  job_server = tmp_path / 'job-server'
  _, job_server_process, *_ = beam_cluster._spark_processes(  # pylint: disable=protected-access
      engine_home, str(job_server), str(tmp_path), lambda line: None, 2)
  server = job_server_process(1, 2, 3)
  assert server.role == 'spark job server'
  assert (f'-Dspark.executor.extraClassPath={job_server / "lib" / "*"}'
          in server.command[:server.command.index('-cp')])
  job_server.mkdir()
  empty = beam_cluster._nothing_to_stage(str(job_server))  # pylint: disable=protected-access
  cluster = beam_cluster.Cluster('spark', str(tmp_path), [], '127.0.0.1:1', '', 2,
                                 files_to_stage=empty)
  assert cluster.beam_pipeline_args()[-1] == f'--files_to_stage={empty}'
  with zipfile.ZipFile(empty) as jar:
    assert jar.namelist() == []
  flink = beam_cluster.Cluster('flink', str(tmp_path), [], '127.0.0.1:1', '', 2)
  assert not any(argument.startswith('--files_to_stage') for argument in
                 flink.beam_pipeline_args())


def _classpath(process):
  return process.command[process.command.index('-cp') + 1].split(os.pathsep)


def test_a_local_flink_clusters_jobs_stage_nothing_and_find_beam_on_its_classpath(tmp_path):
  """Beam's Flink job server staged its 150 MB classpath for every job, whatever
  --files_to_stage said (10-18 s a job here): the jobs name a detector, compiled against the
  job server's Beam, that lists nothing to stage, and the JobManager and TaskManagers load
  Beam from the job server's folder (test_taxi_engines.py measures the disk it saves)."""
  engine_home = beam_cluster.fetch_engine('flink', log=lambda line: None)
  job_server = beam_cluster.fetch_job_server('flink', log=lambda line: None)
  detector = beam_cluster.stage_nothing_detector(job_server, log=pytest.fail)
  with zipfile.ZipFile(detector) as jar:
    assert jar.namelist() == ['tfx_distillery/beam/NothingToStage.class']
  processes, job_server_process, *_ = beam_cluster._flink_processes(  # pylint: disable=protected-access
      engine_home, job_server, str(tmp_path), lambda line: None, 2, detector)
  assert _classpath(job_server_process(1, 2, 3))[0] == detector
  assert [process.role for process in processes] == [
      'flink jobmanager', 'flink taskmanager 0', 'flink taskmanager 1']
  for process in processes:
    classpath = _classpath(process)
    # Flink's own jars first: the job server's copies of them are left out.
    assert classpath[0] == os.path.join(engine_home, 'lib', '*'), process.role
    names = [os.path.basename(entry) for entry in classpath[1:]]
    assert any(name.startswith('beam-runners-flink-') for name in names), names
    assert not [name for name in names if name.startswith('flink-')], names
  cluster = beam_cluster.Cluster('flink', str(tmp_path), [], '127.0.0.1:1', '', 2,
                                 resources_detector=beam_cluster.STAGE_NOTHING_CLASS)
  arguments = cluster.beam_pipeline_args()
  assert arguments[-1] == ('--pipeline_resources_detector_factory_class='
                           'tfx_distillery.beam.NothingToStage')
  assert not any(argument.startswith('--files_to_stage') for argument in arguments)
  # Beam's Python SDK passes on to the job only the options it knows: this one is known.
  from apache_beam.options import pipeline_options  # pylint: disable=g-import-not-at-top
  passed = pipeline_options.PipelineOptions(arguments).get_all_options(drop_default=True)
  assert passed['pipeline_resources_detector_factory_class'] == beam_cluster.STAGE_NOTHING_CLASS


def test_the_detector_is_compiled_once_and_again_when_its_source_changes(tmp_path, monkeypatch):
  job_server = tmp_path / 'job-server'
  (job_server / 'lib').mkdir(parents=True)
  real = beam_cluster.fetch_job_server('flink', log=lambda line: None)
  [core] = [name for name in os.listdir(os.path.join(real, 'lib'))
            if name.startswith('beam-sdks-java-core-')]
  os.symlink(os.path.join(real, 'lib', core), job_server / 'lib' / core)
  first = beam_cluster.stage_nothing_detector(str(job_server), log=pytest.fail)
  assert sorted(os.listdir(job_server)) == ['lib', os.path.basename(first)]

  def no_compile(*unused_args, **unused_kwargs):
    raise AssertionError('compiled again')
  with monkeypatch.context() as patched:
    patched.setattr(beam_cluster.subprocess, 'run', no_compile)
    assert beam_cluster.stage_nothing_detector(str(job_server), log=pytest.fail) == first
  source = tmp_path / 'NothingToStage.java'
  with open(beam_cluster.STAGE_NOTHING_SOURCE) as original:
    source.write_text(original.read() + '// changed\n')
  monkeypatch.setattr(beam_cluster, 'STAGE_NOTHING_SOURCE', str(source))
  second = beam_cluster.stage_nothing_detector(str(job_server), log=pytest.fail)
  assert second != first and os.path.exists(second)


def test_without_javac_or_a_beam_it_compiles_against_flink_jobs_stage_as_beam_does_and_say_so(
    tmp_path, monkeypatch):
  job_server = tmp_path / 'job-server'
  (job_server / 'lib').mkdir(parents=True)
  # An empty jar: javac finds no Beam to compile against.
  with zipfile.ZipFile(job_server / 'lib' / 'beam-sdks-java-core-2.62.0.jar', 'w'):
    pass
  lines = []
  assert beam_cluster.stage_nothing_detector(str(job_server), lines.append) is None
  [line] = lines
  assert line.startswith('beam_cluster: javac could not compile NothingToStage.java: ')
  assert 'package org.apache.beam.sdk.util.construction.resources does not exist' in line
  assert line.endswith('each Flink job stages Beam\'s jars (about 150 MB), 10-18 s more a job')
  monkeypatch.setattr(beam_cluster.shutil, 'which', lambda name: None)
  lines.clear()
  assert beam_cluster.stage_nothing_detector(str(job_server), lines.append) is None
  assert lines == ['beam_cluster: no javac on PATH: each Flink job stages Beam\'s jars '
                   '(about 150 MB), 10-18 s more a job']
  # Nothing half-written is left for a later start to load.
  assert os.listdir(job_server) == ['lib']
