"""docs/probes: the figures docs/mnist1d.md quotes are what the probes wrote."""

import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_temperature_table_in_the_docs_is_the_probe_summary_of_its_output():
  summary = subprocess.run(
      [sys.executable, os.path.join('docs', 'probes', 'mnist1d_sweep.py'), '--summarize',
       '--temperatures', os.path.join('docs', 'probes', 'mnist1d_sweep-temperatures.jsonl')],
      cwd=REPOSITORY, capture_output=True, text=True, check=True, timeout=60).stdout
  test_accuracy = {(int(pool), method): float(test) for pool, method, test in re.findall(
      r'pool\s+(\d+) (\S+)\s+eval \S+ test (\S+)', summary)}
  with open(os.path.join(REPOSITORY, 'docs', 'mnist1d.md')) as handle:
    document = handle.read()
  methods = ['T0.5-alpha0', 'T0.5-alpha0.5', 'T1-alpha0', 'T1-alpha0.5', 'T2-alpha0',
             'T2-alpha0.5']
  for pool in (10000, 50000):
    row = f'| {pool:,} | ' + ' | '.join(f'{test_accuracy[(pool, method)]:.4f}'
                                        for method in methods) + ' |'
    assert row in document
  assert (f'pseudo-labels {test_accuracy[(10000, "pseudo")]:.4f} at 10,000 rows and '
          f'{test_accuracy[(50000, "pseudo")]:.4f} at 50,000' in document)


def load_settings_probe():
  """docs/probes/distiller_settings.py as a module (docs/ is not a package)."""
  path = os.path.join(REPOSITORY, 'docs', 'probes', 'distiller_settings.py')
  spec = importlib.util.spec_from_file_location('distiller_settings_probe', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_the_settings_probe_tries_valid_settings_and_its_control_is_the_benchmarks():
  from benchmarks import mnist1d  # pylint: disable=import-outside-toplevel
  from tfx_distillery.components.distiller import training  # pylint: disable=import-outside-toplevel
  probe = load_settings_probe()
  for name in probe.SETTINGS:
    training.validate(probe.settings_for(name), num_teachers=probe.TEACHERS.get(name, 1))
  # The row named "the benchmark's" must be what the large-cnn configuration trains for ours.
  large_cnn = mnist1d.CONFIGURATIONS['large-cnn']
  assert probe.settings_for('benchmark') == mnist1d.student_settings(large_cnn)[
      mnist1d.ours_name(1.0, 0.5)]
  assert probe.STUDENTS['cnn'][0] == {'architecture': 'cnn', 'filters': 16}


def test_the_ensemble_settings_add_teachers_on_seeds_no_benchmark_uses():
  from benchmarks import mnist1d  # pylint: disable=import-outside-toplevel
  probe = load_settings_probe()
  benchmark_seeds = {seed for configuration in mnist1d.CONFIGURATIONS.values()
                     for seed in configuration.seeds}
  for seed in probe.SEEDS:
    assert probe.teacher_seeds(seed, 'benchmark') == [seed]
    ensemble = probe.teacher_seeds(seed, 'benchmark-3teachers')
    assert ensemble[0] == seed and len(set(ensemble)) == 3
    assert not set(ensemble[1:]) & benchmark_seeds
  # The ensemble's pseudo-labels are the same baseline as the benchmark's, from three teachers.
  assert probe.settings_for('pseudo-3teachers') == probe.settings_for('pseudo')
  assert probe.settings_for('pseudo-mixup1') == dataclasses.replace(
      probe.settings_for('pseudo'), mixup=1.0)


def probe_figures(file_name):
  """{setting: {seed: eval accuracy}} of one output of docs/probes/distiller_settings.py."""
  figures = {}
  with open(os.path.join(REPOSITORY, 'docs', 'probes', file_name)) as handle:
    for line in handle:
      record = json.loads(line)
      figures.setdefault(record['setting'], {})[record['seed']] = record['eval_accuracy']
  return figures


@pytest.mark.parametrize('file_name, labels', [
    ('distiller_settings.jsonl', {
        'benchmark': "the benchmark's: T = 1, alpha 0.5, mixup 1",
        'noise0.1': 'T = 1, alpha 0.5, mixup 1, noise 0.1',
        'T0.5-alpha0': 'T = 0.5, alpha 0, mixup 1',
        'pseudo': 'pseudo-labelling (hard targets, no mixup)'}),
    ('distiller_settings-mlp.jsonl', {
        'benchmark': 'ours: T = 1, alpha 0.5, mixup 1',
        'T2-alpha0': 'ours: T = 2, alpha 0, mixup 1',
        'pseudo': 'pseudo-labelling (hard targets, no mixup)',
        'scratch': 'scratch, labelled rows only'}),
    ('distiller_settings-patient.jsonl', {
        'benchmark': 'ours: T = 1, alpha 0.5, mixup 1, 60,000 steps',
        'pseudo': 'pseudo-labelling (hard targets, no mixup), 60,000 steps'}),
    ('distiller_settings-ensemble.jsonl', {
        'benchmark': 'ours: T = 1, alpha 0.5, mixup 1 (one teacher)',
        'pseudo': 'pseudo-labelling (hard targets, no mixup)',
        'pseudo-mixup1': 'pseudo-labelling with mixup 1',
        'benchmark-3teachers': 'ours from three teachers: T = 1, alpha 0.5, mixup 1',
        'pseudo-3teachers': 'pseudo-labelling from three teachers (their average\'s argmax, '
                            'no mixup)'}),
    ('distiller_settings-mlp-mixup.jsonl', {
        'T1-alpha0': 'ours: T = 1, alpha 0, mixup 1',
        'pseudo': 'pseudo-labelling (hard targets, no mixup)',
        'pseudo-mixup1': 'pseudo-labelling with mixup 1'}),
])
def test_the_settings_tables_in_the_docs_are_the_probe_outputs(file_name, labels):
  figures = probe_figures(file_name)
  with open(os.path.join(REPOSITORY, 'docs', 'mnist1d.md')) as handle:
    document = handle.read()
  assert set(figures) == set(labels)
  for setting, label in labels.items():
    by_seed = figures[setting]
    mean = sum(by_seed.values()) / len(by_seed)
    assert (f'| {label} | {by_seed[101]:.3f} | {by_seed[102]:.3f} | {mean:.4f} |'
            in document), setting


def test_the_teacher_rows_of_the_ensemble_table_are_the_probe_output():
  records = []
  with open(os.path.join(REPOSITORY, 'docs', 'probes',
                         'distiller_settings-ensemble.jsonl')) as handle:
    records = [json.loads(line) for line in handle]
  with open(os.path.join(REPOSITORY, 'docs', 'mnist1d.md')) as handle:
    document = handle.read()
  for teachers, label in ((1, 'the one teacher'),
                          (3, 'the three teachers\' averaged distribution')):
    by_seed = {record['seed']: record['teacher_eval_accuracy'] for record in records
               if record['teachers'] == teachers}
    mean = sum(by_seed.values()) / len(by_seed)
    assert (f'| {label} | {by_seed[101]:.3f} | {by_seed[102]:.3f} | {mean:.4f} |'
            in document)
  # The probe's own figure for the averaged distribution is the Distiller's for one teacher.
  for record in records:
    assert len(record['each_teacher_eval_accuracy']) == record['teachers']
    if record['teachers'] == 1:
      assert record['teacher_eval_accuracy'] == record['each_teacher_eval_accuracy'][0]
