"""docs/probes: the figures docs/mnist1d.md quotes are what the probe's summary prints."""

import os
import re
import subprocess
import sys

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
