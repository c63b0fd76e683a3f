"""Executor of StrictExampleValidator: the stock validation, then a verdict."""

import collections
import os
from typing import Any, Dict, List

from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx import types
from tfx.components.example_validator import executor as example_validator_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.types import standard_component_specs
from tfx.components.statistics_gen import stats_artifact_utils


class DataAnomaliesError(ValueError):
  """The data does not match the schema; the message lists every problem."""


def read_anomalies(path: str) -> anomalies_pb2.Anomalies:
  """Reads one split's binary Anomalies proto as ExampleValidator writes it."""
  anomalies = anomalies_pb2.Anomalies()
  with fileio.open(path, 'rb') as handle:
    anomalies.ParseFromString(handle.read())
  return anomalies


def describe_problems(problems_by_split: Dict[str, List[str]]) -> List[str]:
  """Merges identical problems found in several splits into one line each."""
  splits_by_problem = collections.defaultdict(list)
  for split, problems in problems_by_split.items():
    for problem in problems:
      splits_by_problem[problem].append(split)
  return [
      f"split{'s' if len(splits) > 1 else ''} {', '.join(repr(split) for split in splits)}: "
      f'{problem}' for problem, splits in splits_by_problem.items()
  ]


class Executor(example_validator_executor.Executor):
  """Runs TFX's ExampleValidator executor, then raises if any split has anomalies."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]], exec_properties: Dict[str, Any]):
    executor_output = super().Do(input_dict, output_dict, exec_properties)
    statistics = artifact_utils.get_single_instance(
        input_dict[standard_component_specs.STATISTICS_KEY])
    anomalies_artifact = artifact_utils.get_single_instance(
        output_dict[standard_component_specs.ANOMALIES_KEY])
    problems_by_split = {}
    for split in artifact_utils.decode_split_names(anomalies_artifact.split_names):
      problems = []
      split_statistics = stats_artifact_utils.load_statistics(statistics, split).proto()
      if not any(dataset.num_examples for dataset in split_statistics.datasets):
        # Every column of an empty split is "dropped"; one line says why.
        problems_by_split[split] = ['no examples: the input is empty (an empty CSV file, '
                                    'or a header with no rows)']
        continue
      anomalies = read_anomalies(
          os.path.join(artifact_utils.get_split_uri([anomalies_artifact], split),
                       example_validator_executor.DEFAULT_FILE_NAME))
      for column, info in sorted(anomalies.anomaly_info.items()):
        problems.append(f'column {column!r}: {info.short_description}: {info.description}')
      for reason in anomalies.dataset_anomaly_info.reason:
        problems.append(f'dataset: {reason.short_description}: {reason.description}')
      problems_by_split[split] = problems
    lines = describe_problems(problems_by_split)
    if lines:
      raise DataAnomaliesError(
          'the data does not match the schema, so the pipeline stops here and nothing is '
          'pushed:\n  ' + '\n  '.join(lines) + f'\nAnomalies are in {anomalies_artifact.uri}. '
          'Fix the data (or, if the change is intended, the schema) and rerun.')
    return executor_output
