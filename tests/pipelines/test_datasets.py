"""Dataset choices: where the data comes from and how bad folders are reported."""

import csv
import os

import pytest

from tfx_distillery.pipelines import datasets


def test_taxi_data_is_found_inside_the_installed_tfx_wheel():
  path = datasets.taxi_data_dir()
  with open(os.path.join(path, 'data.csv')) as handle:
    header = handle.readline().strip().split(',')
  assert 'tips' in header and 'fare' in header


def test_digits_are_written_as_one_csv_with_64_pixels_and_a_label(tmp_path):
  folder = datasets.write_digits_csv(str(tmp_path / 'digits'))
  with open(os.path.join(folder, 'data.csv'), newline='') as handle:
    rows = list(csv.reader(handle))
  assert rows[0][:2] == ['pixel_00', 'pixel_01'] and rows[0][-1] == 'label'
  assert len(rows[0]) == 65
  assert len(rows) - 1 == 1797  # scikit-learn's bundled digits
  assert {row[-1] for row in rows[1:]} == {str(digit) for digit in range(10)}
  assert not os.path.exists(os.path.join(folder, 'data.csv.tmp'))


def test_resolve_gives_each_dataset_its_own_module_files(tmp_path):
  taxi = datasets.resolve('taxi', str(tmp_path))
  digits = datasets.resolve('digits', str(tmp_path))
  assert taxi.label_column == 'tips'
  assert taxi.transform_module_file.endswith('taxi_transform.py')
  assert digits.teacher_module_file.endswith('digits_teacher.py')
  for dataset in (taxi, digits):
    assert os.path.isfile(dataset.transform_module_file)
    assert os.path.isfile(dataset.teacher_module_file)


def test_csv_dataset_needs_data_and_label(tmp_path):
  with pytest.raises(ValueError, match='--data DIR .* --label COLUMN'):
    datasets.resolve('csv', str(tmp_path))


def test_unknown_dataset_name_lists_the_choices(tmp_path):
  with pytest.raises(ValueError, match='taxi, digits, mnist1d, csv'):
    datasets.resolve('mnist', str(tmp_path))


def test_sample_keeps_the_header_and_the_first_rows(tmp_path):
  source = tmp_path / 'source'
  source.mkdir()
  (source / 'data.csv').write_text('a,b\n' + ''.join(f'{i},{i}\n' for i in range(50)))
  datasets.sample_csv(str(source), str(tmp_path / 'sample'), rows=10)
  lines = (tmp_path / 'sample' / 'data.csv').read_text().splitlines()
  assert lines[0] == 'a,b' and len(lines) == 11 and lines[-1] == '9,9'
