"""IngestionTransform's spec: TFX's TransformSpec plus the ingestion settings."""

from tfx.types import component_spec
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs

NUM_SHARDS_KEY = 'num_shards'
CACHE_KEY = 'cache'
CACHE_PATH_KEY = 'cache_path'
CYCLE_LENGTH_KEY = 'cycle_length'
DETERMINISTIC_KEY = 'deterministic'
SHUFFLE_BUFFER_KEY = 'shuffle_buffer'
# Examples per record of the packed copy; 0 writes none.
PACKED_BLOCK_SIZE_KEY = 'packed_block_size'
# -1: choose by data size, 0: Beam's in-memory DirectRunner, N > 0: N processes.
DIRECT_NUM_PROCESSES_KEY = 'direct_num_processes'
# The transformed label, checked after the transform; absent: no check.
LABEL_KEY_KEY = 'label_key'
# StatisticsGen's statistics of the same examples: copied as pre_transform_stats.
STATISTICS_KEY = standard_component_specs.STATISTICS_KEY


class IngestionTransformSpec(standard_component_specs.TransformSpec):
  """Transform's inputs and outputs, so it drops in where Transform stands, plus an
  optional `statistics` input that saves a pass over the raw examples."""

  PARAMETERS = {
      **standard_component_specs.TransformSpec.PARAMETERS,
      NUM_SHARDS_KEY: component_spec.ExecutionParameter(type=int),
      CACHE_KEY: component_spec.ExecutionParameter(type=str),
      CACHE_PATH_KEY: component_spec.ExecutionParameter(type=str, optional=True),
      CYCLE_LENGTH_KEY: component_spec.ExecutionParameter(type=int),
      DETERMINISTIC_KEY: component_spec.ExecutionParameter(type=int),
      SHUFFLE_BUFFER_KEY: component_spec.ExecutionParameter(type=int),
      DIRECT_NUM_PROCESSES_KEY: component_spec.ExecutionParameter(type=int),
      PACKED_BLOCK_SIZE_KEY: component_spec.ExecutionParameter(type=int, optional=True),
      LABEL_KEY_KEY: component_spec.ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
      **standard_component_specs.TransformSpec.INPUTS,
      STATISTICS_KEY: component_spec.ChannelParameter(
          type=standard_artifacts.ExampleStatistics, optional=True),
  }
  OUTPUTS = standard_component_specs.TransformSpec.OUTPUTS
