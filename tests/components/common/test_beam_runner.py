"""Our Beam stages run on Beam's DirectRunner without its first try of Prism."""

import logging

import apache_beam as beam
from apache_beam.testing import util as beam_testing
import pytest
from tfx.components.statistics_gen import executor as statistics_executor
from tfx.utils import dependency_utils

from tests import helpers
from tfx_distillery.components.common import beam_runner
from tfx_distillery.pipelines import beam_cluster
from tfx_distillery.pipelines import pipeline


@pytest.mark.parametrize('mode', [['--direct_running_mode=in_memory'],
                                  ['--direct_running_mode=multi_processing',
                                   '--direct_num_workers=2']])
def test_a_pipeline_runs_on_the_fn_api_runner_and_never_tries_prism(mode, caplog, monkeypatch):
  caplog.set_level(logging.INFO, logger='apache_beam')
  # Beam sends a pipeline through its runner API and back (stand-in coders, the whole graph
  # rebuilt) unless the runner's class is named SwitchingDirectRunner: 2.5 times as long.
  round_trips = []
  from_runner_api = beam.Pipeline.from_runner_api
  monkeypatch.setattr(beam.Pipeline, 'from_runner_api', staticmethod(
      lambda *args, **kwargs: round_trips.append(1) or from_runner_api(*args, **kwargs)))
  with beam.Pipeline(argv=beam_runner.with_direct_runner(mode)) as beam_pipeline:
    doubled = (beam_pipeline | beam.Create(range(50)) | beam.Map(lambda x: 2 * x)
               | beam.CombineGlobally(sum))
    beam_testing.assert_that(doubled, beam_testing.equal_to([2450]))
  assert isinstance(beam_pipeline.runner, beam_runner.SwitchingDirectRunner)
  assert not round_trips
  assert not [record for record in caplog.records if 'Prism' in record.getMessage()]


@pytest.mark.parametrize('given, expected', [
    ([], [beam_runner.RUNNER_ARGUMENT]),
    (['--direct_num_workers=1'], [beam_runner.RUNNER_ARGUMENT, '--direct_num_workers=1']),
    (['--runner=FlinkRunner', '--flink_master=host:8081'],
     ['--runner=FlinkRunner', '--flink_master=host:8081']),
    (['--runner', 'DirectRunner'], ['--runner', 'DirectRunner']),
])
def test_a_runner_the_user_names_is_kept(given, expected):
  assert beam_runner.with_direct_runner(given) == expected


def test_the_pipeline_carries_the_runner_unless_the_user_named_one(tmp_path):
  arguments = helpers.taxi_pipeline_arguments(tmp_path)
  built = pipeline.create_pipeline(beam_pipeline_args=['--direct_num_workers=1'], **arguments)
  assert built.beam_pipeline_args == [beam_runner.RUNNER_ARGUMENT, '--direct_num_workers=1']
  flink = pipeline.create_pipeline(beam_pipeline_args=['--runner=FlinkRunner'], **arguments)
  assert flink.beam_pipeline_args == ['--runner=FlinkRunner']


@pytest.fixture
def packing(monkeypatch):
  """(the packages TFX built, the Beam arguments a stock Beam executor ends up with)."""
  # TFX's stock Beam executors (StatisticsGen's here) build a `tfx_ephemeral` sdist for
  # remote workers: about 2 s and a 49 MB copy of TFX per stage.
  built = []
  monkeypatch.setattr(dependency_utils, 'build_ephemeral_package',
                      lambda: built.append('built') or '/packages/tfx_ephemeral.tar.gz')

  def executor_arguments(beam_pipeline_args):
    context = statistics_executor.Executor.Context(beam_pipeline_args=beam_pipeline_args)
    return statistics_executor.Executor(context)._beam_pipeline_args  # pylint: disable=protected-access

  return built, executor_arguments


def test_tfx_packs_no_copy_of_itself_for_this_runner_and_still_does_for_others(packing):
  built, executor_arguments = packing
  ours = executor_arguments(beam_runner.with_direct_runner(['--direct_num_workers=1']))
  assert not built
  assert not [argument for argument in ours if argument.startswith('--extra_package')]
  assert ours[:2] == [beam_runner.RUNNER_ARGUMENT, '--direct_num_workers=1']
  flink = executor_arguments(['--runner=FlinkRunner'])
  assert built == ['built']
  assert '--extra_package=/packages/tfx_ephemeral.tar.gz' in flink


def test_a_portable_runs_harness_in_the_stage_gets_no_package_and_one_elsewhere_does(packing):
  # LOOPBACK: the SDK harness is the stage's own process, which has TFX; the package was
  # only built and staged to the job server. EXTERNAL: a worker pool elsewhere may need it.
  built, executor_arguments = packing
  loopback = beam_cluster.portable_runner_args('flink', '127.0.0.1:8099')
  assert '--environment_type=LOOPBACK' in loopback
  ours = executor_arguments(loopback)
  assert not built and not [argument for argument in ours
                            if argument.startswith('--extra_package')]
  executor_arguments(['--runner', 'PortableRunner', '--environment_type', 'LOOPBACK'])
  assert not built
  external = executor_arguments(beam_cluster.portable_runner_args(
      'spark', '127.0.0.1:8099', 'EXTERNAL', '127.0.0.1:50000'))
  assert built == ['built']
  assert '--extra_package=/packages/tfx_ephemeral.tar.gz' in external
