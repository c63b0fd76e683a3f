"""Writes the curated schemas: what taxi and digits data must look like.

SchemaGen infers a schema from the very data it then checks, so a dropped column,
a changed type or a new label value is never an anomaly. The pipeline imports
these instead (`ImportSchemaGen`, as TFX's penguin example does): SchemaGen's
inference on the whole dataset, with the label given its domain and sometimes-empty
columns allowed to be empty throughout, so that StrictExampleValidator stops a run whose data has drifted from them.
Regenerate them with `python -m tfx_distillery.pipelines.write_schemas`; they are
written into `pipelines/schemas/<dataset>.pbtxt`, which ships in the wheel.
"""

import glob
import os
from typing import Dict, Tuple

from tfx_distillery.pipelines import datasets

# Integer columns and the values they may take; the digits label is a class id.
INT_DOMAINS = {
    'digits': {'label': (0, 9), **{f'pixel_{index:02d}': (0, 16) for index in range(64)}},
    'taxi': {},
}


def curate(schema, split_statistics, int_domains: Dict[str, Tuple[int, int]]) -> None:
  """Turns SchemaGen's inference into the expectation the validator checks.

  Args:
    schema: `schema_pb2.Schema` inferred by SchemaGen; changed in place.
    split_statistics: The `DatasetFeatureStatistics` it was inferred from.
    int_domains: Column -> (smallest, largest) allowed value.
  """
  sometimes_empty = set()
  for statistics in split_statistics:
    for feature_statistics in statistics.features:
      common = (feature_statistics.num_stats.common_stats
                if feature_statistics.HasField('num_stats') else
                feature_statistics.string_stats.common_stats)
      if common.num_missing or common.min_num_values == 0:
        sometimes_empty.add(feature_statistics.path.step[0])
  for feature in schema.feature:
    # CsvExampleGen drops a column with no value at all, so a column that is
    # sometimes empty may vanish from a small file.
    if feature.name in sometimes_empty:
      feature.presence.min_fraction = 0.0
      feature.presence.min_count = 0
    if feature.name in int_domains:
      feature.int_domain.min, feature.int_domain.max = int_domains[feature.name]


def infer_schema(data_root: str, work_dir: str):
  """Runs CsvExampleGen -> StatisticsGen -> SchemaGen, as the pipeline would.

  Args:
    data_root: Folder of the CSV files.
    work_dir: Scratch folder for the pipeline's outputs.

  Returns:
    The `schema_pb2.Schema` SchemaGen inferred, and the `DatasetFeatureStatistics`
    of each split.
  """
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from tfx.utils import io_utils  # pylint: disable=g-import-not-at-top
  example_gen = tfx.components.CsvExampleGen(input_base=data_root)
  statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs['statistics'],
                                        infer_feature_shape=True)
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name='schemas', pipeline_root=os.path.join(work_dir, 'root'),
      components=[example_gen, statistics_gen, schema_gen],
      metadata_connection_config=tfx.orchestration.metadata
      .sqlite_metadata_connection_config(os.path.join(work_dir, 'metadata.sqlite'))))
  from tfx.components.statistics_gen import stats_artifact_utils  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  root = os.path.join(work_dir, 'root')
  [schema_path] = glob.glob(os.path.join(root, 'SchemaGen', 'schema', '*', 'schema.pbtxt'))
  statistics = standard_artifacts.ExampleStatistics()
  [statistics.uri] = glob.glob(os.path.join(root, 'StatisticsGen', 'statistics', '*'))
  statistics.split_names = '["train", "eval"]'
  return io_utils.SchemaReader().read(schema_path), [
      stats_artifact_utils.load_statistics(statistics, split).proto().datasets[0]
      for split in ('train', 'eval')]


def main() -> None:
  """Writes `schemas/taxi.pbtxt` and `schemas/digits.pbtxt` from the full datasets."""
  import tempfile  # pylint: disable=g-import-not-at-top
  from tfx.utils import io_utils  # pylint: disable=g-import-not-at-top
  for dataset_name in ('taxi', 'digits'):
    with tempfile.TemporaryDirectory() as work_dir:
      data_root = (datasets.taxi_data_dir() if dataset_name == 'taxi' else
                   datasets.write_digits_csv(os.path.join(work_dir, 'data')))
      schema, statistics = infer_schema(data_root, work_dir)
    curate(schema, statistics, INT_DOMAINS[dataset_name])
    path = datasets.curated_schema_path(dataset_name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    io_utils.write_pbtxt_file(path + '.tmp', schema)
    os.replace(path + '.tmp', path)
    print(path)


if __name__ == '__main__':
  main()
