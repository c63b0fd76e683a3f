"""Where each component's wall time goes: a profile by phase, for the pipeline benchmark.

While `recording()` is active, the functions every component reaches its work through
(Keras' fit and evaluate, the reading library, the measuring module, the TFLite
conversion, the SavedModel export, Beam's Pipeline) are timed, and each second is
booked to the pipeline node that is running (LocalDagRunner runs one at a time, in
this process) under one phase. Time inside a timed call that another timed call
takes is booked once, to the inner one. A component's wall time that no phase
claims is `other` (TFX's launcher, MLMD, artifact bookkeeping, small Python work).

Keras' fit is split by a callback: the time from the start of fit to the end of the
first call of steps, less what a later call of the same size takes, is the fixed
cost of that training (tracing, strategy and iterator set-up, the first read); the
rest of fit is `steps` (the steps, validation and epoch-end callbacks).
"""

import collections
import contextlib
import functools
import statistics
import time
from typing import Callable, Dict, Iterator, List

# The phases, in the order the tables show them.
PHASES = ('beam construction', 'beam run', 'tracing (time to first step)', 'steps',
          'reading', 'model loading', 'export', 'conversion', 'measurement', 'other')


class Recorder:
  """Seconds by (node, phase), and each training's time to its first step."""

  def __init__(self, node_of: Callable[[], str]):
    self.node_of = node_of
    self.seconds = collections.defaultdict(float)
    self.first_step_seconds: Dict[str, List[float]] = collections.defaultdict(list)
    # {node: {timed function: [calls, seconds including inner timed calls]}}
    self.calls = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0.0]))
    # Open timed calls: [phase, seconds taken by timed calls inside].
    self._stack = []

  @contextlib.contextmanager
  def phase(self, name: str) -> Iterator[None]:
    start = time.monotonic()
    self._stack.append([name, 0.0])
    try:
      yield
    finally:
      elapsed = time.monotonic() - start
      _, inner = self._stack.pop()
      if name is not None:
        self.seconds[(self.node_of(), name)] += elapsed - inner
      if self._stack:
        self._stack[-1][1] += elapsed

  def book(self, name: str, seconds: float) -> None:
    """Books `seconds` of the innermost open call (opened with phase None) to `name`."""
    self.seconds[(self.node_of(), name)] += seconds

  def table(self, component_seconds: Dict[str, float]) -> Dict[str, Dict[str, float]]:
    """{node: {phase: seconds}} with `other` the wall time no phase claimed."""
    split = {}
    for node, wall in component_seconds.items():
      phases = {phase: self.seconds.get((node, phase), 0.0) for phase in PHASES[:-1]}
      phases['other'] = max(0.0, wall - sum(phases.values()))
      split[node] = phases
    return split


def _fit_timer(recorder: Recorder):
  import tf_keras  # pylint: disable=g-import-not-at-top

  class FitTimer(tf_keras.callbacks.Callback):
    """Timestamps of each call of steps and each validation."""

    def __init__(self):
      super().__init__()
      self.fit_start = time.monotonic()
      self.batch_start = None
      self.batches = []  # (start, end) of each call of steps
      self.validations = []

    def on_train_batch_begin(self, batch, logs=None):
      self.batch_start = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
      self.batches.append((self.batch_start, time.monotonic()))

    def on_test_begin(self, logs=None):
      self.test_start = time.monotonic()

    def on_test_end(self, logs=None):
      self.validations.append(time.monotonic() - self.test_start)

    def fixed_seconds(self) -> float:
      """Fit's start to the end of its first call, less a later call's time; plus the
      first validation less a later one's."""
      if not self.batches:
        return 0.0
      durations = [end - start for start, end in self.batches]
      steady = statistics.median(durations[1:]) if len(durations) > 1 else 0.0
      fixed = self.batches[0][1] - self.fit_start - steady
      if len(self.validations) > 1:
        fixed += self.validations[0] - statistics.median(self.validations[1:])
      return max(0.0, fixed)

  return FitTimer


@contextlib.contextmanager
def recording(node_of: Callable[[], str]) -> Iterator[Recorder]:
  """Times the library's entry points while active; yields the Recorder."""
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.common import labels  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.common import measuring  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.common import modeling  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.common import reading  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.quantizer import conversion  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.quantizer import raw_model  # pylint: disable=g-import-not-at-top

  recorder = Recorder(node_of)
  fit_timer = _fit_timer(recorder)
  timed = [
      (reading, 'make_dataset', 'reading'),
      (measuring, 'from_examples_artifact', 'reading'),
      (measuring, 'from_raw_examples', 'reading'),
      (measuring, 'from_transformed_examples', 'reading'),
      (labels, 'count_values', 'reading'),
      (measuring, 'load_scorer', 'model loading'),
      (tf_keras.models, 'load_model', 'model loading'),
      (measuring, 'accuracy', 'measurement'),
      (measuring, 'measure', 'measurement'),
      (measuring, 'latency_ms', 'measurement'),
      (measuring, 'measure_raw_flatbuffer', 'measurement'),
      (measuring, 'raw_flatbuffer_classes', 'measurement'),
      (tf_keras.Model, 'evaluate', 'measurement'),
      (tf_keras.Model, 'predict', 'measurement'),
      (modeling, 'export_serving_model', 'export'),
      (conversion, 'convert', 'conversion'),
      (raw_model, 'convert', 'conversion'),
  ]
  originals = []

  def timed_call(function, phase):
    name = f'{function.__module__.split(".")[-1]}.{function.__qualname__}'

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
      start = time.monotonic()
      try:
        with recorder.phase(phase):
          return function(*args, **kwargs)
      finally:
        calls = recorder.calls[node_of()][name]
        calls[0] += 1
        calls[1] += time.monotonic() - start

    return wrapper

  for owner, attribute, phase in timed:
    if hasattr(owner, attribute):
      original = getattr(owner, attribute)
      originals.append((owner, attribute, original))
      setattr(owner, attribute, timed_call(original, phase))

  original_fit = tf_keras.Model.fit

  @functools.wraps(original_fit)
  def fit(model, *args, **kwargs):
    timer = fit_timer()
    kwargs['callbacks'] = list(kwargs.get('callbacks') or []) + [timer]
    start = time.monotonic()
    with recorder.phase(None):
      history = original_fit(model, *args, **kwargs)
      fixed = timer.fixed_seconds()
      recorder.book('tracing (time to first step)', fixed)
      recorder.book('steps', time.monotonic() - start - fixed)
    recorder.first_step_seconds[node_of()].append(fixed)
    return history

  originals.append((tf_keras.Model, 'fit', original_fit))
  tf_keras.Model.fit = fit

  # Beam: the time from a Pipeline's creation to its run() is construction.
  original_init, original_run = beam.Pipeline.__init__, beam.Pipeline.run

  @functools.wraps(original_init)
  def init(pipeline, *args, **kwargs):
    pipeline._distillery_created = time.monotonic()  # pylint: disable=protected-access
    original_init(pipeline, *args, **kwargs)

  @functools.wraps(original_run)
  def run(pipeline, *args, **kwargs):
    created = getattr(pipeline, '_distillery_created', None)
    if created is not None:
      recorder.book('beam construction', time.monotonic() - created)
      pipeline._distillery_created = None  # pylint: disable=protected-access
    with recorder.phase('beam run'):
      result = original_run(pipeline, *args, **kwargs)
      result.wait_until_finish()
      return result

  originals += [(beam.Pipeline, '__init__', original_init), (beam.Pipeline, 'run', original_run)]
  beam.Pipeline.__init__, beam.Pipeline.run = init, run
  try:
    yield recorder
  finally:
    for owner, attribute, original in reversed(originals):
      setattr(owner, attribute, original)
