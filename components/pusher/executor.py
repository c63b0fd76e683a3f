"""Executor of AtomicPusher: the stock push into a staging folder, then one rename."""

import os
from typing import Any, Dict, List

from absl import logging
import tensorflow as tf
from tfx import types
from tfx.components.pusher import executor as pusher_executor
from tfx.dsl.io import fileio
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from tfx_distillery.components.common import artifacts

# Model servers take only numeric folder names as versions, so they skip this one.
STAGING_DIR_NAME = '.incomplete'
# What a full disk, a read-only folder or a missing permission raises, locally or through
# TensorFlow's file systems.
WRITE_ERRORS = (OSError, tf.errors.OpError)


class PushFailedError(RuntimeError):
  """The serving folder could not take the model; what was there is untouched."""


def _describe(error: Exception) -> str:
  if isinstance(error, OSError) and error.strerror:
    return f'{error.strerror} (errno {error.errno}' + (
        f', {error.filename})' if error.filename else ')')
  return str(getattr(error, 'message', None) or error)


def process_is_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def remove_abandoned_staging(staging_root: str) -> None:
  """Removes staging folders whose push died (its process is gone)."""
  if not fileio.isdir(staging_root):
    return
  for name in fileio.listdir(staging_root):
    name = name.rstrip('/')
    pid_text = name.rsplit('-', 1)[-1]
    if not pid_text.isdigit() or not process_is_alive(int(pid_text)):
      logging.info('Removing %s, left by a push that did not finish.', name)
      fileio.rmtree(os.path.join(staging_root, name))


def copy_nested_saved_models(model_path: str, staged_path: str) -> None:
  """Copies the `saved_model.pb` files below the top level that the stock Pusher skips.

  The stock Pusher holds back every `saved_model.pb` to copy the top one last (its
  "model is complete" signal), and so drops nested ones, such as the transform
  graph inside a Quantizer's self-contained TFLite folder.
  """
  for folder, _, files in fileio.walk(model_path):
    relative = os.path.relpath(folder, model_path)
    if relative == '.' or 'saved_model.pb' not in files:
      continue
    target = os.path.join(staged_path, relative, 'saved_model.pb')
    if not fileio.exists(target):
      fileio.makedirs(os.path.dirname(target))
      fileio.copy(os.path.join(folder, 'saved_model.pb'), target)


class Executor(pusher_executor.Executor):
  """Runs TFX's Pusher executor against a staging folder, then renames the result."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]], exec_properties: Dict[str, Any]):
    destination = pusher_pb2.PushDestination()
    proto_utils.json_to_proto(
        exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], destination)
    if destination.WhichOneof('destination') != 'filesystem':
      return super().Do(input_dict, output_dict, exec_properties)
    base_directory = destination.filesystem.base_directory
    staging_root = os.path.join(base_directory, STAGING_DIR_NAME)
    staging_base = os.path.join(staging_root, f'push-{os.getpid()}')
    destination.filesystem.base_directory = staging_base
    staged_properties = dict(exec_properties)
    staged_properties[standard_component_specs.PUSH_DESTINATION_KEY] = (
        proto_utils.proto_to_json(destination))
    try:
      self._push_through_staging(input_dict, output_dict, staged_properties, base_directory,
                                 staging_base)
    except WRITE_ERRORS as error:
      raise PushFailedError(
          f'AtomicPusher: could not write the model into the serving folder '
          f'{base_directory}: {_describe(error)}. Nothing was pushed, and the versions '
          'already there are untouched. Free space or make the folder writable, then '
          'rerun (finished components come from the cache).') from error
    finally:
      self._remove_staging(staging_root, staging_base)

  def _push_through_staging(self, input_dict, output_dict, staged_properties,
                            base_directory: str, staging_base: str) -> None:
    """The stock push into `staging_base`, then one rename into `base_directory`."""
    remove_abandoned_staging(os.path.dirname(staging_base))
    super().Do(input_dict, output_dict, staged_properties)
    pushed_model = artifact_utils.get_single_instance(
        output_dict[standard_component_specs.PUSHED_MODEL_KEY])
    if not pushed_model.get_int_custom_property('pushed'):
      return
    version = pushed_model.get_string_custom_property('pushed_version')
    for copy in (os.path.join(staging_base, version), pushed_model.uri):
      copy_nested_saved_models(self.GetModelPath(input_dict), copy)
    serving_path = os.path.join(base_directory, version)
    if fileio.exists(serving_path):
      raise PushFailedError(
          f'{serving_path} already exists: another push took version {version} '
          'this second. Rerun to push under a new version.')
    fileio.rename(os.path.join(staging_base, version), serving_path)
    pushed_model.set_string_custom_property('pushed_destination', serving_path)
    model = artifact_utils.get_single_instance(
        input_dict[standard_component_specs.MODEL_KEY])
    artifacts.copy_model_format(model, pushed_model)
    logging.info('Model (%s) pushed to %s in one rename.', artifacts.model_format(model),
                 serving_path)

  @staticmethod
  def _remove_staging(staging_root: str, staging_base: str) -> None:
    """Removes this push's staging folder, and the staging root when it is left empty."""
    try:
      if fileio.exists(staging_base):
        fileio.rmtree(staging_base)
      if fileio.isdir(staging_root) and not fileio.listdir(staging_root):
        fileio.rmtree(staging_root)
    except WRITE_ERRORS as error:
      # A read-only folder had nothing written; anything else is removed by the next push.
      logging.warning('Could not remove %s: %s', staging_base, error)
