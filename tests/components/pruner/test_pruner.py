"""Pruner: sparsity reached per layer, structured patterns, budgeted search, bad input."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tfx import v1 as tfx
from tfx.types import standard_artifacts

from tfx_distillery.components import Pruner
from tfx_distillery.components.common import artifacts
from tfx_distillery.components.pruner import executor as pruner_executor
from tests import helpers


def run_pruner(data, model, output_dir, train_steps=60, baseline=None, **properties):
  examples, graph, _ = data
  pruned = helpers.artifact(standard_artifacts.Model, os.path.join(output_dir, 'pruned'))
  metrics = helpers.artifact(artifacts.ModelMetrics, os.path.join(output_dir, 'metrics'))
  exec_properties = {
      'target_sparsity': 0.8, 'schedule': 'polynomial', 'begin_step': 0, 'end_step': -1,
      'block_size': None, 'm_by_n': None, 'max_accuracy_drop': None,
      'sparsities': json.dumps([0.5, 0.8, 0.95]), 'label_column': 'species',
      'train_args': json.dumps({'num_steps': train_steps}),
      'eval_args': json.dumps({'num_steps': 5}),
      'custom_config': json.dumps({'batch_size': 32, 'learning_rate': 1e-3})}
  exec_properties.update(properties)
  inputs = {'model': [model], 'examples': [examples], 'transform_graph': [graph]}
  if baseline is not None:
    inputs['baseline_model'] = [baseline]
  pruner_executor.Executor().Do(
      inputs,
      {'pruned_model': [pruned], 'metrics': [metrics]}, exec_properties)
  with open(os.path.join(metrics.uri, 'metrics.json')) as handle:
    return pruned, json.load(handle)


def kernels(model_dir):
  model = tf_keras.models.load_model(model_dir, compile=False)
  return {layer.name: layer.kernel.numpy() for layer in model.layers
          if isinstance(layer, tf_keras.layers.Dense)}


def test_pruning_reaches_the_target_sparsity_and_the_pruned_model_still_serves(
    data, teacher, tmp_path):
  pruned, metrics = run_pruner(data, teacher, str(tmp_path))
  model_dir = os.path.join(pruned.uri, 'Format-Serving')
  for name, kernel in kernels(model_dir).items():
    # A layer of n weights can only reach multiples of 1/n.
    assert np.mean(kernel == 0) >= 0.8 - 1.0 / kernel.size - 1e-6, name
  assert set(metrics['layer_sparsity']) >= {f'{name}/kernel' for name in kernels(model_dir)}
  assert metrics['sparsity'] >= 0.79
  assert metrics['pruned_gzip_bytes'] < metrics['dense_gzip_bytes']
  assert metrics['gzip_ratio'] > 1.5
  assert metrics['pruned_accuracy'] > metrics['majority_accuracy']
  loaded = tf.saved_model.load(model_dir)
  serialized = [helpers.serialize({key: value for key, value in row.items()
                                   if key != 'species'}) for row in data[2][:20]]
  assert loaded.signatures['serving_default'](
      examples=tf.constant(serialized))['classes'].shape == (20,)


def test_two_by_four_pattern_zeroes_two_of_every_four_weights(data, teacher, tmp_path):
  pruned, _ = run_pruner(data, teacher, str(tmp_path), m_by_n=json.dumps([2, 4]))
  for name, kernel in kernels(os.path.join(pruned.uri, 'Format-Serving')).items():
    rows = kernel.shape[0] - kernel.shape[0] % 4
    groups = kernel[:rows].T.reshape(kernel.shape[1], -1, 4)
    assert np.all(np.sum(groups == 0, axis=-1) >= 2), name


def test_accuracy_budget_keeps_the_highest_sparsity_within_the_drop(data, teacher, tmp_path):
  _, metrics = run_pruner(data, teacher, str(tmp_path), max_accuracy_drop=0.05)
  trials = metrics['trials']
  assert [trial['sparsity'] for trial in trials] == [0.5, 0.8, 0.95][:len(trials)]
  kept = [trial['sparsity'] for trial in trials if trial['within_budget']]
  assert metrics['target_sparsity'] == (max(kept) if kept else 0.0)
  for trial in trials:
    assert trial['within_budget'] == (
        trial['baseline_accuracy'] - trial['eval_accuracy'] <= 0.05)
  assert metrics['budget_against'] == 'input model'
  assert metrics['pruned_layers'] and metrics['eval_split'] == 'eval'


def test_the_search_fine_tunes_one_model_and_leaves_the_input_model_dense(
    data, teacher, tmp_path):
  # One wrapped model is traced once and fine-tuned from each sparsity to the next; the
  # input model, loaded once, must stay as it was for the dense figures and the fallback.
  examples, graph, _ = data
  executor = pruner_executor.Executor()
  metrics_artifact = helpers.artifact(artifacts.ModelMetrics, str(tmp_path / 'metrics'))
  executor.Do({'model': [teacher], 'examples': [examples], 'transform_graph': [graph]},
              {'pruned_model': [helpers.artifact(standard_artifacts.Model, str(tmp_path / 'p'))],
               'metrics': [metrics_artifact]},
              {'target_sparsity': 0.8, 'schedule': 'polynomial', 'begin_step': 0,
               'end_step': -1, 'block_size': None, 'm_by_n': None, 'max_accuracy_drop': 1.0,
               'sparsities': json.dumps([0.5, 0.8]), 'label_column': 'species',
               'train_args': json.dumps({'num_steps': 20}),
               'eval_args': json.dumps({'num_steps': 5}),
               'custom_config': json.dumps({'batch_size': 32})})
  assert [trial['sparsity'] for trial in json.load(open(os.path.join(
      metrics_artifact.uri, 'metrics.json')))['trials']] == [0.5, 0.8]
  assert pruner_executor.overall_sparsity(executor.dense_model) < 0.05
  assert pruner_executor.overall_sparsity(executor.wrapped) >= 0.79
  # One training step function for both sparsities.
  assert executor.wrapped.train_function is not None


def untrained_model(data, output_dir):
  """The tabular teacher's architecture, untrained: far below the trained teacher."""
  import tensorflow_transform as tft  # pylint: disable=import-outside-toplevel
  from tfx_distillery.trainer_modules import tabular_teacher  # pylint: disable=import-outside-toplevel
  _, graph, _ = data
  tf_keras.utils.set_random_seed(0)
  model = tabular_teacher.build_teacher(tft.TFTransformOutput(graph.uri))
  artifact = helpers.artifact(standard_artifacts.Model, output_dir)
  model.save(os.path.join(artifact.uri, 'Format-Serving'), save_format='tf')
  return artifact


def test_the_budget_is_the_teachers_and_a_spent_one_keeps_the_lowest_sparsity(
    data, teacher, tmp_path):
  weak = untrained_model(data, str(tmp_path / 'weak'))
  _, metrics = run_pruner(data, weak, str(tmp_path / 'run'), train_steps=20, baseline=teacher,
                          max_accuracy_drop=0.01)
  assert metrics['budget_against'] == 'baseline (teacher)'
  assert metrics['baseline_accuracy'] - metrics['dense_accuracy'] > 0.01
  assert metrics['target_sparsity'] == 0.5  # The lowest tried, not the dense model.
  assert [trial['within_budget'] for trial in metrics['trials']] == [False]
  assert metrics['sparsity'] > 0.4


def test_layers_tfmot_can_not_prune_stay_dense_and_are_named(data, teacher, tmp_path):
  _, metrics = run_pruner(data, teacher, str(tmp_path), train_steps=20)
  # The tabular teacher embeds its string column: tfmot prunes Embedding and Dense alike,
  # and every layer with weights is either pruned or named as skipped.
  assert any('dense' in name for name in metrics['pruned_layers'])
  model = tf_keras.models.load_model(os.path.join(teacher.uri, 'Format-Serving'),
                                     compile=False)
  with_weights = {layer.name for layer in model.layers if layer.weights}
  skipped = {entry.split(' ')[0] for entry in metrics['skipped_layers']}
  assert with_weights == set(metrics['pruned_layers']) | skipped


def make(**overrides):
  return Pruner(model=helpers.channel(standard_artifacts.Model),
                examples=helpers.channel(standard_artifacts.Examples),
                transform_graph=helpers.channel(standard_artifacts.TransformGraph), **overrides)


def test_outputs_are_a_pruned_model_and_metrics():
  assert set(make().outputs) == {'pruned_model', 'metrics'}


@pytest.mark.parametrize('overrides,message', [
    ({'target_sparsity': 1.0}, r'target_sparsity must be a number in \(0, 1\)'),
    ({'target_sparsity': 0}, r'target_sparsity must be a number in \(0, 1\)'),
    ({'schedule': 'cubic'}, 'schedule must be one of'),
    ({'begin_step': -1}, 'begin_step must be an integer >= 0'),
    ({'begin_step': 10, 'end_step': 5}, 'end_step must be an integer > begin_step'),
    ({'block_size': (1, 4), 'm_by_n': (2, 4)}, 'block_size and m_by_n exclude each other'),
    ({'m_by_n': (4, 2)}, 'needs m < n'),
    ({'m_by_n': (2,)}, 'm_by_n must be a pair'),
    ({'max_accuracy_drop': 1.5}, 'max_accuracy_drop must be a fraction'),
    ({'sparsities': []}, 'sparsities must be numbers'),
])
def test_bad_arguments_fail_at_construction_naming_the_parameter(overrides, message):
  with pytest.raises(ValueError, match=message):
    make(**overrides)
