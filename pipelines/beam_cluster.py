"""A local Apache Flink or Apache Spark cluster, in separate processes, for the Beam stages.

`start flink` runs a Flink JobManager and two TaskManagers of one slot each; `start spark`
runs a Spark master and one worker of two cores. Each comes with Beam's job server for that
engine, pointed at the cluster (never at an embedded one), so that a pipeline submitted
with `--runner=PortableRunner --job_endpoint=HOST:PORT` runs on the engine itself.

What runs is fetched once into a cache (`DISTILLERY_ENGINE_CACHE`, else
`~/.cache/tfx-distillery/engines`), through the registries alone:
- Beam's job server and its dependencies, at the Beam SDK's own version, with Maven
  (`mvn dependency:copy-dependencies` on a generated POM);
- the engine's own distribution from PyPI: Flink's from `apache-flink-libraries`, Spark's
  from `pyspark` (only their jars are used; nothing is installed into the environment).

Every process listens on loopback, on ports chosen free just before it starts; each is
checked with a bounded wait and dies with the process that started it (Linux's
PR_SET_PDEATHSIG). `stop` ends a cluster that `start` left running.

Usage:
  python -m tfx_distillery.pipelines.beam_cluster fetch [flink] [spark]
  python -m tfx_distillery.pipelines.beam_cluster start flink|spark [--state-dir DIR]
  python -m tfx_distillery.pipelines.beam_cluster stop [--state-dir DIR]
"""

import argparse
import contextlib
import ctypes
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from typing import Dict, Iterator, List, Optional, Sequence

from tfx_distillery.components.common import ports

ENGINES = ('flink', 'spark')
# The engine versions Beam's runners for this SDK are built against: Beam 2.62's Flink
# runner is beam-runners-flink-1.19 (Flink 1.19.0); its Spark runner, beam-runners-spark-3,
# runs on Spark 3 (3.5.3 here, the newest 3.5 that runs on Java 17 and Scala 2.12).
FLINK_VERSION = '1.19.0'
SPARK_VERSION = '3.5.3'
JOB_SERVER_ARTIFACTS = {
    'flink': f'beam-runners-flink-{FLINK_VERSION.rsplit(".", 1)[0]}',
    'spark': 'beam-runners-spark-3',
}
JOB_SERVER_MAIN = {
    'flink': 'org.apache.beam.runners.flink.FlinkJobServerDriver',
    'spark': 'org.apache.beam.runners.spark.SparkJobServerDriver',
}
# Flink 1.19 and Spark 3.5 run on Java 11 and 17.
MINIMUM_JAVA = 11
# The modules Flink and Spark reach into by reflection; Java 17 closes them by default.
JAVA_OPENS = tuple(f'--add-opens=java.base/{package}=ALL-UNNAMED' for package in (
    'java.lang', 'java.lang.invoke', 'java.lang.reflect', 'java.io', 'java.net', 'java.nio',
    'java.text', 'java.time', 'java.util', 'java.util.concurrent',
    'java.util.concurrent.atomic', 'java.util.concurrent.locks', 'sun.nio.ch', 'sun.nio.cs',
    'sun.security.action', 'sun.util.calendar'))
LOOPBACK = '127.0.0.1'
CACHE_VARIABLE = 'DISTILLERY_ENGINE_CACHE'
# Bounds: a fetch (hundreds of MB), a process to answer, a job server to accept jobs.
FETCH_TIMEOUT_S = 1800
START_TIMEOUT_S = 120
# Ports are chosen free, then released for the processes to bind: another process (a second
# local cluster started in the same few seconds) can take one in between. A start whose port
# was taken, or whose job server exited without a word (`_start_once`), starts again on new
# ports, this many times in all.
START_ATTEMPTS = 3
# Beam's job servers listen on this port by default; Flink's REST API (8081) is a common
# mistake for it.
DEFAULT_JOB_PORT = 8099
STOP_TIMEOUT_S = 30
# After a lost process the cluster is of no more use: its jobs are cancelled and its
# processes stopped within these, so that the run ends soon after it names the loss.
CANCEL_TIMEOUT_S = 5
LOST_STOP_TIMEOUT_S = 10
# Beam's job states in which a job has ended.
ENDED_JOB_STATES = ('DONE', 'FAILED', 'CANCELLED', 'DRAINED', 'UPDATED')
SLOTS = 2
STATE_FILE = 'cluster.json'
# Beam's Spark runner stages the job server's whole classpath (about 420 MB of jars) to every
# executor for every Beam job, into the worker's work folder: 4-5 s a job, and a full disk
# after a few runs. On the local cluster the executors get those jars from the job server's
# own folder instead (spark.executor.extraClassPath), and Beam stages this empty jar: its
# runner refuses a list with no existing file.
NOTHING_TO_STAGE = 'nothing-to-stage.jar'
# Beam's Flink job server stages its whole classpath (about 150 MB of jars) for every Beam
# job, whatever --files_to_stage says: the JobManager stores it and each TaskManager fetches
# it and loads Beam anew, 10-18 s a job here. A local Flink cluster has Beam's jars on its own
# classpath instead, and its jobs name this detector (java/NothingToStage.java, compiled
# against the job server's Beam into its folder once), which lists nothing to stage.
STAGE_NOTHING_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'java',
                                    'NothingToStage.java')
STAGE_NOTHING_CLASS = 'tfx_distillery.beam.NothingToStage'
STAGE_NOTHING_OPTION = 'pipeline_resources_detector_factory_class'
COMPILE_TIMEOUT_S = 120
# What a stopped cluster leaves in a work folder the caller gave: its configuration and logs.
# Flink's blob store and Spark's application folders (hundreds of MB) go with the cluster.
KEPT_AFTER_STOP = ('conf', 'logs')
_PR_SET_PDEATHSIG = 1


class ClusterError(RuntimeError):
  """A cluster that could not be fetched, started or reached; the message says which part."""

  # The message says what to do: the CLI adds no advice of its own.
  says_what_to_do = True


def beam_sdk_version() -> str:
  # From the installed distribution's metadata: importing apache_beam loads its Google
  # Cloud modules, whose FutureWarnings would reach the console before the run sends
  # library output to its log file.
  return importlib.metadata.version('apache-beam')


def cache_dir() -> str:
  return os.environ.get(CACHE_VARIABLE) or os.path.join(
      os.path.expanduser('~'), '.cache', 'tfx-distillery', 'engines')


def check_engine(engine: str) -> str:
  if engine not in ENGINES:
    raise ValueError(f'--beam-runner must be one of {", ".join(ENGINES)} (or direct); got '
                     f'{engine!r}.')
  return engine


def java_major_version(java: str = 'java') -> int:
  """The major version of `java` (17 for "17.0.9"), or a ClusterError naming what is needed."""
  try:
    completed = subprocess.run([java, '-version'], capture_output=True, text=True,
                               timeout=60, check=False)
  except (OSError, subprocess.TimeoutExpired) as error:
    raise ClusterError(f'Java {MINIMUM_JAVA} or newer is needed to run Flink and Spark, and '
                       f'{java!r} could not be run ({error}). Install a JDK or put its java '
                       'on PATH.') from error
  found = re.search(r'version "(\d+)(?:\.(\d+))?', completed.stderr + completed.stdout)
  if not found:
    raise ClusterError(f'Java {MINIMUM_JAVA} or newer is needed; {java} -version said: '
                       f'{(completed.stderr or completed.stdout).strip()[:200]!r}.')
  major = int(found.group(1))
  # Java 8 and older call themselves 1.8.
  return int(found.group(2)) if major == 1 else major


def check_java(java: str = 'java') -> int:
  major = java_major_version(java)
  if major < MINIMUM_JAVA:
    raise ClusterError(f'Java {MINIMUM_JAVA} or newer is needed to run Flink {FLINK_VERSION} '
                       f'and Spark {SPARK_VERSION}; {java} is Java {major}.')
  return major


# --- Fetching -------------------------------------------------------------------------------

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>tfx-distillery</groupId>
  <artifactId>{artifact}-classpath</artifactId>
  <version>{version}</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.beam</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


@contextlib.contextmanager
def _filled_in_place(final_dir: str) -> Iterator[str]:
  """A temporary folder beside `final_dir` that becomes it only when the block succeeds."""
  os.makedirs(os.path.dirname(final_dir), exist_ok=True)
  partial = tempfile.mkdtemp(prefix=os.path.basename(final_dir) + '.partial-',
                             dir=os.path.dirname(final_dir))
  try:
    yield partial
    os.replace(partial, final_dir)
  finally:
    shutil.rmtree(partial, ignore_errors=True)


def job_server_dir(engine: str) -> str:
  return os.path.join(cache_dir(), f'{JOB_SERVER_ARTIFACTS[engine]}-job-server-'
                      f'{beam_sdk_version()}')


def fetch_job_server(engine: str, log=print) -> str:
  """Beam's job server for `engine` at the SDK's version, with its dependencies (cached)."""
  final_dir = job_server_dir(engine)
  if os.path.isdir(final_dir):
    return final_dir
  maven = shutil.which('mvn')
  if not maven:
    raise ClusterError(f'Maven (mvn) is needed to fetch Beam\'s {engine} job server '
                       f'(org.apache.beam:{JOB_SERVER_ARTIFACTS[engine]}:{beam_sdk_version()}); '
                       'install it or put it on PATH.')
  artifact = JOB_SERVER_ARTIFACTS[engine]
  log(f'beam_cluster: fetching org.apache.beam:{artifact}:{beam_sdk_version()} and its '
      'dependencies with Maven (once)')
  with _filled_in_place(final_dir) as partial:
    with open(os.path.join(partial, 'pom.xml'), 'w') as handle:
      handle.write(_POM.format(artifact=artifact, version=beam_sdk_version()))
    try:
      completed = subprocess.run(
          [maven, '-B', '-q', '-f', os.path.join(partial, 'pom.xml'),
           'dependency:copy-dependencies', '-DincludeScope=runtime',
           f'-DoutputDirectory={os.path.join(partial, "lib")}'],
          capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
      raise ClusterError(f'Maven did not fetch {artifact}:{beam_sdk_version()} within '
                         f'{FETCH_TIMEOUT_S} s.') from error
    if completed.returncode != 0:
      missing = re.findall(r'(?:Could not find artifact|Could not resolve dependencies)[^\n]*',
                           completed.stdout + completed.stderr)
      raise ClusterError(
          f'Maven could not fetch Beam\'s {engine} job server '
          f'org.apache.beam:{artifact}:{beam_sdk_version()} (the Beam SDK\'s version): '
          f'{missing[0] if missing else completed.stdout[-500:]}')
    check_job_server_version(os.path.join(partial, 'lib'), engine)
  return final_dir


def job_server_version(lib_dir: str, engine: str) -> Optional[str]:
  """The Beam version of the job server jar in `lib_dir` (from its file name)."""
  prefix = JOB_SERVER_ARTIFACTS[engine] + '-'
  for name in sorted(os.listdir(lib_dir)) if os.path.isdir(lib_dir) else []:
    if name.startswith(prefix) and name.endswith('.jar'):
      return name[len(prefix):-len('.jar')]
  return None


def check_job_server_version(lib_dir: str, engine: str) -> None:
  found = job_server_version(lib_dir, engine)
  if found is None:
    raise ClusterError(f'{lib_dir} holds no {JOB_SERVER_ARTIFACTS[engine]} jar.')
  if found != beam_sdk_version():
    raise ClusterError(f'Beam\'s {engine} job server is version {found} but the Beam SDK is '
                       f'{beam_sdk_version()}: they must be the same version.')


def _pip_download(package: str, version: str, into: str) -> str:
  completed = subprocess.run(
      [sys.executable, '-m', 'pip', 'download', '--quiet', '--no-deps', '--no-binary', ':all:',
       f'{package}=={version}', '-d', into],
      capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, check=False)
  archives = [name for name in os.listdir(into) if name.endswith('.tar.gz')]
  if completed.returncode != 0 or not archives:
    raise ClusterError(f'pip could not fetch {package}=={version} (the engine\'s '
                       f'distribution): {completed.stderr.strip()[-500:]}')
  return os.path.join(into, archives[0])


def _extract(archive: str, member_prefix: str, into: str) -> None:
  """Extracts the members under `member_prefix` (e.g. `deps/lib/`) into `into`, flattened
  to the path after the prefix's top folder."""
  with tarfile.open(archive) as tar:
    for member in tar.getmembers():
      relative = member.name.split('/', 1)[1] if '/' in member.name else ''
      if not relative.startswith(member_prefix) or not member.isfile():
        continue
      target = os.path.join(into, relative[len('deps/'):])
      os.makedirs(os.path.dirname(target), exist_ok=True)
      with tar.extractfile(member) as source, open(target, 'wb') as output:
        shutil.copyfileobj(source, output)


def engine_dir(engine: str) -> str:
  version = FLINK_VERSION if engine == 'flink' else SPARK_VERSION
  return os.path.join(cache_dir(), f'{engine}-{version}')


def fetch_engine(engine: str, log=print) -> str:
  """The engine's jars (Flink's lib/ and bin/, Spark's jars/), from PyPI (cached)."""
  final_dir = engine_dir(engine)
  if os.path.isdir(final_dir):
    return final_dir
  package, version = (('apache-flink-libraries', FLINK_VERSION) if engine == 'flink'
                      else ('pyspark', SPARK_VERSION))
  log(f'beam_cluster: fetching {engine} {version} from PyPI ({package}, once)')
  with _filled_in_place(final_dir) as partial, tempfile.TemporaryDirectory(
      dir=os.path.dirname(final_dir)) as download:
    archive = _pip_download(package, version, download)
    for prefix in (('deps/lib/', 'deps/bin/') if engine == 'flink' else ('deps/jars/',)):
      _extract(archive, prefix, partial)
    if engine == 'spark':
      # Spark's launcher takes a folder with RELEASE for a distribution (jars/ beside it).
      with open(os.path.join(partial, 'RELEASE'), 'w') as handle:
        handle.write(f'Spark {SPARK_VERSION} (jars from pyspark {SPARK_VERSION})\n')
  return final_dir


# --- Processes ------------------------------------------------------------------------------


def _die_with_parent() -> None:
  """Run in the child before exec: the kernel kills it when the starting thread ends."""
  os.setsid()  # Its own group: Ctrl-C at a terminal reaches the run, which stops it.
  if sys.platform.startswith('linux'):
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_ports(count: int) -> List[int]:
  """`count` distinct free ports on loopback, held together until all are chosen."""
  try:
    return ports.free_ports(count, LOOPBACK)
  except OSError as error:
    raise ClusterError(f'no free port on {LOOPBACK} for the cluster\'s {count} listeners: '
                       f'{error}') from error


def answers(port: int, host: str = LOOPBACK, timeout: float = 2.0) -> bool:
  """Whether anything accepts a TCP connection on `port`: a listener, of any process."""
  try:
    with socket.create_connection((host, port), timeout=timeout):
      return True
  except OSError:
    return False


def _get_jobs(endpoint: str, timeout_s: float) -> Optional[list]:
  """The job server's jobs (Beam's Job API GetJobs), or None when no job server answers."""
  import grpc  # pylint: disable=g-import-not-at-top
  from apache_beam.portability.api import beam_job_api_pb2  # pylint: disable=g-import-not-at-top
  from apache_beam.portability.api import beam_job_api_pb2_grpc  # pylint: disable=g-import-not-at-top
  with grpc.insecure_channel(endpoint) as channel:
    try:
      return list(beam_job_api_pb2_grpc.JobServiceStub(channel).GetJobs(
          beam_job_api_pb2.GetJobsRequest(), timeout=timeout_s).job_info)
    except grpc.RpcError:
      return None


def job_server_answers(endpoint: str, timeout_s: float = 2.0) -> bool:
  """Whether a Beam job server answers Beam's Job API at `endpoint` within `timeout_s`.

  A TCP connection is not enough: another process may hold the port, such as a second local
  cluster that chose the same free port, or Flink's own REST API given as the endpoint.
  """
  return _get_jobs(endpoint, timeout_s) is not None


@dataclasses.dataclass
class Process:
  """One process of a cluster: its role, command, log file and the Popen."""
  role: str
  command: List[str]
  log_path: str
  popen: Optional[subprocess.Popen] = None

  def start(self, environment: Dict[str, str]) -> None:
    with open(self.log_path, 'ab') as log:
      self.popen = subprocess.Popen(  # pylint: disable=subprocess-popen-preexec-fn
          self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
          env=environment, preexec_fn=_die_with_parent)

  def alive(self) -> bool:
    return self.popen is not None and self.popen.poll() is None

  def tail(self, lines: int = 15) -> str:
    try:
      with open(self.log_path, errors='replace') as handle:
        return ''.join(handle.readlines()[-lines:])
    except OSError:
      return ''


class Cluster:
  """A started engine: its processes, its job server's endpoint, and how to stop it."""

  def __init__(self, engine: str, work_dir: str, processes: List[Process],
               endpoint: Optional[str],
               ui: str, slots: int = SLOTS, owns_work_dir: bool = False,
               files_to_stage: Optional[str] = None,
               resources_detector: Optional[str] = None):
    self.engine = engine
    self.slots = slots
    self.work_dir = work_dir
    # A folder start() made is removed at stop, logs and all, unless a process was lost
    # (the error names its log).
    self.owns_work_dir = owns_work_dir
    self.files_to_stage = files_to_stage
    self.resources_detector = resources_detector
    self.processes = processes
    self.endpoint = endpoint
    self.ui = ui
    self._stopping = False
    self._lost: Optional[Process] = None
    self._stop_lock = threading.Lock()

  def state(self) -> dict:
    return {'engine': self.engine, 'endpoint': self.endpoint, 'ui': self.ui,
            'work_dir': self.work_dir,
            'processes': [{'role': process.role, 'pid': process.popen.pid,
                           'log': process.log_path} for process in self.processes]}

  def beam_pipeline_args(self) -> List[str]:
    return (portable_runner_args(self.engine, self.endpoint, parallelism=self.slots)
            + self.staging_args())

  def staging_args(self) -> List[str]:
    """Beam's arguments for what this cluster's jobs stage: nothing on a local cluster."""
    arguments = [f'--files_to_stage={self.files_to_stage}'] if self.files_to_stage else []
    if self.resources_detector:
      _declare_resources_detector_option()
      arguments.append(f'--{STAGE_NOTHING_OPTION}={self.resources_detector}')
    return arguments

  def lost(self) -> Optional[Process]:
    """The first process that exited while the cluster was meant to run, else None.

    Once found it stays the answer, through the cluster's stop.
    """
    if self._lost is None and not self._stopping:
      self._lost = next((process for process in self.processes if not process.alive()), None)
    return self._lost

  @contextlib.contextmanager
  def watched(self, on_loss, interval_s: float = 1.0) -> Iterator['Cluster']:
    """Calls `on_loss(process)` once, from a daemon thread, if a process exits in the block.

    An engine that loses a TaskManager or a worker may fail the job, retry it, or wait for
    slots that never come back (Spark with its only worker gone): the caller learns of the
    loss within `interval_s` whatever the engine does.
    """
    done = threading.Event()

    def watch():
      while not done.wait(interval_s):
        process = self.lost()
        if process is not None:
          on_loss(process)
          return

    watcher = threading.Thread(target=watch, name=f'{self.engine}-watchdog', daemon=True)
    watcher.start()
    try:
      yield self
    finally:
      done.set()
      watcher.join(timeout=interval_s * 5)

  def jobs(self, timeout_s: float = CANCEL_TIMEOUT_S) -> List[Dict[str, str]]:
    """The jobs the job server has run or runs: id, name and state (Beam's Job API).

    Empty when the job server does not answer within `timeout_s`.
    """
    from apache_beam.portability.api import beam_job_api_pb2  # pylint: disable=g-import-not-at-top
    found = _get_jobs(self.endpoint, timeout_s) or []
    return [{'id': job.job_id, 'name': job.job_name,
             'state': beam_job_api_pb2.JobState.Enum.Name(job.state)} for job in found]

  def cancel_jobs(self, timeout_s: float = CANCEL_TIMEOUT_S) -> List[str]:
    """Cancels every job on the job server that has not ended; returns their ids.

    Through Beam's Job API, the same for Flink and Spark. An engine that lost a process
    may retry the job or wait for slots that never return; cancelled, it stops the job and
    Beam's runner in the stage closes the SDK harness it served. Best effort within
    `timeout_s`: a job server that does not answer is stopped with the cluster anyway.
    """
    import grpc  # pylint: disable=g-import-not-at-top
    from apache_beam.portability.api import beam_job_api_pb2  # pylint: disable=g-import-not-at-top
    from apache_beam.portability.api import beam_job_api_pb2_grpc  # pylint: disable=g-import-not-at-top
    deadline = time.monotonic() + timeout_s
    cancelled = []
    running = [job for job in self.jobs(timeout_s) if job['state'] not in ENDED_JOB_STATES]
    with grpc.insecure_channel(self.endpoint) as channel:
      service = beam_job_api_pb2_grpc.JobServiceStub(channel)
      for job in running:
        try:
          service.Cancel(beam_job_api_pb2.CancelJobRequest(job_id=job['id']),
                         timeout=max(0.1, deadline - time.monotonic()))
          cancelled.append(job['id'])
        except grpc.RpcError:
          continue
    return cancelled

  def stop(self, timeout_s: Optional[float] = None) -> None:
    """Ends every process: SIGTERM, then SIGKILL after `timeout_s`; then removes the scratch.

    By default STOP_TIMEOUT_S, or LOST_STOP_TIMEOUT_S once a process was lost. Safe from two
    threads at once (a watchdog and the run): the second waits for the first. The work folder
    goes whole when `start()` made it; a caller's folder keeps KEPT_AFTER_STOP, and a lost
    process's logs stay, since the error names them (`_remove_scratch`).
    """
    if timeout_s is None:
      timeout_s = LOST_STOP_TIMEOUT_S if self._lost is not None else STOP_TIMEOUT_S
    self._stopping = True
    with self._stop_lock:
      for process in reversed(self.processes):
        if process.alive():
          _signal_group(process.popen.pid, signal.SIGTERM)
      deadline = time.monotonic() + timeout_s
      for process in self.processes:
        if process.popen is None:
          continue
        try:
          process.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
          _signal_group(process.popen.pid, signal.SIGKILL)
          process.popen.wait(timeout=STOP_TIMEOUT_S)
        # What it started is in its group too (Spark's executors, a JVM each): a worker that
        # ended on SIGTERM may leave one still running its shutdown hooks.
        if not _group_ends_by(process.popen.pid, deadline):
          _signal_group(process.popen.pid, signal.SIGKILL)
          _group_ends_by(process.popen.pid, time.monotonic() + 5)
      self._remove_scratch()

  def _remove_scratch(self) -> None:
    """Removes what the engine wrote while it ran; a lost process's logs stay to be read."""
    if not os.path.isdir(self.work_dir):
      return
    if self.owns_work_dir and self._lost is None:
      shutil.rmtree(self.work_dir, ignore_errors=True)
      return
    for name in os.listdir(self.work_dir):
      if name not in KEPT_AFTER_STOP:
        path = os.path.join(self.work_dir, name)
        if os.path.isdir(path) and not os.path.islink(path):
          shutil.rmtree(path, ignore_errors=True)

  def __enter__(self) -> 'Cluster':
    return self

  def __exit__(self, *unused) -> None:
    self.stop()


def _group_ends_by(pgid: int, deadline: float) -> bool:
  """Whether process group `pgid` has no member left by `deadline` (polled)."""
  while True:
    try:
      os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
      return True
    if time.monotonic() >= deadline:
      return False
    time.sleep(0.1)


def _signal_group(pid: int, signum: int) -> None:
  with contextlib.suppress(ProcessLookupError, PermissionError):
    os.killpg(pid, signum)


# The environment variable through which a run's Beam stages find its local cluster's job
# server (`engine_beam_args` with a placeholder endpoint).
ENDPOINT_VARIABLE = 'DISTILLERY_BEAM_JOB_ENDPOINT'
# Where the portable runner runs the Python SDK harness (Beam's `--environment_type`).
ENVIRONMENT_TYPES = ('LOOPBACK', 'PROCESS', 'EXTERNAL', 'DOCKER')


def check_endpoint_format(endpoint: str, name: str = '--beam-endpoint') -> str:
  """`endpoint` when it reads HOST:PORT; else a ValueError naming `name`."""
  host, _, port = (endpoint or '').rpartition(':')
  if not host or not port.isdigit() or not 0 < int(port) < 65536:
    raise ValueError(f'{name} must be HOST:PORT, the job server of a Flink or Spark cluster; '
                     f'got {endpoint!r}.')
  return endpoint


def portable_runner_args(engine: str, endpoint: str, environment_type: str = 'LOOPBACK',
                         environment_config: Optional[str] = None,
                         parallelism: int = SLOTS) -> List[str]:
  """Beam's arguments for a pipeline on the job server at `endpoint`.

  LOOPBACK (the default): the Beam stage's own Python process runs the SDK harness, so a
  local cluster needs no Docker and no separate Python workers, and the harness has the
  installed package (TFX, our modules) at hand; the cluster must reach this machine. A
  cluster elsewhere runs the harness itself: EXTERNAL (a worker pool beside each
  TaskManager or executor, at `environment_config`, HOST:PORT), DOCKER (an image with this
  package, `environment_config`) or PROCESS (a boot command, `environment_config` as
  Beam's JSON). docs/scaling-out.md says how.

  Raises:
    ValueError: an unknown engine or environment type, an endpoint that is not HOST:PORT,
      or EXTERNAL or PROCESS without its configuration, each named.
  """
  check_engine(engine)
  check_endpoint_format(endpoint)
  if environment_type not in ENVIRONMENT_TYPES:
    raise ValueError(f'--beam-environment-type must be one of {", ".join(ENVIRONMENT_TYPES)}; '
                     f'got {environment_type!r}.')
  if environment_type in ('EXTERNAL', 'PROCESS') and not environment_config:
    raise ValueError(f'--beam-environment-type {environment_type} needs '
                     '--beam-environment-config: '
                     + ('the worker pool\'s HOST:PORT' if environment_type == 'EXTERNAL'
                        else 'Beam\'s JSON, e.g. {"command": "/opt/apache/beam/boot"}') + '.')
  if not isinstance(parallelism, int) or parallelism < 1:
    raise ValueError(f'--beam-parallelism must be an integer >= 1; got {parallelism!r}.')
  return ['--runner=PortableRunner', f'--job_endpoint={endpoint}',
          f'--environment_type={environment_type}',
          *([f'--environment_config={environment_config}'] if environment_config else []),
          f'--parallelism={parallelism}']


def engine_beam_args(beam_runner: str = 'direct', beam_endpoint: Optional[str] = None,
                     beam_environment_type: Optional[str] = None,
                     beam_environment_config: Optional[str] = None,
                     beam_pipeline_args: Sequence[str] = (),
                     beam_parallelism: Optional[int] = None) -> List[str]:
  """The Beam arguments of an engine, before the user's own: `create_pipeline`'s rules.

  Raises:
    ValueError: naming the parameter (`beam_runner`, `beam_endpoint`,
      `beam_environment_type`, `beam_environment_config`, `beam_parallelism`) and what it
      must be.
  """
  if beam_parallelism is not None and (not isinstance(beam_parallelism, int)
                                       or beam_parallelism < 1):
    raise ValueError(f'beam_parallelism must be an integer >= 1; got {beam_parallelism!r}.')
  if beam_runner == 'direct':
    for name, value in (('beam_endpoint', beam_endpoint),
                        ('beam_environment_type', beam_environment_type),
                        ('beam_environment_config', beam_environment_config)):
      if value:
        raise ValueError(f'{name} is for beam_runner=\'flink\' or \'spark\' (the '
                         f'portable runner); got {name}={value!r} with beam_runner=\'direct\'.')
    if beam_parallelism is None:
      return []
    # DirectRunner: one worker in this process, or that many worker processes.
    return (['--direct_running_mode=in_memory', '--direct_num_workers=1']
            if beam_parallelism == 1 else
            ['--direct_running_mode=multi_processing',
             f'--direct_num_workers={beam_parallelism}'])
  try:
    check_engine(beam_runner)
    if not beam_endpoint:
      raise ValueError(f'beam_runner={beam_runner!r} needs beam_endpoint, the HOST:PORT of the '
                       'cluster\'s Beam job server (`distillery run --beam-runner` starts a '
                       'local cluster itself).')
    named = [argument for argument in beam_pipeline_args
             if argument == '--runner' or argument.startswith('--runner=')]
    if named:
      raise ValueError(f'beam_pipeline_args name a runner ({named[0]}) and beam_runner is '
                       f'{beam_runner!r}: give one of the two.')
    if not isinstance(beam_endpoint, str):
      # A placeholder (TFX's environment_variable) that TFX resolves when the stage runs:
      # the pipeline, and so its cache key, stays the same whatever port the job server
      # of a run's local cluster got.
      arguments = portable_runner_args(beam_runner, '127.0.0.1:1',
                                       beam_environment_type or 'LOOPBACK',
                                       beam_environment_config, beam_parallelism or SLOTS)
      return [('--job_endpoint=' + beam_endpoint) if argument.startswith('--job_endpoint=')
              else argument for argument in arguments]
    return portable_runner_args(beam_runner, beam_endpoint, beam_environment_type or 'LOOPBACK',
                                beam_environment_config, beam_parallelism or SLOTS)
  except ValueError as error:
    # The same checks serve the command line: name the Python parameters here.
    message = str(error)
    for flag in ('--beam-environment-type', '--beam-environment-config', '--beam-endpoint',
                 '--beam-runner', '--beam-parallelism'):
      message = message.replace(flag, flag[2:].replace('-', '_'))
    raise ValueError(message) from None


def _java_command(classpath: List[str], main: str, arguments: List[str],
                  jvm_options: List[str] = ()) -> List[str]:
  return ['java', *jvm_options, *JAVA_OPENS, '-cp', os.pathsep.join(classpath), main,
          *arguments]


def _wait_until(what: str, ready, processes: List[Process], timeout_s: float) -> None:
  """Waits for `ready()`, failing at once when a process exits, else after `timeout_s`."""
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline:
    for process in processes:
      if not process.alive():
        raise ClusterError(f'{process.role} exited with status {process.popen.returncode} '
                           f'before {what}.\nIts log ({process.log_path}) ends:\n'
                           f'{process.tail()}')
    if ready():
      return
    time.sleep(0.5)
  raise ClusterError(f'{what}: not within {timeout_s:g} s. Logs in '
                     f'{os.path.dirname(processes[0].log_path)}.')


def _rest_json(url: str) -> Optional[dict]:
  try:
    with urllib.request.urlopen(url, timeout=2) as response:  # nosec: loopback only
      return json.loads(response.read().decode())
  except (OSError, ValueError, urllib.error.URLError):
    return None


def _flink_processes(engine_home: str, job_server: str, work_dir: str, log, slots: int,
                     resources_detector: Optional[str] = None
                     ) -> (List[Process], callable, str, callable, List[int]):
  """Flink's JobManager and TaskManagers; a maker of Beam's job server, given its 3 ports;
  the web UI; whether the cluster has its slots; and the ports chosen here."""
  rpc_port, rest_port = free_ports(2)
  conf_dir = os.path.join(work_dir, 'conf')
  os.makedirs(conf_dir, exist_ok=True)
  with open(os.path.join(conf_dir, 'flink-conf.yaml'), 'w') as handle:
    handle.write('\n'.join([
        f'jobmanager.rpc.address: {LOOPBACK}', f'jobmanager.bind-host: {LOOPBACK}',
        f'jobmanager.rpc.port: {rpc_port}', f'rest.address: {LOOPBACK}',
        f'rest.bind-address: {LOOPBACK}', f'rest.port: {rest_port}',
        f'taskmanager.bind-host: {LOOPBACK}', f'taskmanager.host: {LOOPBACK}',
        'taskmanager.numberOfTaskSlots: 1', 'jobmanager.memory.process.size: 1024m',
        'taskmanager.memory.process.size: 4096m', f'parallelism.default: {slots}',
        # Beam's gRPC data plane to the SDK harness allocates direct (off-heap) buffers in
        # the TaskManager. Flink caps direct memory at its off-heap budget, which by default
        # is the network buffers plus 128 MB for the framework: at 1.5 million rows
        # IngestionTransform failed with "OutOfMemoryError: Direct buffer memory". 512 MB
        # of task off-heap memory gives gRPC its own room.
        'taskmanager.memory.task.off-heap.size: 512m',
        # Beam's Flink runner holds a grouped key's values and the data plane's elements on
        # the heap; with 2.5 GB and Flink's default 40% of it managed (for its own sorting),
        # the same run then failed with "Java heap space". 10% managed leaves about 2 GB of
        # heap for the tasks.
        'taskmanager.memory.managed.fraction: 0.1',
        # A batch exchange's sort-shuffle takes 512 network buffers by default, and TFX's
        # Transform runs dozens of exchanges at once: 8,192 buffers ran short. 64 each is
        # Flink's own floor for small jobs.
        'taskmanager.memory.network.min: 256mb', 'taskmanager.memory.network.max: 256mb',
        'taskmanager.network.sort-shuffle.min-buffers: 64',
        # On a busy 2-core machine a TaskManager answered after Flink's 10 s ask timeout and
        # the job failed; a lost process is still found by its heartbeat, within a minute.
        'pekko.ask.timeout: 120 s', 'heartbeat.interval: 10000', 'heartbeat.timeout: 60000',
        f'io.tmp.dirs: {os.path.join(work_dir, "tmp")}', '']))
  os.makedirs(os.path.join(work_dir, 'tmp'), exist_ok=True)
  # Beam's Flink runner from the job server's folder on the cluster's own classpath, after
  # Flink's (the job server's copies of Flink's jars are left out): jobs that stage nothing
  # (STAGE_NOTHING_CLASS) find Beam there, loaded once for all of them.
  beam_jars = sorted(os.path.join(job_server, 'lib', name)
                     for name in os.listdir(os.path.join(job_server, 'lib'))
                     if name.endswith('.jar') and not name.startswith('flink-'))
  flink_classpath = [os.path.join(engine_home, 'lib', '*'), *beam_jars]
  # What Flink's taskmanager.sh asks of BashJavaUtils: the TaskManager's memory and CPU
  # settings, computed from the configuration.
  completed = subprocess.run(
      ['java', '-cp', os.pathsep.join([os.path.join(engine_home, 'bin', 'bash-java-utils.jar'),
                                       *flink_classpath]),
       'org.apache.flink.runtime.util.bash.BashJavaUtils', 'GET_TM_RESOURCE_PARAMS',
       '--configDir', conf_dir], capture_output=True, text=True, timeout=START_TIMEOUT_S,
      check=False)
  results = [line.split(':', 1)[1] for line in completed.stdout.splitlines()
             if line.startswith('BASH_JAVA_UTILS_EXEC_RESULT:')]
  if completed.returncode != 0 or len(results) < 2:
    raise ClusterError(f'Flink could not size its TaskManager from {conf_dir}: '
                       f'{completed.stdout[-300:]}{completed.stderr[-300:]}')
  jvm_options, dynamic = results[0].split(), results[1].split()
  logs = os.path.join(work_dir, 'logs')
  processes = [Process('flink jobmanager', _java_command(
      flink_classpath, 'org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint',
      ['--configDir', conf_dir]), os.path.join(logs, 'jobmanager.log'))]
  processes += [Process(f'flink taskmanager {index}', _java_command(
      flink_classpath, 'org.apache.flink.runtime.taskexecutor.TaskManagerRunner',
      ['--configDir', conf_dir, *dynamic], jvm_options),
      os.path.join(logs, f'taskmanager-{index}.log')) for index in range(slots)]

  def job_server_process(job_port: int, artifact_port: int, expansion_port: int) -> Process:
    return Process('flink job server', _java_command(
        [*([resources_detector] if resources_detector else []),
         os.path.join(job_server, 'lib', '*')], JOB_SERVER_MAIN['flink'],
        [f'--flink-master={LOOPBACK}:{rest_port}', f'--job-host={LOOPBACK}',
         f'--job-port={job_port}', f'--artifact-port={artifact_port}',
         f'--expansion-port={expansion_port}']), os.path.join(logs, 'job-server.log'))

  def cluster_ready() -> bool:
    overview = _rest_json(f'http://{LOOPBACK}:{rest_port}/overview') or {}
    return overview.get('slots-total', 0) >= slots
  return (processes, job_server_process, f'http://{LOOPBACK}:{rest_port}', cluster_ready,
          [rpc_port, rest_port])


def _spark_processes(engine_home: str, job_server: str, work_dir: str, log,
                     slots: int) -> (List[Process], callable, str, callable, List[int]):
  """Spark's master and worker, and the rest as `_flink_processes` returns it."""
  master_port, master_ui, worker_ui = free_ports(3)
  spark_classpath = [os.path.join(engine_home, 'jars', '*')]
  logs = os.path.join(work_dir, 'logs')
  master = f'spark://{LOOPBACK}:{master_port}'
  processes = [
      Process('spark master', _java_command(
          spark_classpath, 'org.apache.spark.deploy.master.Master',
          ['--host', LOOPBACK, '--port', str(master_port), '--webui-port', str(master_ui)]),
              os.path.join(logs, 'master.log')),
      Process('spark worker', _java_command(
          spark_classpath, 'org.apache.spark.deploy.worker.Worker',
          [master, '--host', LOOPBACK, '--cores', str(slots), '--memory', '2g',
           '--webui-port', str(worker_ui), '--work-dir', os.path.join(work_dir, 'work')]),
              os.path.join(logs, 'worker.log')),
  ]

  def job_server_process(job_port: int, artifact_port: int, expansion_port: int) -> Process:
    return Process('spark job server', _java_command(
        [os.path.join(job_server, 'lib', '*'), *spark_classpath], JOB_SERVER_MAIN['spark'],
        [f'--spark-master-url={master}', f'--job-host={LOOPBACK}', f'--job-port={job_port}',
         f'--artifact-port={artifact_port}', f'--expansion-port={expansion_port}'],
        # The executors run on this machine: they load Beam from the job server's folder,
        # and nothing is staged (NOTHING_TO_STAGE).
        [f'-Dspark.executor.extraClassPath={os.path.join(job_server, "lib", "*")}']),
                   os.path.join(logs, 'job-server.log'))

  def cluster_ready() -> bool:
    state = _rest_json(f'http://{LOOPBACK}:{master_ui}/json/') or {}
    return state.get('aliveworkers', 0) >= 1 and state.get('cores', 0) >= slots
  return (processes, job_server_process, f'http://{LOOPBACK}:{master_ui}', cluster_ready,
          [master_port, master_ui, worker_ui])


def start(engine: str, work_dir: Optional[str] = None, log=print,
          slots: int = SLOTS) -> Cluster:
  """Fetches (once) and starts a local cluster of `engine` with Beam's job server for it.

  Args:
    engine: 'flink' or 'spark'.
    work_dir: Where its configuration, logs and scratch go (a new temporary folder if None).
    log: Where progress lines go.
    slots: Flink: TaskManagers of one slot each; Spark: the worker's cores. Beam's
      `--parallelism` is the same.

  Returns:
    The running Cluster; its `endpoint` takes Beam jobs (it answered Beam's Job API). Stop
    it with `stop()` (or use it as a context manager).

  Raises:
    ValueError: an engine we do not support.
    ClusterError: no suitable Java, a fetch that failed, or a process that did not come up
      within its bound (naming it, with the end of its log). A start that failed because
      another process took one of its ports starts again on new ports, up to
      START_ATTEMPTS times in all.
  """
  check_engine(engine)
  if not isinstance(slots, int) or slots < 1:
    raise ValueError(f'--beam-parallelism must be an integer >= 1; got {slots!r}.')
  check_java()
  job_server = fetch_job_server(engine, log)
  check_job_server_version(os.path.join(job_server, 'lib'), engine)
  engine_home = fetch_engine(engine, log)
  resources_detector = stage_nothing_detector(job_server, log) if engine == 'flink' else None
  owns_work_dir = not work_dir
  work_dir = work_dir or tempfile.mkdtemp(prefix=f'distillery-{engine}-')
  os.makedirs(os.path.join(work_dir, 'logs'), exist_ok=True)
  attempt = 1
  while True:
    try:
      return _start_once(engine, engine_home, job_server, work_dir, owns_work_dir, log, slots,
                         resources_detector)
    except _PortTaken as taken:
      if attempt == START_ATTEMPTS:
        raise ClusterError(f'{taken}; the same on each of {START_ATTEMPTS} starts, on new '
                           f'ports each time. Logs in {os.path.join(work_dir, "logs")}.'
                           ) from taken
      attempt += 1
      log(f'beam_cluster: {taken}; starting again on new ports ({attempt} of '
          f'{START_ATTEMPTS})')


class _PortTaken(ClusterError):
  """A start that failed while another process held one of the ports chosen for it, or
  whose job server exited with status 0: Beam's driver does so when it cannot open its
  ports, and logs why nowhere (it has no SLF4J binding)."""


def _start_once(engine: str, engine_home: str, job_server: str, work_dir: str,
                owns_work_dir: bool, log, slots: int,
                resources_detector: Optional[str] = None) -> Cluster:
  """One start on newly chosen ports; `_PortTaken` when another process held one of them."""
  if engine == 'flink':
    processes, job_server_process_for, ui, cluster_ready, chosen_ports = _flink_processes(
        engine_home, job_server, work_dir, log, slots, resources_detector)
  else:
    processes, job_server_process_for, ui, cluster_ready, chosen_ports = _spark_processes(
        engine_home, job_server, work_dir, log, slots)
  environment = dict(os.environ)
  if engine == 'spark':
    # A worker launches executors from SPARK_HOME's jars; the Scala version is asked for by
    # name outside a source tree.
    environment.update({'SPARK_HOME': engine_home, 'SPARK_SCALA_VERSION': '2.12',
                        'SPARK_LOCAL_IP': LOOPBACK})
  cluster = Cluster(engine, work_dir, processes, None, ui, slots, owns_work_dir,
                    _nothing_to_stage(job_server) if engine == 'spark' else None,
                    STAGE_NOTHING_CLASS if resources_detector else None)
  started = time.monotonic()
  job_server_process = None
  try:
    for process in processes:
      process.start(environment)
    _wait_until(f'the {engine} cluster had {slots} slots', cluster_ready, processes,
                START_TIMEOUT_S)
    # The job server's ports are chosen now, not with the engine's: Flink's and Spark's
    # processes bind ports the kernel picks as they start (RPC, blob and data ports), and in
    # CI one of them had taken the job server's port chosen a minute before.
    job_ports = free_ports(3)
    chosen_ports = chosen_ports + job_ports
    job_server_process = job_server_process_for(*job_ports)
    processes.append(job_server_process)
    cluster.endpoint = f'{LOOPBACK}:{job_ports[0]}'
    job_server_process.start(environment)
    # Beam's Job API, not a TCP connection: a port taken by another process also accepts one.
    _wait_until(f'Beam\'s {engine} job server answered on {cluster.endpoint}',
                lambda: job_server_answers(cluster.endpoint), processes, START_TIMEOUT_S)
  except BaseException as error:
    # Read before the stop, which ends the job server with a signal.
    silent_exit = (job_server_process is not None and job_server_process.popen is not None
                   and job_server_process.popen.poll() == 0)
    # The error names a log: it stays.
    cluster.owns_work_dir = False
    cluster.stop()
    if not isinstance(error, ClusterError):
      raise
    # Once ours have ended, a port that still accepts connections is another process's.
    taken = [port for port in chosen_ports if answers(port)]
    if taken:
      raise _PortTaken(f'another process took port {", ".join(map(str, taken))} between '
                       f'its choice and the {engine} cluster\'s start '
                       f'({str(error).splitlines()[0]})') from error
    if silent_exit:
      # A port held for a moment (another process's outgoing connection) is free again by
      # now, so the check above cannot see it.
      raise _PortTaken(f'Beam\'s {engine} job server exited with status 0 before it '
                       f'answered on {cluster.endpoint}: it does so when it cannot open its '
                       f'ports, most often one another process held for a moment') from error
    raise
  log(f'beam_cluster: {engine} up in {time.monotonic() - started:.1f} s: job server '
      f'{cluster.endpoint}, web UI {ui}, logs in {os.path.join(work_dir, "logs")}')
  return cluster


def _declare_resources_detector_option() -> None:
  """Makes Beam's Python SDK pass --pipeline_resources_detector_factory_class to the job.

  Beam's portable runner passes on only the options it knows: its own and those the job
  server describes, and the Flink job server does not describe this one.
  """
  global _ResourcesDetectorOptions
  if _ResourcesDetectorOptions is not None:
    return
  from apache_beam.options import pipeline_options  # pylint: disable=g-import-not-at-top

  class ResourcesDetectorOptions(pipeline_options.PipelineOptions):

    @classmethod
    def _add_argparse_args(cls, parser):
      parser.add_argument(f'--{STAGE_NOTHING_OPTION}', default=None,
                          help='The Java class that lists what a Beam job stages.')

  _ResourcesDetectorOptions = ResourcesDetectorOptions


_ResourcesDetectorOptions = None


def stage_nothing_detector(job_server: str, log=print) -> Optional[str]:
  """The jar of STAGE_NOTHING_CLASS, compiled once into the job server's folder.

  None, and a line in `log`, where it cannot be compiled (a Java runtime without javac):
  the jobs then stage Beam's jars as Beam does by default, more slowly.
  """
  with open(STAGE_NOTHING_SOURCE, 'rb') as handle:
    source = handle.read()
  # Named by the source's content: a changed source is compiled again.
  path = os.path.join(job_server,
                      f'stage-nothing-{hashlib.sha256(source).hexdigest()[:12]}.jar')
  if os.path.exists(path):
    return path
  javac = shutil.which('javac')
  beam_core = [os.path.join(job_server, 'lib', name)
               for name in os.listdir(os.path.join(job_server, 'lib'))
               if name.startswith('beam-sdks-java-core-')]
  if not javac or not beam_core:
    log(f'beam_cluster: {"no javac on PATH" if not javac else "no Beam core jar"}: each '
        'Flink job stages Beam\'s jars (about 150 MB), 10-18 s more a job')
    return None
  with tempfile.TemporaryDirectory(prefix='distillery-javac-') as scratch:
    try:
      completed = subprocess.run(
          [javac, '--release', str(MINIMUM_JAVA), '-cp', beam_core[0], '-d', scratch,
           STAGE_NOTHING_SOURCE], capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
          check=False)
    except subprocess.TimeoutExpired:
      completed = None
    if completed is None or completed.returncode != 0:
      # javac's first error names the cause (most often a Beam it cannot find).
      errors = [line for line in (completed.stderr if completed else '').splitlines()
                if ': error: ' in line]
      log('beam_cluster: javac could not compile ' + os.path.basename(STAGE_NOTHING_SOURCE)
          + (f' within {COMPILE_TIMEOUT_S} s' if completed is None else
             ': ' + (errors[0].split(': error: ', 1)[1] if errors
                     else completed.stderr.strip()[-300:]))
          + '; each Flink job stages Beam\'s jars (about 150 MB), 10-18 s more a job')
      return None
    # Written aside, then renamed: a run started meanwhile never loads half a jar.
    partial = f'{path}.{os.getpid()}.partial'
    with zipfile.ZipFile(partial, 'w') as jar:
      for parent, _, names in os.walk(scratch):
        for name in names:
          jar.write(os.path.join(parent, name),
                    os.path.relpath(os.path.join(parent, name), scratch))
    os.replace(partial, path)
  return path


def _nothing_to_stage(job_server: str) -> str:
  """The empty jar that Beam's Spark runner stages in place of its classpath (made once)."""
  path = os.path.join(job_server, NOTHING_TO_STAGE)
  if not os.path.exists(path):
    partial = f'{path}.{os.getpid()}.partial'
    with zipfile.ZipFile(partial, 'w'):
      pass
    os.replace(partial, path)
  return path


def check_endpoint(endpoint: str, timeout_s: float = 10.0) -> str:
  """`endpoint` (HOST:PORT) if a job server answers there within `timeout_s`."""
  check_endpoint_format(endpoint)
  host, _, port = endpoint.rpartition(':')
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline:
    if job_server_answers(endpoint, timeout_s=min(2.0, max(0.1, deadline - time.monotonic()))):
      return endpoint
    time.sleep(0.5)
  if answers(int(port), host):
    raise ClusterError(f'--beam-endpoint {endpoint}: something listens there, but it is not a '
                       f'Beam job server (Beam\'s Job API did not answer within {timeout_s:g} '
                       f's). Give the job server\'s job port (by default {DEFAULT_JOB_PORT}), '
                       f'not the engine\'s own, such as Flink\'s REST port.')
  raise ClusterError(f'--beam-endpoint {endpoint}: no job server answered within '
                     f'{timeout_s:g} s.')


def _state_path(state_dir: str) -> str:
  return os.path.join(state_dir, STATE_FILE)


def main(argv: Optional[List[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('action', choices=('fetch', 'start', 'stop'))
  parser.add_argument('engine', nargs='*', help='flink or spark (fetch takes both)')
  parser.add_argument('--state-dir', default=os.path.join(tempfile.gettempdir(),
                                                           'distillery-beam-cluster'),
                      help='where start records the processes that stop ends')
  args = parser.parse_args(argv)
  state_path = _state_path(args.state_dir)
  if args.action == 'fetch':
    # What `start` needs, ahead of time (make engines, CI): the jars, through the registries.
    for engine in args.engine or ENGINES:
      try:
        check_engine(engine)
      except ValueError as error:
        parser.error(str(error).replace('--beam-runner', 'engine'))
      check_java()
      job_server = fetch_job_server(engine)
      check_job_server_version(os.path.join(job_server, 'lib'), engine)
      if engine == 'flink':
        stage_nothing_detector(job_server)
      print(f'beam_cluster: {engine} is in {fetch_engine(engine)}')
    return 0
  if args.action == 'stop':
    if not os.path.exists(state_path):
      print(f'beam_cluster: no cluster recorded in {args.state_dir}')
      return 0
    with open(state_path) as handle:
      state = json.load(handle)
    # The serving `start` stops its cluster on SIGINT, as on Ctrl-C; its processes die
    # with it in any case.
    with contextlib.suppress(ProcessLookupError):
      os.kill(state['server_pid'], signal.SIGINT)
    deadline = time.monotonic() + STOP_TIMEOUT_S * 2
    while os.path.exists(state_path) and time.monotonic() < deadline:
      time.sleep(0.2)
    if os.path.exists(state_path):
      for process in state['processes']:
        _signal_group(process['pid'], signal.SIGKILL)
      os.remove(state_path)
    print(f'beam_cluster: stopped the {state["engine"]} cluster')
    return 0
  if len(args.engine) != 1:
    parser.error('start takes one engine: flink or spark')
  args.engine = args.engine[0]
  try:
    check_engine(args.engine)
  except ValueError as error:
    parser.error(str(error).replace('--beam-runner', 'engine'))
  if os.path.exists(state_path):
    parser.error(f'a cluster is recorded in {args.state_dir}: stop it first')
  os.makedirs(args.state_dir, exist_ok=True)
  cluster = start(args.engine, os.path.join(args.state_dir, args.engine))
  with open(state_path + '.tmp', 'w') as handle:
    json.dump({**cluster.state(), 'server_pid': os.getpid()}, handle, indent=1)
  os.replace(state_path + '.tmp', state_path)
  print(f'beam_cluster: {args.engine} job server at {cluster.endpoint}; Beam arguments: '
        f'{" ".join(cluster.beam_pipeline_args())}')
  print('beam_cluster: serving until stopped (Ctrl-C, or `stop` from another shell)')
  # The processes die with this one: it waits while the cluster serves.
  try:
    while all(process.alive() for process in cluster.processes):
      time.sleep(1)
    dead = [process for process in cluster.processes if not process.alive()]
    print(f'beam_cluster: {dead[0].role} exited; stopping the cluster', file=sys.stderr)
    return 1
  except KeyboardInterrupt:
    return 0
  finally:
    cluster.stop()
    with contextlib.suppress(OSError):
      os.remove(state_path)


if __name__ == '__main__':
  sys.exit(main())
