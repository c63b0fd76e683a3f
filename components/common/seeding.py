"""One seed for a run: checked at construction, drawn when absent, applied per process.

A component that draws random numbers takes `random_seed`. Its executor seeds Python,
NumPy and TensorFlow with it in every process that trains and turns on TensorFlow's
op determinism, so the same seed on the same machine gives the same weights. With no
seed, one is drawn and used for the draws, without op determinism (as fast as before,
not bit-for-bit repeatable). Either way the seed goes into the component's
`metrics.json` and onto its output artifacts in ML Metadata.
"""

import contextlib
import random
import secrets
from typing import Any, Dict, Iterator, Optional, Tuple

RANDOM_SEED_KEY = 'random_seed'
# The artifact property that records which seed made a model.
SEED_PROPERTY = 'random_seed'
# NumPy takes seeds below 2**32; TensorFlow's op seeds are derived from the global one.
MAX_SEED = 2**31 - 1


def validate(random_seed: Any) -> None:
  """Raises ValueError naming `random_seed` unless it is None or an integer in [0, 2**31 - 1].

  Args:
    random_seed: The value given to a component, `create_pipeline` or `--seed`.
  """
  if random_seed is None:
    return
  if not isinstance(random_seed, int) or isinstance(random_seed, bool):
    raise ValueError(f'random_seed must be an integer in [0, {MAX_SEED}] or None; got '
                     f'{random_seed!r} ({type(random_seed).__name__}).')
  if not 0 <= random_seed <= MAX_SEED:
    raise ValueError(f'random_seed must be an integer in [0, {MAX_SEED}] or None; got '
                     f'{random_seed}.')


def resolve(random_seed: Optional[Any]) -> int:
  """The run's seed: the one given (an execution property), or a fresh draw to record."""
  if random_seed is None or random_seed == '':
    return secrets.randbelow(MAX_SEED + 1)
  return int(random_seed)


def from_properties(exec_properties: Dict[str, Any]) -> Tuple[int, bool]:
  """(seed, deterministic) of an execution: op determinism only when the seed was given."""
  given = exec_properties.get(RANDOM_SEED_KEY)
  return resolve(given), given is not None and given != ''


def seed_process(random_seed: int, deterministic: bool) -> None:
  """Seeds Python, NumPy and TensorFlow; `deterministic` makes TensorFlow's kernels so too.

  Called once per training process. Op determinism also makes tf.data keep its
  element order; an op with no deterministic kernel then raises
  `UnimplementedError`, which `named_nondeterminism` turns into a message.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  if deterministic:
    # Keras numbers its layers per process (dense_4, dense_9): a component that runs after
    # others in one process (LocalDagRunner, a notebook) would name, and so serialize, the
    # same model differently. Nothing built before this component is used in it.
    tf_keras.backend.clear_session()
    tf.config.experimental.enable_op_determinism()
  random.seed(random_seed)
  tf_keras.utils.set_random_seed(random_seed)


@contextlib.contextmanager
def seeded(random_seed: int, deterministic: bool, component_name: str) -> Iterator[None]:
  """Runs the block seeded and deterministic, then restores the process's determinism.

  In-process executors share one Python process under LocalDagRunner: the next
  component (or a user's code in a notebook) gets op determinism back as it was.

  Args:
    random_seed: The resolved seed.
    deterministic: Turn on op determinism (the seed was given, not drawn).
    component_name: Named when an op has no deterministic kernel.
  """
  from tensorflow.python.framework import config as tf_config  # pylint: disable=g-import-not-at-top
  was_deterministic = tf_config.is_op_determinism_enabled()
  seed_process(random_seed, deterministic)
  try:
    with named_nondeterminism(component_name):
      yield
  finally:
    if not was_deterministic:
      tf_config.disable_op_determinism()


@contextlib.contextmanager
def named_nondeterminism(component_name: str) -> Iterator[None]:
  """Turns TensorFlow's "not deterministic" errors into one naming the op and the component.

  An op with no deterministic kernel raises `UnimplementedError`; a few Python-level
  ops (fractional pooling, an unseeded random op) raise ValueError or RuntimeError.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  try:
    yield
  except (tf.errors.UnimplementedError, ValueError, RuntimeError) as error:
    text = getattr(error, 'message', None) or str(error)
    if 'determinis' not in text.lower():
      raise
    operation = getattr(error, 'op', None)
    op_name = getattr(operation, 'type', None) or getattr(operation, 'name', None) or 'an op'
    raise RuntimeError(
        f'{component_name}: {op_name} has no deterministic form here, and a seeded run makes '
        f'every op deterministic. TensorFlow said: {text.strip().splitlines()[0]} Run it '
        'without random_seed to train without op determinism (a seed is then drawn, '
        'recorded and used for the draws).') from error


def record(artifacts, random_seed: int) -> None:
  """Writes the seed onto output artifacts, so ML Metadata says which seed made them."""
  for artifact in artifacts:
    artifact.set_int_custom_property(SEED_PROPERTY, int(random_seed))
