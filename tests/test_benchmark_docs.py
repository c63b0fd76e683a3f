"""docs/benchmarks.md is generated from docs/results/, and the results match the code."""

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from benchmarks import results

REQUIRED = results.REQUIRED_KEYS


def test_the_committed_document_is_what_the_results_render_to():
  with open(results.DOCUMENT) as handle:
    committed = handle.read()
  assert committed == results.render(results.load_all()), (
      'docs/benchmarks.md differs from its results: run python -m benchmarks.results')


def test_every_benchmark_has_a_result_with_its_provenance_or_is_pending_with_a_reason():
  records = results.load_all()
  measured = sorted(record['benchmark'] for record in records)
  assert not set(measured) & set(results.PENDING), 'a re-run benchmark is still PENDING'
  assert sorted(measured + list(results.PENDING)) == sorted(results.ORDER)
  for record in records:
    assert set(REQUIRED) <= set(record), record['benchmark']
    assert record['machine']['cpu_count'] >= 1 and record['machine']['cpu_model']
    assert record['measured_code_committed'], (
        f"{record['benchmark']} was measured with uncommitted changes to the measured code")


def test_a_pending_benchmark_keeps_its_place_in_the_document_with_its_reason(monkeypatch):
  monkeypatch.setattr(results, 'PENDING', {'mnist1d-small': 'Not re-run yet: the reason.'})
  records = [record for record in results.load_all() if record['benchmark'] != 'mnist1d-small']
  text = results.render(records)
  pending = text.index('## mnist1d-small: no result at this commit\n\nNot re-run yet: the reason.')
  titles = {record['benchmark']: text.index(f"## {record['result']['title']}")
            for record in records if record['benchmark'] in ('distillation', 'mnist1d-large-cnn')}
  assert titles['distillation'] < pending < titles['mnist1d-large-cnn']


def test_missed_targets_are_shown_as_missed():
  text = results.render(results.load_all())
  for record in results.load_all():
    for target in record['result'].get('targets', []):
      if target['met'] is False:
        assert f"| {target['figure']} |" in text and '**missed**' in text


def _document_sections(text):
  """{heading: the section's text} of a markdown document, split at every heading."""
  sections, heading = {}, ''
  for line in text.splitlines():
    if line.startswith('#'):
      heading = line.lstrip('#').strip()
    sections[heading] = sections.get(heading, '') + line + '\n'
  return sections


def test_every_stale_result_is_marked_in_the_document_and_no_current_one_is():
  """Under each result's heading: the stale line with its commit and changed files, or none."""
  with open(results.DOCUMENT) as handle:
    sections = _document_sections(handle.read())
  records = results.load_all()
  stale = results.stale_names(records)
  for record in records:
    section = sections[results.title_of(record)]
    changed = results.stale_files(record)
    if record['benchmark'] in stale:
      assert f"**stale: measured at `{record['commit'][:7]}`; changed since: `{changed[0]}`" in (
          section), f"{record['benchmark']} is stale and its section does not say so"
      assert 'make bench-stale' in section
    else:
      assert 'stale' not in section.lower(), (
          f"{record['benchmark']} is current and its section calls it stale")
  summary = sections['Every target']
  for record in records:
    for target in record['result'].get('targets', []):
      line = next(line for line in summary.splitlines()
                  if line.startswith(f"| {results._cell(target['figure'])} |"))
      assert line.endswith(f"`{record['commit'][:7]}` **stale** |" if record['benchmark'] in stale
                           else f"`{record['commit'][:7]}` |"), line


def _stale_record(benchmark='pipeline'):
  """A result measured on a shapes.py that has changed since, and a schema that has not."""
  schema = 'pipelines/schemas/taxi.pbtxt'
  return {'benchmark': benchmark, 'command': f'python -m benchmarks.{benchmark}',
          'commit': 'b' * 40, 'measured_code_committed': True, 'measured_code_digest': 'x',
          'date': 'd', 'wall_seconds': 3600.0, 'machine': {'cpu_count': 2, 'cpu_model': 'm',
                                                           'system': 's'},
          'depends_on': {'components/common/shapes.py': '0' * 64,
                         schema: results._file_digest(os.path.join(results.REPOSITORY, schema))},
          'result': {'title': 'Example', 'targets': [results.over_seeds(
              'speed-up', [2.0, 2.2], [1, 2], 1.5)]}}


def test_a_result_a_change_made_stale_is_rendered_with_its_commit_and_what_changed():
  record = _stale_record()
  text = results.render([record])
  assert ('## Example\n\n**stale: measured at `bbbbbbb`; changed since: '
          '`components/common/shapes.py`.**') in text
  assert '1 of 1 results are stale: pipeline.' in text
  assert '| speed-up, mean of 2 (1, 2) | 2.100 ± 0.1414 | >= 1.5 | met | `bbbbbbb` **stale** |' in (
      text)
  # Once the file is what it was measured on, the result is current and nothing says stale.
  record['depends_on'] = {'pipelines/schemas/taxi.pbtxt':
                          record['depends_on']['pipelines/schemas/taxi.pbtxt']}
  current = results.render([record])
  assert '**stale: measured at' not in current and '`bbbbbbb` **stale**' not in current
  assert '0 of 1 results are stale.' in current


def test_list_stale_names_the_stale_results_and_bench_stale_with_none_says_so(tmp_path):
  (tmp_path / 'pipeline.json').write_text(json.dumps(_stale_record('pipeline')))
  current = _stale_record('pruning')
  del current['depends_on']['components/common/shapes.py']
  (tmp_path / 'pruning.json').write_text(json.dumps(current))
  listed = subprocess.run([sys.executable, '-m', 'benchmarks.results', '--list-stale',
                           '--results-dir', str(tmp_path)], cwd=results.REPOSITORY,
                          capture_output=True, text=True, timeout=120, check=True)
  assert listed.stdout.split() == ['pipeline']
  # With nothing stale, `make bench-stale` says so, runs nothing and exits 0. (-o: the venv
  # counts as installed, so make never reinstalls it here.)
  (tmp_path / 'pipeline.json').unlink()
  finished = subprocess.run(['make', '--no-print-directory', '-o', '.venv/.installed',
                             'bench-stale', f'RESULTS_DIR={tmp_path}',
                             f'PYTHON={sys.executable}'],
                            cwd=results.REPOSITORY, capture_output=True, text=True, timeout=120)
  assert finished.returncode == 0, finished.stderr
  assert finished.stdout.strip() == 'bench-stale: no result is stale'


def test_bench_stale_measures_again_a_result_the_first_pass_made_stale(tmp_path):
  # A stand-in for Python: its stale list shrinks as make measures, as a real one would once
  # mnist1d-large-mlp-held-out is saved and mlp-mixup-pseudo, which reads it, goes stale.
  fake_python = tmp_path / 'python'
  fake_python.write_text(
      '#!/bin/sh\n'
      f'log={tmp_path}/calls.log\n'
      'case "$*" in\n'
      '  *--list-stale*) n=$(cat "$log" 2>/dev/null | wc -l)\n'
      '    [ "$n" -eq 0 ] && echo mnist1d-large-mlp-held-out\n'
      '    [ "$n" -eq 1 ] && echo mnist1d-mlp-mixup-pseudo\n'
      '    exit 0;;\n'
      '  *benchmarks.recorded*) echo "$3" >> "$log";;\n'
      '  *benchmarks.results*) echo rendered >> "$log";;\n'
      'esac\n')
  fake_python.chmod(0o755)
  finished = subprocess.run(['make', '--no-print-directory', '-o', '.venv/.installed',
                             'bench-stale', f'RESULTS_DIR={tmp_path}', f'PYTHON={fake_python}'],
                            cwd=results.REPOSITORY, capture_output=True, text=True, timeout=120)
  assert finished.returncode == 0, finished.stderr
  assert (tmp_path / 'calls.log').read_text().split() == [
      'mnist1d-large-mlp-held-out', 'mnist1d-mlp-mixup-pseudo', 'rendered']


@pytest.mark.parametrize('content, message', [
    ('{"benchmark": "pipeline", ', 'cannot be read as a benchmark result'),
    ('[]', 'a benchmark result is a JSON object'),
    ('{"benchmark": "pipeline"}', 'a benchmark result needs command, commit'),
])
def test_a_result_file_that_cannot_be_read_is_refused_naming_the_file(tmp_path, content,
                                                                       message):
  (tmp_path / 'pipeline.json').write_text(content)
  with pytest.raises(ValueError, match='pipeline.json: ' + message):
    results.load_all(str(tmp_path))


def test_a_result_naming_a_benchmark_that_does_not_exist_is_refused_naming_the_file(tmp_path):
  (tmp_path / 'mnist1d_large.json').write_text(json.dumps(_stale_record('mnist1d_large')))
  with pytest.raises(ValueError, match=r"mnist1d_large.json: names benchmark 'mnist1d_large', "
                     r'which does not exist; expected one of pipeline, shipping-demo, shipping-csv-1x'):
    results.load_all(str(tmp_path))
  (tmp_path / 'mnist1d_large.json').rename(tmp_path / 'pruning.json')
  (tmp_path / 'pruning.json').write_text(json.dumps(_stale_record('pipeline')))
  with pytest.raises(ValueError, match='pruning.json: holds the result of .pipeline.'):
    results.load_all(str(tmp_path))


def _result_names_in(section: str):
  """The results a section of prose names: its result file, recorded name or command.

  A command in a fenced code block is how to run it, not a quote of its figures.
  """
  section = re.sub(r'```.*?```', '', section, flags=re.DOTALL)
  # Prose wraps: a command split over two lines names its result as much as one on a line.
  section = ' '.join(section.split())
  named = set()
  for name in results.ORDER:
    module, _, configuration = name.partition('-')
    spellings = [f'results/{name}.json', f'recorded {name} ', f'`{name}`']
    spellings += ([f'--config {configuration}'] if configuration else
                  [f'benchmarks.{name} ', f'benchmarks.{name}`'])
    if any(spelling in section for spelling in spellings):
      named.add(name)
  return named


def test_no_document_quotes_a_stale_result_as_current():
  """A README or docs section that names a stale result says it is stale, at its commit."""
  records = {record['benchmark']: record for record in results.load_all()}
  stale = set(results.stale_names(list(records.values())))
  documents = ['README.md'] + [os.path.join('docs', name) for name in
                               sorted(os.listdir(os.path.join(results.REPOSITORY, 'docs')))
                               if name.endswith('.md') and name != 'benchmarks.md']
  checked = 0
  for document in documents:
    with open(os.path.join(results.REPOSITORY, document)) as handle:
      sections = _document_sections(handle.read())
    for heading, section in sections.items():
      for name in _result_names_in(section) & stale:
        checked += 1
        # The commit a section's figures come from may be older than the saved result's.
        assert re.search(r'stale: measured at `[0-9a-f]{7}`', section), (
            f'{document}, section "{heading}", quotes {name}, which is stale: mark it '
            "'stale: measured at `COMMIT`' with the commit of its figures")
  assert checked or not stale


def test_a_section_that_quotes_a_stale_result_without_the_mark_is_caught():
  section = ('## The larger teacher\n\n`python -m benchmarks.mnist1d --config large-cnn` gave '
             '0.9555 on eval.\n')
  assert _result_names_in(section) == {'mnist1d-large-cnn'}
  wrapped = ('on eval (`python -m benchmarks.recorded\nshipping-stock-taxi-bare --save --json` '
             'at `eade7b5`)')
  assert _result_names_in(wrapped) == {'shipping-stock-taxi-bare'}
  assert _result_names_in('`python -m benchmarks.pruning --chains taxi`') == {'pruning'}
  assert _result_names_in('see `docs/results/pipeline.json`') == {'pipeline'}
  assert not _result_names_in('benchmarks.pipeline_helpers')
  assert not _result_names_in('Run it:\n```\npython -m benchmarks.pruning --json\n```\n')


def _recorded_run(tmp_path, code):
  """Runs `code` in a Python process set up as `benchmarks.recorded` sets up a benchmark."""
  opened = tmp_path / 'opened'
  opened.mkdir()
  environment = dict(os.environ, PYTHONPATH=results.OPENED_FILES_HOOK,
                     **{results.OPENED_FILES_VARIABLE: str(opened),
                        results.REPOSITORY_VARIABLE: results.REPOSITORY,
                        results.MEASURED_PATHS_VARIABLE: os.pathsep.join(results.MEASURED_PATHS)})
  subprocess.run([sys.executable, '-c', code], env=environment, check=True, timeout=120,
                 cwd=str(tmp_path))
  return str(opened)


def test_a_recorded_run_depends_on_what_its_processes_opened_and_on_schemas(tmp_path):
  # The parent imports one module; a child it starts imports another (as TFX's and Beam's
  # worker processes do); neither imports the Distiller.
  opened = _recorded_run(tmp_path, (
      'import subprocess, sys\n'
      'import tfx_distillery.components.common.seeding\n'
      'subprocess.run([sys.executable, "-c", '
      '"import tfx_distillery.components.common.shapes"], check=True, timeout=60)\n'))
  dependencies = results.depends_on(opened)
  assert 'components/common/seeding.py' in dependencies
  assert 'components/common/shapes.py' in dependencies
  assert 'components/distiller/executor.py' not in dependencies
  # Only the measured folders are noted, not the libraries of a virtual environment inside it.
  with open(os.path.join(opened, os.listdir(opened)[0])) as handle:
    assert all(line.split('/')[0] in results.MEASURED_PATHS for line in handle)
  # Read by TensorFlow where no Python open is seen, or the environment: always depended on.
  assert 'pipelines/schemas/taxi.pbtxt' in dependencies
  assert 'trainer_modules/taxi_teacher.py' not in dependencies
  assert 'requirements/lock.txt' in dependencies
  with open(os.path.join(results.REPOSITORY, 'components/common/shapes.py'), 'rb') as handle:
    assert dependencies['components/common/shapes.py'] == hashlib.sha256(
        handle.read()).hexdigest()


def test_a_saved_result_depends_on_what_the_benchmark_read_not_on_its_own_code_digest(tmp_path):
  # The run reads one benchmark file and saves; the save's provenance digests every measured
  # file in the same process, which must not count as read.
  results_dir = tmp_path / 'results'
  _recorded_run(tmp_path, (
      'import json, sys\n'
      f'sys.path.insert(0, {results.REPOSITORY!r})\n'
      'from benchmarks import results\n'
      'open(results.REPOSITORY + "/benchmarks/phases.py").read()\n'
      f'results.RESULTS_DIR = {str(results_dir)!r}\n'
      'results.save("phases", [], {}, 1.0)\n'))
  with open(results_dir / 'phases.json') as handle:
    record = json.load(handle)
  assert 'benchmarks/phases.py' in record['depends_on']
  assert 'components/distiller/executor.py' not in record['depends_on']
  assert record['measured_code_digest'] == results.measured_code_digest()


def test_a_configurations_result_records_the_module_it_ran_with_its_configuration():
  record = results.provenance('shipping-stock-taxi', ['--config', 'stock-taxi'])
  assert record['benchmark'] == 'shipping-stock-taxi'
  assert record['command'] == 'python -m benchmarks.shipping --config stock-taxi'
  assert ['python', *results.command_for('shipping-stock-taxi')] == record['command'].split()
  for saved in results.load_all():
    module = saved['command'].split()[2]
    assert importlib.util.find_spec(module) or saved.get('renamed_from'), saved['benchmark']


def test_a_result_is_stale_when_a_file_it_depends_on_changes(tmp_path):
  record = {'measured_code_digest': 'x',
            'depends_on': {'components/common/shapes.py': '0' * 64,
                           'pipelines/schemas/taxi.pbtxt': results._file_digest(
                               os.path.join(results.REPOSITORY, 'pipelines/schemas/taxi.pbtxt')),
                           'components/gone.py': '0' * 64}}
  assert results.stale_files(record) == ['components/common/shapes.py', 'components/gone.py']
  del record['depends_on']['components/common/shapes.py'], record['depends_on'][
      'components/gone.py']
  assert results.stale_files(record) == []
  # Without a record of what it read, any change to the measured code makes it stale.
  assert results.stale_files({'measured_code_digest': 'x'}) != []
  assert results.stale_files({'measured_code_digest': results.measured_code_digest()}) == []


def test_a_result_is_stale_when_a_saved_result_it_started_from_is_saved_again(tmp_path):
  # mlp-mixup-pseudo's rows name the result each seed's eval choice came from.
  source = {'benchmark': 'mnist1d-large-mlp-held-out', 'date': '2026-12-04 08:13 UTC'}
  (tmp_path / 'mnist1d-large-mlp-held-out.json').write_text(json.dumps(source))
  reader = {'measured_code_digest': results.measured_code_digest(), 'wall_seconds': 3000.0,
            'date': '2026-12-04 09:05 UTC',
            'result': {'per_seed': [{'seed': 201, 'source': 'mnist1d-large-mlp-held-out'}]}}
  assert results.results_read(reader) == ['mnist1d-large-mlp-held-out']
  assert results.stale_files(reader, results_dir=str(tmp_path)) == []
  # Saved again after the run began (08:15, 3,000 s before 09:05): stale, by the file's name.
  source['date'] = '2026-12-04 08:16 UTC'
  (tmp_path / 'mnist1d-large-mlp-held-out.json').write_text(json.dumps(source))
  assert results.stale_files(reader, results_dir=str(tmp_path)) == [
      'docs/results/mnist1d-large-mlp-held-out.json']
  assert results.stale_names([{'benchmark': 'reader', **reader}], results_dir=str(tmp_path)) == [
      'reader']
  (tmp_path / 'mnist1d-large-mlp-held-out.json').unlink()
  assert results.stale_files(reader, results_dir=str(tmp_path)) == [
      'docs/results/mnist1d-large-mlp-held-out.json']


def test_a_figure_over_seeds_is_decided_on_its_mean_and_says_when_within_noise():
  noisy = results.over_seeds('distilled − scratch', [0.010, -0.004, 0.003], [1, 2, 3], 0.0)
  assert noisy['value'] == pytest.approx(0.003) and noisy['met']
  assert noisy['std'] == pytest.approx(0.007) and noisy['within_noise']
  assert noisy['figure'] == 'distilled − scratch, mean of 3 (1, 2, 3)'
  clear = results.over_seeds('gap', [0.030, 0.031, 0.029], [1, 2, 3], 0.01,
                             higher_is_better=False)
  assert not clear['met'] and not clear['within_noise'] and clear['target'] == '<= 0.01'
  # One row of 100 below on one seed, two on another: -0.01 exactly, -0.010000000000000009 in
  # floats, is on the bound and meets it; a hundredth of a row past it does not.
  on_the_bound = results.over_seeds('built-in − peer', [0.98 - 0.98, 0.96 - 0.97, 0.98 - 1.0],
                                    [1, 2, 3], -0.01)
  assert on_the_bound['value'] < -0.01 and on_the_bound['met']
  assert not results.over_seeds('x', [-0.0101], [1], -0.01)['met']
  assert not results.over_seeds('x', [0.0101], [1], 0.01, higher_is_better=False)['met']
  text = results.render([{'benchmark': 'x', 'command': 'c', 'commit': '0' * 40,
                          'measured_code_digest': results.measured_code_digest(),
                          'measured_code_committed': True, 'date': 'd', 'wall_seconds': 1,
                          'machine': {'cpu_count': 2, 'cpu_model': 'm', 'system': 's'},
                          'result': {'targets': [noisy, clear]}}])
  assert '| 0.0030 | 0.0070 | >= 0 | met (within noise) |' in text
  assert '| **missed** |' in text


def test_a_figure_from_fewer_folds_than_its_label_says_names_the_real_count():
  row = results.over_seeds('gap_closed, folds', [0.75], ['fold 3'], None, out_of=5,
                           left_out_because='the teacher was not ahead of scratch')
  assert row['figure'] == ('gap_closed, folds, mean of 1 of 5 (fold 3; the other 4: the '
                           'teacher was not ahead of scratch)')
  assert results.over_seeds('x', [1.0, 2.0], [1, 2], None, out_of=2)['figure'] == (
      'x, mean of 2 (1, 2)')
  with pytest.raises(ValueError, match='x: 1 values for 2 seeds'):
    results.over_seeds('x', [1.0], [1, 2], None)


def _record_with(detail):
  return {'benchmark': 'distillation', 'command': 'c', 'commit': '0' * 40,
          'measured_code_digest': results.measured_code_digest(),
          'measured_code_committed': True, 'date': 'd', 'wall_seconds': 1,
          'machine': {'cpu_count': 2, 'cpu_model': 'm', 'system': 's'},
          'result': {'tables': [detail]}}


def test_a_curve_whose_settings_made_one_model_is_refused_naming_the_rows():
  columns = ['hidden units', 'parameters', 'ours']
  # #85: three widths, one model (the module read another hyperparameter).
  same = results.table('digits', columns, [[8, 6090, 0.97], [32, 6090, 0.97],
                                           [128, 6090, 0.97]],
                       curve={'setting': 'hidden units', 'parameters': 'parameters'})
  with pytest.raises(ValueError, match=r"distillation: the curve 'digits' claims settings it "
                                       r'did not measure: hidden units 8 and 32: the same '
                                       r'parameters \(6090\); hidden units 8 and 32: the same '
                                       r'measurements in every column'):
    results.render([_record_with(same)])
  # Other sizes that measure alike in every column are refused as well.
  assert results.curve_problems(results.table(
      'digits', columns, [[8, 610, 0.97], [32, 2410, 0.97]],
      curve={'setting': 'hidden units', 'parameters': 'parameters'})) == [
          'hidden units 8 and 32: the same measurements in every column']
  varied = results.table('digits', columns, [[8, 610, 0.93], [32, 2410, 0.96]],
                         curve={'setting': 'hidden units', 'parameters': 'parameters'})
  assert '| 8 | 610 | 0.9300 |' in results.render([_record_with(varied)])
  with pytest.raises(ValueError, match=r"curve columns \['width'\] are not among"):
    results.table('digits', columns, [], curve={'setting': 'width', 'parameters': 'parameters'})


def test_no_saved_curve_has_two_settings_with_one_parameter_count():
  curves = 0
  for record in results.load_all():
    for detail in record['result'].get('tables', []):
      assert results.curve_problems(detail) == [], (record['benchmark'], detail['title'])
      curves += 'curve' in detail
  # The digits width curve declares itself a curve, so the check above reads it.
  [distillation] = [record for record in results.load_all()
                    if record['benchmark'] == 'distillation']
  assert any(detail.get('curve', {}).get('setting') == 'hidden units'
             for detail in distillation['result']['tables'])
  assert curves >= 1


def test_render_marks_missed_and_met(tmp_path):
  record = {'benchmark': 'scale', 'command': 'python -m benchmarks.scale', 'commit': 'a' * 40,
            'measured_code_digest': results.measured_code_digest(),
            'measured_code_committed': True, 'date': '2026-01-01 00:00 UTC',
            'machine': {'cpu_count': 2, 'cpu_model': 'CPU', 'system': 'Linux'},
            'wall_seconds': 1.0,
            'result': {'targets': [results.target('fast', 0.5, '>= 1', False),
                                   results.target('small', 2.0, '<= 3', True)]}}
  (tmp_path / 'scale.json').write_text(json.dumps(record))
  text = results.render(results.load_all(str(tmp_path)))
  assert '| fast | 0.5000 |  | >= 1 | **missed** |' in text
  assert '| small | 2.000 |  | <= 3 | met |' in text
  assert 'commit `aaaaaaa`' in text


def test_only_files_the_digest_covers_count_as_measured_code():
  # A component's README edited while a benchmark runs changes no figure; its code does.
  assert results.is_measured_file('components/pruner/executor.py')
  assert results.is_measured_file('requirements/lock.txt')
  assert not results.is_measured_file('components/csv_example_gen/README.md')
  assert not results.is_measured_file('benchmarks/results.py')
  assert not results.is_measured_file('components/pruner/__pycache__/executor.cpython-310.pyc')


def test_no_result_records_a_path_of_the_machine_it_ran_on():
  """A result is read on other machines: its recorded output names the work dir, not /tmp."""
  home = os.path.expanduser('~')
  for record in results.load_all():
    text = json.dumps(record['result'])
    for path in ('/tmp/', home + '/', results.REPOSITORY + '/'):
      assert path not in text, f"{record['benchmark']} records {path}"


def test_a_failed_runs_log_is_recorded_without_the_machines_paths(tmp_path):
  # corpus-wine's failed seed: its traceback named the repository and the Python under ~.
  home = os.path.expanduser('~')
  log = (f'File "{home}/.pyenv/versions/3.10.13/lib/python3.10/runpy.py"\n'
         f'File "{results.REPOSITORY}/components/gate/report.py"\n{tmp_path}/wine-1/child.log')
  assert results.recordable(log, str(tmp_path)) == (
      'File "~/.pyenv/versions/3.10.13/lib/python3.10/runpy.py"\n'
      'File "$REPOSITORY/components/gate/report.py"\n$WORK_DIR/wine-1/child.log')


def test_a_recorded_output_tail_writes_the_work_dir_as_a_variable(tmp_path):
  from benchmarks import pipeline  # pylint: disable=import-outside-toplevel
  output = f'gate: nothing passed\nreport: {tmp_path}/demo/runs/taxi/report.html\n'.encode()
  assert pipeline.output_tail(output, str(tmp_path)) == [
      'gate: nothing passed', 'report: $WORK_DIR/demo/runs/taxi/report.html']
  assert pipeline.output_tail(b'a\nb\nc\n', str(tmp_path), lines=2) == ['b', 'c']


def test_recorded_refuses_a_benchmark_that_does_not_exist():
  finished = subprocess.run([sys.executable, '-m', 'benchmarks.recorded', 'pipelines', '--save'],
                            cwd=results.REPOSITORY, capture_output=True, text=True, timeout=60)
  assert finished.returncode != 0
  assert "unknown benchmark 'pipelines'" in finished.stderr and 'pipeline,' in finished.stderr


def test_make_bench_all_runs_every_benchmark_the_document_has_a_place_for_and_states_its_time():
  with open(os.path.join(results.REPOSITORY, 'Makefile')) as handle:
    text = handle.read()
  with open(os.path.join(results.REPOSITORY, 'README.md')) as handle:
    readme = ' '.join(handle.read().split())

  def listed(variable):
    value = text.split(f'{variable} :=', 1)[1].split('\n')
    lines = [value[0]] + ([value[1]] if value[0].rstrip().endswith('\\') else [])
    return ' '.join(lines).replace('\\', ' ').split()

  bench, long_runs = listed('BENCHMARKS'), listed('LONG_RUNS')
  rechecks = listed('RECHECKS') + listed('SHIPPING_RUNS') + listed('CORPUS_RUNS')
  assert sorted(bench + long_runs + rechecks) == sorted(results.ORDER)
  assert len(set(bench + long_runs + rechecks)) == len(results.ORDER)
  assert ('$(BENCHMARKS) $(LONG_RUNS) $(RECHECKS) $(SHIPPING_RUNS) $(CORPUS_RUNS);'
          in text.split('bench-all:', 1)[1])
  assert '$(BENCHMARKS);' in text.split('bench:', 1)[1].split('\n\n', 1)[0]
  records = {record['benchmark']: record for record in results.load_all()}
  # A pending benchmark has no result, so no time yet (docs/benchmarks.md says why).
  hours = results.bench_hours([records[name] for name in bench if name in records])
  long_hours = results.bench_hours([records[name] for name in long_runs if name in records])
  all_hours = results.bench_hours(list(records.values()))
  assert f'three longest ({hours:.1f} hours on 2 cores' in text
  assert f'LONG_RUNS ({long_hours:.1f} hours)' in ' '.join(text.replace('#', ' ').split())
  assert f'against the stronger baseline ({all_hours:.1f} hours)' in text
  assert f'`make bench` writes ({hours:.1f} hours on 2 cores; `make bench-all`, every result, ' \
         f'{all_hours:.1f})' in readme


@pytest.mark.parametrize('name', ['mnist1d-large-mlp', 'mnist1d-large-mlp-held-out'])
def test_the_accuracy_tables_docs_mnist1d_quotes_are_the_results(name):
  """Each student row of the benchmark's table appears in docs/mnist1d.md as it was measured."""
  with open(os.path.join(results.RESULTS_DIR, f'{name}.json')) as handle:
    rows = json.load(handle)['result']['tables'][0]['rows']
  with open(os.path.join(results.REPOSITORY, 'docs', 'mnist1d.md')) as handle:
    document = handle.read()
  section = document.split(f'`{name}`\n', 1)[1].split('\n## ', 1)[0]
  # The first figure column: a held-out table quotes the benchmark's beside it.
  quoted = [line.split(' | ')[1].rstrip(' |') for line in section.splitlines()
            if line.startswith('| ') and ' ± ' in line]
  assert [row[1] for row in rows] == quoted[:len(rows)]


def test_the_mixup_baseline_table_in_docs_mnist1d_is_the_result():
  """The margins docs/mnist1d.md quotes over pseudo-labelling with mixup are the result's."""
  with open(os.path.join(results.RESULTS_DIR, 'mnist1d-mlp-mixup-pseudo.json')) as handle:
    targets = json.load(handle)['result']['targets']
  with open(os.path.join(results.REPOSITORY, 'docs', 'mnist1d.md')) as handle:
    document = handle.read()
  section = document.split('`mnist1d-mlp-mixup-pseudo`\n', 1)[1]
  for row in targets:
    seeds = row['seeds']
    verdict = 'met' if row['met'] else 'missed'
    line = (f"| {seeds[0]}-{seeds[-1]} | **{row['value']:+.3f} ± {row['std']:.3f}, {verdict}** | "
            + ', '.join(f'{value:+.3f}' for value in row['values']) + ' |')
    assert line in section, line


def test_the_teachers_plans_docs_scaling_out_shows_are_the_result():
  """Every row of the teachers' plan table in docs/scaling-out.md is the recorded result's."""
  with open(os.path.join(results.RESULTS_DIR, 'pipeline_parallel.json')) as handle:
    tables = json.load(handle)['result']['tables']
  plans = next(table for table in tables if table['title'].startswith("Our teachers' plans"))
  with open(os.path.join(results.REPOSITORY, 'docs', 'scaling-out.md')) as handle:
    document = handle.read()
  section = document.split("## Our teachers' plans", 1)[1].split('\n#', 1)[0]
  quoted = [line for line in section.splitlines() if line.startswith('| ')][1:]
  assert quoted == ['| ' + ' | '.join(str(cell) for cell in row) + ' |'
                    for row in plans['rows']]


def test_the_engine_cost_curve_docs_scaling_out_shows_is_the_result():
  """The cost-curve table in docs/scaling-out.md is the recorded beam_engines result's."""
  with open(os.path.join(results.RESULTS_DIR, 'beam_engines.json')) as handle:
    table = json.load(handle)['result']['tables'][0]
  with open(os.path.join(results.REPOSITORY, 'docs', 'scaling-out.md')) as handle:
    document = handle.read()
  section = document.split('## The cost curve on each engine', 1)[1].split('\n## ', 1)[0]
  lines = section.splitlines()
  header = '| ' + ' | '.join(table['columns']) + ' |'
  start = lines.index(header) + 2
  quoted = lines[start:start + len(table['rows'])]
  assert quoted == ['| ' + ' | '.join(str(cell) for cell in row) + ' |'
                    for row in table['rows']]
