"""Checks on execution parameters shared by every component's constructor."""

import re
from typing import Any

# Names that say "this value is a credential".
SECRET_NAME = re.compile(r'secret|passw(or)?d|token|api[_-]?key|credential|private[_-]?key',
                         re.IGNORECASE)


def refuse_secrets(parameter_name: str, value: Any) -> None:
  """Raises when a parameter carries something named like a credential.

  Execution parameters are stored in clear in ML Metadata, in every execution's
  record and in the compiled Kubeflow pipeline JSON. A credential belongs in the
  environment of the process that needs it or in a secret manager (Kubernetes
  secrets, Secret Manager), read at run time.

  Args:
    parameter_name: The parameter, as named in the error (e.g. `custom_config`).
    value: Its value: dicts and lists are searched through; `--name=value`
      strings (Beam arguments) are checked by name.

  Raises:
    ValueError: naming the parameter and the key that looks like a secret.
  """
  if isinstance(value, dict):
    for key, item in value.items():
      if SECRET_NAME.search(str(key)):
        raise ValueError(
            f'{parameter_name}[{key!r}] looks like a credential. Execution parameters are '
            'stored in clear in ML Metadata and in the compiled pipeline; read the secret '
            'at run time from the environment or a secret manager instead.')
      refuse_secrets(f'{parameter_name}[{key!r}]', item)
  elif isinstance(value, (list, tuple)):
    for position, item in enumerate(value):
      refuse_secrets(f'{parameter_name}[{position}]', item)
  elif isinstance(value, str) and value.startswith('--') and '=' in value:
    name = value[2:].split('=', 1)[0]
    if SECRET_NAME.search(name):
      raise ValueError(
          f'{parameter_name} passes --{name}=..., which looks like a credential. Pipeline '
          'arguments are stored in clear in ML Metadata and in the compiled pipeline; let '
          'the runner read it from the environment or a secret manager instead.')
