"""StrictExampleValidator: the stock ExampleValidator, failing when it finds anomalies."""

from tfx.components import ExampleValidator
from tfx.dsl.components.base import executor_spec

from tfx_distillery.components.example_validator import executor


class StrictExampleValidator(ExampleValidator):
  """Validates statistics against the schema and fails the run on any anomaly.

  TFX's ExampleValidator writes its anomalies and marks them `blessed: 0`, but no
  stock component reads that mark, so bad data flows on into Transform and
  training. This drop-in takes the same arguments and writes the same
  `anomalies` artifact, then fails its execution (recorded as FAILED in ML
  Metadata) with one line per problem, naming the split, the column and what is
  wrong, so nothing downstream runs and nothing is pushed. A split with no
  examples (an empty CSV file, or a header alone) is a problem too.

  Which problems it sees depends on the schema: with a curated schema
  (`ImportSchemaGen`) it catches a dropped column, a type change, and a value
  outside a declared domain, such as a label never seen in training.

  Example:

    example_validator = StrictExampleValidator(
        statistics=statistics_gen.outputs['statistics'],
        schema=import_schema_gen.outputs['schema'])
  """

  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)
