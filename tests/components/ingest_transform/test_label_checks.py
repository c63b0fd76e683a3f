"""IngestionTransform refuses a label that can not train a classifier, before any training."""

import csv
import os
import re

import pytest
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from tfx_distillery.components import IngestionTransform
from tfx_distillery.pipelines import datasets
from tests import helpers

TRAIN_ROWS = 120


def write_split(folder, rows):
  os.makedirs(folder)
  with open(os.path.join(folder, 'data.csv'), 'w', newline='') as handle:
    writer = csv.writer(handle)
    writer.writerow(['size', 'kind'])
    writer.writerows(rows)


def run_transform(tmp_path, train_kinds, eval_kinds):
  """CsvExampleGen (train and eval from their own files) -> SchemaGen -> IngestionTransform."""
  write_split(tmp_path / 'data' / 'train', [(index * 0.5, kind)
                                            for index, kind in enumerate(train_kinds)])
  write_split(tmp_path / 'data' / 'eval', [(index * 0.5, kind)
                                           for index, kind in enumerate(eval_kinds)])
  example_gen = tfx.components.CsvExampleGen(
      input_base=str(tmp_path / 'data'),
      input_config=tfx.proto.Input(splits=[
          tfx.proto.Input.Split(name='train', pattern='train/*'),
          tfx.proto.Input.Split(name='eval', pattern='eval/*')]))
  statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs['statistics'],
                                        infer_feature_shape=True)
  transform = IngestionTransform(
      examples=example_gen.outputs['examples'], schema=schema_gen.outputs['schema'],
      module_file=datasets.module_file('tabular_transform'),
      custom_config={'label_column': 'kind'}, num_shards=1, label_key='label')
  metadata_path = str(tmp_path / 'metadata.sqlite')
  with pytest.raises(Exception) as failure:
    tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
        pipeline_name='label-checks', pipeline_root=str(tmp_path / 'root'),
        components=[example_gen, statistics_gen, schema_gen, transform],
        metadata_connection_config=tfx.orchestration.metadata
        .sqlite_metadata_connection_config(metadata_path)))
  assert helpers.latest_state(metadata_path, 'IngestionTransform') == (
      metadata_store_pb2.Execution.FAILED)
  return str(failure.value)


@pytest.mark.e2e  # long: make test-e2e
def test_the_label_is_refused_naming_the_column_and_the_count(tmp_path):
  """The whole path: the transformed label counted per split, the check, the raw values.

  One case runs the pipeline: a class only eval has goes through every step of the check
  (the counts, the -1 the vocabulary gives it, the raw values read back). The messages for
  one class and for a continuous label are check_counts' own, tested on counts in
  tests/components/common/test_labels.py.
  """
  error = run_transform(tmp_path, ['adelie', 'gentoo'] * (TRAIN_ROWS // 2),
                        ['adelie', 'chinstrap'] * 10)
  assert re.search(r"holds \[-1\] in the eval split.*Raw 'kind' values the train split never "
                   r"had: eval: \['chinstrap'\]", error, re.DOTALL), error
  assert "raw column 'kind'" in error
