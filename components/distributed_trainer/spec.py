"""DistributedTrainer's spec: TFX's TrainerSpec plus how to distribute the training."""

from tfx.types import component_spec
from tfx.types import standard_component_specs

from tfx_distillery.components.common import seeding

STRATEGY_KEY = 'strategy'
NUM_WORKERS_KEY = 'num_workers'
NUM_PARAMETER_SERVERS_KEY = 'num_parameter_servers'
COMMUNICATION_KEY = 'communication'
# Seconds a training process may go without a heartbeat before the run fails.
PROGRESS_TIMEOUT_KEY = 'progress_timeout_seconds'
# JSON of the Vertex AI training job (project, region, worker pool specs); absent
# for local processes.
VERTEX_TRAINING_KEY = 'vertex_training'
# Micro-batches per step whose gradients are accumulated and applied once (1: none).
MICRO_BATCHES_KEY = 'micro_batches'
# strategy='pipeline': stages, recomputation, and a CPU split into logical devices.
STAGES_KEY = 'stages'
RECOMPUTE_KEY = 'recompute'
LOGICAL_DEVICES_KEY = 'logical_devices'


class DistributedTrainerSpec(standard_component_specs.TrainerSpec):
  """Same inputs and outputs as Trainer, so it drops in where Trainer stands."""

  PARAMETERS = {
      **standard_component_specs.TrainerSpec.PARAMETERS,
      STRATEGY_KEY: component_spec.ExecutionParameter(type=str),
      NUM_WORKERS_KEY: component_spec.ExecutionParameter(type=int),
      NUM_PARAMETER_SERVERS_KEY: component_spec.ExecutionParameter(type=int),
      COMMUNICATION_KEY: component_spec.ExecutionParameter(type=str),
      PROGRESS_TIMEOUT_KEY: component_spec.ExecutionParameter(type=float, optional=True),
      VERTEX_TRAINING_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      MICRO_BATCHES_KEY: component_spec.ExecutionParameter(type=int, optional=True),
      STAGES_KEY: component_spec.ExecutionParameter(type=int, optional=True),
      RECOMPUTE_KEY: component_spec.ExecutionParameter(type=int, optional=True),
      LOGICAL_DEVICES_KEY: component_spec.ExecutionParameter(type=int, optional=True),
      seeding.RANDOM_SEED_KEY: component_spec.ExecutionParameter(type=int, optional=True),
  }
  INPUTS = standard_component_specs.TrainerSpec.INPUTS
  OUTPUTS = standard_component_specs.TrainerSpec.OUTPUTS
