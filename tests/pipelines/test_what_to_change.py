"""When no candidate passes, the console says which figure missed and what to change (#61):
the digits run that pushed nothing said only that nothing passed."""

from tfx_distillery.pipelines import summary
from tests.components.gate.test_parent_rule import EXAMPLES
from tests.components.gate.test_parent_rule import MAX_DROP
from tests.components.gate.test_parent_rule import TEACHER_RIGHT
from tests.components.gate.test_parent_rule import decide
from tests.components.gate.test_parent_rule import right


def table_of(models, max_model_bytes=None):
  decided = decide(models, {})
  teacher = {'format': 'saved_model', 'accuracy': TEACHER_RIGHT / EXAMPLES,
             'size_bytes': 750_000, 'latency_ms': 3.0, 'model_dir': '/models/teacher'}
  blessed = any(candidate['passed'] for candidate in decided.values())
  decision = {'blessed': blessed, 'chosen': None, 'teacher': teacher,
              'candidates': list(decided.values()), 'left_out': [], 'majority_accuracy': 0.77,
              'eval_examples': EXAMPLES, 'split': 'test', 'max_model_bytes': max_model_bytes,
              'max_accuracy_drop': MAX_DROP}
  return summary.format_table(summary.from_decision(decision, None))


def test_a_student_short_of_the_budget_names_the_drop_and_the_flags_that_move_it():
  # The teacher at 0.8925; the best candidate 0.8650, 0.0275 below it.
  table = table_of([('student', right(1730), 730_000),
                    ('student_full_integer', right(1700), 37_000)])
  assert 'nothing was pushed (exit status 3)' in table
  assert ("what missed: accuracy. The best candidate, student, is 0.0275 below the teacher's "
          '0.8925 on test; the budget is 0.0100') in table
  assert '--max-accuracy-drop 0.028' in table
  assert '--student-train-steps' in table and '--student-shares' in table
  assert 'majority class (0.7700). No' not in table


def test_candidates_no_better_than_the_majority_class_are_told_to_train_longer():
  table = table_of([('student', right(1540), 730_000)])
  assert 'what missed: the lead over the majority class (0.7700)' in table
  assert '--train-steps' in table


def test_candidates_too_large_for_max_model_bytes_say_so():
  table = table_of([('student', right(1785), 730_000, 10_000)], max_model_bytes=10_000)
  assert 'what missed: size. The smallest candidate, student, is 730000 bytes' in table
  assert 'what missed: accuracy' not in table


def test_a_run_that_pushed_prints_no_advice():
  table = table_of([('student', right(1785), 730_000)])
  assert 'what missed' not in table and 'what to change' not in table


def test_a_test_split_too_small_for_the_budget_says_it_cannot_resolve_it():
  # #84: a 178-row table left 32 test rows; one miss is 0.031, three times the budget.
  teacher = {'format': 'saved_model', 'accuracy': 31 / 32, 'size_bytes': 750_000,
             'latency_ms': 3.0, 'model_dir': '/models/teacher'}
  student = {'name': 'student', 'accuracy': 30 / 32, 'size_bytes': 5_000, 'latency_ms': 1.0,
             'passed': False, 'reasons': ['0.0312 below the teacher'], 'format': 'saved_model',
             'accuracy_drop': 1 / 32, 'model_dir': '/models/student'}
  decision = {'blessed': False, 'chosen': None, 'teacher': teacher, 'candidates': [student],
              'left_out': [], 'majority_accuracy': 0.5, 'eval_examples': 32, 'split': 'test',
              'max_model_bytes': None, 'max_accuracy_drop': 0.01}
  table = summary.format_table(summary.from_decision(decision, None))
  assert ("what missed: resolution. The gate's test split has 32 examples, so the smallest "
          'accuracy difference it can show is one example, 0.0312: more than '
          'max_accuracy_drop 0.0100') in table
  assert 'this split cannot resolve the budget' in table
  assert ('more rows (at least 100 in the test split for one example to fit in 0.01), a '
          'larger test share of the data, or a larger budget (--max-accuracy-drop 0.0312 or '
          'more)') in table
  # Enough rows for the budget: the accuracy line alone.
  assert 'resolution' not in table_of([('student', right(1730), 730_000)])
