"""The gate knows its noise: a lead of one example over the majority class is refused as
within noise, a clear lead passes, and every interval is the one a textbook gives."""

import numpy as np
import pytest

from tfx_distillery.components.common import measuring
from tfx_distillery.components.gate import executor
from tfx_distillery.components.gate import report

# TFX's weak stock teacher on taxi: a majority class of 0.7745 on 2,000 test examples.
EXAMPLES = 2000
MAJORITY_RIGHT = 1549


def labels():
  return np.array([0] * MAJORITY_RIGHT + [1] * (EXAMPLES - MAJORITY_RIGHT))


def candidate(extra_right: int):
  """The constant guess, plus `extra_right` minority examples right (a near-constant model)."""
  correct = measuring.majority_correct(labels()).copy()
  correct[MAJORITY_RIGHT:MAJORITY_RIGHT + extra_right] = True
  return correct


def figures(correct, size_bytes=1000):
  return {'accuracy': float(np.mean(correct)), 'size_bytes': size_bytes,
          'versus_majority': measuring.paired_comparison(
              correct, measuring.majority_correct(labels()))}


def decide(correct):
  majority = measuring.majority_accuracy(labels())
  return executor.reasons_against(figures(correct), teacher_accuracy=0.78, majority=majority,
                                  max_drop=0.01, max_bytes=-1)


def test_one_example_above_the_majority_class_is_refused_as_within_noise():
  reasons = decide(candidate(1))
  assert len(reasons) == 1 and 'within noise' in reasons[0], reasons
  assert '+0.0005' in reasons[0] and 'McNemar p = 0.500' in reasons[0]


def test_a_clear_lead_over_the_majority_class_passes():
  assert decide(candidate(30)) == []


def test_at_or_below_the_majority_class_keeps_its_own_reason():
  assert 'at or below the majority class' in decide(candidate(0))[0]


def test_mcnemar_is_the_exact_binomial_tail_of_the_discordant_examples():
  first = np.array([True] * 8 + [False] * 2 + [True] * 90)
  second = np.array([False] * 8 + [True] * 2 + [True] * 90)
  comparison = measuring.paired_comparison(first, second)
  assert (comparison['wins'], comparison['losses']) == (8, 2)
  # P(X >= 8), X ~ Binomial(10, 1/2) = (45 + 10 + 1) / 1024.
  assert comparison['p_value'] == pytest.approx(56 / 1024)
  assert comparison['difference'] == pytest.approx(0.06)
  low, high = comparison['interval']
  assert low < 0.06 < high and high - low == pytest.approx(2 * 1.96 * np.sqrt(10 - 36 / 100) / 100,
                                                         rel=1e-3)
  assert measuring.paired_comparison(first, first)['p_value'] == 1.0


def test_wilson_interval_matches_the_textbook_value():
  # 81 right of 100: Wilson's 95% interval is [0.7222, 0.8749].
  low, high = measuring.accuracy_interval(np.array([True] * 81 + [False] * 19))
  assert low == pytest.approx(0.7222, abs=1e-4) and high == pytest.approx(0.8749, abs=1e-4)


def test_the_interval_holds_its_own_accuracy_at_every_size_even_at_none_and_all_right():
  # Wilson's bounds at 0 and 1 right are the accuracy itself, up to float rounding: a
  # student right on all 66 of wine's eval rows got an upper bound 1e-16 below its
  # accuracy, and the report's error bar refused the negative length, failing the run.
  for examples in range(1, 700):
    for right in sorted({0, 1, examples // 2, examples - 1, examples}):
      correct = np.array([True] * right + [False] * (examples - right))
      low, high = measuring.accuracy_interval(correct)
      assert 0 <= low <= right / examples <= high <= 1, (examples, right, low, high)


def test_the_table_text_shows_the_interval_and_the_paired_difference():
  assert report.interval_text([0.7222, 0.8749]) == '[0.722, 0.875]'
  assert report.difference_text({'difference': -0.005, 'interval': [-0.012, 0.002]}) == (
      '-0.0050 [-0.012, +0.002]')
