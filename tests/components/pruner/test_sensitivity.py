"""The sensitivity rule on its own: one-shot magnitude pruning, the table, the allocation."""

import numpy as np
import tensorflow as tf

from tfx_distillery.components.pruner import sensitivity


def test_one_shot_zeroes_the_smallest_magnitudes_and_keeps_the_rest():
  values = np.array([[0.5, -0.1], [2.0, -0.3]], dtype=np.float32)
  pruned = sensitivity.one_shot(values, 0.5)
  np.testing.assert_array_equal(pruned, [[0.5, 0.0], [2.0, 0.0]])
  np.testing.assert_array_equal(sensitivity.one_shot(values, 0.0), values)


def test_measure_records_each_layers_loss_alone_and_restores_every_weight():
  first = tf.Variable([1.0, 2.0, 3.0, 4.0])
  second = tf.Variable([5.0, 6.0])

  def accuracy():
    # Stands for a model that needs `first` whole and ignores `second`.
    return 1.0 - float(np.sum(first.numpy() == 0)) / 4.0

  losses = sensitivity.measure({'first': first, 'second': second}, [0.25, 0.5], accuracy, 1.0)
  assert losses == {'first': {0.25: 0.25, 0.5: 0.5}, 'second': {0.25: 0.0, 0.5: 0.0}}
  np.testing.assert_array_equal(first.numpy(), [1.0, 2.0, 3.0, 4.0])
  np.testing.assert_array_equal(second.numpy(), [5.0, 6.0])


def test_allocation_prunes_tolerant_layers_first_and_leaves_a_breaking_layer_dense():
  losses = {'dense': {0.5: 0.0, 0.9: 0.001},
            # A small vocabulary's embedding: half of it erases categories.
            'embedding': {0.5: 0.1, 0.9: 0.3},
            'logits': {0.5: 0.002, 0.9: 0.2}}
  sizes = {'dense': 900, 'embedding': 50, 'logits': 50}
  targets = sensitivity.allocate(losses, sizes, 0.5, allowance=0.05)
  assert targets == {'dense': 0.9, 'embedding': 0.0, 'logits': 0.0}
  assert sensitivity.removed_share(targets, sizes) >= 0.5
  # More than the tolerant layers can give: the next least sensitive step is taken, but
  # never one past the allowance.
  targets = sensitivity.allocate(losses, sizes, 0.95, allowance=0.05)
  assert targets == {'dense': 0.9, 'embedding': 0.0, 'logits': 0.5}


def test_a_level_is_allowed_only_when_every_lower_level_is():
  # Noise can make a higher level look harmless after a lower one broke the layer.
  losses = {'layer': {0.5: 0.2, 0.9: 0.0}}
  assert sensitivity.allocate(losses, {'layer': 10}, 0.9, allowance=0.1) == {'layer': 0.0}
  assert 'layer (0.5: +0.2000, 0.9: +0.0000)' in sensitivity.nothing_prunable_message(
      losses, 0.1)
