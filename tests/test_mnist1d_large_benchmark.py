"""benchmarks/mnist1d_large.py: ours is chosen on eval, never on test, and every student
the table needs is trained."""

import pytest

from benchmarks import mnist1d_large


def per_seed_figures(seeds, ours_with_pool):
  """The CNN's figures on each seed: teacher 0.95, scratch 0.91, ours at no pool and 50k."""
  return [{'seed': seed, 'teacher': 0.95, 'majority': 0.1, 'teacher_kept_epoch': 9,
           'ours_chosen': {'ours@0': 'ours-alpha0.5', 'ours@50000': 'ours-alpha0'},
           'students': {'cnn': {'scratch': 0.91, 'recipe': 0.90, 'ours@0': 0.92,
                                'ours@50000': ours_with_pool, 'pseudo@50000': 0.92,
                                'labelled+50000': 0.95, 'student_params': 1050,
                                'teacher_params': 105738}}} for seed in seeds]


def test_ours_is_the_alpha_with_the_higher_eval_accuracy_whatever_test_says():
  chosen = mnist1d_large.choose_on_eval({'ours@50000': [
      {'settings': 'ours-alpha0.5', 'eval_accuracy': 0.93, 'accuracy': 0.99},
      {'settings': 'ours-alpha0', 'eval_accuracy': 0.95, 'accuracy': 0.90}]})
  assert chosen['ours@50000']['settings'] == 'ours-alpha0'
  assert chosen['ours@50000']['accuracy'] == 0.90


def test_each_pool_trains_ours_at_every_alpha_and_one_pseudo_labelled_student():
  runs = mnist1d_large.student_runs([0, 10000])
  assert ('ours@0', 'ours-alpha0.5', 0) in runs and ('ours@0', 'ours-alpha0', 0) in runs
  assert ('pseudo@10000', 'pseudo', 10000) in runs and ('pseudo@0', 'pseudo', 0) not in runs
  assert len(runs) == 2 + 2 * 2 + 1
  settings = mnist1d_large.student_settings()
  assert {name for _, name, _ in runs} <= set(settings)
  # The same decay for every student, baselines too; only ours' alpha differs between them.
  assert {value.learning_rate_schedule for value in settings.values()} == {'cosine'}
  assert settings['ours-alpha0'].alpha == 0.0 and settings['scratch'].alpha == 1.0
  # Ours at the temperature chosen on eval, not the Distiller's default.
  assert {settings[f'ours-alpha{alpha:g}'].temperature for alpha in mnist1d_large.ALPHAS} == {
      mnist1d_large.TEMPERATURE} == {1.0}


def test_described_targets_and_notes_name_this_benchmark_its_budget_and_choices():
  per_seed = per_seed_figures((1, 2), ours_with_pool=0.945)
  described = mnist1d_large.describe({
      'per_seed': per_seed, 'seeds': [1, 2], 'pools': [0, 50000], 'architectures': ['cnn'],
      'extra_labelled': [50000], 'split_rows': {'train': 4000, 'test': 1000},
      'test_examples': 1000, 'budget': {**mnist1d_large.BUDGET, 'student_steps': 300}})
  gap = next(target for target in described['targets'] if 'gap_closed' in target['figure'])
  assert gap['figure'].startswith('mnist1d_large: gap_closed')
  assert gap['value'] == pytest.approx(0.875) and gap['met']
  notes = ' '.join(described['notes'])
  assert '300 steps' in notes and 'seed 1: 0 rows 0.5, 50000 rows 0' in notes
  assert 'the Distiller at T = 1,' in described['summary']


def test_the_held_out_run_uses_seeds_no_other_benchmark_uses_and_names_its_targets():
  from benchmarks import mnist1d  # pylint: disable=g-import-not-at-top
  from benchmarks import mnist1d_held_out  # pylint: disable=g-import-not-at-top
  assert not set(mnist1d_held_out.HELD_OUT_SEEDS) & set(mnist1d.SEEDS)
  per_seed = per_seed_figures((201, 202), ours_with_pool=0.93)
  described = mnist1d_held_out.describe({
      'per_seed': per_seed, 'seeds': [201, 202], 'pools': [0, 50000], 'architectures': ['cnn'],
      'extra_labelled': [50000], 'split_rows': {'train': 4000, 'test': 1000},
      'test_examples': 1000, 'budget': mnist1d_large.BUDGET})
  figures = [target['figure'] for target in described['targets']]
  assert all(figure.startswith('mnist1d_held_out: ') for figure in figures)
  gap = next(target for target in described['targets'] if 'gap_closed' in target['figure'])
  assert gap['value'] == pytest.approx(0.5) and not gap['met']


def test_the_mlp_run_trains_ours_at_each_temperature_and_alpha_beside_the_cnns_baselines():
  from benchmarks import mnist1d_large_mlp  # pylint: disable=g-import-not-at-top
  runs = mnist1d_large_mlp.student_runs([0, 50000])
  for rows in (0, 50000):
    assert {settings for name, settings, _ in runs if name == f'ours@{rows}'} == {
        'ours-T1-alpha0.5', 'ours-T1-alpha0', 'ours-T2-alpha0.5', 'ours-T2-alpha0'}
  assert ('pseudo@50000', 'pseudo', 50000) in runs and len(runs) == 2 + 4 + 4 + 1
  settings = mnist1d_large_mlp.student_settings()
  assert settings['ours-T2-alpha0'].temperature == 2.0 and settings['ours-T2-alpha0'].alpha == 0
  # The baselines are mnist1d_large's, so the two students are compared on equal terms.
  cnn = mnist1d_large.student_settings()
  assert all(settings[name] == cnn[name] for name in ('scratch', 'recipe', 'pseudo'))
  assert {value.learning_rate_schedule for value in settings.values()} == {'cosine'}


def mlp_measured(seeds, ours_with_pool, pseudo):
  """The MLP run's measurement: scratch 0.58, ours 0.60 without a pool; T 1 chosen at no pool."""
  per_seed = [{'seed': seed, 'teacher': 0.95, 'majority': 0.1, 'teacher_kept_epoch': 9,
               'ours_chosen': {'ours@0': 'ours-T1-alpha0.5', 'ours@50000': 'ours-T2-alpha0'},
               'students': {'mlp': {'scratch': 0.58, 'recipe': 0.57, 'ours@0': 0.60,
                                    'ours@50000': ours_with_pool, 'pseudo@50000': pseudo,
                                    'labelled+50000': 0.90, 'student_params': 6538,
                                    'teacher_params': 105738}}} for seed in seeds]
  return {'per_seed': per_seed, 'seeds': list(seeds), 'pools': [0, 50000],
          'architectures': ['mlp'], 'extra_labelled': [50000],
          'split_rows': {'train': 4000, 'test': 1000}, 'test_examples': 1000,
          'budget': mnist1d_large.BUDGET}


def test_the_mlp_run_names_its_targets_and_the_setting_eval_chose_per_seed():
  from benchmarks import mnist1d_large_mlp  # pylint: disable=g-import-not-at-top
  described = mnist1d_large_mlp.describe(mlp_measured((1, 2), ours_with_pool=0.77, pseudo=0.75))
  targets = {target['figure'].split(', MLP')[0]: target for target in described['targets']}
  assert all(figure.startswith('mnist1d_large_mlp: ') for figure in targets)
  margin = targets['mnist1d_large_mlp: ours − pseudo-labelling']
  assert margin['value'] == pytest.approx(0.02) and margin['met']
  # The MLP is 6.2% of the teacher: its gap_closed is a figure, the 2% student's target is not its.
  assert targets['mnist1d_large_mlp: gap_closed']['met'] is None
  assert 'seed 2: 0 rows T1-alpha0.5, 50000 rows T2-alpha0' in ' '.join(described['notes'])


def test_the_mlp_held_out_run_is_the_mlp_run_on_the_held_out_seeds_under_its_own_name():
  from benchmarks import mnist1d_held_out  # pylint: disable=g-import-not-at-top
  from benchmarks import mnist1d_mlp_held_out  # pylint: disable=g-import-not-at-top
  described = mnist1d_mlp_held_out.describe(mlp_measured(
      mnist1d_held_out.HELD_OUT_SEEDS, ours_with_pool=0.74, pseudo=0.735))
  figures = [target['figure'] for target in described['targets']]
  assert all(figure.startswith('mnist1d_mlp_held_out: ') for figure in figures)
  margin = next(target for target in described['targets'] if 'pseudo' in target['figure'])
  assert margin['value'] == pytest.approx(0.005) and not margin['met']
  assert 'held-out seeds' in described['title']


def test_the_mixup_baseline_is_pseudo_labelling_with_ours_mixup_and_ours_is_eval_s_choice():
  from benchmarks import mnist1d_large_mlp, mnist1d_mlp_mixup_pseudo  # pylint: disable=import-outside-toplevel
  from tfx_distillery.components.distiller import training  # pylint: disable=import-outside-toplevel
  settings = mnist1d_mlp_mixup_pseudo.pseudo_with_mixup_settings()
  pseudo = mnist1d_large.student_settings()['pseudo']
  assert settings.mixup == 1.0 and pseudo.mixup == 0.0
  assert settings == pseudo.__class__(**{**pseudo.__dict__, 'mixup': 1.0})
  assert settings.teacher_targets == 'hard' and settings.learning_rate_schedule == 'cosine'
  training.validate(settings, num_teachers=1)
  # Ours per seed is the setting that seed's eval chose in the saved MLP results, all ten.
  saved = mnist1d_mlp_mixup_pseudo.saved_seeds()
  assert set(mnist1d_mlp_mixup_pseudo.SEEDS) <= set(saved)
  assert len(mnist1d_mlp_mixup_pseudo.SEEDS) == 10
  for seed in mnist1d_mlp_mixup_pseudo.SEEDS:
    assert saved[seed]['ours_settings'] in mnist1d_large_mlp.student_settings()
  with pytest.raises(ValueError, match=r'--seeds: \[999\]'):
    mnist1d_mlp_mixup_pseudo.check_seeds([101, 999], saved)


def test_the_mixup_baseline_run_decides_each_seed_group_on_its_own_margins():
  from benchmarks import mnist1d_mlp_mixup_pseudo  # pylint: disable=import-outside-toplevel

  def figures(seed, ours, pseudo_mixup, reproduced):
    return {'seed': seed, 'teacher': 0.96, 'saved_teacher': 0.96, 'ours_settings': 'ours-T1-alpha0',
            'ours': ours, 'saved_ours': ours if reproduced else ours - 0.001,
            'saved_pseudo': 0.72, 'pseudo_mixup': pseudo_mixup}

  measured = {'seeds': [101, 102, 201, 202], 'budget': mnist1d_large.BUDGET, 'per_seed': [
      figures(101, 0.76, 0.72, True), figures(102, 0.75, 0.73, True),
      figures(201, 0.73, 0.73, False), figures(202, 0.74, 0.73, True)]}
  described = mnist1d_mlp_mixup_pseudo.describe(measured)
  benchmark_seeds, held_out = described['targets']
  assert "mnist1d_large_mlp's seeds" in benchmark_seeds['figure']
  assert benchmark_seeds['seeds'] == [101, 102] and benchmark_seeds['met']
  assert benchmark_seeds['value'] == pytest.approx(0.03)
  assert held_out['seeds'] == [201, 202] and not held_out['met']
  assert held_out['value'] == pytest.approx(0.005)
  assert 'exactly on 3 of 4 seeds (101, 102, 202)' in described['notes'][0]
  assert described['tables'][0]['rows'][0][-1] == pytest.approx(0.0)
