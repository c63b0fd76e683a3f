"""benchmarks/mnist1d.py: each named configuration trains the students its table needs, ours
is chosen on eval and never on test, and the figures (gap_closed, the margins over
pseudo-labelling and the recipe, the labelled rows scratch needs) come from the accuracies."""

import dataclasses

import numpy as np
import pytest

from benchmarks import mnist1d
from benchmarks import results
from tfx_distillery.components.distiller import training

SMALL = mnist1d.CONFIGURATIONS['small']
LARGE_CNN = mnist1d.CONFIGURATIONS['large-cnn']
LARGE_MLP = mnist1d.CONFIGURATIONS['large-mlp']
MIXUP_PSEUDO = mnist1d.CONFIGURATIONS['mlp-mixup-pseudo']


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
          'test_examples': 1000, 'budget': mnist1d.BUDGET}


def test_every_configuration_has_its_own_result_and_every_mnist1d_result_a_configuration():
  names = {configuration.result_name for configuration in mnist1d.CONFIGURATIONS.values()}
  assert names == {name for name in results.ORDER if results.module_of(name) == 'mnist1d'}
  assert results.command_for('mnist1d-large-cnn') == ['-m', 'benchmarks.mnist1d', '--config',
                                                       'large-cnn']
  assert results.command_for('pipeline') == ['-m', 'benchmarks.pipeline']


def test_gap_closed_is_the_share_of_the_teachers_lead_that_the_pool_closes():
  result = mnist1d.describe(SMALL, measured(0.925, 0.90, (0.90, 0.93)))
  gap = next(target for target in result['targets'] if 'gap_closed' in target['figure'])
  # (0.925 - 0.85) / (0.95 - 0.85), on both seeds; the CNN is 1.7% of the teacher.
  assert gap['value'] == pytest.approx(0.75) and gap['met']
  assert gap['figure'].startswith('mnist1d-small: gap_closed')
  margins = [target for target in result['targets'] if 'pseudo-labelling' in target['figure']]
  assert [target['value'] for target in margins] == [pytest.approx(0.025)]
  assert margins[0]['met']
  assert 'scratch needs 50,000 extra labelled rows' in result['tables'][0]['title']
  assert 'the Distiller\'s defaults (T = 2' in result['summary']


def test_a_pool_that_does_no_better_than_pseudo_labels_misses_its_target():
  result = mnist1d.describe(SMALL, measured(0.90, 0.895, (0.91, 0.93)))
  margin = next(target for target in result['targets'] if 'pseudo-labelling' in target['figure'])
  assert margin['value'] == pytest.approx(0.005) and not margin['met']
  gap = next(target for target in result['targets'] if 'gap_closed' in target['figure'])
  assert gap['value'] == pytest.approx(0.5) and not gap['met']
  # 4,000 more labelled rows already match ours.
  assert 'scratch needs 4,000 extra labelled rows' in result['tables'][0]['title']


def test_the_small_configuration_trains_each_student_for_every_pool_and_baseline():
  runs = mnist1d.student_runs(SMALL, [0, 10000])
  assert ('cnn', 'ours@0', 'ours', 0) in runs and ('mlp', 'pseudo@10000', 'pseudo', 10000) in runs
  assert not [run for run in runs if run[1] == 'pseudo@0']
  assert len(runs) == 2 * 5
  assert mnist1d.labelled_more_rows([0, 50000], [4000]) == [4000, 50000]
  assert mnist1d.labelled_more_rows([0, 10000], [4000]) == [4000]
  # Ours is the Distiller's defaults, with no choice to make on eval.
  assert mnist1d.student_settings(SMALL)['ours'] == training.DistillationSettings(
      train_baseline=False)


def eval_run(settings: str, right: int, test_accuracy: float, shift: int = 0) -> dict:
  """A student right on `right` of 1,000 eval rows (from row `shift` on, wrapping)."""
  correct = np.roll(np.arange(1000) < right, shift)
  return {'settings': settings, 'eval_accuracy': right / 1000, 'eval_correct': correct,
          'accuracy': test_accuracy}


def test_ours_is_the_setting_eval_prefers_beyond_noise_whatever_test_says():
  chosen = mnist1d.choose_on_eval({'ours@50000': [
      eval_run('ours-T1-alpha0.5', 930, 0.99), eval_run('ours-T1-alpha0', 950, 0.90)]},
      mnist1d.student_settings(LARGE_CNN))
  # 20 rows more right, none fewer: beyond noise.
  assert chosen['ours@50000']['settings'] == 'ours-T1-alpha0'
  assert chosen['ours@50000']['accuracy'] == 0.90
  assert chosen['ours@50000']['why'].endswith(', moved)')


def test_a_lead_of_one_eval_row_is_a_tie_that_keeps_the_choice_already_made():
  """Seed 201's case: T 2 led T 1 by one row of 1,000 on eval, both far above the Distiller's
  default (T 2, alpha 0.5). The choice starts at the default and moves only on a lead
  beyond noise over the current choice; with no default in the grid, at the first."""
  settings = mnist1d.student_settings(LARGE_MLP)
  runs = [eval_run('ours-T1-alpha0.5', 700, 0.70), eval_run('ours-T1-alpha0', 749, 0.77),
          eval_run('ours-T2-alpha0.5', 700, 0.70),
          eval_run('ours-T2-alpha0', 750, 0.75, shift=100)]
  chosen = mnist1d.choose_on_eval({'ours@50000': runs}, settings)
  # T 1 alpha 0 leads the default by 49 rows: chosen; T 2 alpha 0 then leads it by one row
  # (100 rows won, 99 lost): a tie, which keeps T 1 alpha 0.
  assert chosen['ours@50000']['settings'] == 'ours-T1-alpha0'
  assert chosen['ours@50000']['why'].startswith('from ours-T2-alpha0.5: ')
  assert 'ours-T2-alpha0 +0.001 against ours-T1-alpha0' in chosen['ours@50000']['why']
  # Against the default, a one-row lead (on rows where they disagree) is within noise.
  tied = [eval_run('ours-T2-alpha0.5', 749, 0.75, shift=100),
          eval_run('ours-T1-alpha0', 750, 0.77)]
  chosen = mnist1d.choose_on_eval({'ours@50000': tied}, settings)
  assert chosen['ours@50000']['settings'] == 'ours-T2-alpha0.5'
  assert chosen['ours@50000']['why'] == ('from ours-T2-alpha0.5: ours-T1-alpha0 +0.001 '
                                         'against ours-T2-alpha0.5 (p 0.500)')
  # No default in the grid (the large CNN's T 1 only): the first setting keeps a tie.
  chosen = mnist1d.choose_on_eval({'ours@0': [
      eval_run('ours-T1-alpha0.5', 800, 0.80, shift=300), eval_run('ours-T1-alpha0', 803, 0.70)]},
      mnist1d.student_settings(LARGE_CNN))
  assert chosen['ours@0']['settings'] == 'ours-T1-alpha0.5'
  # A name with one run is that run.
  single = eval_run('pseudo', 900, 0.9)
  assert mnist1d.choose_on_eval({'pseudo@50000': [single]}, settings)['pseudo@50000'] is single


def test_large_cnn_trains_ours_at_every_alpha_and_one_pseudo_labelled_student_per_pool():
  runs = mnist1d.student_runs(LARGE_CNN, [0, 10000])
  assert ('cnn', 'ours@0', 'ours-T1-alpha0.5', 0) in runs
  assert ('cnn', 'ours@0', 'ours-T1-alpha0', 0) in runs
  assert ('cnn', 'pseudo@10000', 'pseudo', 10000) in runs
  assert len(runs) == 2 + 2 * 2 + 1
  settings = mnist1d.student_settings(LARGE_CNN)
  assert {name for _, _, name, _ in runs} <= set(settings)
  # The same decay for every student, baselines too; only ours' alpha differs between them.
  assert {value.learning_rate_schedule for value in settings.values()} == {'cosine'}
  assert settings['ours-T1-alpha0'].alpha == 0.0 and settings['scratch'].alpha == 1.0
  # Ours at the temperature chosen on eval, not the Distiller's default.
  assert {settings[name].temperature for name in mnist1d.ours_settings_names(LARGE_CNN)} == {1.0}
  assert LARGE_CNN.budget['student_steps'] == 20000
  assert LARGE_CNN.teacher_hyperparameters == {'filters': 128}


def per_seed_figures(seeds, ours_with_pool):
  """The CNN's figures on each seed: teacher 0.95, scratch 0.91, ours at no pool and 50k."""
  return [{'seed': seed, 'teacher': 0.95, 'majority': 0.1, 'teacher_kept_epoch': 9,
           'ours_chosen': {'ours@0': 'ours-T1-alpha0.5', 'ours@50000': 'ours-T1-alpha0'},
           'students': {'cnn': {'scratch': 0.91, 'recipe': 0.90, 'ours@0': 0.92,
                                'ours@50000': ours_with_pool, 'pseudo@50000': 0.92,
                                'labelled+50000': 0.95, 'student_params': 1050,
                                'teacher_params': 105738}}} for seed in seeds]


def test_large_cnn_targets_and_notes_name_the_configuration_its_budget_and_choices():
  described = mnist1d.describe(LARGE_CNN, {
      'per_seed': per_seed_figures((1, 2), ours_with_pool=0.945), 'seeds': [1, 2],
      'pools': [0, 50000], 'architectures': ['cnn'], 'extra_labelled': [50000],
      'split_rows': {'train': 4000, 'test': 1000}, 'test_examples': 1000,
      'budget': {**LARGE_CNN.budget, 'student_steps': 300}})
  gap = next(target for target in described['targets'] if 'gap_closed' in target['figure'])
  assert gap['figure'].startswith('mnist1d-large-cnn: gap_closed')
  assert gap['value'] == pytest.approx(0.875) and gap['met']
  notes = ' '.join(described['notes'])
  assert '300 steps' in notes and 'seed 1: 0 rows T1-alpha0.5, 50000 rows T1-alpha0' in notes
  assert 'filters 128' in notes and 'cosine schedule' in notes
  assert 'the Distiller at T 1 and alpha 0.5 or 0, chosen on eval' in described['summary']


def test_the_held_out_configurations_use_seeds_no_other_configuration_uses():
  held_out = mnist1d.CONFIGURATIONS['large-cnn-held-out']
  assert not set(held_out.seeds) & set(LARGE_CNN.seeds)
  assert held_out.seeds == mnist1d.CONFIGURATIONS['large-mlp-held-out'].seeds
  # The same experiment as large-cnn on other seeds, with the pools the headline needs.
  assert dataclasses.replace(held_out, name='x', title='x', seeds=(), pools=(),
                             extra_labelled=()) == dataclasses.replace(
                                 LARGE_CNN, name='x', title='x', seeds=(), pools=(),
                                 extra_labelled=())
  described = mnist1d.describe(held_out, {
      'per_seed': per_seed_figures((201, 202), ours_with_pool=0.93), 'seeds': [201, 202],
      'pools': [0, 50000], 'architectures': ['cnn'], 'extra_labelled': [50000],
      'split_rows': {'train': 4000, 'test': 1000}, 'test_examples': 1000,
      'budget': held_out.budget})
  figures = [target['figure'] for target in described['targets']]
  assert all(figure.startswith('mnist1d-large-cnn-held-out: ') for figure in figures)
  gap = next(target for target in described['targets'] if 'gap_closed' in target['figure'])
  assert gap['value'] == pytest.approx(0.5) and not gap['met']


def test_large_mlp_trains_ours_at_each_temperature_and_alpha_beside_the_cnns_baselines():
  runs = mnist1d.student_runs(LARGE_MLP, [0, 50000])
  for rows in (0, 50000):
    assert {settings for _, name, settings, _ in runs if name == f'ours@{rows}'} == {
        'ours-T1-alpha0.5', 'ours-T1-alpha0', 'ours-T2-alpha0.5', 'ours-T2-alpha0'}
  assert ('mlp', 'pseudo@50000', 'pseudo', 50000) in runs and len(runs) == 2 + 4 + 4 + 1
  settings = mnist1d.student_settings(LARGE_MLP)
  assert settings['ours-T2-alpha0'].temperature == 2.0 and settings['ours-T2-alpha0'].alpha == 0
  # The baselines are large-cnn's, so the two students are compared on equal terms.
  cnn = mnist1d.student_settings(LARGE_CNN)
  assert all(settings[name] == cnn[name] for name in ('scratch', 'recipe', 'pseudo'))
  assert {value.learning_rate_schedule for value in settings.values()} == {'cosine'}
  assert LARGE_MLP.teacher_hyperparameters == LARGE_CNN.teacher_hyperparameters


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
          'budget': LARGE_MLP.budget}


def test_large_mlp_names_its_targets_and_the_setting_eval_chose_per_seed():
  described = mnist1d.describe(LARGE_MLP, mlp_measured((1, 2), ours_with_pool=0.77, pseudo=0.75))
  targets = {target['figure'].split(', MLP')[0]: target for target in described['targets']}
  assert all(figure.startswith('mnist1d-large-mlp: ') for figure in targets)
  margin = targets['mnist1d-large-mlp: ours − pseudo-labelling']
  assert margin['value'] == pytest.approx(0.02) and margin['met']
  # The MLP is 6.2% of the teacher: its gap_closed is a figure, the 2% student's target is not its.
  assert targets['mnist1d-large-mlp: gap_closed']['met'] is None
  assert 'seed 2: 0 rows T1-alpha0.5, 50000 rows T2-alpha0' in ' '.join(described['notes'])
  assert 'T 1 or 2 and alpha 0.5 or 0' in described['summary']


def test_the_mlp_held_out_run_is_the_mlp_run_on_the_held_out_seeds_under_its_own_name():
  held_out = mnist1d.CONFIGURATIONS['large-mlp-held-out']
  described = mnist1d.describe(held_out, mlp_measured(held_out.seeds, ours_with_pool=0.74,
                                                      pseudo=0.735))
  figures = [target['figure'] for target in described['targets']]
  assert all(figure.startswith('mnist1d-large-mlp-held-out: ') for figure in figures)
  margin = next(target for target in described['targets'] if 'pseudo' in target['figure'])
  assert margin['value'] == pytest.approx(0.005) and not margin['met']
  assert 'held-out seeds' in described['title']


def test_the_mixup_baseline_is_pseudo_labelling_with_ours_mixup_and_ours_is_eval_s_choice():
  settings = mnist1d.student_settings(MIXUP_PSEUDO)
  pseudo, with_mixup = settings['pseudo'], settings['pseudo-mixup']
  assert with_mixup.mixup == 1.0 and pseudo.mixup == 0.0
  assert with_mixup == dataclasses.replace(pseudo, mixup=1.0)
  assert with_mixup.teacher_targets == 'hard' and with_mixup.learning_rate_schedule == 'cosine'
  training.validate(with_mixup, num_teachers=1)
  # Ours per seed is the setting that seed's eval chose in the saved MLP results, all ten.
  saved = mnist1d.saved_seeds(MIXUP_PSEUDO)
  assert set(MIXUP_PSEUDO.seeds) <= set(saved) and len(MIXUP_PSEUDO.seeds) == 10
  for seed in MIXUP_PSEUDO.seeds:
    assert saved[seed]['ours_settings'] in settings
  with pytest.raises(ValueError, match=r'--seeds: \[999\]'):
    mnist1d.check_seeds(MIXUP_PSEUDO, [101, 999], saved)


def test_the_mixup_baseline_run_decides_each_seed_group_on_its_own_margins():

  def figures(seed, ours, pseudo_mixup, reproduced):
    return {'seed': seed, 'teacher': 0.96, 'saved_teacher': 0.96, 'ours_settings': 'ours-T1-alpha0',
            'ours': ours, 'saved_ours': ours if reproduced else ours - 0.001,
            'saved_pseudo': 0.72, 'pseudo_mixup': pseudo_mixup}

  measured_runs = {'seeds': [101, 102, 201, 202], 'budget': MIXUP_PSEUDO.budget, 'per_seed': [
      figures(101, 0.76, 0.72, True), figures(102, 0.75, 0.73, True),
      figures(201, 0.73, 0.73, False), figures(202, 0.74, 0.73, True)]}
  described = mnist1d.describe_against_mixup_pseudo(MIXUP_PSEUDO, measured_runs)
  benchmark_seeds, held_out = described['targets']
  assert "mnist1d-large-mlp's seeds" in benchmark_seeds['figure']
  assert benchmark_seeds['seeds'] == [101, 102] and benchmark_seeds['met']
  assert benchmark_seeds['value'] == pytest.approx(0.03)
  assert held_out['seeds'] == [201, 202] and not held_out['met']
  assert held_out['value'] == pytest.approx(0.005)
  assert 'exactly on 3 of 4 seeds (101, 102, 202)' in described['notes'][0]
  assert described['tables'][0]['rows'][0][-1] == pytest.approx(0.0)


@pytest.mark.parametrize('arguments, message', [
    (['--config', 'huge'], "argument --config: invalid choice: 'huge'"),
    (['--seeds', '101'], 'the following arguments are required: --config'),
    (['--config', 'small', '--seeds', '1,x'], "--seeds: expected whole numbers separated by "
     "commas; got '1,x'"),
    (['--config', 'small', '--student-steps', '0'], '--student-steps must be a positive'),
    (['--config', 'mlp-mixup-pseudo', '--seeds', '999'], '--seeds: [999] have no eval choice'),
])
def test_a_bad_configuration_or_option_is_refused_by_name_before_anything_runs(
    arguments, message, capsys):
  with pytest.raises(SystemExit) as exited:
    mnist1d.parse_arguments(arguments)
  assert exited.value.code == 2
  assert message in capsys.readouterr().err


def test_a_configuration_s_defaults_are_what_it_runs_unless_an_option_says_otherwise():
  _, configuration, seeds, pools, extra, budget = mnist1d.parse_arguments(
      ['--config', 'large-cnn-held-out'])
  assert (seeds, pools, extra) == ([201, 202, 203, 204, 205], [0, 50000], [])
  assert budget == configuration.budget
  _, _, seeds, _, extra, budget = mnist1d.parse_arguments(
      ['--config', 'large-cnn', '--seeds', '7', '--extra-labelled', '', '--student-steps', '50'])
  assert seeds == [7] and extra == [] and budget['student_steps'] == 50
