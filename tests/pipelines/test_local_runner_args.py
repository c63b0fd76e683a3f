"""The local runner's command line rejects bad arguments with actionable messages."""

import pytest

from tfx_distillery.pipelines import local_runner


def test_defaults_for_taxi():
  args = local_runner.parse_args(['--dataset', 'taxi'])
  assert args.dataset == 'taxi' and args.num_workers == 1 and args.train_steps is None


@pytest.mark.parametrize('argv, message', [
    (['--dataset', 'imagenet'], 'invalid choice'),
    (['--dataset', 'taxi', '--train-steps', '0'], '--train-steps must be >= 1'),
    (['--dataset', 'taxi', '--num-workers', '0'], '--num-workers must be >= 1'),
    (['--dataset', 'taxi', '--student-train-steps', '0'], '--student-train-steps must be >= 1'),
    (['--dataset', 'taxi', '--label', 'tips'],
     '--data, --label, --schema, --unlabelled and --student-shares are for'),
    (['--dataset', 'taxi', '--unlabelled', 'logs'],
     '--data, --label, --schema, --unlabelled and --student-shares are for'),
])
def test_bad_arguments_exit_with_a_message(argv, message, capsys):
  with pytest.raises(SystemExit) as exit_info:
    local_runner.parse_args(argv)
  assert exit_info.value.code != 0
  assert message in capsys.readouterr().err


def test_csv_without_label_fails_before_any_work(tmp_path, capsys):
  code = local_runner.main(['--dataset', 'csv', '--data', str(tmp_path),
                            '--pipeline-root', str(tmp_path / 'root')])
  assert code == 2
  assert '--label COLUMN' in capsys.readouterr().err


def test_student_steps_are_their_own_flag():
  args = local_runner.parse_args(['--dataset', 'taxi', '--train-steps', '50',
                                  '--student-train-steps', '70'])
  assert (args.train_steps, args.student_train_steps) == (50, 70)


def test_each_csv_folder_gets_its_own_run_and_serving_folders(tmp_path):
  first = local_runner.parse_args(['--dataset', 'csv', '--data', str(tmp_path / 'penguins'),
                                   '--label', 'species'])
  second = local_runner.parse_args(['--dataset', 'csv', '--data', str(tmp_path / 'my data/'),
                                    '--label', 'kind'])
  assert local_runner.run_folder_name(first) == 'csv-penguins'
  assert local_runner.run_folder_name(second) == 'csv-my-data'
  assert local_runner.run_folder_name(local_runner.parse_args(['--dataset', 'taxi'])) == 'taxi'


def test_verbose_leaves_library_lines_on_the_console(tmp_path):
  # The quiet path (library lines to the log only) runs end to end in test_cli.py; under
  # pytest's own capture its fd redirection can not be checked in-process.
  import os  # pylint: disable=import-outside-toplevel
  log_path = str(tmp_path / 'pipeline.log')
  stderr_before = os.fstat(2)
  with local_runner.console_shows_progress_only(log_path, verbose=True):
    stderr_inside = os.fstat(2)
    os.write(2, b'a library line\n')
  assert (stderr_inside.st_ino, stderr_inside.st_dev) == (stderr_before.st_ino,
                                                          stderr_before.st_dev)
  assert 'a library line' not in open(log_path).read()


def test_verbose_and_the_gate_budget_are_flags():
  args = local_runner.parse_args(['--dataset', 'taxi', '--verbose', '--max-accuracy-drop', '0.05'])
  assert args.verbose and args.max_accuracy_drop == 0.05
  with pytest.raises(SystemExit):
    local_runner.parse_args(['--dataset', 'taxi', '--max-accuracy-drop', '5'])


def test_the_gates_budget_defaults_to_one_point_and_to_ten_for_mnist1d():
  assert local_runner.parse_args(['--dataset', 'taxi']).max_accuracy_drop == 0.01
  assert local_runner.parse_args(['--dataset', 'mnist1d']).max_accuracy_drop == 0.1
  assert local_runner.parse_args(['--dataset', 'mnist1d', '--max-accuracy-drop',
                                  '0.02']).max_accuracy_drop == 0.02
