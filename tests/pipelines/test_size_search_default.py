"""A CSV of the user's own gets the size search by default (#36 item 3): no student module
file, the built-in student at growing shares of the teacher, kept within the gate's budget."""

import json

import pytest

from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import local_runner
from tfx_distillery.pipelines import pipeline

ARGUMENTS = dict(data_root='data', transform_module_file=datasets.module_file('tabular_transform'),
                 teacher_module_file=datasets.module_file('tabular_teacher'),
                 label_column='species', serving_model_dir='serving')


def distiller_of(**arguments):
  [distiller] = [component for component in pipeline.create_components(**ARGUMENTS, **arguments)
                 if component.id == 'Distiller']
  return distiller.exec_properties


def test_a_csv_dataset_has_no_student_module_file_and_the_default_shares(tmp_path):
  dataset = datasets.resolve('csv', str(tmp_path), str(tmp_path), 'species')
  assert dataset.student_module_file is None
  assert dataset.student_parameter_shares == datasets.DEFAULT_STUDENT_PARAMETER_SHARES
  # The stock examples keep the student module files they were written with.
  assert datasets.resolve('taxi', str(tmp_path)).student_parameter_shares == ()


def test_shares_build_the_distiller_with_the_built_in_student_and_the_gates_budget():
  properties = distiller_of(student_parameter_shares=(0.01, 0.1), max_accuracy_drop=0.02)
  assert not properties.get('module_file')
  assert json.loads(properties['distillation'])['student_parameter_shares'] == [0.01, 0.1]
  assert json.loads(properties['distillation'])['max_accuracy_drop'] == 0.02


def test_no_student_and_no_shares_leaves_the_distiller_out():
  assert not [component for component in pipeline.create_components(**ARGUMENTS)
              if component.id == 'Distiller']


def test_a_module_file_and_shares_together_are_refused_by_name():
  with pytest.raises(ValueError, match='student_module_file .* student_parameter_shares'):
    distiller_of(student_module_file=datasets.module_file('tabular_student'),
                 student_parameter_shares=(0.01,))


def test_the_run_passes_the_shares_flag_or_the_default(tmp_path):
  args = local_runner.parse_args(['--dataset', 'csv', '--data', str(tmp_path), '--label', 'y',
                                  '--student-shares', '0.02,0.2'])
  assert args.student_shares == (0.02, 0.2)
  assert local_runner.parse_args(['--dataset', 'csv', '--data', str(tmp_path),
                                  '--label', 'y']).student_shares is None


@pytest.mark.parametrize('text', ['0.3,0.1', '0', '1.5', 'small', '0.1,0.1', 'nan'])
def test_bad_shares_are_refused_by_flag_name(text, capsys):
  with pytest.raises(SystemExit):
    local_runner.parse_args(['--dataset', 'csv', '--data', 'd', '--label', 'y',
                             '--student-shares', text])
  error = capsys.readouterr().err
  assert '--student-shares' in error and 'increasing fractions in (0, 1]' in error


def test_shares_are_for_the_csv_dataset_only(capsys):
  with pytest.raises(SystemExit):
    local_runner.parse_args(['--dataset', 'taxi', '--student-shares', '0.1'])
  assert '--student-shares are for --dataset csv only' in capsys.readouterr().err
