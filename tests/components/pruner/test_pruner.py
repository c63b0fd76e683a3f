"""Pruner: sparsity reached per layer, structured patterns, budgeted search, bad input."""

import filecmp
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
from tfx_distillery.components.common import measuring
from tfx_distillery.components.pruner import executor as pruner_executor
from tests import helpers


def run_pruner(data, model, output_dir, train_steps=60, baseline=None, **properties):
  examples, graph, _ = data
  pruned = helpers.artifact(standard_artifacts.Model, os.path.join(output_dir, 'pruned'))
  metrics = helpers.artifact(artifacts.ModelMetrics, os.path.join(output_dir, 'metrics'))
  exec_properties = {
      'target_sparsity': 0.8, 'schedule': 'polynomial', 'begin_step': 0, 'end_step': -1,
      'block_size': None, 'm_by_n': None, 'max_accuracy_drop': None,
      'sparsities': json.dumps([0.5, 0.8, 0.95]), 'max_layer_accuracy_drop': None,
      'label_column': 'species',
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


def test_a_fixed_target_is_reached_layer_by_layer_and_the_pruned_model_still_serves(
    data, teacher, tmp_path):
  # A built-in student's plan on the input model is carried to the gate's report.
  student = helpers.artifact(standard_artifacts.Model, teacher.uri)
  student.set_string_custom_property(artifacts.FEATURE_PLAN_PROPERTY, '{"x1_xf": "number"}')
  pruned, metrics = run_pruner(data, student, str(tmp_path))
  assert pruned.get_string_custom_property(
      artifacts.FEATURE_PLAN_PROPERTY) == '{"x1_xf": "number"}'
  model_dir = os.path.join(pruned.uri, 'Format-Serving')
  targets = metrics['layer_targets']
  assert metrics['handed_on'] == 'pruned model' and metrics['target_sparsity'] == 0.8
  # Each layer reaches its own target (a layer of n weights only multiples of 1/n), and
  # together they remove the target's share of the prunable weights.
  model = tf_keras.models.load_model(model_dir, compile=False)
  sizes = {}
  for layer in model.layers:
    if layer.name in targets:
      weight = (layer.embeddings if isinstance(layer, tf_keras.layers.Embedding)
                else layer.kernel).numpy()
      sizes[layer.name] = weight.size
      assert abs(np.mean(weight == 0) - targets[layer.name]) <= 1.0 / weight.size + 1e-6, (
          layer.name)
  assert set(sizes) == set(targets)
  assert sum(targets[name] * sizes[name] for name in sizes) / sum(sizes.values()) >= 0.8
  assert metrics['sensitivity'].keys() == targets.keys()
  assert metrics['pruned_gzip_bytes'] < metrics['dense_gzip_bytes']
  assert metrics['pruned_accuracy'] > metrics['majority_accuracy']
  assert pruned.get_string_custom_property(artifacts.LAYER_SPARSITY_PROPERTY)
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


@pytest.mark.e2e  # long: make test-e2e
def test_the_search_hands_on_the_smallest_shipped_file_within_the_budget(
    data, teacher, tmp_path, monkeypatch):
  # As if the gate judged on 200 test rows: every level keeps the margin their noise asks.
  monkeypatch.setattr(pruner_executor.measuring, 'test_split_size', lambda *_, **__: 200)
  pruned, metrics = run_pruner(data, teacher, str(tmp_path), max_accuracy_drop=0.05)
  trials = metrics['trials']
  assert trials and trials[0]['sparsity'] == 0.5  # The lowest of `sparsities` first.
  for trial in trials:
    # The lead over the majority class is a paired test on the same eval examples.
    versus_majority = trial['versus_majority']
    assert trial['above_majority'] == (versus_majority['p_value'] < 0.05)
    assert versus_majority['wins'] - versus_majority['losses'] == round(
        (trial['eval_accuracy'] - metrics['majority_accuracy']) * metrics['eval_examples'])
    gate = trial['gate_margin']
    assert gate['test_examples'] == 200 and gate['margin'] > 0
    assert gate['drop'] == pytest.approx(trial['baseline_accuracy'] - trial['eval_accuracy'])
    assert trial['within_budget'] == (gate['drop'] + gate['margin'] <= 0.05 + 1e-9
                                      and trial['above_majority'])
    assert abs(trial['versus_baseline']['difference']
               - (trial['eval_accuracy'] - trial['baseline_accuracy'])) < 1e-9
  kept = [trial for trial in trials if trial['within_budget']]
  assert kept, trials  # A 5-point budget on a near-perfect teacher keeps something.
  smallest = min(trial['shipped_int8_bytes'] for trial in kept)
  if smallest < metrics['dense_int8_bytes']:
    assert metrics['handed_on'] == 'pruned model'
    assert metrics['shipped_int8_bytes'] == smallest
    assert measuring.within_drop(metrics['baseline_accuracy'], metrics['pruned_accuracy'],
                                 0.05 - min(trial['gate_margin']['margin'] for trial in kept))
    assert not pruned.has_custom_property(artifacts.NOT_A_CANDIDATE_PROPERTY)
  else:
    assert metrics['handed_on'] == 'input model, unchanged'
  assert metrics['budget_against'] == 'input model' and metrics['eval_split'] == 'eval'


def test_no_sparsity_is_kept_whose_margin_for_the_gates_few_test_rows_leaves_no_room(
    data, teacher, tmp_path, monkeypatch):
  # As if the gate judged on 4 test rows: the margin their noise asks for is past a 5-point
  # budget even for a level that agrees with the input model on every eval row (0.069 with
  # gate_margin's one added disagreement in 200; at 10 rows it would be 0.045), so no level
  # is kept however well it scores on eval, and the input model goes on, with the reason.
  monkeypatch.setattr(pruner_executor.measuring, 'test_split_size', lambda *_, **__: 4)
  _, metrics = run_pruner(data, teacher, str(tmp_path), train_steps=20,
                          max_accuracy_drop=0.05)
  trials = metrics['trials']
  assert trials and not any(trial['within_budget'] for trial in trials)
  assert all(trial['gate_margin']['margin'] > 0.05 for trial in trials)
  assert any(trial['gate_margin']['drop'] <= 0.05 for trial in trials)  # On eval alone, kept.
  assert metrics['handed_on'] == 'input model, unchanged'
  assert 'with the margin the gate\'s noise on test asks for' in metrics['reason']


@pytest.mark.e2e  # long: make test-e2e
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
  with open(os.path.join(metrics_artifact.uri, 'metrics.json')) as handle:
    metrics = json.load(handle)
  trials = metrics['trials']
  assert [trial['sparsity'] for trial in trials] == [0.5, 0.8]
  assert pruner_executor.overall_sparsity(executor.dense_model) < 0.05
  assert trials[-1]['overall_sparsity'] > trials[0]['overall_sparsity']
  # The wrapped model ends at the kept trial (which one depends on the two files'
  # sizes, a tie keeping the lower sparsity): every layer at that trial's target.
  kept = [trial for trial in trials if trial['sparsity'] == metrics['target_sparsity']]
  assert len(kept) == 1 and metrics['handed_on'] == 'pruned model'
  assert abs(pruner_executor.overall_sparsity(executor.wrapped)
             - kept[0]['overall_sparsity']) < 0.01
  assert abs(metrics['sparsity'] - kept[0]['overall_sparsity']) < 0.01
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


def same_files(first: str, second: str) -> bool:
  comparison = filecmp.dircmp(first, second)
  return not (comparison.left_only or comparison.right_only or comparison.diff_files)


def test_a_model_already_over_budget_is_handed_on_unchanged_and_marked(
    data, teacher, tmp_path):
  weak = untrained_model(data, str(tmp_path / 'weak'))
  pruned, metrics = run_pruner(data, weak, str(tmp_path / 'run'), train_steps=20,
                               baseline=teacher, max_accuracy_drop=0.01)
  assert metrics['budget_against'] == 'baseline (teacher)'
  assert metrics['baseline_accuracy'] - metrics['dense_accuracy'] > 0.01
  assert metrics['handed_on'] == 'input model, unchanged' and not metrics['pruning_paid']
  assert metrics['trials'] == [] and metrics['sparsity'] < 0.01
  assert 'already' in metrics['reason']
  assert same_files(os.path.join(weak.uri, 'Format-Serving'),
                    os.path.join(pruned.uri, 'Format-Serving'))
  assert artifacts.not_a_candidate(pruned).startswith('pruning did not pay')


@pytest.mark.parametrize('saving,paid', [(8, False), (255, False), (256, True)])
def test_pruning_pays_only_when_the_shipped_file_shrinks_by_a_real_amount(
    data, teacher, tmp_path, monkeypatch, saving, paid):
  # A converted file moves by a few bytes with its buffers' alignment: 8 bytes once made
  # the Pruner keep a pruned model. The unpruned int8 file here is about 15 KB, so 1% is
  # below PAYS_BYTES, which then sets the line.
  def shipped_bytes(self, model):
    return self._unpruned_int8_bytes() - saving

  monkeypatch.setattr(pruner_executor.Executor, '_shipped_bytes', shipped_bytes)
  pruned, metrics = run_pruner(data, teacher, str(tmp_path), train_steps=5)
  assert metrics['dense_int8_bytes'] * pruner_executor.PAYS_SHARE < pruner_executor.PAYS_BYTES
  assert metrics['pruning_paid'] == paid
  if paid:
    assert artifacts.not_a_candidate(pruned) is None
  else:
    assert 'that pruning must save to pay' in artifacts.not_a_candidate(pruned)


def test_when_the_lowest_level_is_over_budget_the_search_tries_lower_ones(
    data, teacher, tmp_path):
  # Nothing may be lost at all, and the only level asked for is 0.95: it fails, so the
  # search goes down through 0.4 ... 0.1 before it gives up.
  pruned, metrics = run_pruner(data, teacher, str(tmp_path), train_steps=10,
                               max_accuracy_drop=0.0, sparsities=json.dumps([0.95]))
  trials = metrics['trials']
  assert trials[0]['sparsity'] == 0.95 and not trials[0]['within_budget']
  assert [trial['sparsity'] for trial in trials[1:]] == [0.4, 0.3, 0.2, 0.1][:len(trials) - 1]
  assert not any(trial['within_budget'] for trial in trials[:-1])
  if trials[-1]['within_budget'] and metrics['handed_on'] == 'pruned model':
    assert metrics['target_sparsity'] == trials[-1]['sparsity']
  else:
    assert metrics['handed_on'] == 'input model, unchanged'
    assert artifacts.not_a_candidate(pruned)
  # Never over budget, whichever way it went.
  assert metrics['pruned_accuracy'] >= metrics['baseline_accuracy']


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


def test_nothing_prunable_under_the_sensitivity_rule_hands_the_model_on_naming_layers(
    data, teacher, tmp_path):
  # No layer may cost any accuracy, at 0.99 of its weights pruned alone.
  pruned, metrics = run_pruner(data, teacher, str(tmp_path), target_sparsity=0.99,
                               sparsities=json.dumps([0.99]), max_layer_accuracy_drop=0.0)
  breaking = {name for name, losses in metrics['sensitivity'].items() if losses['0.99'] > 0}
  untouched = set(metrics['sensitivity']) - breaking
  assert breaking  # Pruning 99% of a trained layer costs something somewhere.
  for name in breaking:
    assert metrics['layer_targets'].get(name, 0.0) == 0.0, name
  if not untouched:
    assert metrics['handed_on'] == 'input model, unchanged'
    for name in breaking:
      assert name in metrics['reason']
    assert 'no layer can be pruned' in metrics['reason']
    assert artifacts.not_a_candidate(pruned)


def make(**overrides):
  return Pruner(model=helpers.channel(standard_artifacts.Model),
                examples=helpers.channel(standard_artifacts.Examples),
                transform_graph=helpers.channel(standard_artifacts.TransformGraph), **overrides)


def test_outputs_are_a_pruned_model_and_metrics():
  assert set(make().outputs) == {'pruned_model', 'metrics'}


def test_by_default_the_pruner_searches_within_a_one_point_budget():
  assert make().exec_properties['max_accuracy_drop'] == 0.01
  fixed = make(target_sparsity=0.5).exec_properties
  assert fixed['max_accuracy_drop'] is None and fixed['target_sparsity'] == 0.5


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
    ({'max_layer_accuracy_drop': -0.1}, 'max_layer_accuracy_drop must be a fraction'),
])
def test_bad_arguments_fail_at_construction_naming_the_parameter(overrides, message):
  with pytest.raises(ValueError, match=message):
    make(**overrides)
