"""A user-code wheel is installed by pip once per process, however often TFX loads from it."""

import subprocess

from tfx.components.util import udf_utils

from tfx_distillery.components.common import modules
from tfx_distillery.pipelines import datasets


def count_pip_installs(monkeypatch):
  """Counts the pip commands TFX's installer runs, and runs them."""
  commands = []
  original = subprocess.check_call

  def check_call(command, *args, **kwargs):
    if command[1:4] == ['-m', 'pip', 'install']:
      commands.append(command)
    return original(command, *args, **kwargs)

  monkeypatch.setattr(subprocess, 'check_call', check_call)
  return commands


def test_tfx_loads_every_function_from_one_pip_install_of_the_wheel(tmp_path, monkeypatch):
  installs = count_pip_installs(monkeypatch)
  _, module_path = udf_utils.package_user_module_file(
      'Distiller', datasets.module_file('tabular_student'), str(tmp_path / 'root'))
  exec_properties = {'module_path': module_path}
  with modules.user_module_first(exec_properties):
    first = udf_utils.get_fn(exec_properties, 'build_student')
    second = udf_utils.get_fn(exec_properties, 'build_student')
  assert len(installs) == 1, installs
  with open(first.__code__.co_filename) as loaded, \
      open(datasets.module_file('tabular_student')) as given:
    assert loaded.read() == given.read()
  assert second.__code__.co_filename.endswith('tabular_student.py')
  # Outside the context TFX's own installer is back: pip runs again.
  assert udf_utils.install_to_temp_directory is not modules.install_once
  udf_utils.get_fn(exec_properties, 'build_student')
  assert len(installs) == 2


def test_each_wheel_is_installed_once_and_copied_where_tfx_asks(tmp_path, monkeypatch):
  installs = count_pip_installs(monkeypatch)
  wheels = [udf_utils.package_user_module_file(
      'Distiller', datasets.module_file(name), str(tmp_path / name))[1].split('@')[1]
            for name in ('tabular_student', 'taxi_student')]
  folders = [modules.install_once(wheel) for wheel in wheels]
  assert len(installs) == 2 and folders[0] != folders[1]
  copied = modules.install_once(wheels[1], temp_dir=str(tmp_path / 'copy'))
  assert len(installs) == 2 and (tmp_path / 'copy' / 'taxi_student.py').is_file()
  assert copied == str(tmp_path / 'copy')
