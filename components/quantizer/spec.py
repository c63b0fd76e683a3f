"""Quantizer's spec: a model and its data in; a TFLite model and its figures out."""

from tfx import types
from tfx.types import component_spec
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import seeding

MODE_KEY = 'mode'
IO_TYPE_KEY = 'io_type'
REPRESENTATIVE_SAMPLES_KEY = 'representative_samples'
QAT_STEPS_KEY = 'qat_steps'
PRESERVE_SPARSITY_KEY = 'preserve_sparsity'
EVAL_EXAMPLES_KEY = 'eval_examples'
LATENCY_RUNS_KEY = 'latency_runs'
LABEL_COLUMN_KEY = 'label_column'
LABEL_KEY_KEY = 'label_key'
STRICT_INT8_KEY = 'strict_int8'
SPARSE_ENCODING_KEY = 'sparse_encoding'
RAW_EXAMPLES_KEY = 'raw_examples'
SKIP_NOT_A_CANDIDATE_KEY = 'skip_not_a_candidate'
# The int8 model's largest eval accuracy drop against its float32 TFLite twin before the
# Quantizer recovers (float layers, then QAT); negative: no recovery.
MAX_ACCURACY_DROP_KEY = 'max_accuracy_drop'
SPARSE_ENCODINGS = ('auto', 'never')
QUANTIZED_MODEL_KEY = 'quantized_model'
METRICS_KEY = 'metrics'


class QuantizerSpec(types.ComponentSpec):
  """Takes TFX's `model`, `examples` and `transform_graph`; gives a TFLite model."""

  PARAMETERS = {
      seeding.RANDOM_SEED_KEY: component_spec.ExecutionParameter(type=int, optional=True),
      MODE_KEY: component_spec.ExecutionParameter(type=str),
      IO_TYPE_KEY: component_spec.ExecutionParameter(type=str),
      REPRESENTATIVE_SAMPLES_KEY: component_spec.ExecutionParameter(type=int),
      QAT_STEPS_KEY: component_spec.ExecutionParameter(type=int),
      PRESERVE_SPARSITY_KEY: component_spec.ExecutionParameter(type=int),
      EVAL_EXAMPLES_KEY: component_spec.ExecutionParameter(type=int),
      LATENCY_RUNS_KEY: component_spec.ExecutionParameter(type=int),
      LABEL_COLUMN_KEY: component_spec.ExecutionParameter(type=str),
      LABEL_KEY_KEY: component_spec.ExecutionParameter(type=str),
      STRICT_INT8_KEY: component_spec.ExecutionParameter(type=int),
      SPARSE_ENCODING_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      SKIP_NOT_A_CANDIDATE_KEY: component_spec.ExecutionParameter(type=int, optional=True),
      MAX_ACCURACY_DROP_KEY: component_spec.ExecutionParameter(type=float, optional=True),
  }
  INPUTS = {
      standard_component_specs.MODEL_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.Model),
      standard_component_specs.EXAMPLES_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.Examples),
      standard_component_specs.TRANSFORM_GRAPH_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.TransformGraph),
      # ExampleGen's raw examples: calibration and checks of the raw-input flatbuffer.
      RAW_EXAMPLES_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.Examples, optional=True),
  }
  OUTPUTS = {
      # Named like Pusher's `pushed_model`: a spec can't reuse the input key `model`.
      QUANTIZED_MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model),
      METRICS_KEY: component_spec.ChannelParameter(type=artifacts.ModelMetrics),
  }
