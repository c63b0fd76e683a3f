"""Distiller's spec: the Trainer's data inputs, frozen teachers, the student out."""

from tfx import types
from tfx.types import component_spec
from tfx.types import standard_artifacts
from tfx.proto import trainer_pb2
from tfx.types import standard_component_specs

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import seeding
from tfx_distillery.components.distributed_trainer import spec as trainer_spec

TEACHER_MODEL_KEY = 'teacher_model'
# Extra teachers get their own keys: a union channel would not keep their order,
# and teacher_weights are given by position.
MAX_TEACHERS = 4
TEACHER_MODEL_KEYS = (TEACHER_MODEL_KEY,) + tuple(
    f'{TEACHER_MODEL_KEY}_{position}' for position in range(1, MAX_TEACHERS))
# Raw rows, with or without the label, that the student learns the teacher on.
TRANSFER_EXAMPLES_KEY = 'transfer_examples'
METRICS_KEY = 'metrics'
# JSON of training.DistillationSettings.
DISTILLATION_KEY = 'distillation'


class DistillerSpec(types.ComponentSpec):
  """Trainer-like inputs plus teachers; outputs model, model_run and metrics."""

  PARAMETERS = {
      standard_component_specs.MODULE_FILE_KEY:
          component_spec.ExecutionParameter(type=str, optional=True),
      standard_component_specs.MODULE_PATH_KEY:
          component_spec.ExecutionParameter(type=str, optional=True),
      standard_component_specs.TRAIN_ARGS_KEY:
          component_spec.ExecutionParameter(type=trainer_pb2.TrainArgs),
      standard_component_specs.EVAL_ARGS_KEY:
          component_spec.ExecutionParameter(type=trainer_pb2.EvalArgs),
      standard_component_specs.CUSTOM_CONFIG_KEY:
          component_spec.ExecutionParameter(type=str, optional=True),
      DISTILLATION_KEY: component_spec.ExecutionParameter(type=str),
      trainer_spec.STRATEGY_KEY: component_spec.ExecutionParameter(type=str),
      trainer_spec.NUM_WORKERS_KEY: component_spec.ExecutionParameter(type=int),
      trainer_spec.NUM_PARAMETER_SERVERS_KEY: component_spec.ExecutionParameter(type=int),
      trainer_spec.COMMUNICATION_KEY: component_spec.ExecutionParameter(type=str),
      trainer_spec.PROGRESS_TIMEOUT_KEY:
          component_spec.ExecutionParameter(type=float, optional=True),
      seeding.RANDOM_SEED_KEY: component_spec.ExecutionParameter(type=int, optional=True),
  }
  INPUTS = {
      standard_component_specs.EXAMPLES_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.Examples),
      standard_component_specs.TRANSFORM_GRAPH_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.TransformGraph),
      standard_component_specs.SCHEMA_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.Schema, optional=True),
      # Transform's post_transform_stats: the class count's last source.
      standard_component_specs.STATISTICS_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.ExampleStatistics,
                                          optional=True),
      standard_component_specs.HYPERPARAMETERS_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.HyperParameters,
                                          optional=True),
      TRANSFER_EXAMPLES_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.Examples, optional=True),
      **{key: component_spec.ChannelParameter(type=standard_artifacts.Model,
                                              optional=key != TEACHER_MODEL_KEY)
         for key in TEACHER_MODEL_KEYS},
  }
  OUTPUTS = {
      standard_component_specs.MODEL_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.Model),
      standard_component_specs.MODEL_RUN_KEY:
          component_spec.ChannelParameter(type=standard_artifacts.ModelRun),
      METRICS_KEY: component_spec.ChannelParameter(type=artifacts.ModelMetrics),
  }
