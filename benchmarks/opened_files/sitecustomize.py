"""Records which files of the repository a benchmark's processes open.

`python -m benchmarks.recorded NAME` puts this folder first on PYTHONPATH, so
Python loads this module at the start of the benchmark's process and of every
Python process it starts (TFX executors, Beam workers, tf.distribute workers,
the `distillery` CLI). Each appends the repository files it opens (a module's
source or its cached bytecode, a schema) to one file per process, as it goes, so
a process that is killed has still said what it read. `benchmarks.results` turns
the list into the files a result depends on.

Outside such a run the folder is not on any path and this does nothing.
"""

import os
import sys

_DIRECTORY = os.environ.get('DISTILLERY_BENCHMARK_OPENED_FILES')
_REPOSITORY = os.environ.get('DISTILLERY_BENCHMARK_REPOSITORY')
# The measured folders and files (`benchmarks.results.MEASURED_PATHS`): a virtual environment
# or a work folder inside the repository is not noted.
_MEASURED = os.environ.get('DISTILLERY_BENCHMARK_MEASURED_PATHS', '')


def _install() -> None:
  repository = os.path.realpath(_REPOSITORY) + os.sep
  measured = tuple(repository + path for path in _MEASURED.split(os.pathsep) if path)
  seen = set()

  def on_audit_event(event, arguments):
    # Only file opens matter; everything else returns at once, to cost nothing measurable.
    if event != 'open' or not arguments:
      return
    path = arguments[0]
    if not isinstance(path, str) or path in seen:
      return
    seen.add(path)
    full_path = os.path.realpath(path)
    if not full_path.startswith(measured):
      return
    # A forked child keeps this hook: write to the file of the process that opens.
    try:
      with open(f'{_DIRECTORY}/{os.getpid()}.txt', 'a') as record:
        record.write(full_path[len(repository):] + '\n')
    except FileNotFoundError:
      pass  # The run has saved its result and removed the folder: nothing more to note.

  sys.addaudithook(on_audit_event)


if _DIRECTORY and _REPOSITORY and os.path.isdir(_DIRECTORY):
  _install()
