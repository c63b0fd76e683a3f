"""A push killed with SIGKILL half-way never leaves a half-written model version.

The push runs in a child process whose file copy is slowed down (fault injection),
so the kill lands after the first file and before the last."""

import filecmp
import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from tfx import v1 as tfx
from tfx.types import standard_artifacts

from tfx_distillery.components.pusher import executor as pusher_executor
from tests import helpers

PUSH_SCRIPT = """
import sys, time
from tfx.dsl.io import fileio

model_dir, serving_dir, pushed_dir, marker, executor_module = sys.argv[1:6]
original_copy = fileio.copy

def slow_copy(source, destination, overwrite=False):
  original_copy(source, destination, overwrite)
  open(marker, 'a').close()
  time.sleep(60)

fileio.copy = slow_copy
executor = __import__(executor_module, fromlist=['Executor']).Executor()
from tests.reliability.test_kill_during_push import push_arguments
executor.Do(*push_arguments(model_dir, serving_dir, pushed_dir))
"""


def push_arguments(model_dir, serving_dir, pushed_dir):
  """The Do() arguments of a push of the model at `model_dir`, blessed."""
  model = helpers.artifact(standard_artifacts.Model, model_dir)
  blessing = helpers.artifact(standard_artifacts.ModelBlessing, model_dir + '-blessing')
  blessing.set_int_custom_property('blessed', 1)
  pushed = helpers.artifact(standard_artifacts.PushedModel, pushed_dir)
  destination = tfx.proto.PushDestination(
      filesystem=tfx.proto.PushDestination.Filesystem(base_directory=serving_dir))
  from tfx.utils import proto_utils
  return ({'model': [model], 'model_blessing': [blessing]}, {'pushed_model': [pushed]},
          {'push_destination': proto_utils.proto_to_json(destination)})


@pytest.fixture
def model_dir(tmp_path):
  """A real SavedModel with variables, under the Format-Serving folder Trainer writes."""
  module = tf.Module()
  module.weights = tf.Variable(tf.ones([64, 64]))
  module.serve = tf.function(lambda inputs: tf.matmul(inputs, module.weights),
                             input_signature=[tf.TensorSpec([None, 64], tf.float32)])
  path = tmp_path / 'model'
  tf.saved_model.save(module, str(path / 'Format-Serving'))
  return str(path)


def versions(serving_dir):
  return sorted(name for name in os.listdir(serving_dir) if name.isdigit())


def kill_mid_push(tmp_path, model_dir, executor_module):
  """Starts a slowed push, SIGKILLs it after its first file, returns the serving dir."""
  serving_dir = tmp_path / 'serving'
  marker = tmp_path / 'first-file-copied'
  process = subprocess.Popen(
      [sys.executable, '-c', PUSH_SCRIPT, model_dir, str(serving_dir), str(tmp_path / 'pushed'),
       str(marker), executor_module],
      **helpers.child_process_options(),
      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  deadline = time.monotonic() + 120
  while not marker.exists():
    assert process.poll() is None, process.stderr.read().decode()[-3000:]
    assert time.monotonic() < deadline, 'the push never copied a file'
    time.sleep(0.2)
  process.send_signal(signal.SIGKILL)
  process.wait()
  return str(serving_dir)


def test_a_push_killed_mid_copy_leaves_no_version_and_the_next_push_is_whole(tmp_path,
                                                                          model_dir):
  serving_dir = kill_mid_push(tmp_path, model_dir, 'tfx_distillery.components.pusher.executor')

  assert versions(serving_dir) == []
  assert os.listdir(os.path.join(serving_dir, pusher_executor.STAGING_DIR_NAME))

  input_dict, output_dict, properties = push_arguments(model_dir, serving_dir,
                                                       str(tmp_path / 'pushed-again'))
  pusher_executor.Executor().Do(input_dict, output_dict, properties)
  [version] = versions(serving_dir)
  pushed = os.path.join(serving_dir, version)
  comparison = filecmp.dircmp(os.path.join(model_dir, 'Format-Serving'), pushed)
  assert not (comparison.left_only or comparison.right_only or comparison.diff_files)
  loaded = tf.saved_model.load(pushed)
  assert loaded.serve(tf.ones([1, 64])).numpy()[0, 0] == 64.0
  assert output_dict['pushed_model'][0].get_string_custom_property(
      'pushed_destination') == pushed
  # The abandoned staging folder of the killed push is gone too.
  assert not os.path.exists(os.path.join(serving_dir, pusher_executor.STAGING_DIR_NAME))


def test_the_stock_pusher_killed_mid_copy_leaves_a_half_written_version(tmp_path, model_dir):
  """Why AtomicPusher exists: the same kill against TFX's own Pusher executor."""
  serving_dir = kill_mid_push(tmp_path, model_dir, 'tfx.components.pusher.executor')

  [version] = versions(serving_dir)
  assert not os.path.exists(os.path.join(serving_dir, version, 'saved_model.pb'))


def test_an_unblessed_model_is_not_pushed_and_leaves_nothing_behind(tmp_path, model_dir):
  serving_dir = str(tmp_path / 'serving')
  input_dict, output_dict, properties = push_arguments(model_dir, serving_dir,
                                                       str(tmp_path / 'pushed'))
  input_dict['model_blessing'][0].set_int_custom_property('blessed', 0)
  pusher_executor.Executor().Do(input_dict, output_dict, properties)
  assert output_dict['pushed_model'][0].get_int_custom_property('pushed') == 0
  assert not os.path.exists(serving_dir) or versions(serving_dir) == []
