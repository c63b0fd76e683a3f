"""Curated schemas: what taxi and digits data must look like.

SchemaGen infers a schema from the very data it then checks, so a dropped column,
a changed type or a new label value is never an anomaly. The pipeline imports
these instead (`ImportSchemaGen`, as TFX's penguin example does): SchemaGen's
inference on the whole dataset, with the label given its domain, so that
StrictExampleValidator stops a run whose data has drifted from them.
Regenerate with `python -m pipelines.schemas`.
"""

import os
from typing import Dict, Optional, Tuple

SCHEMA_DIR = os.path.dirname(os.path.abspath(__file__))

# Integer columns and the values they may take; the digits label is a class id.
INT_DOMAINS = {
    'digits': {'label': (0, 9), **{f'pixel_{index:02d}': (0, 16) for index in range(64)}},
    'taxi': {},
}


def schema_file(dataset_name: str) -> Optional[str]:
  """Returns the curated schema of a dataset, or None when it has none (csv)."""
  path = os.path.join(SCHEMA_DIR, dataset_name, 'schema.pbtxt')
  return path if os.path.isfile(path) else None


def infer_schema(csv_path: str, int_domains: Dict[str, Tuple[int, int]]):
  """Infers a schema from a CSV file as SchemaGen would, then adds integer domains.

  Args:
    csv_path: The whole dataset, as one CSV file.
    int_domains: Column -> (smallest, largest) allowed value.

  Returns:
    The `schema_pb2.Schema`.
  """
  import tensorflow_data_validation as tfdv  # pylint: disable=g-import-not-at-top
  statistics = tfdv.generate_statistics_from_csv(csv_path)
  schema = tfdv.infer_schema(statistics, infer_feature_shape=True)
  for column, (smallest, largest) in int_domains.items():
    feature = tfdv.get_feature(schema, column)
    feature.int_domain.min = smallest
    feature.int_domain.max = largest
  return schema


def main() -> None:
  """Writes `taxi/schema.pbtxt` and `digits/schema.pbtxt` from the full datasets."""
  import tempfile  # pylint: disable=g-import-not-at-top
  import tensorflow_data_validation as tfdv  # pylint: disable=g-import-not-at-top
  from pipelines import datasets  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as work_dir:
    csv_paths = {
        'taxi': os.path.join(datasets.taxi_data_dir(), 'data.csv'),
        'digits': os.path.join(datasets.write_digits_csv(work_dir), 'data.csv'),
    }
    for dataset_name, csv_path in csv_paths.items():
      schema = infer_schema(csv_path, INT_DOMAINS[dataset_name])
      os.makedirs(os.path.join(SCHEMA_DIR, dataset_name), exist_ok=True)
      path = os.path.join(SCHEMA_DIR, dataset_name, 'schema.pbtxt')
      tfdv.write_schema_text(schema, path + '.tmp')
      os.replace(path + '.tmp', path)
      print(path)


if __name__ == '__main__':
  main()
