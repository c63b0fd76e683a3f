"""benchmarks/mnist1d.py's figures from its measured accuracies: gap_closed, the margins over
pseudo-labelling and the recipe, and the labelled rows scratch needs to match the pool."""

import pytest

from benchmarks import mnist1d


def measured(ours_with_pool, pseudo, scratch_with_more):
  """Two seeds of the CNN student, teacher 0.95 and scratch 0.85 on each."""
  per_seed = []
  for seed in (1, 2):
    per_seed.append({'seed': seed, 'teacher': 0.95, 'majority': 0.1, 'teacher_kept_epoch': 9,
                     'students': {'cnn': {
                         'scratch': 0.85, 'recipe': 0.86, 'ours@0': 0.87,
                         'ours@50000': ours_with_pool, 'pseudo@50000': pseudo,
                         'labelled+4000': scratch_with_more[0],
                         'labelled+50000': scratch_with_more[1],
                         'student_params': 480, 'teacher_params': 28298}}})
  return {'per_seed': per_seed, 'seeds': [1, 2], 'pools': [0, 50000], 'architectures': ['cnn'],
          'extra_labelled': [4000, 50000], 'split_rows': {'train': 4000, 'test': 1000},
          'test_examples': 1000}


def targets_by_start(result):
  return {target['figure'].split(',')[0]: target for target in result['targets']}


def test_gap_closed_is_the_share_of_the_teachers_lead_that_the_pool_closes():
  result = mnist1d.describe(measured(0.925, 0.90, (0.90, 0.93)))
  gap = next(target for target in result['targets'] if 'gap_closed' in target['figure'])
  # (0.925 - 0.85) / (0.95 - 0.85), on both seeds; the CNN is 1.7% of the teacher.
  assert gap['value'] == pytest.approx(0.75) and gap['met']
  margins = [target for target in result['targets'] if 'pseudo-labelling' in target['figure']]
  assert [target['value'] for target in margins] == [pytest.approx(0.025)]
  assert margins[0]['met']
  assert 'scratch needs 50,000 extra labelled rows' in result['tables'][0]['title']


def test_a_pool_that_does_no_better_than_pseudo_labels_misses_its_target():
  result = mnist1d.describe(measured(0.90, 0.895, (0.91, 0.93)))
  margin = next(target for target in result['targets'] if 'pseudo-labelling' in target['figure'])
  assert margin['value'] == pytest.approx(0.005) and not margin['met']
  gap = next(target for target in result['targets'] if 'gap_closed' in target['figure'])
  assert gap['value'] == pytest.approx(0.5) and not gap['met']
  # 4,000 more labelled rows already match ours.
  assert 'scratch needs 4,000 extra labelled rows' in result['tables'][0]['title']


def test_each_student_is_trained_for_every_pool_and_baseline():
  runs = mnist1d.student_runs([0, 10000], ['cnn', 'mlp'])
  assert ('cnn', 'ours@0', 0) in runs and ('mlp', 'pseudo@10000', 10000) in runs
  assert ('cnn', 'pseudo@0', 0) not in runs
  assert len(runs) == 2 * 5
  assert mnist1d.labelled_more_rows([0, 50000], [4000]) == [4000, 50000]
  assert mnist1d.labelled_more_rows([0, 10000], [4000]) == [4000]
