"""Runs a benchmark so that its result records the files it depends on.

Usage:
  python -m benchmarks.recorded NAME [ARGUMENTS ...]
  e.g. python -m benchmarks.recorded pipeline --save --json
       python -m benchmarks.recorded mnist1d-large-cnn --save --json

NAME is a result's name (`results.ORDER`): a module, or `<module>-<configuration>` for a
module with named configurations. It runs `python -m benchmarks.MODULE [--config
CONFIGURATION] ARGUMENTS` in place of itself, with `benchmarks/opened_files` first on
PYTHONPATH: every Python process of the run then notes the repository files it opens.
With `--save`, the result keeps the SHA-256 of each (`depends_on`), so a later change
makes stale only the results that read the changed file. `make bench` and `make bench-all`
run their benchmarks this way, and `make bench-stale` the stale ones.
"""

import os
import sys
import tempfile

from benchmarks import results


def main() -> None:
  if len(sys.argv) < 2 or sys.argv[1].startswith('-'):
    sys.exit(__doc__)
  name = sys.argv[1]
  if name not in results.ORDER:
    sys.exit(f'benchmarks.recorded: unknown benchmark {name!r}; expected one of '
             f'{", ".join(results.ORDER)}')
  environment = dict(os.environ)
  # `results.save` reads this folder and removes it.
  environment[results.OPENED_FILES_VARIABLE] = tempfile.mkdtemp(prefix=f'opened-files-{name}-')
  environment[results.REPOSITORY_VARIABLE] = results.REPOSITORY
  environment[results.MEASURED_PATHS_VARIABLE] = os.pathsep.join(results.MEASURED_PATHS)
  environment['PYTHONPATH'] = os.pathsep.join(
      [results.OPENED_FILES_HOOK] + [part for part in
                                     [environment.get('PYTHONPATH', '')] if part])
  # exec, not a child: nothing waits, and a signal reaches the benchmark itself.
  os.execvpe(sys.executable, [sys.executable, *results.command_for(name), *sys.argv[2:]],
             environment)


if __name__ == '__main__':
  main()
