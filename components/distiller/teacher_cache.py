"""The teachers' logits computed once per training row, and looked up at every step.

A student sees each train row many times: on a small table, thousands of times. With the
teacher run at every step, a large teacher (TFX's imdb LSTM, over 400 tokens a review) costs
far more than the student it teaches. The teacher is frozen and deterministic, so its logits
for a row never change: one pass over the train split computes them, and each step looks
them up by a key made from the bytes of the row's transformed features.

Mixup and noise change only float features, so on features with no float (token ids, as
imdb's) every input the teachers see is still a train row. A batch with any row not in the
cache (a transfer set's rows, a record the pass did not see) runs the teachers as before, so
a lookup can only save work, never change a target.
"""

import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfx_distillery.components.common import reading
from tfx_distillery.components.distiller import teachers as teachers_lib

# The logits are held in memory: rows x outputs x teachers float32 values, with a key each.
MAX_ROWS = 1_000_000


def row_keys(features: Dict[str, tf.Tensor]) -> tf.Tensor:
  """A 64-bit key per row, from the bytes of every feature of that row (dense only)."""
  fingerprints = []
  for name in sorted(features):
    values = features[name]
    # A row's bytes: a (batch,) feature and a (batch, 1) one of the same values agree.
    rows = tf.reshape(values, [tf.shape(values)[0], -1])
    fingerprints.append(tf.fingerprint(rows))
  return tf.bitcast(tf.fingerprint(tf.concat(fingerprints, axis=1)), tf.int64)


class TeacherCache:
  """Sorted row keys and, per teacher, the frozen logits of each keyed row."""

  def __init__(self, keys: np.ndarray, logits: Sequence[np.ndarray]):
    order = np.argsort(keys, kind='stable')
    keys = keys[order]
    # Equal keys are equal rows, with equal logits: one of each is kept.
    first = np.concatenate([[True], keys[1:] != keys[:-1]]) if keys.size else keys.astype(bool)
    self.rows = int(first.sum())
    self.keys = tf.constant(keys[first])
    self.logits = [tf.constant(values[order][first]) for values in logits]

  def lookup(self, features: Dict[str, tf.Tensor],
             compute: Callable[[], List[tf.Tensor]]) -> List[tf.Tensor]:
    """Each teacher's logits for the batch: looked up when every row is cached, else
    `compute()` (the teachers run on the batch)."""
    keys = row_keys(features)
    position = tf.minimum(tf.searchsorted(self.keys, keys), self.rows - 1)
    cached = tf.reduce_all(tf.equal(tf.gather(self.keys, position), keys))
    return tf.cond(cached,
                   lambda: [tf.gather(values, position) for values in self.logits],
                   compute)


def reason_not_to_cache(element_spec: Tuple[Dict[str, Any], Any], mixup: float,
                        noise: float) -> Optional[str]:
  """Why the teachers must run at every step, or None when a cache can stand in.

  Mixup and noise change float features only: mixup swaps whole rows of the others (one
  draw per example for all of them), and noise leaves them be. So with no float feature,
  every input the teachers see is a train row, and the cache holds its logits.
  """
  features = element_spec[0]
  uncached = sorted(name for name, spec in features.items()
                    if not isinstance(spec, tf.TensorSpec))
  if uncached:
    return f'sparse or ragged features ({", ".join(uncached)}) are looked up by dense rows only'
  floats = sorted(name for name, spec in features.items() if spec.dtype.is_floating)
  if (mixup > 0 or noise > 0) and floats:
    return (f'mixup or noise makes new values of the float features ({", ".join(floats)}) at '
            'every step')
  return None


def build(train_files: Sequence[str], tf_transform_output, label_key: str,
          batch_map_fn: Callable, options: reading.IngestionOptions, batch_size: int,
          teachers: Sequence[teachers_lib.Teacher], rows_seen: int
          ) -> Tuple[Optional[TeacherCache], Dict[str, Any]]:
  """One pass of the teachers over the train split, when it costs less than the steps do.

  Args:
    train_files: The transformed train split's files.
    tf_transform_output: Its `tft.TFTransformOutput`.
    label_key: The transformed label, popped out of the features as in training.
    batch_map_fn: The training batches' per-batch work (the label's preparation), so that
      the pass's features are the training steps' to the byte.
    options: The run's ingestion options (the pass reads in file order, once).
    batch_size: Rows a teacher call takes.
    teachers: The frozen teachers of one student.
    rows_seen: Rows one training shows the teachers; a split with more rows is not cached,
      since a pass over it costs more than the steps.

  Returns:
    The cache, or None, and what metrics.json records of it.
  """
  files = reading.list_files(train_files)
  limit = min(MAX_ROWS, rows_seen)
  records = tf.data.TFRecordDataset(files, compression_type=options.compression)
  rows = int(records.take(limit + 1).reduce(np.int64(0), lambda count, _: count + 1))
  if rows > limit:
    reason = (f'the train split holds more than {limit:,} rows, '
              + ('more than one training shows the teachers' if limit == rows_seen
                 else f'more than the cache holds ({MAX_ROWS:,})'))
    return None, {'cached': False, 'reason': reason}
  started = time.monotonic()
  one_pass = reading.IngestionOptions(compression=options.compression, shuffle_buffer=0,
                                      shuffle_files=False, deterministic=True,
                                      packed=options.packed)
  dataset = reading.make_dataset(train_files, tf_transform_output, batch_size, one_pass,
                                 label_key=label_key, num_epochs=1, batch_map_fn=batch_map_fn)

  @tf.function
  def keys_and_logits(features):
    return row_keys(features), [teachers_lib.frozen_logits(teacher, features)
                                for teacher in teachers]

  keys, logits = [], [[] for _ in teachers]
  for features, _ in dataset:
    batch_keys, batch_logits = keys_and_logits(features)
    keys.append(batch_keys.numpy())
    for position, values in enumerate(batch_logits):
      logits[position].append(values.numpy())
  if not keys:
    return None, {'cached': False, 'reason': 'the train split holds no rows'}
  cache = TeacherCache(np.concatenate(keys), [np.concatenate(values) for values in logits])
  return cache, {'cached': True, 'rows': rows, 'distinct_rows': cache.rows,
                 'seconds': round(time.monotonic() - started, 2)}
