"""The benchmark of what ships (#61) reads the README's own pipeline and judges runs by rule."""

import json
import os
import shutil

import pytest

from benchmarks import shipping


def test_the_stock_taxi_run_is_the_readmes_block_with_1000_steps_and_the_seed():
  script = shipping.stock_taxi_script(7)
  assert script.count('num_steps=1000') == 1
  assert 'trainer = tfx.components.Trainer(' in script
  for name in ('Distiller', 'Pruner', 'Quantizer'):
    assert f'{name}(random_seed=7, ' in script
  assert script.rstrip().endswith('tfx.orchestration.LocalDagRunner().run(pipeline)')
  compile(script, 'stock-taxi', 'exec')


def test_a_readme_block_that_lost_its_trainer_steps_is_refused(monkeypatch):
  monkeypatch.setattr(shipping, 'readme_block', lambda: 'distiller = Distiller(x=1)\n')
  with pytest.raises(ValueError, match='update benchmarks/shipping.py'):
    shipping.stock_taxi_script(1)


def test_the_csv_is_repeated_under_one_header(tmp_path):
  (tmp_path / 'source').mkdir()
  (tmp_path / 'source' / 'data.csv').write_text('a,b\n1,2\n3,4\n')
  shipping.write_repeated_csv(str(tmp_path / 'source'), str(tmp_path / 'out'), 3)
  assert (tmp_path / 'out' / 'data.csv').read_text() == 'a,b\n' + '1,2\n3,4\n' * 3


def entry(seed, exit_status=0, pushed_format='tflite_raw', pushed_bytes=40_000,
          pushed=0.88, teacher=0.89, student=0.885, int8=0.884):
  return {'seed': seed, 'exit_status': exit_status, 'pushed': 'student_full_integer'
          if exit_status == 0 else None, 'pushed_format': pushed_format,
          'pushed_bytes': pushed_bytes, 'pushed_test_accuracy': pushed,
          'teacher_test_accuracy': teacher, 'max_accuracy_drop': 0.01,
          'student_test_accuracy': student, 'int8_test_accuracy': int8}


def verdicts(rows):
  return {row['figure'].split(',')[0].split(' (')[0]: row['met'] for row in rows}


def test_a_csv_run_meets_its_targets_only_when_every_seed_ships_small_int8_within_budget():
  met = verdicts(shipping.targets_of('csv-1x', [entry(1), entry(2), entry(3)]))
  assert met == {'csv-1x: seeds that pushed a model': True,
                 'csv-1x: seeds whose pushed model is int8 and at most 64 KB as shipped': True,
                 "csv-1x: pushed models within the gate's budget on test": True,
                 'csv-1x: int8 - float test accuracy of the chosen student': True,
                 "csv-1x: the pushed model's test accuracy minus the teacher's": None}
  # One float folder pushed, one seed over budget, one int8 that lost 0.03 to its float.
  missed = verdicts(shipping.targets_of('csv-1x', [
      entry(1, pushed_format='saved_model', pushed_bytes=700_000), entry(2, pushed=0.87),
      entry(3, int8=0.855)]))
  assert missed['csv-1x: seeds whose pushed model is int8 and at most 64 KB as shipped'] is False
  assert missed["csv-1x: pushed models within the gate's budget on test"] is False
  assert missed['csv-1x: int8 - float test accuracy of the chosen student'] is False


def test_a_run_that_pushed_nothing_misses_the_push_target():
  met = verdicts(shipping.targets_of('mnist1d', [entry(1), entry(2, exit_status=3)]))
  assert met['mnist1d: seeds that pushed a model'] is False
  assert 'mnist1d: seeds whose pushed model is int8' not in met


def test_the_demo_must_push_int8_on_every_unseeded_run():
  met = verdicts(shipping.targets_of('demo', [entry(None) for _ in range(5)]))
  assert met['demo: seeds that pushed a model'] is True
  assert met['demo: seeds whose pushed model is int8'] is True
  one_float = [entry(None) for _ in range(4)] + [entry(None, pushed_format='saved_model')]
  assert verdicts(shipping.targets_of('demo', one_float))[
      'demo: seeds whose pushed model is int8'] is False


def test_the_demos_first_run_ratio_is_the_median_over_pairs_against_the_baseline_commit():
  pairs = [{'baseline_s': 200.0, 'current_s': current} for current in (210.0, 230.0, 215.0)]
  [row] = shipping.demo_targets(pairs)
  assert row['value'] == pytest.approx(215.0 / 200.0) and row['met'] is True
  assert shipping.DEMO_BASELINE_COMMIT in row['figure']
  slower = [{'baseline_s': 200.0, 'current_s': current} for current in (225.0, 230.0, 215.0)]
  assert shipping.demo_targets(slower)[0]['met'] is False


def test_both_commits_run_the_same_command():
  command = shipping.demo_command()
  assert command[-3:] == ['run', '--dataset', 'taxi'] and '--seed' not in command


def test_the_stock_taxi_script_outlives_the_home_that_a_run_empties(tmp_path, monkeypatch):
  def run_chain(command, home, environment=None, cwd=None):
    del environment
    shutil.rmtree(home, ignore_errors=True)  # As pruning.run_chain does first.
    assert os.path.isfile(command[-1]) and os.path.isdir(cwd), (command, cwd)
    assert not os.path.commonpath([cwd, home]) == home
    return {'exit_status': 0, 'wall_s': 1.0, 'pipeline_s': None, 'stderr_tail': ''}

  monkeypatch.setattr(shipping.pruning, 'run_chain', run_chain)
  entry = shipping.one_run('stock-taxi', 4, str(tmp_path), {})
  # The script ends 0 either way; with no gate report nothing was pushed.
  assert entry['exit_status'] == 3 and entry['pushed'] is None
  assert json.loads((tmp_path / 'runs.jsonl').read_text())['seed'] == 4


def test_a_failed_runs_output_is_kept_without_this_machines_paths(tmp_path, monkeypatch):
  def run_chain(command, home, environment=None, cwd=None, timeout_s=None):
    del command, environment, cwd, timeout_s
    return {'exit_status': 1, 'wall_s': 1.0, 'pipeline_s': None,
            'stderr_tail': f'OSError: {home}/runs/taxi: no space left'}

  monkeypatch.setattr(shipping.pruning, 'run_chain', run_chain)
  entry = shipping.one_run('taxi', 2, str(tmp_path), {})
  assert entry['stderr_tail'] == 'OSError: $WORK_DIR/home-taxi-2/runs/taxi: no space left'
  assert str(tmp_path) not in (tmp_path / 'runs.jsonl').read_text()


def test_draws_meet_their_targets_only_when_every_unseeded_run_pushes_int8_near_the_teacher():
  good = [dict(entry(None, pushed=0.886), exported_student='distilled') for _ in range(10)]
  met = verdicts(shipping.draws_targets('draws-csv-1x', good))
  assert met['draws-csv-1x: runs that pushed a model'] is True
  assert met['draws-csv-1x: runs that pushed int8 of at most 64 KB'] is True
  assert met['draws-csv-1x: mean test drop of the pushed model'] is True  # 0.004 <= 0.005
  assert met['draws-csv-1x: worst test drop of the pushed model'] is True
  # One run of ten pushed nothing, one lost 0.02 to the teacher, one handed on its twin.
  bad = good[:7] + [dict(entry(None, exit_status=3), exported_student='scratch'),
                    dict(entry(None, pushed=0.87), exported_student='distilled'),
                    dict(entry(None, pushed_format='saved_model', pushed_bytes=700_000),
                         exported_student='distilled')]
  rows = {row['figure'].split(' (')[0]: row for row in shipping.draws_targets('draws-csv-1x', bad)}
  assert rows['draws-csv-1x: runs that pushed a model']['value'] == 9
  assert rows['draws-csv-1x: runs that pushed int8 of at most 64 KB']['met'] is False
  assert rows['draws-csv-1x: worst test drop of the pushed model']['met'] is False
  assert rows['draws-csv-1x: runs whose Distiller handed on the from-scratch twin']['value'] == 1
  # A draw has no --seed, and runs the dataset the configuration draws.
  assert shipping.run_command('draws-demo', None, {}) == ['run', '--dataset', 'taxi']
  assert '--seed' not in shipping.run_command('draws-digits', None, {})


def test_a_chain_past_its_bound_is_killed_and_recorded_as_timed_out(tmp_path):
  # The bound is on the chain's process, not on a wait for its result: a run that hangs
  # ends at the bound with exit status 124.
  outcome = shipping.pruning.run_chain(['sleep', '30'], str(tmp_path / 'home'), timeout_s=0.5)
  assert outcome['exit_status'] == 124 and outcome['wall_s'] < 10
  assert 'timed out after 0.5 s' in outcome['stderr_tail']
  assert shipping.RUN_TIMEOUT_S['csv-100x'] > shipping.pruning.CHAIN_TIMEOUT_S


def test_each_configuration_has_its_own_default_work_folder(tmp_path):
  # main() empties its work folder first: two configurations measured at once, on the
  # default, must not empty each other's. A folder given by name is kept as given.
  demo = shipping.parse_arguments(['--config', 'draws-demo']).work_dir
  digits = shipping.parse_arguments(['--config', 'draws-digits']).work_dir
  assert demo != digits and demo.endswith('draws-demo') and digits.endswith('draws-digits')
  given = str(tmp_path / 'mine')
  assert shipping.parse_arguments(['--config', 'draws-demo', '--work-dir', given]
                                  ).work_dir == given


def test_unseeded_draws_side_by_side_each_run_in_a_home_of_their_own(tmp_path, monkeypatch):
  # Two draws at once in one home: the second found the first's metadata in use (exit 2),
  # and emptied its home as it started.
  homes = []

  def run_chain(command, home, environment=None, cwd=None, timeout_s=None):
    del command, environment, cwd, timeout_s
    homes.append(home)
    return {'exit_status': 0, 'wall_s': 1.0, 'pipeline_s': None, 'stderr_tail': ''}

  monkeypatch.setattr(shipping.pruning, 'run_chain', run_chain)
  for draw in range(3):
    shipping.one_run('draws-digits', None, str(tmp_path), {}, draw)
  shipping.one_run('digits', 2, str(tmp_path), {})
  assert len(set(homes)) == 4 and homes[-1].endswith('home-digits-2')
