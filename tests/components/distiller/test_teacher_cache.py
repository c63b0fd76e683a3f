"""The teachers' logits, computed once per train row and looked up at every step."""

import numpy as np
import tensorflow as tf

from tfx_distillery.components.distiller import loss as loss_lib
from tfx_distillery.components.distiller import teacher_cache


def features(first, second):
  return {'width': tf.constant(first, tf.float32), 'tokens': tf.constant(second, tf.int64)}


def test_a_batch_of_cached_rows_is_looked_up_and_the_teachers_do_not_run():
  rows = features([1.0, 2.0, 3.0], [[1, 2], [3, 4], [5, 6]])
  logits = np.array([[0.1], [0.2], [0.3]], np.float32)
  cache = teacher_cache.TeacherCache(teacher_cache.row_keys(rows).numpy(), [logits])
  # The same rows in another order and at another rank: (batch, 1) against (batch,). The
  # teachers' stand-in answers -9, which no cached row holds.
  batch = features([[3.0], [1.0], [2.0]], [[5, 6], [1, 2], [3, 4]])
  found = tf.function(lambda batch: cache.lookup(batch, lambda: [tf.fill([3, 1], -9.0)]))(batch)
  np.testing.assert_allclose(found[0].numpy(), [[0.3], [0.1], [0.2]])


def test_a_batch_with_a_row_not_cached_runs_the_teachers_on_the_whole_batch():
  rows = features([1.0, 2.0], [[1, 2], [3, 4]])
  cache = teacher_cache.TeacherCache(teacher_cache.row_keys(rows).numpy(),
                                     [np.array([[0.1], [0.2]], np.float32)])
  # One row differs from a cached one in a single token.
  batch = features([1.0, 2.0], [[1, 2], [3, 5]])
  found = cache.lookup(batch, lambda: [tf.fill([2, 1], -9.0)])
  np.testing.assert_allclose(found[0].numpy(), [[-9.0], [-9.0]])


def test_equal_rows_are_kept_once_and_the_keys_tell_apart_features_that_differ_by_one_value():
  rows = features([1.0, 1.0, 1.0], [[1, 2], [1, 2], [2, 1]])
  keys = teacher_cache.row_keys(rows).numpy()
  assert keys[0] == keys[1] and keys[0] != keys[2]
  cache = teacher_cache.TeacherCache(keys, [np.array([[0.5], [0.5], [0.7]], np.float32)])
  assert cache.rows == 2


def test_mixup_or_noise_on_float_features_and_sparse_features_keep_the_teachers_running():
  dense = ({'x': tf.TensorSpec([None, 1], tf.float32)}, tf.TensorSpec([None], tf.int64))
  tokens = ({'tokens': tf.TensorSpec([None, 4], tf.int64)}, tf.TensorSpec([None], tf.int64))
  sparse = ({'tokens': tf.TensorSpec([None, 4], tf.int64),
             'words': tf.SparseTensorSpec([None, None], tf.int64)}, None)
  assert teacher_cache.reason_not_to_cache(dense, mixup=0.0, noise=0.0) is None
  assert 'mixup or noise' in teacher_cache.reason_not_to_cache(dense, mixup=0.2, noise=0.0)
  assert '(x)' in teacher_cache.reason_not_to_cache(dense, mixup=0.0, noise=0.1)
  assert teacher_cache.reason_not_to_cache(tokens, mixup=1.0, noise=0.1) is None
  assert 'words' in teacher_cache.reason_not_to_cache(sparse, mixup=0.0, noise=0.0)


def test_mixup_of_features_with_no_float_makes_train_rows_and_each_is_looked_up():
  rows = {'tokens': tf.constant([[1, 2], [3, 4], [5, 6], [7, 8]], tf.int64),
          'length': tf.constant([2, 2, 2, 3], tf.int64)}
  logits = np.array([[0.1], [0.2], [0.3], [0.4]], np.float32)
  cache = teacher_cache.TeacherCache(teacher_cache.row_keys(rows).numpy(), [logits])
  mixed = loss_lib.perturb_features(loss_lib.mix_features(rows, 1.0, seed=3), 0.5, seed=3)
  found = cache.lookup(mixed, lambda: [tf.fill([4, 1], -9.0)])[0].numpy()
  # Each mixed row is one of the train rows, whole, and gets that row's logits.
  for position, row in enumerate(mixed['tokens'].numpy()):
    source = [index for index, tokens in enumerate(rows['tokens'].numpy())
              if (tokens == row).all()]
    assert found[position] == logits[source[0]]
