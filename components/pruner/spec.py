"""Pruner's spec: a model and its data in; a sparse model and its figures out."""

from tfx import types
from tfx.proto import trainer_pb2
from tfx.types import component_spec
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import seeding

TARGET_SPARSITY_KEY = 'target_sparsity'
SCHEDULE_KEY = 'schedule'
BEGIN_STEP_KEY = 'begin_step'
END_STEP_KEY = 'end_step'
BLOCK_SIZE_KEY = 'block_size'
M_BY_N_KEY = 'm_by_n'
MAX_ACCURACY_DROP_KEY = 'max_accuracy_drop'
MAX_LAYER_ACCURACY_DROP_KEY = 'max_layer_accuracy_drop'
SPARSITIES_KEY = 'sparsities'
LABEL_COLUMN_KEY = 'label_column'
LABEL_KEY_KEY = 'label_key'
BASELINE_MODEL_KEY = 'baseline_model'
PRUNED_MODEL_KEY = 'pruned_model'
METRICS_KEY = 'metrics'


class PrunerSpec(types.ComponentSpec):
  """Takes TFX's `model`, `examples` and `transform_graph`; gives a pruned SavedModel."""

  PARAMETERS = {
      seeding.RANDOM_SEED_KEY: component_spec.ExecutionParameter(type=int, optional=True),
      TARGET_SPARSITY_KEY: component_spec.ExecutionParameter(type=float, optional=True),
      SCHEDULE_KEY: component_spec.ExecutionParameter(type=str),
      BEGIN_STEP_KEY: component_spec.ExecutionParameter(type=int),
      END_STEP_KEY: component_spec.ExecutionParameter(type=int),
      # JSON lists; absent when not used.
      BLOCK_SIZE_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      M_BY_N_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      MAX_ACCURACY_DROP_KEY: component_spec.ExecutionParameter(type=float, optional=True),
      MAX_LAYER_ACCURACY_DROP_KEY: component_spec.ExecutionParameter(type=float,
                                                                     optional=True),
      SPARSITIES_KEY: component_spec.ExecutionParameter(type=str),
      LABEL_COLUMN_KEY: component_spec.ExecutionParameter(type=str),
      LABEL_KEY_KEY: component_spec.ExecutionParameter(type=str),
      standard_component_specs.TRAIN_ARGS_KEY:
          component_spec.ExecutionParameter(type=trainer_pb2.TrainArgs),
      standard_component_specs.EVAL_ARGS_KEY:
          component_spec.ExecutionParameter(type=trainer_pb2.EvalArgs),
      standard_component_specs.CUSTOM_CONFIG_KEY:
          component_spec.ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
      standard_component_specs.MODEL_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.Model),
      standard_component_specs.EXAMPLES_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.Examples),
      standard_component_specs.TRANSFORM_GRAPH_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.TransformGraph),
      # The gate's baseline (the teacher): the accuracy budget is measured against it.
      BASELINE_MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model,
                                                          optional=True),
  }
  OUTPUTS = {
      # Named like Pusher's `pushed_model`: a spec can't reuse the input key `model`.
      PRUNED_MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model),
      METRICS_KEY: component_spec.ChannelParameter(type=artifacts.ModelMetrics),
  }
