"""Logs a person can follow: one line as each component starts and ends, with wall time.

No TensorFlow import here, so command lines can log before TensorFlow loads.
"""

import contextlib
import logging
import os
import sys
import time
from typing import Iterator, TextIO

LOGGER_NAME = 'distillery'
# The component whose executor runs in this process (set by component_timer), for messages.
_current_component = []


def get_logger() -> logging.Logger:
  """Returns the project logger, with a stdout handler if nobody configured one."""
  logger = logging.getLogger(LOGGER_NAME)
  if not logger.handlers:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter('%(asctime)s %(message)s', '%H:%M:%S'))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    # The root logger may print absl's INFO flood; ours stays separate.
    logger.propagate = False
  return logger


def set_console(stream) -> None:
  """Points the project logger's console handler at `stream`."""
  for handler in get_logger().handlers:
    if isinstance(handler, logging.StreamHandler):
      handler.setStream(stream)


def current_component(default: str = 'tfx_distillery') -> str:
  """The component running in this process (its name without ' executor'), else `default`."""
  return _current_component[-1] if _current_component else default


@contextlib.contextmanager
def running_component(component_name: str) -> Iterator[None]:
  """Names the component that errors raised meanwhile should name."""
  _current_component.append(component_name)
  try:
    yield
  finally:
    _current_component.pop()


@contextlib.contextmanager
def component_timer(component_name: str) -> Iterator[None]:
  """Logs one line when a component starts and one when it ends, with wall time."""
  logger = get_logger()
  logger.info('%s: started', component_name)
  start = time.monotonic()
  try:
    with running_component(component_name.replace(' executor', '')):
      yield
  except BaseException:
    logger.info('%s: FAILED after %.1f s', component_name,
                time.monotonic() - start)
    raise
  logger.info('%s: finished in %.1f s', component_name,
              time.monotonic() - start)


@contextlib.contextmanager
def process_output_to(target_fd: int, include_stderr: bool) -> Iterator[TextIO]:
  """Points this process's stdout (and stderr) file descriptors at `target_fd`.

  TFX packages module files with pip and setuptools subprocesses, and TensorFlow
  logs from C++; they write to the file descriptors, not to `sys.stdout`, so
  only redirecting those keeps a console readable.

  Args:
    target_fd: Open file descriptor that receives the output.
    include_stderr: Redirect stderr too (else only stdout).

  Yields:
    A stream on the original stdout; progress lines are sent there meanwhile.
  """
  sys.stdout.flush()
  sys.stderr.flush()
  redirected = (1, 2) if include_stderr else (1,)
  originals = {fd: os.dup(fd) for fd in redirected}
  console = os.fdopen(os.dup(originals[1]), 'w', buffering=1)
  set_console(console)
  for fd in redirected:
    os.dup2(target_fd, fd)
  try:
    yield console
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, original in originals.items():
      os.dup2(original, fd)
      os.close(original)
    set_console(sys.stdout)
    console.close()
