"""Exit statuses: 2 only for input refused by name, 130 for Ctrl-C wherever it lands (a Beam
step too), 1 for the rest."""

import json
import os
import signal

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from tfx_distillery.pipelines import local_runner
from tfx_distillery.components.common import beam_runner


@pytest.fixture(autouse=True)
def no_control_c_mark_left():
  """A test that fails mid-run leaves no Ctrl-C mark to hide the next test's errors."""
  yield
  local_runner._control_c_pressed.clear()  # pylint: disable=protected-access


def raise_from(module_file):
  """A ValueError raised by a function compiled as if it lived in `module_file`."""
  namespace = {}
  exec(compile('def check():\n  raise ValueError("label_key \'x\' names no feature")\n',  # pylint: disable=exec-used
               module_file, 'exec'), namespace)
  try:
    namespace['check']()
  except ValueError as error:
    return error


def test_exit_2_is_for_refused_input_only_and_a_library_error_in_the_run_is_a_failure(
    monkeypatch):
  ours = raise_from(local_runner.__file__)
  library = raise_from(os.path.join(os.path.dirname(json.__file__), 'decoder.py'))
  gone = FileNotFoundError(2, 'No such file or directory', 'last_run.json.tmp')
  monkeypatch.setattr(local_runner, '_pipeline_started', False)
  assert all(local_runner.is_bad_input(error) for error in (ours, library, gone))
  monkeypatch.setattr(local_runner, '_pipeline_started', True)
  assert local_runner.is_bad_input(ours)
  assert not local_runner.is_bad_input(library) and not local_runner.is_bad_input(gone)


class Interrupted(beam.DoFn):

  def process(self, element):
    raise KeyboardInterrupt


def test_control_c_inside_a_beam_step_exits_130_as_interrupted(monkeypatch, capsys):
  def run(unused_args):
    with beam.Pipeline(options=PipelineOptions([beam_runner.RUNNER_ARGUMENT])) as pipeline:
      _ = pipeline | beam.Create([1]) | 'InferKinds' >> beam.ParDo(Interrupted())

  monkeypatch.setattr(local_runner, 'run', run)
  assert local_runner.run_with_exit_status(None) == local_runner.EXIT_INTERRUPTED
  error = capsys.readouterr().err
  assert 'interrupted' in error and 'fix its input' not in error


def test_control_c_that_a_c_extension_turns_into_another_error_still_exits_130(
    monkeypatch, capsys):
  # As pybind11 does when Ctrl-C's handler raises while TensorFlow builds a NotFoundError
  # (CI, stop 98): the KeyboardInterrupt is gone, replaced by an unchained RuntimeError.
  def run(unused_args):
    try:
      signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
      pass
    raise RuntimeError('pybind11::error_already_set: MISMATCH of original and normalized '
                       'active exception types: ORIGINAL NotFoundError REPLACED BY '
                       'KeyboardInterrupt: <EMPTY MESSAGE>')

  monkeypatch.setattr(local_runner, 'run', run)
  # Python's own Ctrl-C handler, which the run wraps: a suite started in the background
  # (`make test-e2e &`) has SIGINT ignored, and the run then leaves it so.
  previous = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    assert local_runner.run_with_exit_status(None) == local_runner.EXIT_INTERRUPTED
  finally:
    signal.signal(signal.SIGINT, previous)
  error = capsys.readouterr().err
  assert 'interrupted' in error and 'MISMATCH' not in error and 'fix its input' not in error
  # The next run in the process starts without the mark: its own failure is a failure.
  def fail(unused_args):
    raise RuntimeError('a real failure')

  monkeypatch.setattr(local_runner, 'run', fail)
  assert local_runner.run_with_exit_status(None) == local_runner.EXIT_FAILED


def test_the_console_hides_a_library_error_record_of_an_interrupted_step_only():
  import logging  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel

  def record_of(raise_it):
    try:
      raise_it()
    except Exception:  # pylint: disable=broad-except
      return logging.LogRecord('apache_beam.runners.common', logging.ERROR, __file__, 1,
                               'step failed', None, sys.exc_info())

  def interrupted_step():
    try:
      raise KeyboardInterrupt
    except KeyboardInterrupt:
      raise RuntimeError("KeyboardInterrupt [while running 'InferKinds[0]']")  # As Beam does.

  def failed_step():
    raise ValueError('a real failure')

  hides = local_runner.HidesInterruptedSteps()
  assert not hides.filter(record_of(interrupted_step))
  assert hides.filter(record_of(failed_step))
  # After Ctrl-C, whatever a library logs with a traceback is the interrupt's doing.
  local_runner._control_c_pressed.set()  # pylint: disable=protected-access
  try:
    assert not hides.filter(record_of(failed_step))
  finally:
    local_runner._control_c_pressed.clear()  # pylint: disable=protected-access
  assert hides.filter(logging.LogRecord('x', logging.ERROR, __file__, 1, 'plain', None, None))
