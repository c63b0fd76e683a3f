"""AccuracyGate's spec: the teacher and the candidates in; a blessing and the winner out."""

from tfx import types
from tfx.types import component_spec
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs

from tfx_distillery.components.common import artifacts

BASELINE_MODEL_KEY = 'baseline_model'
CANDIDATE_MODEL_KEY = 'candidate_model'
# One key per candidate: a union channel would lose which candidate is which.
MAX_CANDIDATES = 8
CANDIDATE_MODEL_KEYS = (CANDIDATE_MODEL_KEY,) + tuple(
    f'{CANDIDATE_MODEL_KEY}_{position}' for position in range(1, MAX_CANDIDATES))
CANDIDATE_NAMES_KEY = 'candidate_names'
CANDIDATE_PARENTS_KEY = 'candidate_parents'
MAX_ACCURACY_DROP_KEY = 'max_accuracy_drop'
MAX_MODEL_BYTES_KEY = 'max_model_bytes'
EVAL_EXAMPLES_KEY = 'eval_examples'
LATENCY_RUNS_KEY = 'latency_runs'
REPORT_KEY = 'report'
LABEL_KEY_KEY = 'label_key'
LABEL_COLUMN_KEY = 'label_column'


class AccuracyGateSpec(types.ComponentSpec):
  """Outputs TFX's `blessing` (ModelBlessing) and `model`, so Pusher takes them as they are."""

  PARAMETERS = {
      CANDIDATE_NAMES_KEY: component_spec.ExecutionParameter(type=str),
      # JSON {candidate: the candidate it was made from}; '{}' for none.
      CANDIDATE_PARENTS_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      MAX_ACCURACY_DROP_KEY: component_spec.ExecutionParameter(type=float),
      # -1: no size limit.
      MAX_MODEL_BYTES_KEY: component_spec.ExecutionParameter(type=int),
      EVAL_EXAMPLES_KEY: component_spec.ExecutionParameter(type=int),
      LATENCY_RUNS_KEY: component_spec.ExecutionParameter(type=int),
      LABEL_KEY_KEY: component_spec.ExecutionParameter(type=str),
      LABEL_COLUMN_KEY: component_spec.ExecutionParameter(type=str),
  }
  INPUTS = {
      standard_component_specs.EXAMPLES_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.Examples),
      standard_component_specs.TRANSFORM_GRAPH_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.TransformGraph),
      BASELINE_MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model),
      **{key: component_spec.ChannelParameter(type=standard_artifacts.Model,
                                              optional=key != CANDIDATE_MODEL_KEY)
         for key in CANDIDATE_MODEL_KEYS},
  }
  OUTPUTS = {
      standard_component_specs.MODEL_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.Model),
      standard_component_specs.BLESSING_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.ModelBlessing),
      REPORT_KEY: component_spec.ChannelParameter(type=artifacts.ModelMetrics),
  }
