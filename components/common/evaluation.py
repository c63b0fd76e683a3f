"""Where models and examples are on disk: artifact folders, raw examples, sizes.

The figures themselves (accuracy, majority, size, latency) are computed in
`measuring`, the one measuring path.
"""

import os
from typing import List, Optional

import tensorflow as tf

from tfx_distillery.components.common import reading

SERVING_SIGNATURE = 'serving_default'
TRANSFORM_SIGNATURE = 'transform_features'


def directory_bytes(path: str) -> int:
  """Total size of the files under `path` (a file's own size if it is one)."""
  if not tf.io.gfile.isdir(path):
    return tf.io.gfile.stat(path).length
  total = 0
  for folder, _, files in tf.io.gfile.walk(path):
    for name in files:
      total += tf.io.gfile.stat(os.path.join(folder, name)).length
  return total


def read_serialized_examples(file_pattern, limit: Optional[int] = None,
                             compression: str = 'GZIP') -> List[bytes]:
  """Reads serialized tf.Examples (ExampleGen's output) in file order."""
  dataset = tf.data.TFRecordDataset(reading.list_files(file_pattern),
                                     compression_type=compression)
  if limit:
    dataset = dataset.take(limit)
  return list(dataset.as_numpy_iterator())


def serving_model_path(model_uri: str) -> str:
  """The SavedModel folder inside a Model artifact (TFX puts it in Format-Serving)."""
  candidate = os.path.join(model_uri, 'Format-Serving')
  return candidate if tf.io.gfile.exists(candidate) else model_uri
