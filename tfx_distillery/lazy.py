"""Public names that load their module on first use (PEP 562), so importing a package is cheap.

The `distillery` command must redirect TensorFlow's start-up lines before anything
imports TensorFlow, and `tfx_distillery.components.common.progress` must not pull in TFX.
"""

import importlib
from typing import Callable, Dict, List, Tuple


def exports(package_name: str, module_of: Dict[str, str],
            package_globals: dict) -> Tuple[Callable[[str], object], Callable[[], List[str]]]:
  """Returns the `__getattr__` and `__dir__` of a package whose names load lazily.

  Args:
    package_name: The package's `__name__`.
    module_of: Public name -> the absolute module that defines it.
    package_globals: The package's `globals()`; a loaded name is cached there.
  """

  def getattr_(name: str):
    if name in module_of:
      value = getattr(importlib.import_module(module_of[name]), name)
      package_globals[name] = value
      return value
    raise AttributeError(f'module {package_name!r} has no attribute {name!r}')

  def dir_() -> List[str]:
    return sorted(set(package_globals) | set(module_of))

  return getattr_, dir_
