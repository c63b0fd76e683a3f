"""Starts, watches and stops the local training processes of a DistributedTrainer.

Each process gets its own TF_CONFIG on free loopback ports. Their progress lines
are streamed with a `[worker i]` prefix; if any process fails, every other one is
stopped at once and the run fails with the failing process's last lines.
"""

import collections
import dataclasses
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

from tfx_distillery.components.common import progress
from tfx_distillery.components.common import strategy as strategy_lib

LOOPBACK = '127.0.0.1'
POLL_SECONDS = 0.2
TAIL_LINES = 30
WORKER_MODULE = 'tfx_distillery.components.distributed_trainer.worker'
# Not a child of the progress logger: workers' other output goes to the log, not the console.
WORKER_OUTPUT_LOGGER = 'distillery_worker_output'


@dataclasses.dataclass(frozen=True)
class Task:
  """One process of the cluster: its TF_CONFIG job name, index and address."""
  job: str
  index: int
  address: str
  # Workers and ps of the parameter_server strategy only serve; the chief trains.
  is_server: bool = False

  @property
  def label(self) -> str:
    return f'{self.job} {self.index}'

  @property
  def trains(self) -> bool:
    return not self.is_server


def pick_free_ports(count: int, host: str = LOOPBACK) -> List[int]:
  """Returns `count` distinct free TCP ports on `host`.

  Raises:
    RuntimeError: when the system has no free port, naming how many were needed.
  """
  sockets = []
  try:
    for _ in range(count):
      handle = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      sockets.append(handle)
      handle.bind((host, 0))
    return [handle.getsockname()[1] for handle in sockets]
  except OSError as error:
    raise RuntimeError(
        f'no free port on {host}: num_workers + num_parameter_servers processes need '
        f'{count} ports ({error}).') from error
  finally:
    for handle in sockets:
      handle.close()


def plan_tasks(training: strategy_lib.TrainingSettings, ports: List[int]) -> List[Task]:
  """Lays out the processes: workers for MWMS; chief, workers and ps for parameter_server."""
  addresses = iter(f'{LOOPBACK}:{port}' for port in ports)
  if training.strategy != 'parameter_server':
    return [Task('worker', index, next(addresses)) for index in range(training.num_workers)]
  tasks = [Task('chief', 0, next(addresses))]
  tasks += [Task('worker', index, next(addresses), is_server=True)
            for index in range(training.num_workers)]
  tasks += [Task('ps', index, next(addresses), is_server=True)
            for index in range(training.num_parameter_servers)]
  return tasks


def processes_needed(training: strategy_lib.TrainingSettings) -> int:
  if training.strategy == 'parameter_server':
    return 1 + training.num_workers + training.num_parameter_servers
  return training.num_workers


def cluster_spec(tasks: List[Task]) -> Dict[str, List[str]]:
  spec = collections.defaultdict(list)
  for task in tasks:
    spec[task.job].append(task.address)
  return dict(spec)


class _Process:
  """A running task with threads that stream its output."""

  def __init__(self, task: Task, command: List[str], environment: Dict[str, str]):
    self.task = task
    self.tail = collections.deque(maxlen=TAIL_LINES)
    self.popen = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=environment, text=True, bufsize=1,
                                  start_new_session=True)
    self._threads = [
        threading.Thread(target=self._stream, args=(self.popen.stdout, True), daemon=True),
        threading.Thread(target=self._stream, args=(self.popen.stderr, False), daemon=True),
    ]
    for thread in self._threads:
      thread.start()

  def _stream(self, pipe, is_progress: bool):
    prefix = f'[{self.task.label}] '
    for line in pipe:
      line = line.rstrip('\n')
      self.tail.append(line)
      if is_progress:
        progress.get_logger().info('%s%s', prefix, line)
      else:
        logging.getLogger(WORKER_OUTPUT_LOGGER).info('%s%s', prefix, line)

  def stop(self):
    """SIGKILLs the whole process group; the task may be stuck in a collective op."""
    if self.popen.poll() is None:
      try:
        os.killpg(self.popen.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
    self.popen.wait()
    for thread in self._threads:
      thread.join(timeout=5)

  def describe_exit(self) -> str:
    code = self.popen.returncode
    if code is not None and code < 0:
      return f'was killed by signal {-code} ({signal.Signals(-code).name})'
    return f'exited with code {code}'


def run(training: strategy_lib.TrainingSettings, job_path: str,
        timeout_seconds: Optional[float] = None) -> None:
  """Runs every task of the cluster to completion, or fails fast.

  Args:
    training: Strategy, worker counts and backup folder.
    job_path: JSON file with the executor's inputs, outputs and properties.
    timeout_seconds: Give up (and stop every process) after this long.

  Raises:
    RuntimeError: naming the task that failed, how, and its last lines.
  """
  tasks = plan_tasks(training, pick_free_ports(processes_needed(training)))
  spec = cluster_spec(tasks)
  chief = tasks[0]
  progress.get_logger().info('DistributedTrainer: %s on %s', training.strategy,
                             ', '.join(f'{task.label}={task.address}' for task in tasks))
  processes = []
  try:
    for task in tasks:
      environment = dict(os.environ)
      environment['TF_CONFIG'] = json.dumps(
          {'cluster': spec, 'task': {'type': task.job, 'index': task.index}})
      environment[strategy_lib.ENVIRONMENT_VARIABLE] = dataclasses.replace(
          training, is_chief=task == chief).to_json()
      environment['PYTHONUNBUFFERED'] = '1'
      # gRPC servers of the parameter_server strategy should fail over, not abort.
      environment.setdefault('GRPC_FAIL_FAST', 'use_caller')
      processes.append(_Process(
          task, [sys.executable, '-m', WORKER_MODULE, job_path, task.job, str(task.index)],
          environment))
    start = time.monotonic()
    trainers = [process for process in processes if process.task.trains]
    while True:
      for process in processes:
        code = process.popen.poll()
        if code is not None and (code != 0 or not process.task.trains):
          raise RuntimeError(
              f'DistributedTrainer: {process.task.label} {process.describe_exit()}; every '
              'other process was stopped. Its last lines:\n  ' + '\n  '.join(process.tail))
      if all(process.popen.poll() == 0 for process in trainers):
        return
      if timeout_seconds and time.monotonic() - start > timeout_seconds:
        raise RuntimeError(f'DistributedTrainer: training did not finish in '
                           f'{timeout_seconds:.0f} s; every process was stopped.')
      time.sleep(POLL_SECONDS)
  finally:
    for process in processes:
      process.stop()
