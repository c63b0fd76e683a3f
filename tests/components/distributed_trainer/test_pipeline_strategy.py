"""strategy='pipeline': GPipe's stages equal one device's training, the plan, and refusals."""

import io
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tfx.types import standard_artifacts

from tfx_distillery.components import DistributedTrainer
from tfx_distillery.components.common import progress
from tfx_distillery.components.distributed_trainer import gpipe
from tfx_distillery.pipelines import cli
from tests import helpers
from tests.components.distributed_trainer import test_distributed_trainer as trainer_tests

HERE = os.path.dirname(__file__)
EQUALITY_SCRIPT = os.path.join(HERE, 'pipeline_equality.py')
CHAIN_MODULE = os.path.join(HERE, 'chain_module.py')
TABULAR_TEACHER_PATH = trainer_tests.TABULAR_TEACHER


def test_the_split_is_the_best_contiguous_one_found_by_trying_every_split():
  generator = random.Random(0)
  for _ in range(200):
    costs = [generator.uniform(0.1, 5.0) for _ in range(generator.randint(1, 10))]
    stages = generator.randint(1, len(costs))
    boundaries, slowest = gpipe.best_split(costs, stages)
    edges = [0] + boundaries + [len(costs)]
    assert len(boundaries) == stages - 1 and all(
        start < end for start, end in zip(edges, edges[1:]))
    assert slowest == pytest.approx(max(sum(costs[start:end])
                                        for start, end in zip(edges, edges[1:])))
    assert slowest == pytest.approx(gpipe.exhaustive_slowest(costs, stages))


def test_the_bubble_share_is_gpipes():
  assert gpipe.bubble_share(1, 8) == 0
  assert gpipe.bubble_share(4, 8) == pytest.approx(3 / 11)


def skip_model():
  inputs = tf_keras.Input((5,))
  first = tf_keras.layers.Dense(4, name='first')(inputs)
  second = tf_keras.layers.Dense(4, name='second')(first)
  third = tf_keras.layers.Dense(4, name='third')(second)
  joined = tf_keras.layers.Add(name='skip')([first, third])
  model = tf_keras.Model(inputs, tf_keras.layers.Dense(3, name='out')(joined))
  model.compile('sgd', 'mse')
  return model


def test_a_chain_is_cut_after_every_layer_and_a_branch_only_around_it():
  chain = tf_keras.Sequential([tf_keras.layers.Dense(4, input_shape=(5,)),
                               tf_keras.layers.Dense(4), tf_keras.layers.Dense(2)])
  assert [len(unit.layer_names) for unit in gpipe.units_of(chain)] == [1, 1, 1]
  assert [unit.layer_names for unit in gpipe.units_of(skip_model())] == [
      ['first'], ['second', 'third', 'skip'], ['out']]


def test_a_branch_across_a_stage_boundary_is_refused_naming_the_layer():
  model = skip_model()
  with pytest.raises(ValueError, match="model 'model.*' has 2: layer 'skip' takes inputs that "
                                       'cross a stage boundary'):
    gpipe.make_plan(model, 4, 2, ['/cpu:0'] * 4, [np.ones((4, 5), 'float32')])


def test_more_stages_than_layers_are_refused_by_name():
  with pytest.raises(ValueError, match='stages=6 is more than the 5 layers'):
    gpipe.make_plan(skip_model(), 6, 2, ['/cpu:0'] * 6, [np.ones((4, 5), 'float32')])


def test_a_shared_layer_is_refused_by_name():
  inputs = tf_keras.Input((4,))
  shared = tf_keras.layers.Dense(4, name='shared')
  model = tf_keras.Model(inputs, shared(shared(inputs)))
  with pytest.raises(ValueError, match="layer 'shared' is called more than once"):
    gpipe.units_of(model)


def test_more_stages_than_devices_are_refused_naming_both_numbers():
  with pytest.raises(ValueError, match=r'stages=64 is more than the devices this machine has '
                                       r'\(0 GPUs, 1 CPUs\).*logical_devices=True'):
    gpipe.devices_for(64)


def test_the_plan_measures_every_unit_and_balances_the_slowest_stage():
  model = tf_keras.Sequential([tf_keras.layers.Dense(64, input_shape=(8,))]
                              + [tf_keras.layers.Dense(64) for _ in range(4)]
                              + [tf_keras.layers.Dense(2)])
  plan = gpipe.make_plan(model, 2, 4, ['/cpu:0', '/cpu:0'],
                         [np.ones((16, 8), 'float32')] * 3)
  assert [stage['stage'] for stage in plan['per_stage']] == [0, 1]
  assert sum(len(stage['layers']) for stage in plan['per_stage']) == 6
  assert sum(stage['parameters'] for stage in plan['per_stage']) == model.count_params()
  # float32 weights: 4 bytes a parameter, what each stage holds on its device.
  assert [stage['weight_bytes'] for stage in plan['per_stage']] == [
      4 * stage['parameters'] for stage in plan['per_stage']]
  assert all(unit['seconds'] > 0 and unit['activation_bytes'] == 16 * unit_width * 4
             for unit, unit_width in zip(plan['units'], [64] * 5 + [2]))
  assert plan['slowest_stage_seconds'] == pytest.approx(
      max(stage['seconds'] for stage in plan['per_stage']))
  assert plan['predicted_bubble_share'] == pytest.approx(1 / 5)


def test_a_model_whose_optimizer_holds_slots_keeps_its_weights_where_they_are(tmp_path):
  # Trained once before: Adam made its slots for these variables, so new ones on the
  # stages' devices would leave the slots behind. The run says so and trains as it is.
  model = tf_keras.Sequential([tf_keras.layers.Dense(4, input_shape=(3,)),
                               tf_keras.layers.Dense(2)])
  model.compile(tf_keras.optimizers.Adam(0.01), 'mse')
  features, targets = np.ones((8, 3), 'float32'), np.zeros((8, 2), 'float32')
  model.fit(features, targets, batch_size=8, verbose=0)
  before = [variable.ref() for variable in model.weights]
  with helpers.ProgressLines() as lines, gpipe.Pipelining(1, 2) as pipelining:
    model.fit(features, targets, batch_size=8, verbose=0)
  assert pipelining.plans[0]['placed_variables'] == 0
  assert [variable.ref() for variable in model.weights] == before
  assert any("leaves the weights where they are: the optimizer of model" in line
             for line in lines)


class SignFlip(tf_keras.layers.Layer):
  """A user's layer whose Python `if` reads a tensor: it traces only through AutoGraph."""

  def call(self, inputs):
    if tf.reduce_mean(inputs) > 0:
      return inputs * 2.0
    return -inputs


def test_a_users_layer_that_needs_autograph_trains_in_stages_as_keras_trains_it():
  # The pipelined step runs as plain Python in the trace; what the model brings is still
  # converted as Keras' own train step converts it.
  features = np.linspace(-1, 1, 48, dtype='float32').reshape(16, 3)
  targets = np.ones((16, 2), 'float32')
  weights = []
  for pipelined in (False, True):
    tf_keras.utils.set_random_seed(1)
    model = tf_keras.Sequential([tf_keras.layers.Dense(4, input_shape=(3,)), SignFlip(),
                                 tf_keras.layers.Dense(2)])
    model.compile(tf_keras.optimizers.SGD(0.1), 'mse')
    if pipelined:
      # One micro-batch: the layer's branch reads the whole batch, as in Keras' step.
      with gpipe.Pipelining(1, 1):
        model.fit(features, targets, batch_size=16, epochs=2, verbose=0)
    else:
      model.fit(features, targets, batch_size=16, epochs=2, verbose=0)
    weights.append(model.get_weights())
  for keras_weight, staged_weight in zip(*weights):
    np.testing.assert_allclose(staged_weight, keras_weight, rtol=1e-5, atol=1e-6)


def test_a_model_built_under_a_strategy_of_its_own_keeps_its_weights_there():
  # TFX's penguin module builds its model under MirroredStrategy: that strategy placed the
  # variables, and its optimizer refuses any made outside it.
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  strategy = tf.distribute.MirroredStrategy(['/cpu:0'])
  with strategy.scope():
    model = tf_keras.Sequential([tf_keras.layers.Dense(4, input_shape=(3,)),
                                 tf_keras.layers.Dense(2)])
    model.compile(tf_keras.optimizers.Adam(0.01), 'mse')
  features, targets = np.ones((8, 3), 'float32'), np.zeros((8, 2), 'float32')
  before = model.get_weights()
  with helpers.ProgressLines() as lines, gpipe.Pipelining(1, 2) as pipelining:
    model.fit(features, targets, batch_size=8, verbose=0)
  assert pipelining.plans[0]['placed_variables'] == 0
  assert any('was built under MirroredStrategy, which places its variables itself' in line
             for line in lines)
  assert any(not np.array_equal(now, then) for now, then in zip(model.get_weights(), before))


def trains_one_devices_weights(pairs):
  """Runs pipeline_equality.py on `pairs` (`S,M` or `S,M,r`) on 4 logical CPUs, in a child
  process (logical devices must be made before TensorFlow starts), and checks each."""
  finished = subprocess.run([sys.executable, EQUALITY_SCRIPT, *pairs],
                            capture_output=True, text=True, timeout=600, check=False)
  assert finished.returncode == 0, finished.stderr[-3000:]
  results = [json.loads(line) for line in finished.stdout.splitlines() if line.startswith('{')]
  assert len(results) == len(pairs)
  for result in results:
    assert result['gradient_relative_difference'] <= 1e-5, result
    assert result['weight_max_abs_difference'] <= 1e-4, result
    # Stage s ran on device s.
    assert result['devices'] == [f'/device:CPU:{index}' for index in range(result['stages'])]
    assert sum(result['layers_per_stage']) == 8
    # And it owns its state and its work there: each variable, each of Adam's two slots per
    # variable, and every op of the traced step under its layers or its gradients' sum,
    # forward and backward (a ReadVariableOp runs where its variable is).
    placement = result['placement']
    assert placement['variables'] == 16 and placement['slots'] == 2 * 16, placement
    assert placement['variables_elsewhere'] == [] and placement['slots_elsewhere'] == []
    assert placement['backward_ops'] > 0, placement
    # A sum over micro-batches where there are two or more.
    assert (placement['gradient_sum_ops'] > 0) == (result['micro_batches'] > 1), placement
    assert placement['ops_elsewhere_count'] == 0, placement['ops_elsewhere']
    # The model was built on the default device (the first stage's): every other stage's
    # variables moved, a kernel and a bias per layer.
    assert result['placed_variables'] == 2 * (8 - result['layers_per_stage'][0]), result


def test_four_stages_of_eight_micro_batches_recomputing_train_one_devices_weights():
  trains_one_devices_weights(['4,8,r'])


@pytest.mark.e2e  # long: 18 trainings (make test-e2e); the benchmark measures the same grid
def test_every_stage_and_micro_batch_count_trains_one_devices_weights():
  """S = 1, 2, 4 and M = 1, 4, 8. S = 4, M = 8 with recomputation is make test's, above: the
  same check, so the long suite does not train it twice (#82)."""
  trains_one_devices_weights(['1,1', '1,4', '1,8', '2,1', '2,4', '2,8', '4,1', '4,4', '4,8'])


def test_the_trainer_runs_a_stock_style_chain_in_stages_on_logical_devices(data, tmp_path):
  with helpers.ProgressLines() as lines:
    model_uri, model_run_uri = trainer_tests.run_executor(
        data, str(tmp_path), module_file=CHAIN_MODULE, train_steps=8, strategy='pipeline',
        stages=2, micro_batches=4, logical_devices=True)
  with open(os.path.join(model_run_uri, gpipe.PLAN_FILE_NAME)) as handle:
    plan = json.load(handle)
  assert [stage['device'] for stage in plan['per_stage']] == ['/device:CPU:0', '/device:CPU:1']
  assert plan['micro_batches'] == 4 and plan['stages'] == 2
  assert any(line.startswith('[worker 0]') and "strategy='pipeline', 2 stages x 4" in line
             for line in lines)
  # One ordinary SavedModel, as every strategy exports.
  assert os.path.exists(os.path.join(model_uri, 'Format-Serving', 'saved_model.pb'))


@pytest.mark.parametrize('arguments, message', [
    ({'strategy': 'pipeline'}, 'stages must be a whole number >= 1'),
    ({'strategy': 'pipeline', 'stages': 0}, 'stages must be a whole number >= 1'),
    ({'strategy': 'mirrored', 'stages': 2}, "stages is only used by strategy 'pipeline'"),
    ({'recompute': True}, "recompute is only used by strategy 'pipeline'"),
    ({'logical_devices': True}, "logical_devices is only used by strategy 'pipeline'"),
    ({'strategy': 'pipeline', 'stages': 2, 'logical_devices': 'yes'},
     'logical_devices must be True or False'),
    ({'strategy': 'pipeline', 'stages': 2, 'num_workers': 2},
     "strategy 'pipeline' runs its stages in one process"),
])
def test_bad_pipeline_arguments_are_refused_at_construction(arguments, message):
  with pytest.raises(ValueError, match=message):
    DistributedTrainer(examples=helpers.channel(standard_artifacts.Examples),
                       module_file=trainer_tests.TABULAR_TEACHER, **arguments)


def plan_stages(data, capsys, *arguments):
  examples, graph, _ = data
  try:
    status = cli.main(['plan-stages', TABULAR_TEACHER_PATH, '--examples', examples.uri,
                       '--transform-graph', graph.uri, '--custom-config',
                       '{"label_column": "species"}', *arguments])
  finally:
    # The command leaves the logger on this test's captured stdout, which pytest closes.
    progress.set_console(io.StringIO())
  return status, capsys.readouterr()


def test_plan_stages_prints_our_teachers_plan_and_the_bubble_share_without_training(data,
                                                                                    capsys):
  status, printed = plan_stages(data, capsys, '--devices', '3', '--micro-batches', '4')
  assert status == 0, printed.err
  assert 'predicted bubble share (S - 1) / (M + S - 1) = 0.33' in printed.out
  assert [line.split('|')[1].strip() for line in printed.out.splitlines()
          if line.startswith('| ') and line[2].isdigit()] == ['0', '1', '2']
  status, printed = plan_stages(data, capsys, '--devices', '2', '--micro-batches', '8', '--json')
  plan = json.loads(printed.out)
  assert plan['stages'] == 2 and plan['predicted_bubble_share'] == pytest.approx(1 / 9)
  assert plan['per_stage'][0]['device'] == 'device 0'
  # Every layer with weights is in one stage, the teacher's parameters all counted.
  assert sum(stage['parameters'] for stage in plan['per_stage']) == sum(
      unit['parameters'] for unit in plan['units'])


def test_plan_stages_refuses_more_stages_than_layers_by_name(data, capsys):
  status, printed = plan_stages(data, capsys, '--devices', '40')
  assert status == 2
  assert 'stages=40 is more than the' in printed.err and 'layers of model' in printed.err


def test_plan_stages_refuses_a_device_count_below_one(data, capsys):
  with pytest.raises(SystemExit) as exit_info:
    plan_stages(data, capsys, '--devices', '0')
  assert exit_info.value.code == 2
  assert '--devices must be a whole number >= 1; got 0' in capsys.readouterr().err
