"""make test-e2e hands the longest modules out first, keeps each module's own order, hands a
worker its next module only when it starts its last test, and finds every serial test."""

import dataclasses
import glob
import os
import re

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


class FakeConfig:
  """What xdist's scheduler reads of the config: `--dist` and two local workers."""

  def getvalue(self, name):
    return {'dist': 'loadscope', 'tx': ['2*popen']}[name]


class FakeNode:
  """A worker: records the tests it is sent and whether it was told to shut down."""

  def __init__(self):
    self.sent, self.shutting_down = [], False

  def send_runtest_some(self, indices):
    self.sent.extend(indices)

  def shutdown(self):
    self.shutting_down = True


def test_a_worker_gets_its_next_module_only_when_it_starts_its_last_test():
  scheduler = conftest.pytest_xdist_make_scheduler(FakeConfig(), log=None)
  node = FakeNode()
  collection = ['a.py::one', 'a.py::two', 'a.py::three', 'b.py::one']
  scheduler.registered_collections[node] = collection
  scheduler.workqueue['b.py'] = {'b.py::one': False}
  scheduler.assigned_work[node] = {'a.py': {'a.py::one': True, 'a.py::two': False,
                                            'a.py::three': False}}
  scheduler._reschedule(node)  # pylint: disable=protected-access
  assert node.sent == []  # Two tests left: module b stays free for the other worker.
  scheduler.assigned_work[node]['a.py']['a.py::two'] = True
  scheduler._reschedule(node)  # pylint: disable=protected-access
  assert node.sent == [3] and not scheduler.workqueue  # Its last test: b goes with it.
  scheduler._reschedule(node)  # pylint: disable=protected-access
  assert node.shutting_down  # Nothing left to hand out.


def test_every_other_dist_mode_keeps_xdists_own_scheduler():

  class LoadFile(FakeConfig):

    def getvalue(self, name):
      return 'loadfile' if name == 'dist' else super().getvalue(name)

  assert conftest.pytest_xdist_make_scheduler(LoadFile(), log=None) is None


def test_every_serial_test_is_in_the_folder_make_test_e2e_collects_them_from():
  root = os.path.dirname(conftest.__file__)
  with open(os.path.join(os.path.dirname(root), 'Makefile')) as handle:
    [folder] = re.findall(r'^SERIAL_TESTS := (\S+)$', handle.read(), re.MULTILINE)
  def marks_serial(path):
    with open(path) as source:
      return 'mark.serial' in source.read()

  marked = sorted(os.path.relpath(path, os.path.dirname(root))
                  for path in glob.glob(os.path.join(root, '**', '*.py'), recursive=True)
                  if path != __file__ and marks_serial(path))
  assert marked, 'no serial test found: the search is wrong'
  outside = [path for path in marked if not path.startswith(folder + os.sep)]
  # The first phase leaves serial tests out; one outside SERIAL_TESTS would never run.
  assert not outside, f'serial tests outside SERIAL_TESTS ({folder}) in the Makefile: {outside}'
