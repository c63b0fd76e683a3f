"""The report's plot shows the decision: each point with its 95% interval, axes zoomed to
the candidates, the majority class drawn or named at the edge, and no name over another or
cut off."""

import itertools
import os

import pytest

from tfx_distillery.components.gate import report


def point(name, accuracy, size_bytes, latency_ms, passed=True, half_width=0.014):
  return {'name': name, 'accuracy': accuracy, 'size_bytes': size_bytes,
          'latency_ms': latency_ms, 'passed': passed, 'format': 'saved_model', 'reasons': [],
          'accuracy_drop': 0.892 - accuracy,
          'accuracy_interval': [accuracy - half_width, accuracy + half_width]}


def demo_decision(majority=0.765):
  """`make demo`'s decision (taxi, 1,000 test rows): teacher and student at one latency."""
  teacher = point('teacher', 0.892, 1_835_338, 1.95)
  candidates = [point('student', 0.888, 748_077, 1.93),
                point('student_full_integer', 0.889, 38_456, 0.086)]
  return {'teacher': teacher, 'candidates': candidates, 'chosen': 'student_full_integer',
          'max_accuracy_drop': 0.01, 'majority_accuracy': majority, 'split': 'test'}


def crowded_decision():
  """Five candidates within a few bytes, milliseconds and points of each other."""
  teacher = point('teacher', 0.80, 40_000, 0.20)
  candidates = [point('student', 0.795, 31_072, 0.19),
                point('student_full_integer', 0.797, 12_056, 0.18),
                point('pruned', 0.794, 31_072, 0.19, passed=False),
                point('pruned_full_integer', 0.793, 12_048, 0.18, passed=False),
                point('scratch', 0.790, 12_060, 0.18, passed=False)]
  return {'teacher': teacher, 'candidates': candidates, 'chosen': 'student_full_integer',
          'max_accuracy_drop': 0.01, 'majority_accuracy': 0.785, 'split': 'test'}


@pytest.fixture(name='laid_out')
def laid_out_fixture():
  figures = []

  def lay_out(decision):
    figure, names = report.layout(decision)
    figures.append(figure)
    return figure, names

  yield lay_out
  from matplotlib import pyplot  # pylint: disable=import-outside-toplevel
  for figure in figures:
    pyplot.close(figure)


@pytest.mark.parametrize('decision', [demo_decision(), crowded_decision()],
                         ids=['demo', 'crowded'])
def test_no_name_overlaps_another_or_leaves_its_axes(laid_out, decision):
  figure, names = laid_out(decision)
  renderer = figure.canvas.get_renderer()
  every = ['teacher'] + [candidate['name'] for candidate in decision['candidates']]
  for axis, texts in names.items():
    assert [text.get_text() for text in texts] == every
    inside = axis.get_window_extent(renderer)
    boxes = [report.name_box(text, renderer) for text in texts]
    for text, box in zip(texts, boxes):
      assert (box.x0 >= inside.x0 and box.x1 <= inside.x1 and box.y0 >= inside.y0
              and box.y1 <= inside.y1), (text.get_text(), box, inside)
    for (one, first), (other, second) in itertools.combinations(zip(texts, boxes), 2):
      assert not first.overlaps(second), (one.get_text(), other.get_text())
  # Nor the figure's edge: every title and axis label within the image.
  whole = figure.bbox
  for axis in names:
    for text in (axis.title, axis.xaxis.label, axis.yaxis.label):
      box = text.get_window_extent(renderer)
      assert box.x0 >= whole.x0 and box.x1 <= whole.x1 and box.y1 <= whole.y1, text


def test_each_point_carries_its_interval_and_the_axes_zoom_to_them(laid_out):
  decision = demo_decision()
  figure, names = laid_out(decision)
  del figure
  points = [decision['teacher'], *decision['candidates']]
  for axis in names:
    bars = axis.containers
    assert len(bars) == len(points)
    for bar, figures in zip(bars, points):
      [segments] = bar.lines[2]
      [(_, low), (_, high)] = segments.get_segments()[0]
      assert (low, high) == pytest.approx(tuple(figures['accuracy_interval']))
    bottom, top = axis.get_ylim()
    floor = decision['teacher']['accuracy'] - decision['max_accuracy_drop']
    lowest = min(figures['accuracy_interval'][0] for figures in points)
    highest = max(figures['accuracy_interval'][1] for figures in points)
    assert bottom <= min(lowest, floor) and top >= highest
    # Zoomed: the candidates' span fills most of the axis, not 0.76 to 0.90.
    assert (highest - lowest) / (top - bottom) > 0.6
    # The majority class (0.765) lies below the zoomed axis: named at its edge, not drawn.
    notes = [text.get_text() for text in axis.texts]
    assert 'majority class 0.765 (below)' in notes
    assert [line.get_ydata()[0] for line in axis.lines if line.get_linestyle() == ':'] == []


def test_a_majority_class_inside_the_zoom_is_drawn_as_a_line(laid_out):
  decision = demo_decision(majority=0.88)
  _, names = laid_out(decision)
  for axis in names:
    assert [line.get_ydata()[0] for line in axis.lines
            if line.get_linestyle() == ':'] == [0.88]
    assert not any(text.get_text().startswith('majority class') for text in axis.texts)


def test_a_candidate_right_on_every_row_is_drawn_with_its_interval(tmp_path):
  # wine's 66 eval rows: a student right on all of them, its interval from the gate's own
  # measuring (the run failed on it: a bar of length -1e-16).
  import numpy as np  # pylint: disable=import-outside-toplevel
  from tfx_distillery.components.common import measuring  # pylint: disable=import-outside-toplevel
  decision = demo_decision()
  for figures, right in zip([decision['teacher'], *decision['candidates']], (66, 66, 65)):
    figures['accuracy'] = right / 66
    figures['accuracy_interval'] = measuring.accuracy_interval(
        np.array([True] * right + [False] * (66 - right)))
  report.write({**decision, 'blessed': True, 'left_out': [], 'eval_examples': 66,
                'label_key': 'cultivar_xf'}, str(tmp_path))
  assert os.path.getsize(tmp_path / report.PNG_FILE_NAME) > 10_000


def test_the_png_is_written_whole_beside_the_html(tmp_path):
  report.write({**demo_decision(), 'blessed': True, 'left_out': [], 'eval_examples': 1000,
                'label_key': 'tips_xf'}, str(tmp_path))
  assert os.path.getsize(tmp_path / report.PNG_FILE_NAME) > 10_000
  assert not list(tmp_path.glob('*.tmp*'))


def test_the_report_shows_what_the_builtin_student_made_of_each_feature():
  """#84: the built-in student's plan, carried on the model, is shown once, escaped."""
  decision = demo_decision()
  decision.update({'blessed': True, 'eval_examples': 1000, 'left_out': []})
  for candidate in decision['candidates']:
    candidate['versus_teacher'] = None
    candidate['feature_plan'] = {'trip_miles_xf': 'number',
                                 'pickup_census_tract_xf': 'number',
                                 'payment_type_xf': '1010 ids, embedded 8',
                                 'company<xf>': 'left out: a string with no vocabulary'}
  decision['teacher'].update(format='saved_model')
  page = report.render_html(decision, None)
  assert page.count('What the built-in student made of each feature') == 1
  assert '<tr><td>payment_type_xf</td><td>1010 ids, embedded 8</td></tr>' in page
  assert '<td>company&lt;xf&gt;</td>' in page
  for candidate in decision['candidates']:
    del candidate['feature_plan']
  assert 'built-in student' not in report.render_html(decision, None)
