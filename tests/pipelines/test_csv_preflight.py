"""The CSV preflight: a verdict for every file of 130 generated messy folders, the copy
ExampleGen reads, and the catalogue in docs/bad-data-and-faults.md."""

import csv
import logging
import os
import re
import shutil

import pytest

from tests.reliability import messy_csv
from tfx_distillery.pipelines import csv_preflight

CASES = messy_csv.cases(130)
DOCUMENT = os.path.join(os.path.dirname(__file__), '..', '..', 'docs', 'bad-data-and-faults.md')


def test_the_generated_cases_cover_every_kind_mixed():
  assert len(CASES) >= 100
  seen = {kind for case in CASES for kind in case.kinds}
  assert seen == set(messy_csv.KINDS)
  assert sum(case.refused for case in CASES) >= 40
  assert sum(not case.refused for case in CASES) >= 40
  assert sum(len(case.kinds) >= 3 for case in CASES) >= 40


@pytest.mark.parametrize('case', CASES, ids=lambda case: '+'.join(case.kinds))
def test_each_folder_runs_or_is_refused_naming_file_line_and_column(case, tmp_path):
  folder = case.write(tmp_path / 'data')
  preflight = csv_preflight.preflight_csv(folder, messy_csv.LABEL)
  assert len(preflight.verdicts) == len(case.files)
  if case.refused:
    assert preflight.refused, [verdict.message for verdict in preflight.verdicts]
    [verdict] = [verdict for verdict in preflight.verdicts
                 if os.path.basename(verdict.path) == case.refused_file]
    assert verdict.status == csv_preflight.REFUSED, verdict
    assert verdict.message.startswith(os.path.join(folder, case.refused_file))
    assert case.refused_phrase in verdict.message, verdict.message
    if case.refused_line is not None:
      assert f', line {case.refused_line}' in verdict.message, verdict.message
    if case.refused_column is not None:
      assert f"column {case.refused_column!r}" in verdict.message, verdict.message
    with pytest.raises(csv_preflight.CsvRefused, match=re.escape(case.refused_phrase)):
      preflight.raise_if_refused()
    return
  assert not preflight.refused, [verdict.message for verdict in preflight.verdicts]
  assert sum(verdict.rows for verdict in preflight.verdicts) == case.rows
  assert sum(sum(verdict.blanked_cells.values()) for verdict in preflight.verdicts) == (
      case.blanked)
  assert sum(verdict.dropped_rows for verdict in preflight.verdicts) == case.dropped
  # What ExampleGen will read: plain UTF-8 CSV, the header as given, only finite numbers.
  staged = csv_preflight.stage(preflight, str(tmp_path / 'inputs'))
  rows = []
  for name in sorted(os.listdir(staged)):
    assert name.endswith('.csv')
    with open(os.path.join(staged, name), newline='', encoding='utf-8') as handle:
      table = list(csv.reader(handle, strict=True))
    assert table[0] == case.header
    rows += table[1:]
  assert len(rows) == case.rows
  assert all(row[3] for row in rows)
  for row in rows:
    for value in row[:2]:
      assert value == '' or abs(float(value)) < 1e6, row


def test_staging_reuses_the_copy_of_the_same_files_and_says_what_changed(tmp_path):
  folder = messy_csv.make_case(1, ['two_files', 'bom']).write(tmp_path / 'data')
  inputs = str(tmp_path / 'inputs')
  first = csv_preflight.preflight_csv(folder, messy_csv.LABEL)
  assert csv_preflight.changed_inputs(first, inputs) is None
  staged = csv_preflight.stage(first, inputs)
  stamp = os.stat(os.path.join(staged, sorted(os.listdir(staged))[0])).st_mtime_ns

  again = csv_preflight.preflight_csv(folder, messy_csv.LABEL)
  assert csv_preflight.changed_inputs(again, inputs) == []
  # The same folder, untouched: ExampleGen's fingerprint (sizes and times) holds.
  assert csv_preflight.stage(again, inputs) == staged
  assert os.stat(os.path.join(staged, sorted(os.listdir(staged))[0])).st_mtime_ns == stamp

  with open(os.path.join(folder, 'b.csv'), 'a') as handle:
    handle.write('40.0,200.0,Dream,Gentoo\n')
  with open(os.path.join(folder, 'c.csv'), 'w') as handle:
    handle.write(','.join(messy_csv.make_case(1, ['two_files']).header) + '\n1,2,Dream,Adelie\n')
  changed = csv_preflight.preflight_csv(folder, messy_csv.LABEL)
  assert csv_preflight.changed_inputs(changed, inputs) == ['added c.csv', 'changed b.csv']
  restaged = csv_preflight.stage(changed, inputs)
  assert restaged != staged and not os.path.exists(staged)


def test_other_files_are_listed_and_left_out(tmp_path):
  folder = messy_csv.make_case(3, ['crlf']).write(tmp_path / 'data')
  (tmp_path / 'data' / 'README.txt').write_text('notes')
  preflight = csv_preflight.preflight_csv(folder, messy_csv.LABEL)
  assert preflight.ignored == ['README.txt'] and not preflight.refused
  staged = csv_preflight.stage(preflight, str(tmp_path / 'inputs'))
  assert os.listdir(staged) == ['000-a.csv']


@pytest.mark.parametrize('files, message', [
    ({'notes.txt': 'hello'}, r'holds no \.csv or \.csv\.gz files \(it has notes\.txt\)'),
    (None, 'is not a folder'),
])
def test_a_folder_without_csv_files_is_refused(tmp_path, files, message):
  folder = tmp_path / 'data'
  if files is not None:
    folder.mkdir()
    for name, text in files.items():
      (folder / name).write_text(text)
  with pytest.raises(ValueError, match=message):
    csv_preflight.preflight_csv(str(folder), 'label')


def test_the_documented_catalogue_is_what_the_preflight_says(tmp_path):
  with open(DOCUMENT) as handle:
    text = handle.read()
  assert messy_csv.catalogue(str(tmp_path)) in text, (
      'docs/bad-data-and-faults.md differs from the preflight: run '
      'python -m tests.reliability.messy_csv')


def write_bills(folder, bills, tips=None):
  folder.mkdir(exist_ok=True)
  rows = ['bill,day,tip'] + [f'{bill},{"Sun" if index % 2 else "Sat"},{index % 2}'
                             for index, bill in enumerate(bills)]
  (folder / 'a.csv').write_text('\n'.join(rows) + '\n')
  return str(folder)


def test_missing_value_markers_in_a_numeric_column_are_read_as_empty_and_counted(tmp_path):
  """The issue's case: `NA` in 1 of 7 cells used to make `bill` text with every number a class."""
  folder = write_bills(tmp_path / 'data', ['12.5', '20.1', 'NA', '8.75', '31.0', '15.2', '9.9'])
  preflight = csv_preflight.preflight_csv(folder, 'tip')
  assert preflight.column_kinds == {'bill': 'number', 'day': 'category', 'tip': 'number'}
  assert preflight.verdicts[0].blanked_cells == {'bill': 1}
  assert preflight.mostly_numbers == []
  staged = csv_preflight.stage(preflight, str(tmp_path / 'inputs'))
  with open(os.path.join(staged, '000-a.csv')) as handle:
    bills = [row['bill'] for row in csv.DictReader(handle)]
  assert bills == ['12.5', '20.1', '', '8.75', '31.0', '15.2', '9.9']


@pytest.mark.parametrize('marker', sorted(csv_preflight.MISSING_MARKERS))
def test_every_pandas_default_marker_is_missing(tmp_path, marker):
  folder = write_bills(tmp_path / 'data', ['1.5', marker, '2.5', '3.5'])
  preflight = csv_preflight.preflight_csv(folder, 'tip')
  assert preflight.column_kinds['bill'] == 'number'
  assert preflight.verdicts[0].blanked_cells == {'bill': 1}


def test_a_column_of_mostly_numbers_read_as_text_is_named_with_its_first_non_number(tmp_path):
  folder = write_bills(tmp_path / 'data', ['12.5', '20.1', '8.75', 'twelve', '31.0', 'n.a.'])
  preflight = csv_preflight.preflight_csv(folder, 'tip')
  assert preflight.column_kinds['bill'] == 'category'
  assert preflight.mostly_numbers == [('bill', 4 / 6, 'twelve', 'a.csv', 5)]
  assert preflight.verdicts[0].blanked_cells == {}  # Text: nothing is blanked.


def test_the_console_says_how_each_column_is_read(tmp_path):
  from tfx_distillery.pipelines import local_runner  # pylint: disable=import-outside-toplevel
  from tests import helpers  # pylint: disable=import-outside-toplevel
  folder = write_bills(tmp_path / 'data', ['12.5', '20.1', '8.75', 'twelve', '31.0'])
  with helpers.ProgressLines() as lines:
    local_runner.report_preflight(csv_preflight.preflight_csv(folder, 'tip'))
  assert 'data: read as numbers: tip' in lines
  assert 'data: read as categories: bill, day' in lines
  [warning] = [line for line in lines if 'yet 80% of its values are numbers' in line]
  assert "'bill'" in warning and "'twelve' (a.csv, line 5)" in warning


def test_memory_does_not_grow_with_the_rows(tmp_path):
  """The check and the staged copy stream: 20,000 and 200,000 rows peak about alike."""
  import tracemalloc  # pylint: disable=import-outside-toplevel

  def peak_bytes(rows):
    folder = tmp_path / f'rows-{rows}'
    folder.mkdir()
    with open(folder / 'a.csv', 'w') as handle:
      handle.write('fare,miles,company,tip\n')
      for index in range(rows):
        handle.write(f'{index % 97 * 0.5},{index % 13},company {index % 7},{index % 2}\n')
    tracemalloc.start()
    preflight = csv_preflight.preflight_csv(str(folder), 'tip')
    csv_preflight.stage(preflight, str(folder / 'inputs'))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert sum(verdict.rows for verdict in preflight.verdicts) == rows
    return peak

  small, large = peak_bytes(20_000), peak_bytes(200_000)
  assert large < 2 * small + 1_000_000, (small, large)


def test_a_folder_too_large_for_memory_is_refused_before_anything_starts(tmp_path, monkeypatch,
                                                                        capsys):
  """With 1 GB available, even a small folder is refused by `distillery run`, clearly."""
  from tfx_distillery.pipelines import cli  # pylint: disable=import-outside-toplevel
  from tfx_distillery.pipelines import local_runner  # pylint: disable=import-outside-toplevel
  folder = write_bills(tmp_path / 'data', ['12.5', '20.1', '8.75', '31.0'])
  home = tmp_path / 'home'
  monkeypatch.setenv(local_runner.HOME_VARIABLE, str(home))
  monkeypatch.setattr(local_runner, 'available_memory_bytes', lambda: 2**30)
  status = cli.main(['run', '--dataset', 'csv', '--data', folder, '--label', 'tip'])
  error = capsys.readouterr().err
  assert status == local_runner.EXIT_BAD_INPUT
  assert f'data: {folder} holds 4 rows of 3 columns' in error
  assert 'GB of memory' in error and '1.0 GB available' in error
  assert 'beam_pipeline_args' in error
  assert not (home / 'runs').exists()


def test_a_folder_that_fits_passes_the_memory_check(tmp_path, monkeypatch):
  from tfx_distillery.pipelines import local_runner  # pylint: disable=import-outside-toplevel
  folder = write_bills(tmp_path / 'data', ['12.5', '20.1', '8.75', '31.0'])
  preflight = csv_preflight.preflight_csv(folder, 'tip')
  monkeypatch.setattr(local_runner, 'available_memory_bytes', lambda: 8 * 2**30)
  local_runner.check_memory(preflight)
  # The estimate grows with the cells: a folder of 50 million such rows would not fit in 8 GB.
  preflight.verdicts[0].rows = 50_000_000
  with pytest.raises(ValueError, match='50,000,000 rows of 3 columns'):
    local_runner.check_memory(preflight)


def write_rows(folder, name, header, rows):
  folder.mkdir(exist_ok=True)
  with open(folder / name, 'w') as handle:
    handle.write('\n'.join([','.join(header)] + [','.join(map(str, row)) for row in rows]) + '\n')
  return str(folder)


@pytest.mark.parametrize('header, rows, refusal', [
    # An extra column: the transform and the teacher do not know it.
    (['bill', 'island', 'visitor_id'], [[40.5, 'Dream', 7]],
     r"logs\.csv, line 1, column 'visitor_id'.*is not a column of the labelled data"),
    # A column the transform reads is missing.
    (['island'], [['Dream']], r"logs\.csv, line 1, column 'bill'.*lacks column 'bill'"),
    # Text where the labelled rows hold numbers.
    (['bill', 'island'], [[40.5, 'Dream'], ['long', 'Biscoe']],
     r"logs\.csv, line 3, column 'bill'.*'long' is not a number"),
])
def test_an_unlabelled_folder_is_refused_naming_file_and_column(tmp_path, header, rows,
                                                               refusal):
  labelled = csv_preflight.preflight_csv(
      write_rows(tmp_path / 'data', 'a.csv', ['bill', 'island', 'species'],
                 [[40.5, 'Dream', 'Adelie'], [50.1, 'Biscoe', 'Gentoo']]), 'species')
  unlabelled = csv_preflight.preflight_unlabelled(
      write_rows(tmp_path / 'logs', 'logs.csv', header, rows), labelled)
  with pytest.raises(csv_preflight.CsvRefused, match=refusal):
    unlabelled.raise_if_refused()


def test_an_unlabelled_folder_runs_with_or_without_the_label_and_is_staged_apart(tmp_path):
  data = write_rows(tmp_path / 'data', 'a.csv', ['bill', 'island', 'species'],
                    [[40.5, 'Dream', 'Adelie'], [50.1, 'Biscoe', 'Gentoo']])
  labelled = csv_preflight.preflight_csv(data, 'species')
  logs = write_rows(tmp_path / 'logs', 'logs.csv', ['island', 'bill'],
                    [['Dream', 'NA'], ['Torgersen', 38]])
  tagged = csv_preflight.preflight_unlabelled(
      write_rows(tmp_path / 'tagged', 'some.csv', ['bill', 'island', 'species'],
                 [[41.0, 'Dream', ''], [42.0, 'Dream', 'Adelie']]), labelled)
  assert not tagged.refused and tagged.verdicts[0].rows == 2
  assert 'is ignored' in ' '.join(tagged.verdicts[0].notes)
  unlabelled = csv_preflight.preflight_unlabelled(logs, labelled)
  assert not unlabelled.refused
  verdict = unlabelled.verdicts[0]
  assert verdict.rows == 2 and verdict.blanked_cells == {'bill': 1}
  assert unlabelled.column_kinds == {'bill': csv_preflight.NUMBER,
                                     'island': csv_preflight.CATEGORY}
  assert csv_preflight.shared_files(labelled, unlabelled) == []
  staged = csv_preflight.stage(unlabelled, str(tmp_path / 'inputs-unlabelled'))
  with open(os.path.join(staged, '000-logs.csv')) as handle:
    assert handle.read() == 'island,bill\nDream,\nTorgersen,38\n'
  # The labelled file itself in the pool: its rows reach test, which is said.
  shutil.copy(os.path.join(data, 'a.csv'), tmp_path / 'tagged' / 'copy.csv')
  again = csv_preflight.preflight_unlabelled(str(tmp_path / 'tagged'), labelled)
  assert csv_preflight.shared_files(labelled, again) == ['copy.csv']


def test_an_unlabelled_folder_that_is_not_one_is_refused_naming_the_flag(tmp_path):
  labelled = csv_preflight.preflight_csv(
      write_rows(tmp_path / 'data', 'a.csv', ['bill', 'species'], [[1, 'a'], [2, 'b']]),
      'species')
  with pytest.raises(ValueError, match='--unlabelled: .* is not a folder'):
    csv_preflight.preflight_unlabelled(str(tmp_path / 'nowhere'), labelled)


def test_a_local_cluster_counts_its_jvms_and_a_remote_one_only_the_run(tmp_path, monkeypatch,
                                                                       caplog):
  """A 4-row folder fits DirectRunner in 4 GB, but a local Flink cluster of two TaskManagers
  peaked at about 8.4 GB at 15,002 rows: warned, naming the figures and what to try; a
  remote cluster leaves only the run here. JVMs use what they are allowed: not refused."""
  from tfx_distillery.pipelines import local_runner  # pylint: disable=import-outside-toplevel
  folder = write_bills(tmp_path / 'data', ['12.5', '20.1', '8.75', '31.0'])
  preflight = csv_preflight.preflight_csv(folder, 'tip')
  monkeypatch.setattr(local_runner, 'available_memory_bytes', lambda: 4 * 2**30)
  local_runner.check_memory(preflight)
  with caplog.at_level(logging.WARNING):
    local_runner.check_memory(preflight, 'flink', 2)
  warned = [record.getMessage() for record in caplog.records if 'memory:' in record.getMessage()]
  assert len(warned) == 1, warned
  assert ("4 rows of 3 columns: the local flink cluster's JVMs at parallelism 2 and this run "
          'peaked at about 8.4 GB' in warned[0])
  assert '4.0 GB available' in warned[0] and 'a lower --beam-parallelism' in warned[0]
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    local_runner.check_memory(preflight, 'flink', 2, local_cluster=False)
    monkeypatch.setattr(local_runner, 'available_memory_bytes', lambda: 16 * 2**30)
    local_runner.check_memory(preflight, 'flink', 2)
    local_runner.check_memory(preflight, 'spark', 2)
  assert not [record for record in caplog.records if 'memory:' in record.getMessage()]
  # Flink's TaskManagers are one per slot; Spark's one executor takes every core.
  assert (local_runner.local_cluster_bytes('flink', 1000, 4)
          - local_runner.local_cluster_bytes('flink', 1000, 2)) > 4 * 2**30
  assert (local_runner.local_cluster_bytes('spark', 1000, 4)
          == local_runner.local_cluster_bytes('spark', 1000, 2))
  assert abs(local_runner.local_cluster_bytes('flink', 270_036, 2) / 2**30 - 8.41) < 0.01
  # And it grows with the cells: at 1,500,200 rows the TaskManagers peaked at 3.2 GB each.
  assert abs(local_runner.local_cluster_bytes('flink', 27_003_600, 2) / 2**30 - 11.29) < 0.01
