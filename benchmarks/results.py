"""Benchmark results as files, and `docs/benchmarks.md` rendered from them.

Each benchmark run with `--save` writes `docs/results/<name>.json`: its result,
the command, the commit and whether the measured code had uncommitted changes,
the date and the machine. `python -m benchmarks.results` renders
`docs/benchmarks.md` from those files alone, so no figure in it is typed by
hand; a test renders it again and fails when the committed file differs.

A result is stale when a file it depends on changed since it was measured, or a saved
result it started from was saved again after its run began. It keeps
its figures, and the document says so under its heading and in the summary table;
`make bench-stale` measures the stale ones again.

Usage:
  python -m benchmarks.results                # writes docs/benchmarks.md
  python -m benchmarks.results --check        # exits 1 when it is out of date
  python -m benchmarks.results --list-stale   # the stale results' names, one a line
  python -m benchmarks.results --bench-hours  # make bench's time, from the results
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from typing import Any, Dict, List, Optional

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(REPOSITORY, 'docs', 'results')
DOCUMENT = os.path.join(REPOSITORY, 'docs', 'benchmarks.md')
# What a benchmark measures: a change here since a result's commit makes it stale.
MEASURED_PATHS = ('benchmarks', 'components', 'trainer_modules', 'pipelines', 'tfx_distillery',
                  'pyproject.toml', 'requirements/lock.txt')
# Every result, in the order of sections in docs/benchmarks.md. A result is named after its
# module (`benchmarks/<name>.py`), or `<module>-<configuration>` for a module run under named
# configurations (`python -m benchmarks.<module> --config <configuration>`).
ORDER = ('pipeline', 'shipping-demo', 'shipping-csv-1x', 'shipping-csv-10x', 'shipping-csv-100x',
         'shipping-digits', 'shipping-taxi', 'shipping-mnist1d', 'shipping-stock-taxi',
         'shipping-stock-taxi-bare',
         'pruning', 'distillation', 'mnist1d-small', 'mnist1d-large-cnn',
         'mnist1d-large-cnn-held-out', 'mnist1d-large-mlp', 'mnist1d-large-mlp-held-out',
         'mnist1d-mlp-mixup-pseudo', 'compression', 'distributed', 'ingestion', 'scale',
         'beam_modes', 'beam_engines', 'pipeline_parallel', 'shipping-draws-demo',
         'shipping-draws-csv-1x', 'shipping-draws-digits', 'corpus-taxi', 'corpus-taxi-sparse',
         'corpus-taxi-big-tipper', 'corpus-penguin', 'corpus-penguin-tuner', 'corpus-imdb',
         'corpus-iris', 'corpus-wine', 'corpus-breast-cancer')


# Why a result saved under an older name was renamed, unless it says (`renamed_why`).
FOLDED_INTO_ONE = 'the benchmark\'s modules were folded into one'


def module_of(name: str) -> str:
  """`mnist1d-large-cnn` -> `mnist1d`; a result without a configuration is its module."""
  return name.split('-', 1)[0]


def command_for(name: str) -> List[str]:
  """The `python -m` arguments that measure result `name`."""
  module, _, configuration = name.partition('-')
  return ['-m', f'benchmarks.{module}'] + (['--config', configuration] if configuration else [])
# Benchmarks with no result at this commit, and why: their old result went stale and its
# re-run did not fit the session. docs/benchmarks.md says so in the result's place; a test
# fails once a pending benchmark has a result again, so the entry goes with its re-run.
PENDING: Dict[str, str] = {
}


def target(name: str, value: Optional[float], rule: str, met: Optional[bool]) -> Dict[str, Any]:
  """One row of a benchmark's target table; `met` None means no target, only a figure."""
  return {'figure': name, 'value': value, 'target': rule, 'met': met}


# What a mean over seeds may miss its bound by and still meet it: float rounding, far below
# one row of any split we measure on.
FLOAT_SLACK = 1e-9


def over_seeds(name: str, values: List[float], seeds: List[Any],
               target_value: Optional[float], higher_is_better: bool = True,
               rule: Optional[str] = None, out_of: Optional[int] = None,
               left_out_because: str = 'no value') -> Dict[str, Any]:
  """A target row decided on the mean over seeds, with the standard deviation beside it.

  Args:
    name: What is measured.
    values: One value per seed (or fold), in the order of `seeds`.
    seeds: The seeds (or folds) the values came from.
    target_value: The bound the mean must reach; None for a figure without a target.
    higher_is_better: Met when mean >= target_value; else when mean <= target_value.
    rule: The target as written (default `>= target_value` or `<= target_value`).
    out_of: The seeds (or folds) the label's measurement ran on, when `values` keeps only some
      of them: the name then says how many of how many the mean rests on.
    left_out_because: Why the others have no value (with `out_of`).

  Returns:
    A `target` row whose `value` is the mean, with `std` (sample standard deviation, 0 for
    one value), `values`, `seeds` and `within_noise` (the target is inside one standard
    deviation of the mean, so the verdict could flip on other seeds).
  """
  mean = statistics.mean(values)
  std = statistics.stdev(values) if len(values) > 1 else 0.0
  if len(values) != len(seeds) or not values:
    raise ValueError(f'{name}: {len(values)} values for {len(seeds)} seeds; one value per seed')
  counted = (f'{len(values)} of {out_of}' if out_of is not None and len(values) < out_of
             else f'{len(values)}')
  listed = ', '.join(str(seed) for seed in seeds)
  if out_of is not None and len(values) < out_of:
    listed += f'; the other {out_of - len(values)}: {left_out_because}'
  name = f'{name}, mean of {counted} ({listed})'
  if target_value is None:
    row = target(name, mean, rule, None)
  else:
    # Accuracies are fractions of rows: a mean on the bound in exact arithmetic can miss it by
    # float rounding (corpus-penguin's -0.010000000000000009 against >= -0.01).
    met = (mean >= target_value - FLOAT_SLACK if higher_is_better
           else mean <= target_value + FLOAT_SLACK)
    row = target(name, mean,
                 rule or f'{">=" if higher_is_better else "<="} {target_value:g}', met)
  row.update({'std': std, 'values': list(values), 'seeds': list(seeds),
              'within_noise': target_value is not None and abs(mean - target_value) <= std})
  return row


def table(title: str, columns: List[str], rows: List[List[Any]],
          curve: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
  """A detail table of a benchmark's result.

  Args:
    title: The table's title.
    columns: Its column names.
    rows: Its rows, one value per column.
    curve: For a table whose rows vary one setting of a model, {'setting': the column of
      that setting, 'parameters': the column of the model's parameter count}. Rendering
      then refuses rows of different settings with the same parameter count or the same
      measurements (`curve_problems`): they would be one model under several labels.
  """
  made = {'title': title, 'columns': columns, 'rows': rows}
  if curve is not None:
    missing = [column for column in (curve.get('setting'), curve.get('parameters'))
               if column not in columns]
    if missing:
      raise ValueError(f'table {title!r}: curve columns {missing} are not among {columns}')
    made['curve'] = {'setting': curve['setting'], 'parameters': curve['parameters']}
  return made


def curve_problems(detail: Dict[str, Any]) -> List[str]:
  """What makes a curve table claim more than it measured, one line per pair of rows.

  Two rows of different settings must differ in parameter count, and in at least one
  measured cell (every column but the setting and the parameters): otherwise the setting
  did not reach the model.
  """
  curve = detail.get('curve')
  if not curve:
    return []
  columns = detail['columns']
  setting = columns.index(curve['setting'])
  parameters = columns.index(curve['parameters'])
  measured = [index for index in range(len(columns)) if index not in (setting, parameters)]
  problems = []
  rows = detail['rows']
  for first in range(len(rows)):
    for second in range(first + 1, len(rows)):
      one, other = rows[first], rows[second]
      if one[setting] == other[setting]:
        continue
      names = (f'{curve["setting"]} {one[setting]} and {other[setting]}')
      if one[parameters] == other[parameters]:
        problems.append(f'{names}: the same {curve["parameters"]} ({one[parameters]})')
      if measured and all(one[index] == other[index] for index in measured):
        problems.append(f'{names}: the same measurements in every column')
  return problems


def recordable(text: str, work_dir: Optional[str] = None) -> str:
  """`text` with this machine's paths written as variables, as a result must record it: a
  failed run's log names its work folder, the repository, and the Python under the home."""
  if work_dir:
    text = text.replace(os.path.abspath(work_dir), '$WORK_DIR')
  return text.replace(REPOSITORY, '$REPOSITORY').replace(os.path.expanduser('~'), '~')


def _git(*arguments: str) -> str:
  return subprocess.run(['git', *arguments], cwd=REPOSITORY, check=True, capture_output=True,
                        text=True).stdout.strip()


def machine() -> Dict[str, Any]:
  """CPU count and model, and the operating system, of this machine."""
  model = platform.processor() or platform.machine()
  try:
    with open('/proc/cpuinfo') as handle:
      for line in handle:
        if line.startswith('model name'):
          model = line.split(':', 1)[1].strip()
          break
  except OSError:
    pass
  return {'cpu_count': os.cpu_count(), 'cpu_model': model,
          'system': f'{platform.system()} {platform.release()}',
          'python': platform.python_version()}


# Files whose change does not change a measurement: this module, and the recording of what a
# benchmark opened (it notes file names; it changes no figure).
NOT_MEASURED = ('benchmarks/results.py', 'benchmarks/recorded.py',
                'benchmarks/opened_files/sitecustomize.py')
MEASURED_SUFFIXES = ('.py', '.pbtxt', '.toml', '.txt', '.json', '.sh')


def is_measured_file(relative: str) -> bool:
  """Whether a file (path from the repository root) is code a benchmark measures.

  A README beside a component is not: editing it changes no figure.
  """
  parts = relative.split(os.sep)
  return (relative not in NOT_MEASURED and relative.endswith(MEASURED_SUFFIXES)
          and '__pycache__' not in parts
          and not any(part.endswith('.egg-info') for part in parts))


def measured_code_digest(repository: str = REPOSITORY) -> str:
  """SHA-256 over the measured code's files (path and content), read from disk.

  It needs no git history, so a test on any checkout can tell whether the code
  still is what a result was measured on.
  """
  digest = hashlib.sha256()
  for measured in MEASURED_PATHS:
    root = os.path.join(repository, measured)
    files = [root] if os.path.isfile(root) else sorted(
        os.path.join(folder, file_name) for folder, folders, file_names in os.walk(root)
        for file_name in file_names)
    for path in sorted(files):
      relative = os.path.relpath(path, repository)
      if not is_measured_file(relative):
        continue
      digest.update(relative.encode() + b'\0')
      with open(path, 'rb') as handle:
        digest.update(handle.read() + b'\0')
  return digest.hexdigest()


# How `python -m benchmarks.recorded` tells a run's processes where to note what they open.
OPENED_FILES_VARIABLE = 'DISTILLERY_BENCHMARK_OPENED_FILES'
REPOSITORY_VARIABLE = 'DISTILLERY_BENCHMARK_REPOSITORY'
MEASURED_PATHS_VARIABLE = 'DISTILLERY_BENCHMARK_MEASURED_PATHS'
OPENED_FILES_HOOK = os.path.join(REPOSITORY, 'benchmarks', 'opened_files')
# The environment: every result depends on these. Schemas and other files that are not Python
# are read by TensorFlow's own file system, where no Python open is seen, so they count too.
ALWAYS_DEPENDED_PATHS = ('pyproject.toml', 'requirements/lock.txt')


def _measured_files(repository: str = REPOSITORY) -> List[str]:
  """Every measured file, as a path from the repository root, sorted."""
  relatives = []
  for measured in MEASURED_PATHS:
    root = os.path.join(repository, measured)
    files = [root] if os.path.isfile(root) else [
        os.path.join(folder, file_name) for folder, folders, file_names in os.walk(root)
        for file_name in file_names]
    relatives.extend(os.path.relpath(path, repository) for path in files)
  return sorted(relative for relative in relatives if is_measured_file(relative))


def _file_digest(path: str) -> str:
  with open(path, 'rb') as handle:
    return hashlib.sha256(handle.read()).hexdigest()


def _source_of(relative: str) -> str:
  """`x/__pycache__/y.cpython-310.pyc` -> `x/y.py`; any other path as it is."""
  parts = relative.split(os.sep)
  if len(parts) >= 2 and parts[-2] == '__pycache__' and parts[-1].endswith('.pyc'):
    return os.sep.join(parts[:-2] + [parts[-1].split('.')[0] + '.py'])
  return relative


def depends_on(opened_files_dir: str, repository: str = REPOSITORY) -> Dict[str, str]:
  """The measured files a recorded run depends on, each with its SHA-256.

  Those any of its processes opened (a module's source or bytecode counts as its
  source; TFX opens a module file in Python to hash, copy and import it), every file
  of `ALWAYS_DEPENDED_PATHS`, and every measured file that is not Python (schemas),
  since TensorFlow reads those where no Python open is seen.

  Args:
    opened_files_dir: The folder `benchmarks/opened_files/sitecustomize.py` wrote to.
    repository: The repository root.

  Returns:
    {path from the repository root: SHA-256 of its content}.
  """
  opened = set()
  for file_name in os.listdir(opened_files_dir):
    with open(os.path.join(opened_files_dir, file_name)) as handle:
      opened.update(_source_of(line.strip()) for line in handle if line.strip())
  measured = _measured_files(repository)
  chosen = [relative for relative in measured
            if relative in opened or not relative.endswith('.py')
            or relative in ALWAYS_DEPENDED_PATHS]
  return {relative: _file_digest(os.path.join(repository, relative)) for relative in chosen}


def results_read(record: Dict[str, Any]) -> List[str]:
  """The saved results a benchmark started from, by name.

  A benchmark that reads saved results (mnist1d's `mlp-mixup-pseudo` takes each seed's eval
  choice from them) names, in each per-seed row, the result that row came from (`source`).
  """
  per_seed = record.get('result', {}).get('per_seed', [])
  return sorted({run['source'] for run in per_seed if isinstance(run, dict) and 'source' in run})


def _minutes(date: str) -> datetime.datetime:
  return datetime.datetime.strptime(date, '%Y-%m-%d %H:%M UTC')


def _results_saved_since(record: Dict[str, Any], results_dir: str) -> List[str]:
  """The results this one read that were saved again, or are gone, since its run began.

  The hook sees only the measured code, not docs/results, so a result read this way is
  checked by its save time: the run began `wall_seconds` before its own save.
  """
  changed = []
  for name in results_read(record):
    path = os.path.join(results_dir, f'{name}.json')
    relative = f'docs/results/{name}.json'
    if not os.path.isfile(path):
      changed.append(relative)
      continue
    with open(path) as handle:
      source = json.load(handle)
    began = _minutes(record['date']) - datetime.timedelta(seconds=record['wall_seconds'])
    if _minutes(source['date']) > began:
      changed.append(relative)
  return changed


def stale_files(record: Dict[str, Any], repository: str = REPOSITORY,
                results_dir: Optional[str] = None) -> List[str]:
  """What changed since a result was measured; empty when it is still current.

  A result with `depends_on` is stale when one of those files changed or is gone.
  One without (saved outside `benchmarks.recorded`) is stale when any measured file
  changed, since nothing says which it read. Either is stale too when a saved result it
  started from (`results_read`) was saved again after its run began.
  """
  read_again = _results_saved_since(
      record, results_dir or os.path.join(repository, 'docs', 'results'))
  if 'depends_on' not in record:
    if record['measured_code_digest'] == measured_code_digest(repository):
      return read_again
    return [f'the measured code ({", ".join(MEASURED_PATHS)})'] + read_again
  changed = []
  for relative, digest in sorted(record['depends_on'].items()):
    path = os.path.join(repository, relative)
    if not os.path.isfile(path) or _file_digest(path) != digest:
      changed.append(relative)
  return changed + read_again


def provenance(name: str, argv: List[str]) -> Dict[str, Any]:
  """Where a result comes from: command, commit, clean tree or not, date, machine."""
  # The files the digest covers, and only those: a README edited during a run is no change.
  changed_or_new = (_git('diff', '--name-only', 'HEAD', '--', *MEASURED_PATHS).split('\n')
                    + _git('ls-files', '--others', '--exclude-standard', '--',
                           *MEASURED_PATHS).split('\n'))
  changed = [path for path in changed_or_new if path and is_measured_file(path)]
  return {
      'benchmark': name,
      # The module the configuration's name starts with; argv holds `--config` itself.
      'command': ' '.join(['python', '-m', f'benchmarks.{module_of(name)}', *argv]),
      'commit': _git('rev-parse', 'HEAD'),
      'measured_code_committed': not changed,
      'measured_code_digest': measured_code_digest(),
      'date': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'),
      'machine': machine(),
  }


def save(name: str, argv: List[str], result: Dict[str, Any], seconds: float) -> str:
  """Writes docs/results/<name>.json (through a temporary file); returns its path."""
  # What the run opened is read before the provenance: its code digest opens every measured
  # file in this process, and the hook would note them all as read by the benchmark.
  dependencies = None
  opened_files_dir = os.environ.get(OPENED_FILES_VARIABLE)
  if opened_files_dir and os.path.isdir(opened_files_dir):
    dependencies = depends_on(opened_files_dir)
    if f'benchmarks/{module_of(name)}.py' not in dependencies:
      # The hook did not see the benchmark's own module: trust none of it.
      print(f'results: no record of benchmarks/{module_of(name)}.py being opened; the result '
            'depends on '
            'all the measured code', file=sys.stderr)
      dependencies = None
  record = {**provenance(name, argv), 'wall_seconds': round(seconds, 1), 'result': result}
  if dependencies is not None:
    record['depends_on'] = dependencies
  if opened_files_dir:
    # Last: the hook of this process still writes there while the provenance is read.
    shutil.rmtree(opened_files_dir, ignore_errors=True)
  os.makedirs(RESULTS_DIR, exist_ok=True)
  path = os.path.join(RESULTS_DIR, f'{name}.json')
  with open(path + '.tmp', 'w') as handle:
    json.dump(record, handle, indent=1, sort_keys=True)
    handle.write('\n')
  os.replace(path + '.tmp', path)
  return path


# What every result file holds.
REQUIRED_KEYS = ('benchmark', 'command', 'commit', 'measured_code_committed',
                 'measured_code_digest', 'date', 'machine', 'result', 'wall_seconds')


def load(path: str) -> Dict[str, Any]:
  """One result file, checked.

  Raises:
    ValueError: naming the file, when it is not JSON, lacks a key of `REQUIRED_KEYS`, names a
      benchmark that is not in `ORDER`, or is not named after the benchmark it holds.
  """
  try:
    with open(path) as handle:
      record = json.load(handle)
  except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
    raise ValueError(f'{path}: cannot be read as a benchmark result: {error}') from error
  if not isinstance(record, dict):
    raise ValueError(f'{path}: a benchmark result is a JSON object; got {type(record).__name__}')
  missing = [key for key in REQUIRED_KEYS if key not in record]
  if missing:
    raise ValueError(f'{path}: a benchmark result needs {", ".join(missing)}')
  if record['benchmark'] not in ORDER:
    raise ValueError(f'{path}: names benchmark {record["benchmark"]!r}, which does not exist; '
                     f'expected one of {", ".join(ORDER)}')
  if os.path.basename(path) != f'{record["benchmark"]}.json':
    raise ValueError(f'{path}: holds the result of {record["benchmark"]!r}, so its name must be '
                     f'{record["benchmark"]}.json')
  return record


def load_all(results_dir: str = RESULTS_DIR) -> List[Dict[str, Any]]:
  """Every saved result, in the document's order; a bad file is refused by `load`."""
  records = []
  for file_name in sorted(os.listdir(results_dir)) if os.path.isdir(results_dir) else []:
    if file_name.endswith('.json'):
      records.append(load(os.path.join(results_dir, file_name)))
  rank = {name: position for position, name in enumerate(ORDER)}
  return sorted(records, key=lambda record: (rank.get(record['benchmark'], len(ORDER)),
                                             record['benchmark']))


def _cell(value: Any) -> str:
  if value is None:
    return ''
  if isinstance(value, bool):
    return 'yes' if value else 'no'
  if isinstance(value, float):
    if value == 0:
      return '0'
    if abs(value) >= 1000:
      return f'{value:,.0f}'
    if abs(value) >= 100:
      return f'{value:.1f}'
    if abs(value) >= 10:
      return f'{value:.2f}'
    if abs(value) >= 1:
      return f'{value:.3f}'
    return f'{value:.4f}'
  if isinstance(value, int):
    return f'{value:,}'
  if isinstance(value, (list, tuple)):
    return ', '.join(_cell(item) for item in value)
  return str(value).replace('|', '\\|')


def _markdown_table(columns: List[str], rows: List[List[Any]]) -> List[str]:
  lines = ['| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns)]
  lines += ['| ' + ' | '.join(_cell(value) for value in row) + ' |' for row in rows]
  return lines


def _verdict(row: Dict[str, Any]) -> str:
  met = row['met']
  verdict = '' if met is None else ('met' if met else '**missed**')
  # Decided on the mean; said when the target is inside one standard deviation of it.
  return verdict + (' (within noise)' if row.get('within_noise') else '')


# How many changed files a stale line names before "and N more".
STALE_FILES_SHOWN = 6


def stale_line(record: Dict[str, Any], repository: str = REPOSITORY) -> Optional[str]:
  """The line under a stale result's heading; None for a result that is current."""
  changed = stale_files(record, repository)
  if not changed:
    return None
  shown = ', '.join(f'`{path}`' for path in changed[:STALE_FILES_SHOWN])
  more = len(changed) - STALE_FILES_SHOWN
  return (f"**stale: measured at `{record['commit'][:7]}`; changed since: {shown}"
          + (f' and {more} more' if more > 0 else '') + '.** Its figures are that commit\'s, '
          f"not this one's: `make bench-stale` measures it again.")


def stale_names(records: List[Dict[str, Any]], repository: str = REPOSITORY,
                results_dir: Optional[str] = None) -> List[str]:
  """The results a file they depend on changed since, in the document's order."""
  return [record['benchmark'] for record in records
          if stale_files(record, repository, results_dir)]


def _value_with_spread(row: Dict[str, Any]) -> str:
  value = _cell(row['value'])
  return value + (f" ± {_cell(row['std'])}" if row.get('std') is not None else '')


def summary_table(records: List[Dict[str, Any]], stale: List[str]) -> List[str]:
  """One line per target of every result: its value with the spread, verdict and commit."""
  rows = []
  for record in records:
    measured_at = f"`{record['commit'][:7]}`" + (' **stale**' if record['benchmark'] in stale
                                                 else '')
    for row in record['result'].get('targets', []):
      rows.append([row['figure'], _value_with_spread(row), row['target'], _verdict(row),
                   measured_at])
  return _markdown_table(['figure', 'value ± std over seeds', 'target', 'verdict',
                          'measured at'], rows)


def render(records: List[Dict[str, Any]], repository: str = REPOSITORY) -> str:
  """docs/benchmarks.md from the saved results, each stale one marked under its heading."""
  stale = stale_names(records, repository)
  lines = [
      '# Measured results',
      '',
      '<!-- Generated by `python -m benchmarks.results` from docs/results/*.json; '
      'do not edit. -->',
      '',
      'Every figure below is read from `docs/results/<name>.json`, which `make bench` (or '
      'the command shown) wrote on the commit and machine named with it. A test '
      'renders this file again and fails when it differs. A result is **stale** when a file '
      'it depends on changed after the commit it names: the files its processes '
      'opened, with the schemas and the lock file (run through `python -m benchmarks.recorded`'
      ', as `make bench` does), else all the measured code; or when a saved result it '
      'started from was saved again after its run began. A stale result keeps its figures, '
      'marked with the commit they were measured at and what changed since; '
      '`make bench-stale` measures the stale ones again. Accuracies are fractions '
      '(0.01 is one point) on the held-out `test` split unless a table says otherwise. '
      'Missed targets stay in the tables, marked **missed**. A figure measured over seeds '
      'is their mean, decided on the mean, with the standard deviation beside it; "within '
      'noise" marks a target inside one standard deviation of the mean.',
      '',
      f'{len(stale)} of {len(records)} results are stale'
      + (f": {', '.join(stale)}." if stale else '.'),
      '',
      '## Every target',
      '',
  ]
  lines += summary_table(records, stale)
  lines.append('')
  rank = {name: position for position, name in enumerate(ORDER)}
  measured = {record['benchmark'] for record in records}
  pending = sorted((name for name in PENDING if name not in measured), key=rank.get)
  for record in records:
    # A pending benchmark keeps its place in the order, saying why it has no figures.
    while pending and rank[pending[0]] < rank.get(record['benchmark'], len(ORDER)):
      lines += _pending_section(pending.pop(0))
    result, machine_info = record['result'], record['machine']
    lines += [f"## {title_of(record)}", '']
    if record['benchmark'] in stale:
      lines += [stale_line(record, repository), '']
    lines += [
        f"`{record['command']}` at commit `{record['commit'][:7]}`"
        + ('' if record['measured_code_committed'] else ' **with uncommitted changes**')
        + f", {record['date']}, {machine_info['cpu_count']} × {machine_info['cpu_model']} "
        f"({machine_info['system']}), {_cell(record['wall_seconds'])} s"
        + (f"; depends on {len(record['depends_on'])} files." if 'depends_on' in record
           else '; depends on all the measured code.')
        + (f" Saved as `{record['benchmark']}`; measured as `{record['renamed_from']}` "
           f"before {record.get('renamed_why', FOLDED_INTO_ONE)}."
           if record.get('renamed_from') else ''),
        '',
    ]
    # Some results keep their run settings as a dict under `summary`; the tables show them.
    if isinstance(result.get('summary'), str) and result['summary']:
      lines += [result['summary'], '']
    if result.get('targets'):
      lines += _markdown_table(
          ['figure', 'value', 'std over seeds', 'target', 'verdict'],
          [[row['figure'], row['value'], row.get('std'), row['target'], _verdict(row)]
           for row in result['targets']])
      lines.append('')
    for detail in result.get('tables', []):
      problems = curve_problems(detail)
      if problems:
        raise ValueError(f"{record['benchmark']}: the curve {detail['title']!r} claims "
                         f"settings it did not measure: {'; '.join(problems)}")
      lines += [f"**{detail['title']}**", '']
      lines += _markdown_table(detail['columns'], detail['rows'])
      lines.append('')
    for note in result.get('notes', []):
      lines += [f'- {note}']
    if result.get('notes'):
      lines.append('')
  for name in pending:
    lines += _pending_section(name)
  return '\n'.join(lines).rstrip() + '\n'


def title_of(record: Dict[str, Any]) -> str:
  """A result's heading in docs/benchmarks.md: its title, else the benchmark's name."""
  return record['result'].get('title', record['benchmark'])


def bench_hours(records: List[Dict[str, Any]]) -> float:
  """`make bench`'s time: the sum of every result's own wall time, in hours."""
  return sum(record['wall_seconds'] for record in records) / 3600


def _pending_section(name: str) -> List[str]:
  return [f'## {name}: no result at this commit', '', PENDING[name], '']


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--check', action='store_true',
                      help='exit 1 when docs/benchmarks.md differs from a fresh render')
  parser.add_argument('--list-stale', action='store_true',
                      help='print the stale results\' names, one a line (none: nothing)')
  parser.add_argument('--bench-hours', action='store_true',
                      help='print make bench\'s time: the sum of the results\' wall times')
  parser.add_argument('--results-dir', default=RESULTS_DIR,
                      help='where the results are (default docs/results)')
  args = parser.parse_args()
  records = load_all(args.results_dir)
  if args.list_stale:
    for name in stale_names(records, results_dir=args.results_dir):
      print(name)
    return 0
  if args.bench_hours:
    print(f'{bench_hours(records):.1f}')
    return 0
  text = render(records)
  if args.check:
    with open(DOCUMENT) as handle:
      if handle.read() != text:
        print(f'{DOCUMENT} is out of date: run python -m benchmarks.results', file=sys.stderr)
        return 1
    return 0
  with open(DOCUMENT + '.tmp', 'w') as handle:
    handle.write(text)
  os.replace(DOCUMENT + '.tmp', DOCUMENT)
  return 0


if __name__ == '__main__':
  sys.exit(main())
