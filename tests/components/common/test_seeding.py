"""`random_seed` is checked where it is given, and a seeded block is deterministic."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tfx.types import standard_artifacts
from tensorflow.python.framework import config as tf_config

from tfx_distillery import components
from tfx_distillery.components.common import seeding
from tfx_distillery.pipelines import local_runner
from tfx_distillery.pipelines import pipeline
from tests import helpers


def trainer(random_seed):
  return components.DistributedTrainer(
      examples=helpers.channel(standard_artifacts.Examples),
      transform_graph=helpers.channel(standard_artifacts.TransformGraph),
      run_fn='tfx_distillery.trainer_modules.base.run_fn', random_seed=random_seed)


def distiller(random_seed):
  return components.Distiller(
      examples=helpers.channel(standard_artifacts.Examples),
      transform_graph=helpers.channel(standard_artifacts.TransformGraph),
      teacher_model=helpers.channel(standard_artifacts.Model), random_seed=random_seed)


def compressor(component_class):
  """A Pruner or Quantizer builder: both take a model, examples and the transform graph."""
  def build(random_seed):
    return component_class(
        model=helpers.channel(standard_artifacts.Model),
        examples=helpers.channel(standard_artifacts.Examples),
        transform_graph=helpers.channel(standard_artifacts.TransformGraph),
        random_seed=random_seed)
  return build


def chain(random_seed):
  return pipeline.create_components(
      data_root='data', transform_module_file='transform.py',
      teacher_module_file='teacher.py', label_column='label', serving_model_dir='serving',
      random_seed=random_seed)


BUILDERS = [trainer, distiller, compressor(components.Pruner),
            compressor(components.Quantizer), chain]


@pytest.mark.parametrize('build', BUILDERS)
@pytest.mark.parametrize('bad', ['7', 7.0, True, -1, 2**31])
def test_a_seed_that_is_not_a_non_negative_integer_is_refused_by_name(build, bad):
  with pytest.raises(ValueError, match=r'random_seed must be an integer in \[0, 2147483647\]'):
    build(bad)


@pytest.mark.parametrize('build', BUILDERS[:4])
def test_the_seed_is_an_execution_property(build):
  assert build(11).exec_properties[seeding.RANDOM_SEED_KEY] == 11
  assert build(None).exec_properties.get(seeding.RANDOM_SEED_KEY) is None


@pytest.mark.parametrize('argv', [['--dataset', 'taxi', '--seed', '-3'],
                                  ['--dataset', 'taxi', '--seed', 'abc']])
def test_distillery_run_refuses_a_bad_seed(argv, capsys):
  with pytest.raises(SystemExit) as exit_info:
    local_runner.parse_args(argv)
  assert exit_info.value.code == 2
  assert '--seed' in capsys.readouterr().err


def test_a_given_seed_makes_draws_and_kernels_repeatable_and_restores_determinism():
  def draw():
    with seeding.seeded(5, True, 'Test'):
      assert tf_config.is_op_determinism_enabled()
      return (np.random.rand(), tf.random.uniform([3]).numpy(),
              tf_keras.initializers.GlorotUniform()([2, 2]).numpy())
  first, second = draw(), draw()
  assert not tf_config.is_op_determinism_enabled()
  assert first[0] == second[0]
  np.testing.assert_array_equal(first[1], second[1])
  np.testing.assert_array_equal(first[2], second[2])


def test_a_drawn_seed_is_in_range_and_leaves_kernels_as_they_were():
  seed, deterministic = seeding.from_properties({})
  assert 0 <= seed <= seeding.MAX_SEED and not deterministic
  assert seeding.from_properties({seeding.RANDOM_SEED_KEY: 3}) == (3, True)


def test_an_op_without_a_deterministic_kernel_is_named_with_the_component():
  with pytest.raises(RuntimeError, match=r'^Pruner: an op has no deterministic form.*'
                     r'GPU kernel for Foo.*without random_seed'):
    with seeding.named_nondeterminism('Pruner'):
      raise tf.errors.UnimplementedError(
          None, None, 'A deterministic GPU kernel for Foo is not available.')
  with pytest.raises(ValueError, match='unrelated'):  # Other errors pass through unchanged.
    with seeding.named_nondeterminism('Pruner'):
      raise ValueError('unrelated')
