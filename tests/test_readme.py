"""The README's and docs/components.md's usage examples run, so they can't drift from the code."""

import os
import re

import pytest

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


DOCUMENTS = ('README.md', os.path.join('docs', 'components.md'))


def python_blocks(document):
  with open(os.path.join(REPOSITORY, document)) as handle:
    text = handle.read()
  return re.findall(r'```python\n(.*?)```', text, flags=re.DOTALL)


def test_the_readme_has_a_csv_and_an_own_pipeline_example():
  blocks = python_blocks('README.md')
  assert len(blocks) >= 2
  assert any('create_pipeline' in block for block in blocks)
  assert any('tfx.components.Trainer' in block for block in blocks)


def test_the_readme_is_short_enough_to_read_in_five_minutes():
  with open(os.path.join(REPOSITORY, 'README.md')) as handle:
    assert len(handle.readlines()) <= 210


@pytest.mark.parametrize('document, index', [
    (document, index) for document in DOCUMENTS for index in range(len(python_blocks(document)))])
def test_each_example_runs(document, index, monkeypatch, tmp_path):
  # Outside the repository, as a user of the installed package.
  monkeypatch.chdir(tmp_path)
  namespace = {}
  exec(compile(python_blocks(document)[index], f'{document} block {index}', 'exec'), namespace)  # pylint: disable=exec-used
  # Each block builds at least one component or pipeline and leaves it in scope.
  from tfx.dsl.components.base import base_node
  from tfx.orchestration import pipeline as tfx_pipeline
  assert any(isinstance(value, (base_node.BaseNode, tfx_pipeline.Pipeline))
             for value in namespace.values())
