"""Measures an exported model the way a user meets it: raw tf.Examples in.

Accuracy, size and batch-1 latency are read from the SavedModel's own
signatures, so the figures hold for any model our components export.
"""

import dataclasses
import os
import statistics
import time
from typing import List, Optional

import numpy as np
import tensorflow as tf

from components.common import reading

SERVING_SIGNATURE = 'serving_default'
TRANSFORM_SIGNATURE = 'transform_features'
LABEL_KEY = reading.DEFAULT_LABEL_KEY


@dataclasses.dataclass
class ModelFigures:
  """What a user asks of a model: how right, how big, how fast.

  Attributes:
    accuracy: Fraction of evaluation examples classified correctly.
    majority_accuracy: Accuracy of always predicting the most common class.
    size_bytes: Bytes on disk of the exported model.
    latency_ms: Median batch-1 latency of the serving signature.
    examples: Number of evaluation examples.
  """
  accuracy: float
  majority_accuracy: float
  size_bytes: int
  latency_ms: float
  examples: int


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


def evaluate_saved_model(model_dir: str,
                         serialized_examples: List[bytes],
                         batch_size: int = 512,
                         latency_runs: int = 200) -> ModelFigures:
  """Accuracy, size and latency of a SavedModel exported with our signatures.

  Args:
    model_dir: SavedModel folder with `serving_default` and `transform_features`.
    serialized_examples: Raw evaluation examples, label column included.
    batch_size: Examples per accuracy call.
    latency_runs: Batch-1 calls timed for the median latency.

  Returns:
    The `ModelFigures`.
  """
  if not serialized_examples:
    raise ValueError('serialized_examples is empty; nothing to evaluate.')
  loaded = tf.saved_model.load(model_dir)
  serve = loaded.signatures[SERVING_SIGNATURE]
  transform = loaded.signatures[TRANSFORM_SIGNATURE]
  labels, predictions = [], []
  for start in range(0, len(serialized_examples), batch_size):
    batch = tf.constant(serialized_examples[start:start + batch_size])
    labels.append(np.reshape(transform(examples=batch)[LABEL_KEY].numpy(), [-1]))
    predictions.append(np.reshape(serve(examples=batch)['classes'].numpy(), [-1]))
  labels = np.concatenate(labels)
  predictions = np.concatenate(predictions)
  majority = np.bincount(labels[labels >= 0]).max() / len(labels)

  one_example = tf.constant(serialized_examples[:1])
  serve(examples=one_example)  # The first call traces; keep it out of the timing.
  timings = []
  for _ in range(latency_runs):
    start = time.perf_counter()
    serve(examples=one_example)
    timings.append(time.perf_counter() - start)
  return ModelFigures(accuracy=float(np.mean(labels == predictions)),
                      majority_accuracy=float(majority),
                      size_bytes=directory_bytes(model_dir),
                      latency_ms=1000.0 * statistics.median(timings),
                      examples=int(len(labels)))
