"""Keras' own code is traced as written, not rewritten by AutoGraph first.

AutoGraph rewrites every Python function a `tf.function` calls, recursively, into
graph-building code before tracing it. For a Keras training step that is every
tf_keras layer, model, loss, metric and optimizer method it reaches: on the taxi
teacher (2 cores) that rewrite was 12 of the 14.7 s before the first step, and a
third of each first `evaluate` and SavedModel export.

tf_keras' built-in code needs no rewrite: it also runs in TF1 graph mode, where
there is no AutoGraph, and Keras 3 (`keras`) is already on AutoGraph's
do-not-convert list. What does need it is still converted: the `tf.function` a
fit builds (its loop over `steps_per_execution` steps), subclassed layers and
models (Keras converts their `call` itself: ours, tfmot's wrappers, a user's),
and every function outside tf_keras.
"""

from tensorflow.python.autograph.core import config as autograph_config

KERAS_PACKAGE = 'tf_keras'


def trace_keras_as_written() -> None:
  """Puts tf_keras on AutoGraph's do-not-convert list (once; later calls do nothing)."""
  for rule in autograph_config.CONVERSION_RULES:
    if isinstance(rule, autograph_config.DoNotConvert) and rule.matches(KERAS_PACKAGE):
      return
  # First, so that no broader rule decides for tf_keras before this one.
  autograph_config.CONVERSION_RULES = ((autograph_config.DoNotConvert(KERAS_PACKAGE),)
                                       + tuple(autograph_config.CONVERSION_RULES))
