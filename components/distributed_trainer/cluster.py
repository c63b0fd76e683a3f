"""Starts, watches and stops the local training processes of a DistributedTrainer.

Each process gets its own TF_CONFIG on free loopback ports. Their progress lines
are streamed with a `[worker i]` prefix; if any process fails, every other one is
stopped at once and the run fails with the failing process's last lines. A process
whose heartbeat (components/common/heartbeat.py) is older than the bound is stuck: the
run fails naming it, its phase and its stack. A port taken between picking and binding
starts the cluster again on new ports, and every process dies with this one
(worker.py).
"""

import collections
import dataclasses
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional

from tfx_distillery.components.common import heartbeat
from tfx_distillery.components.common import ports
from tfx_distillery.components.common import progress
from tfx_distillery.components.common import strategy as strategy_lib

LOOPBACK = '127.0.0.1'
POLL_SECONDS = 0.2
TAIL_LINES = 30
# Lines of stderr kept per process: enough for a stack dump of every thread.
KEPT_LINES = 400
# Frames of the stuck thread's stack shown in the error, most recent first.
STACK_FRAMES_SHOWN = 12
WORKER_MODULE = 'tfx_distillery.components.distributed_trainer.worker'
# Set in every process we start: the pid it must not outlive.
PARENT_VARIABLE = 'DISTILLERY_PARENT_PID'
# How many clusters to start when a picked port is taken before a process binds it.
PORT_ATTEMPTS = 3
# What a gRPC server prints when its port is taken.
BIND_FAILURES = ('Address already in use', 'Failed to add port', 'Could not start gRPC server')
# Frames of a Python stack that wait in a collective (variable broadcast, all-reduce).
COLLECTIVE_FRAMES = ('collective_ops', 'collective_all_reduce', 'cross_device_ops',
                     'broadcast_send', 'broadcast_recv', 'all_reduce')
# Time for a stuck process to write its stack dump before it is stopped.
STACK_DUMP_SECONDS = 2.0
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
  try:
    return ports.free_ports(count, host)
  except OSError as error:
    raise RuntimeError(
        f'no free port on {host}: num_workers + num_parameter_servers processes need '
        f'{count} ports ({error}).') from error


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
  """A running task with threads that stream its output, and the file it beats in."""

  def __init__(self, task: Task, command: List[str], environment: Dict[str, str],
               heartbeat_path: str):
    self.task = task
    self.lines = collections.deque(maxlen=KEPT_LINES)
    self.heartbeat_path = heartbeat_path
    self.started = time.time()
    self.popen = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env={**environment,
                                       heartbeat.ENVIRONMENT_VARIABLE: heartbeat_path},
                                  text=True, bufsize=1, start_new_session=True)
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
      self.lines.append(line)
      if is_progress:
        progress.get_logger().info('%s%s', prefix, line)
      else:
        logging.getLogger(WORKER_OUTPUT_LOGGER).info('%s%s', prefix, line)

  @property
  def tail(self) -> List[str]:
    return list(self.lines)[-TAIL_LINES:]

  def stack(self) -> List[str]:
    """The main thread's frames from the last stack dump, most recent first (or none)."""
    lines = list(self.lines)
    starts = [index for index, line in enumerate(lines)
              if line.startswith('Current thread 0x')]
    if not starts:
      return []
    frames = []
    for line in lines[starts[-1] + 1:]:
      if not line.strip().startswith('File '):
        break
      frames.append(line.strip())
    return frames

  def last_beat(self) -> dict:
    """The process's last beat; before its first, set-up since it started."""
    return heartbeat.read(self.heartbeat_path) or {
        'phase': heartbeat.SET_UP, 'detail': 'starting (importing TensorFlow and TFX)',
        'time': self.started}

  def dump_stacks(self) -> None:
    """Asks the process for every thread's Python stack (worker.py registers SIGUSR1)."""
    if self.popen.poll() is None:
      try:
        os.kill(self.popen.pid, signal.SIGUSR1)
      except ProcessLookupError:
        pass

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

  def finish_output(self) -> None:
    """Waits (briefly) until an exited process's last lines are read."""
    for thread in self._threads:
      thread.join(timeout=5)

  def describe_exit(self) -> str:
    code = self.popen.returncode
    if code is not None and code < 0:
      return f'was killed by signal {-code} ({signal.Signals(-code).name})'
    return f'exited with code {code}'

  def could_not_bind(self) -> bool:
    """Whether the process failed because its port was taken before its server bound it."""
    return any(marker in line for line in self.tail for marker in BIND_FAILURES)


def in_collective(stack: List[str]) -> bool:
  """Whether a stack dump's top frames wait in a collective (for a peer)."""
  top = '\n'.join(stack[:STACK_FRAMES_SHOWN])
  return any(marker in top for marker in COLLECTIVE_FRAMES)


def stuck_phase(beat: dict, stack: List[str]) -> str:
  """The phase a stuck process is in: its last beat's, or `collective` when its stack says so."""
  if in_collective(stack):
    return f'collective (during {beat["phase"]}: {beat.get("detail") or "no detail"})'
  return f'{beat["phase"]} ({beat.get("detail") or "no detail"})'


def holding_up(fired, live: list):
  """The process that holds the run up: of the live trainers, the one that waits for no peer
  (its stack is not in a collective), longest without a beat first; else the one that fired.

  A collective waits for its slowest member, so the first to pass the bound may only be
  waiting; which one passes first is a race between beats a moment apart.
  """
  own_work = [each for each in live if each.task.trains and not in_collective(each.stack())]
  if not own_work:
    return fired
  return min(own_work, key=lambda each: each.last_beat()['time'])


class StuckProcess(RuntimeError):
  """A training process made no progress within the bound."""


class PortTaken(RuntimeError):
  """A process could not bind its port: another process took it after it was picked."""


def run(training: strategy_lib.TrainingSettings, job_path: str,
        timeout_seconds: Optional[float] = None, port_attempts: int = PORT_ATTEMPTS) -> None:
  """Runs every task of the cluster to completion, or fails fast.

  Args:
    training: Strategy, worker counts, backup folder and the progress bound
      (`progress_timeout_seconds`: a training process whose last beat is older fails
      the run; 0 turns the bound off).
    job_path: JSON file with the executor's inputs, outputs and properties.
    timeout_seconds: Give up (and stop every process) after this long in all.
    port_attempts: Cluster starts with fresh ports when a port was taken before a
      process bound it.

  Raises:
    RuntimeError: naming the task that failed or is stuck, how (or in which phase),
      and its last lines. Every process is stopped first.
  """
  for attempt in range(1, port_attempts + 1):
    try:
      _run_once(training, job_path, timeout_seconds)
      return
    except PortTaken as error:
      if attempt == port_attempts:
        raise RuntimeError(f'{error} Tried {port_attempts} sets of ports.') from error
      progress.get_logger().warning('DistributedTrainer: %s Starting again on new ports '
                                    '(attempt %d of %d).', error, attempt + 1, port_attempts)


def _run_once(training: strategy_lib.TrainingSettings, job_path: str,
              timeout_seconds: Optional[float]) -> None:
  tasks = plan_tasks(training, pick_free_ports(processes_needed(training)))
  spec = cluster_spec(tasks)
  chief = tasks[0]
  heartbeat_folder = tempfile.mkdtemp(prefix='heartbeats-', dir=os.path.dirname(job_path))
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
      # Workers end with this process, whatever ends it (worker.py asks the kernel).
      environment[PARENT_VARIABLE] = str(os.getpid())
      # gRPC servers of the parameter_server strategy should fail over, not abort.
      environment.setdefault('GRPC_FAIL_FAST', 'use_caller')
      processes.append(_Process(
          task, [sys.executable, '-m', WORKER_MODULE, job_path, task.job, str(task.index)],
          environment, os.path.join(heartbeat_folder, f'{task.job}-{task.index}.json')))
    start = time.monotonic()
    trainers = [process for process in processes if process.task.trains]
    bound = training.progress_timeout_seconds
    while True:
      for process in processes:
        code = process.popen.poll()
        if code is not None and (code != 0 or not process.task.trains):
          process.finish_output()
          if code != 0 and process.could_not_bind() and process.last_beat()['phase'] == (
              heartbeat.SET_UP):
            raise PortTaken(f'{process.task.label} could not bind {process.task.address}: '
                            'another process took the port after it was picked.')
          raise RuntimeError(
              f'DistributedTrainer: {process.task.label} {process.describe_exit()}; every '
              'other process was stopped. Its last lines:\n  ' + '\n  '.join(process.tail))
      if all(process.popen.poll() == 0 for process in trainers):
        return
      if bound:
        for process in trainers:
          if process.popen.poll() is not None:
            continue
          if time.time() - process.last_beat()['time'] > bound:
            _fail_stuck(process, bound, processes)
      if timeout_seconds and time.monotonic() - start > timeout_seconds:
        raise RuntimeError(f'DistributedTrainer: training did not finish in '
                           f'{timeout_seconds:.0f} s; every process was stopped.')
      time.sleep(POLL_SECONDS)
  finally:
    for process in processes:
      process.stop()
    shutil.rmtree(heartbeat_folder, ignore_errors=True)


def _fail_stuck(fired: _Process, bound: float, processes: List[_Process]):
  """Collects every stack, then raises naming the process that holds the run up, its phase,
  where it waits and its last lines."""
  last_lines = {id(each): each.tail for each in processes}  # Before the dumps join the output.
  for each in processes:
    each.dump_stacks()
  time.sleep(STACK_DUMP_SECONDS)  # The dump arrives on stderr, into the tail.
  live = [each for each in processes if each.popen.poll() is None]
  stuck = holding_up(fired, live)
  beat = stuck.last_beat()
  stack = stuck.stack()
  others = [f'{each.task.label}: {stuck_phase(each.last_beat(), each.stack())}'
            for each in live if each is not stuck]
  raise StuckProcess(
      f'DistributedTrainer: training made no progress for {bound:.0f} s '
      f'(progress_timeout_seconds): {stuck.task.label} holds it up, in phase '
      f'{stuck_phase(beat, stack)}, its last beat {time.time() - beat["time"]:.0f} s ago; '
      'every process was stopped.'
      + (f' The others: {"; ".join(others)}.' if others else '')
      + (' Where it waits (most recent call first):\n  '
         + '\n  '.join(stack[:STACK_FRAMES_SHOWN]) if stack else '')
      + '\nIts last lines:\n  ' + '\n  '.join(last_lines[id(stuck)]))
