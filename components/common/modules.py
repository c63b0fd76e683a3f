"""Loading user module files from the file the pipeline was given, and nowhere else."""

import ast
import contextlib
import os
import shutil
import sys
import threading
from typing import Any, Dict, Iterator, Optional, Tuple

from tfx.components.util import udf_utils
from tfx.utils import io_utils

MODULE_PATH_KEY = 'module_path'

# TFX's own installer, kept so that the once-per-wheel one below can call it.
_INSTALL_WITH_PIP = udf_utils.install_to_temp_directory
# (wheel path, size, mtime) -> the folder pip installed it into, in this process.
_INSTALLED: Dict[Tuple[str, int, int], str] = {}
_INSTALLED_LOCK = threading.Lock()


def install_once(pip_dependency: str, temp_dir: Optional[str] = None) -> str:
  """TFX's `udf_utils.install_to_temp_directory`, with pip run once per wheel file.

  TFX installs the user-code wheel with `pip install --target` each time it loads a
  function from it: 8 times in one run of our chain, about 2 s each (16 s of a 280 s
  `make demo`). The wheel's name carries the hash of the module files, so a second
  install of the same file would write the same files: they are copied from the first.
  Anything that is not a local file (a requirement such as "six==1.16") goes to pip.

  Args:
    pip_dependency: A wheel's path, or a pip requirement.
    temp_dir: The folder to install into; a new temporary one when None.

  Returns:
    The folder that holds the installed package, as TFX's function returns.
  """
  if not os.path.isfile(pip_dependency):
    return _INSTALL_WITH_PIP(pip_dependency, temp_dir=temp_dir)
  status = os.stat(pip_dependency)
  key = (os.path.realpath(pip_dependency), status.st_size, status.st_mtime_ns)
  with _INSTALLED_LOCK:
    installed = _INSTALLED.get(key)
    if installed is None or not os.path.isdir(installed):
      installed = _INSTALL_WITH_PIP(pip_dependency)
      _INSTALLED[key] = installed
  if temp_dir is None:
    return installed
  shutil.copytree(installed, temp_dir, dirs_exist_ok=True)
  return temp_dir


@contextlib.contextmanager
def user_module_first(exec_properties: Dict[str, Any]) -> Iterator[None]:
  """Makes the user module of an execution win over same-named modules on sys.path.

  In a pipeline, TFX packages the module file into a wheel and records
  `module_path = "<module name>@<wheel>"`; the executor installs the wheel into a
  temporary folder that it *appends* to sys.path, then imports the module by
  name. A module of the same name found earlier (in the working directory, or an
  installed package) is imported instead of the file the pipeline was given. While
  this context is active the wheel's folder comes first and no module of that
  name is cached, so TFX's own loader finds the given file. TFX's installs inside it
  run pip once per wheel (`install_once`).

  Args:
    exec_properties: The execution's properties; without a wheel `module_path`
      (a bare `module_file` is already loaded by its path) nothing changes.

  Yields:
    Nothing.
  """
  module_path = exec_properties.get(MODULE_PATH_KEY) or ''
  if '@' not in module_path:
    yield
    return
  module_name, wheel_path = module_path.split('@', 1)
  install_dir = install_once(io_utils.ensure_local(wheel_path))
  sys.path.insert(0, install_dir)
  sys.modules.pop(module_name, None)
  # TFX's loaders call the module's installer by name (TempPipInstallContext).
  installer, udf_utils.install_to_temp_directory = udf_utils.install_to_temp_directory, install_once
  try:
    yield
  finally:
    udf_utils.install_to_temp_directory = installer
    if install_dir in sys.path:
      sys.path.remove(install_dir)


def check_module_defines(module_file: str, function_name: str, signature: str) -> None:
  """Raises ValueError when a local module file is missing or lacks `function_name`.

  The file is parsed, not imported, so constructing the pipeline runs no user code.
  Remote paths (gs://...) are left to the executor, which reports the same.

  Args:
    module_file: The path the component was given.
    function_name: The top-level function the component calls.
    signature: Its arguments and result, for the message.
  """
  if '://' in module_file:
    return
  if not os.path.isfile(module_file):
    raise ValueError(f'module_file {module_file!r} does not exist; give the path of a .py '
                     f'file defining {function_name}{signature}.')
  with open(module_file, encoding='utf-8') as handle:
    tree = ast.parse(handle.read(), filename=module_file)
  defined = {node.name for node in tree.body
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
  defined |= {target.id for node in tree.body if isinstance(node, ast.Assign)
              for target in node.targets if isinstance(target, ast.Name)}
  if function_name not in defined:
    raise ValueError(f'module_file {module_file!r} must define {function_name}{signature}; '
                     'it defines none.')
