"""Measures models on transformed eval batches: accuracy, batch-1 latency, file sizes.

Shared by the Pruner and the Quantizer, which compare a model before and after.
"""

import gzip
import os
import statistics
import time
from typing import Callable, Dict, List, Tuple

import numpy as np
import tensorflow as tf

from components.common import evaluation
from components.common import reading

Batch = Tuple[Dict[str, np.ndarray], np.ndarray]


def eval_batches(file_pattern, tf_transform_output, max_examples: int,
                 batch_size: int = 256, compression: str = 'GZIP',
                 record_dataset_fn=None) -> List[Batch]:
  """Up to `max_examples` transformed examples in file order, as numpy batches."""
  options = reading.IngestionOptions(shuffle_files=False, deterministic=True, cache='none',
                                     shuffle_buffer=0, compression=compression)
  dataset = reading.make_dataset(file_pattern, tf_transform_output, batch_size, options,
                                 num_epochs=1, record_dataset_fn=record_dataset_fn)
  batches, seen = [], 0
  for features, labels in dataset:
    remaining = max_examples - seen
    if remaining <= 0:
      break
    batches.append(({name: values.numpy()[:remaining] for name, values in features.items()},
                    np.reshape(labels.numpy(), [-1])[:remaining]))
    seen += len(batches[-1][1])
  return batches


def accuracy_of(logits_fn: Callable[[Dict[str, np.ndarray]], np.ndarray],
                batches: List[Batch]) -> float:
  """Accuracy of a logits function (1 logit: > 0 is class 1; else argmax)."""
  correct = total = 0
  for features, labels in batches:
    logits = np.asarray(logits_fn(features))
    predicted = (logits[:, 0] > 0).astype(np.int64) if logits.shape[-1] == 1 else \
        logits.argmax(axis=-1)
    correct += int(np.sum(predicted == labels))
    total += len(labels)
  return correct / max(1, total)


def majority_accuracy(batches: List[Batch]) -> float:
  labels = np.concatenate([labels for _, labels in batches])
  return float(np.bincount(labels.astype(np.int64)).max() / max(1, len(labels)))


def one_example(batches: List[Batch]) -> Dict[str, np.ndarray]:
  features, _ = batches[0]
  return {name: values[:1] for name, values in features.items()}


def median_latency_ms(call: Callable[[], object], runs: int) -> float:
  """Median wall time of `call` in milliseconds, after one untimed warm-up call."""
  call()
  timings = []
  for _ in range(runs):
    start = time.perf_counter()
    call()
    timings.append(time.perf_counter() - start)
  return 1000.0 * statistics.median(timings)


def keras_logits_fn(model) -> Callable[[Dict[str, np.ndarray]], np.ndarray]:
  predict = tf.function(lambda features: model(features, training=False))
  return lambda features: predict({name: tf.constant(features[name])
                                   for name in model.input_names}).numpy()


def keras_figures(model, model_dir: str, batches: List[Batch], latency_runs: int) -> dict:
  """Size (SavedModel bytes), accuracy and batch-1 latency of a Keras model."""
  logits_fn = keras_logits_fn(model)
  example = one_example(batches)
  return {'size_bytes': evaluation.directory_bytes(model_dir),
          'accuracy': accuracy_of(logits_fn, batches),
          'latency_ms': median_latency_ms(lambda: logits_fn(example), latency_runs)}


def gzip_bytes(content: bytes) -> int:
  """Size of `content` gzipped at the highest level (how sparse weights pay off on disk)."""
  return len(gzip.compress(content, compresslevel=9))


def write_atomically(path: str, content) -> None:
  """Writes a file through a temporary name, so readers never see half of it."""
  temporary = path + '.tmp'
  mode = 'wb' if isinstance(content, bytes) else 'w'
  with tf.io.gfile.GFile(temporary, mode) as handle:
    handle.write(content)
  tf.io.gfile.rename(temporary, path, overwrite=True)


