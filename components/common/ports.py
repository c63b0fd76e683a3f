"""Free TCP ports for the processes we start: the trainers' cluster and the Beam engines'."""

import socket
from typing import List

LOOPBACK = '127.0.0.1'


def free_ports(count: int, host: str = LOOPBACK) -> List[int]:
  """`count` distinct free TCP ports on `host`, each held until all are chosen.

  Raises:
    OSError: when the system has no free port left.
  """
  sockets = []
  try:
    for _ in range(count):
      handle = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      sockets.append(handle)
      handle.bind((host, 0))
    return [handle.getsockname()[1] for handle in sockets]
  finally:
    for handle in sockets:
      handle.close()
