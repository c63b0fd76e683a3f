"""Generated messy CSV folders through `distillery run`: each refused one stops with exit 2
before any component, naming the file and column, with no traceback and nothing pushed.

A folder with every kind that runs goes through the whole pipeline once, in test_faults'
`messy_run`, which the fault tests reuse."""

import os

import pytest

from tests.pipelines.test_cli import distillery
from tests.reliability import messy_csv


def refused_cases():
  """One generated case for each kind that must be refused, mixed with kinds that run."""
  chosen = {}
  for case in messy_csv.cases(400, seed=7):
    refused = [kind for kind in case.kinds if kind in messy_csv.REFUSED_KINDS]
    if refused and refused[0] not in chosen and len(case.kinds) >= 2:
      chosen[refused[0]] = case
  return [chosen[kind] for kind in messy_csv.REFUSED_KINDS if kind in chosen]


REFUSED = refused_cases()


def test_at_least_ten_kinds_of_refusal_are_tried():
  assert len(REFUSED) >= 10


@pytest.mark.parametrize('case', REFUSED, ids=lambda case: '+'.join(case.kinds))
def test_a_refused_folder_stops_before_any_component(case, tmp_path):
  data = case.write(tmp_path / 'data')
  result = distillery('run', '--dataset', 'csv', '--data', data, '--label', messy_csv.LABEL,
                      '--serving-dir', str(tmp_path / 'serving'), home=tmp_path / 'home',
                      cwd=tmp_path, timeout=120)
  console = result.stdout + result.stderr
  assert result.returncode == 2, console
  assert 'Traceback' not in console
  assert os.path.join(data, case.refused_file) in result.stderr, console
  assert case.refused_phrase in result.stderr, console
  if case.refused_column:
    assert f'column {case.refused_column!r}' in result.stderr, console
  # Refused before anything was written: no serving folder, no pipeline root.
  assert not (tmp_path / 'serving').exists()
  assert not (tmp_path / 'home' / 'runs').exists()
  assert 'CsvExampleGen: started' not in console
