"""Embedding gradients are all-reduced dense across replicas: one packed collective."""

import types

import tensorflow as tf
import tf_keras

from tfx_distillery.components.common import modeling


def aggregated_gradients(num_replicas, table_rows=50):
  """What Adam's aggregation receives for an embedding and a dense layer's gradients."""
  embedding = tf.Variable(tf.zeros([table_rows, 4]))
  kernel = tf.Variable(tf.zeros([4, 2]))
  sparse = tf.IndexedSlices(tf.ones([3, 4]), tf.constant([1, 7, 7]), tf.constant([table_rows, 4]))
  optimizer = tf_keras.optimizers.Adam()
  received = []
  # Stands in for the strategy and the collective: what reaches them is the point.
  optimizer._distribution_strategy = types.SimpleNamespace(num_replicas_in_sync=num_replicas)
  optimizer.aggregate_gradients = lambda grads_and_vars: received.extend(grads_and_vars)
  modeling.all_reduce_dense_gradients(optimizer).aggregate_gradients(
      [(sparse, embedding), (tf.ones([4, 2]), kernel)])
  return received


def test_sparse_gradients_are_made_dense_across_replicas():
  (embedding_gradient, _), (kernel_gradient, _) = aggregated_gradients(num_replicas=2)
  assert not isinstance(embedding_gradient, tf.IndexedSlices)
  dense = embedding_gradient.numpy()
  assert dense.shape == (50, 4)
  # Repeated indices add up, as the sparse update would.
  assert dense[7].tolist() == [2.0] * 4 and dense[1].tolist() == [1.0] * 4
  assert dense.sum() == 12.0
  assert kernel_gradient.shape == (4, 2)


def test_one_replica_and_huge_tables_keep_sparse_gradients():
  (gradient, _), _ = aggregated_gradients(num_replicas=1)
  assert isinstance(gradient, tf.IndexedSlices)
  rows = modeling.MAX_DENSE_GRADIENT_ELEMENTS // 4 + 1
  (gradient, _), _ = aggregated_gradients(num_replicas=2, table_rows=rows)
  assert isinstance(gradient, tf.IndexedSlices)
