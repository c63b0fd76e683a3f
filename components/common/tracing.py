"""Keras' (and tfmot's) own code is traced as written, not rewritten by AutoGraph first.

AutoGraph rewrites every Python function a `tf.function` calls, recursively, into
graph-building code before tracing it. For a Keras training step that is every
tf_keras layer, model, loss, metric and optimizer method it reaches: on the taxi
teacher (2 cores) that rewrite was 12 of the 14.7 s before the first step, and a
third of each first `evaluate` and SavedModel export. tfmot's pruning and
quantization wrappers cost the Pruner another 1.5 s the same way.

Neither package needs the rewrite: both also run in TF1 graph mode, where there
is no AutoGraph (they use tf.cond and smart_cond themselves), and Keras 3
(`keras`) is already on AutoGraph's do-not-convert list. What does need it is
still converted: the `tf.function` a fit builds (its loop over
`steps_per_execution` steps), subclassed layers and models outside these
packages (ours, a user's), and every other function.
"""

from tensorflow.python.autograph.core import config as autograph_config

KERAS_PACKAGES = ('tf_keras', 'tensorflow_model_optimization')


def trace_keras_as_written() -> None:
  """Puts tf_keras and tfmot on AutoGraph's do-not-convert list (once)."""
  for package in KERAS_PACKAGES:
    if any(isinstance(rule, autograph_config.DoNotConvert) and rule.matches(package)
           for rule in autograph_config.CONVERSION_RULES):
      continue
    # First, so that no broader rule decides for the package before this one.
    autograph_config.CONVERSION_RULES = ((autograph_config.DoNotConvert(package),)
                                         + tuple(autograph_config.CONVERSION_RULES))
