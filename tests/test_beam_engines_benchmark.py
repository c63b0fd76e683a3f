"""The Beam engines benchmark's own arithmetic: stage times, process roles, the crossover."""

from benchmarks import beam_engines


def test_stage_seconds_are_read_from_the_runs_finished_lines():
  output = ('CsvExampleGen: started\nCsvExampleGen: finished in 12.5 s\n'
            'StatisticsGen: reused from the cache (0.1 s)\nIngestionTransform: finished in 40 s\n')
  assert beam_engines.stage_seconds(output) == {'CsvExampleGen': 12.5,
                                                'IngestionTransform': 40.0}


def test_each_process_is_named_by_its_role():
  assert beam_engines.role_of('python distillery run', True) == 'distillery run'
  assert beam_engines.role_of('java org.apache.flink.runtime.taskexecutor.TaskManagerRunner',
                              False) == 'flink taskmanager'
  assert beam_engines.role_of('java org.apache.spark.deploy.worker.Worker spark://',
                              False) == 'spark worker'
  assert beam_engines.role_of('python -m apache_beam.runners.worker.sdk_worker_main',
                              False) == 'beam worker'
  assert beam_engines.role_of('sleep 1', False) == 'other'


def test_the_crossover_is_interpolated_in_log_rows_where_the_ratio_crosses_one():
  # 3x slower at 10,000 rows, 2x faster at 1,000,000: the ratio crosses 1 at (3 - 1) /
  # (3 - 0.5) of the way in log rows.
  rows = beam_engines.crossover_rows([(10_000, 30.0, 10.0), (1_000_000, 300.0, 600.0)])
  assert rows == round(10 ** (4 + 2 * (2 / 2.5)))
  assert beam_engines.crossover_rows([(10_000, 30.0, 10.0), (1_000_000, 700.0, 600.0)]) is None
  assert beam_engines.crossover_rows([(10_000, 5.0, 10.0), (1_000_000, 5.0, 10.0)]) == 10_000


def test_a_failed_runs_console_tail_names_no_path_of_this_machine(tmp_path):
  from benchmarks import results  # pylint: disable=import-outside-toplevel
  text = (f'{results.REPOSITORY}/.venv/lib/python3.10/site-packages/apache_beam/x.py\n'
          f'error: {tmp_path}/home-x100-flink-1/runs failed\n')
  recorded = beam_engines.recordable(text, str(tmp_path))
  assert recorded == ('$REPOSITORY/.venv/lib/python3.10/site-packages/apache_beam/x.py\n'
                      'error: $WORK_DIR/home-x100-flink-1/runs failed\n')


def test_a_failed_flink_run_misses_its_memory_target_and_gets_no_ratio():
  def run(status):
    return {'engine': 'flink-2', 'rows': 1000, 'exit_status': status, 'beam_stages_s': 30.0,
            'peak_memory_bytes': {'flink taskmanager 0': 2**30}}

  passed = beam_engines.flink_targets([run(0)], 1000, {1000: 20.0})
  assert [target['met'] for target in passed] == [True, None]
  assert passed[1]['value'] == 1.5
  failed = beam_engines.flink_targets([run(1)], 1000, {1000: 20.0})
  assert failed[0]['met'] is False
  assert failed[1]['value'] is None and 'not computed: flink-2 exited with status 1' in (
      failed[1]['figure'])
  # No DirectRunner run that passed at those rows: nothing to compare with.
  assert len(beam_engines.flink_targets([run(0)], 1000, {})) == 1
