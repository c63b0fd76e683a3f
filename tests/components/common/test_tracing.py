"""Keras' own code is traced as written: AutoGraph leaves tf_keras and tfmot alone."""

from tensorflow.python.autograph.impl import conversion as autograph_conversion
import tf_keras
from tensorflow_model_optimization.python.core.sparsity.keras import pruning_wrapper

from tfx_distillery.components.common import modeling  # pylint: disable=unused-import
from tfx_distillery.components.common import tracing


class UserLayer(tf_keras.layers.Layer):
  """A layer written outside tf_keras, as a user's or tfmot's is."""

  def call(self, inputs):
    return inputs


def test_tf_keras_code_is_left_to_run_as_written_and_other_code_is_converted():
  # Importing our modeling module puts tf_keras on AutoGraph's do-not-convert list.
  assert autograph_conversion.is_allowlisted(tf_keras.layers.Dense.call)
  assert autograph_conversion.is_allowlisted(tf_keras.Model.train_step)
  assert autograph_conversion.is_allowlisted(pruning_wrapper.PruneLowMagnitude.call)
  assert not autograph_conversion.is_allowlisted(UserLayer.call)


def test_the_rule_is_added_once():
  from tensorflow.python.autograph.core import config  # pylint: disable=import-outside-toplevel
  tracing.trace_keras_as_written()
  tracing.trace_keras_as_written()
  for package in tracing.KERAS_PACKAGES:
    assert sum(isinstance(rule, config.DoNotConvert) and rule.matches(package)
               for rule in config.CONVERSION_RULES) == 1
