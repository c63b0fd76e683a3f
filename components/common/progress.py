"""Logs a person can follow: one line as each component starts and ends, with wall time.

No TensorFlow import here, so command lines can log before TensorFlow loads.
"""

import contextlib
import logging
import sys
import time
from typing import Iterator

LOGGER_NAME = 'distillery'


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


@contextlib.contextmanager
def component_timer(component_name: str) -> Iterator[None]:
  """Logs one line when a component starts and one when it ends, with wall time."""
  logger = get_logger()
  logger.info('%s: started', component_name)
  start = time.monotonic()
  try:
    yield
  except BaseException:
    logger.info('%s: FAILED after %.1f s', component_name,
                time.monotonic() - start)
    raise
  logger.info('%s: finished in %.1f s', component_name,
              time.monotonic() - start)
