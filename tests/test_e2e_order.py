"""make test-e2e hands the longest modules out first, and keeps each module's own order."""

import dataclasses

import pytest

from tests import conftest


@dataclasses.dataclass
class Item:
  nodeid: str


@dataclasses.dataclass
class Config:
  rootpath: str


def test_the_longest_modules_come_first_and_each_keeps_its_order():
  items = [Item('tests/a_test.py::test_one'), Item('tests/notebooks/test_walkthrough.py::test_x'),
           Item('tests/a_test.py::test_two'), Item('tests/reliability/test_faults.py::test_b'),
           Item('tests/reliability/test_faults.py::test_a')]
  conftest.pytest_collection_modifyitems(Config(conftest.os.path.dirname(
      conftest.os.path.dirname(conftest.__file__))), items)
  assert [item.nodeid for item in items] == [
      'tests/reliability/test_faults.py::test_b', 'tests/reliability/test_faults.py::test_a',
      'tests/notebooks/test_walkthrough.py::test_x', 'tests/a_test.py::test_one',
      'tests/a_test.py::test_two']


def test_a_module_that_is_no_longer_there_is_named(monkeypatch, tmp_path):
  monkeypatch.setattr(conftest, 'LONGEST_MODULES_FIRST', ('tests/gone.py',))
  with pytest.raises(ValueError, match=r"names no such file: \['tests/gone.py'\]"):
    conftest.pytest_collection_modifyitems(Config(str(tmp_path)), [])
