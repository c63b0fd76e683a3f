"""Nothing imports the old top-level names `components`, `pipelines`, `trainer_modules`.

Inside the repository `import components` still resolves (the folder is on the path), so
a leftover would pass every other test here and break only for an installed user.
"""

import ast
import json
import os
import re

import pytest

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OLD_NAMES = ('components', 'pipelines', 'trainer_modules')
SKIPPED_FOLDERS = {'.git', '.venv', 'build', 'dist', 'runs', 'serving', '__pycache__',
                   '.pytest_cache', '.hypothesis'}
# `python -m components.x`, `'pipelines.local_runner'` and the like, in any text.
# A file name such as 'components.md' is not a module path.
OLD_MODULE_STRING = re.compile(r'''(-m\s+|['"])(%s)\.(?!(md|py|ipynb)\b)\w''' %
                               '|'.join(OLD_NAMES))


def repository_files(*suffixes):
  for folder, subfolders, names in os.walk(REPOSITORY):
    subfolders[:] = [name for name in subfolders if name not in SKIPPED_FOLDERS
                     and not name.endswith('.egg-info')]
    for name in names:
      if name.endswith(suffixes) or name in suffixes:
        yield os.path.join(folder, name)


def old_imports(source: str, filename: str):
  """The imports in `source` whose first name is one of `OLD_NAMES`."""
  found = []
  for node in ast.walk(ast.parse(source, filename=filename)):
    if isinstance(node, ast.Import):
      found += [alias.name for alias in node.names if alias.name.split('.')[0] in OLD_NAMES]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      if node.module.split('.')[0] in OLD_NAMES:
        found.append(node.module)
  return found


def notebook_code(path):
  with open(path) as handle:
    cells = json.load(handle)['cells']
  return '\n'.join(''.join(cell['source']) for cell in cells if cell['cell_type'] == 'code')


def markdown_python(path):
  with open(path) as handle:
    return '\n'.join(re.findall(r'```python\n(.*?)```', handle.read(), flags=re.DOTALL))


def test_the_checker_sees_an_old_import():
  assert old_imports('from components.common import reading\nimport pipelines\n'
                     'from tfx_distillery.components import Distiller\n', 'x.py') == [
                         'components.common', 'pipelines']
  assert OLD_MODULE_STRING.search("WORKER = 'components.distributed_trainer.worker'")
  assert not OLD_MODULE_STRING.search("'tfx_distillery.components.pusher.executor'")
  assert not OLD_MODULE_STRING.search("os.path.join('docs', 'components.md')")


@pytest.mark.parametrize('kind', ['python', 'notebook', 'markdown'])
def test_no_code_imports_an_old_top_level_name(kind):
  readers = {'python': (('.py',), lambda path: open(path).read()),
             'notebook': (('.ipynb',), notebook_code),
             'markdown': (('.md',), markdown_python)}
  suffixes, read = readers[kind]
  offenders = {}
  for path in repository_files(*suffixes):
    found = old_imports(read(path), path)
    if found:
      offenders[os.path.relpath(path, REPOSITORY)] = found
  assert not offenders, f'import these through tfx_distillery: {offenders}'


def test_no_text_runs_or_names_an_old_module_path():
  offenders = []
  for path in repository_files('.py', '.md', '.ipynb', 'Makefile', 'Dockerfile', '.sh'):
    if os.path.samefile(path, __file__):
      continue  # Its own examples of what it looks for.
    with open(path) as handle:
      for number, line in enumerate(handle, 1):
        if OLD_MODULE_STRING.search(line):
          offenders.append(f'{os.path.relpath(path, REPOSITORY)}:{number}: {line.strip()}')
  assert not offenders, '\n'.join(offenders)
