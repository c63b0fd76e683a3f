"""The README's usage examples run, so they can't drift from the code."""

import os
import re

import pytest

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_blocks():
  with open(os.path.join(REPOSITORY, 'README.md')) as handle:
    text = handle.read()
  return re.findall(r'```python\n(.*?)```', text, flags=re.DOTALL)


def test_the_readme_has_usage_examples():
  assert len(python_blocks()) >= 2


@pytest.mark.parametrize('index', range(len(python_blocks())))
def test_each_readme_example_runs(index, monkeypatch):
  monkeypatch.chdir(REPOSITORY)
  namespace = {}
  exec(compile(python_blocks()[index], f'README.md block {index}', 'exec'), namespace)  # pylint: disable=exec-used
  # Each block builds at least one component or pipeline and leaves it in scope.
  from tfx.dsl.components.base import base_node
  from tfx.orchestration import pipeline as tfx_pipeline
  assert any(isinstance(value, (base_node.BaseNode, tfx_pipeline.Pipeline))
             for value in namespace.values())
