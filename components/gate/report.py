"""The run report: one HTML page and one PNG comparing teacher and candidates.

Everything that comes from data or parameters (model names, reasons, paths) is
HTML-escaped.
"""

import html
import os
from typing import Any, Dict, Optional, Sequence

import tensorflow as tf

from tfx_distillery.components.common import measuring

HTML_FILE_NAME = 'report.html'
PNG_FILE_NAME = 'report.png'


def interval_text(interval: Optional[Sequence[float]]) -> str:
  """`[0.881, 0.907]`, or `-` for a decision written before intervals were."""
  return f'[{interval[0]:.3f}, {interval[1]:.3f}]' if interval else '-'


def difference_text(comparison: Optional[dict]) -> str:
  """`-0.0050 [-0.012, +0.002]`: a candidate's paired difference to the teacher."""
  if not comparison:
    return '-'
  low, high = comparison['interval']
  return f'{comparison["difference"]:+.4f} [{low:+.3f}, {high:+.3f}]'


def model_format(figures: Dict[str, Any]) -> str:
  """`tflite (full_integer)` for a quantized candidate, else its format alone."""
  if figures.get('quantization'):
    kind = 'tflite, raw columns' if figures['format'] == 'tflite_raw' else figures['format']
    return f'{kind} ({figures["quantization"]})'
  return figures['format']


# Where a point's name may go, in points from the point, nearest first: beside it, then
# above and below, then further out; the first spot that overlaps no other name and stays
# inside the axes is taken.
_LABEL_OFFSETS = [(dx * scale, dy * scale) for scale in (1, 2, 3, 4)
                  for dx, dy in ((9, 4), (-9, 4), (9, -12), (-9, -12), (0, 12), (0, -18))]
# Room around the candidates, as a share of the span the axes show.
_MARGIN = 0.12


def _interval(figures: Dict[str, Any]) -> Sequence[float]:
  interval = figures.get('accuracy_interval')
  return interval if interval else (figures['accuracy'], figures['accuracy'])


def layout(decision: Dict[str, Any]):
  """The report's figure: accuracy against size and against latency, and each point's name.

  Each point carries its 95% interval (the decision's Wilson interval). The accuracy axis
  zooms to the points' intervals and the gate's floor; the majority class is a line where it
  falls inside, else named at the axes' lower edge. Names are placed where they overlap no
  other name and stay inside the axes.

  Returns:
    (figure, {axis: [each name's Text]}), drawn once so that the names' extents are final.
  """
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')  # No display: write files only.
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  figure, (size_axis, latency_axis) = pyplot.subplots(1, 2, figsize=(11, 4.8))
  teacher = decision['teacher']
  rows = [('teacher', teacher, 'black')] + [
      (candidate['name'], candidate, 'tab:green' if candidate['passed'] else 'tab:red')
      for candidate in decision['candidates']]
  floor = teacher['accuracy'] - decision['max_accuracy_drop']
  majority = decision['majority_accuracy']
  lows = [_interval(figures)[0] for _, figures, _ in rows] + [floor]
  highs = [_interval(figures)[1] for _, figures, _ in rows] + [floor]
  span = max(max(highs) - min(lows), 0.01)
  bottom, top = min(lows) - _MARGIN * span, max(highs) + 2 * _MARGIN * span
  names, bars = {}, {}
  for axis, key, label in ((size_axis, 'size_bytes', 'size (bytes, log scale)'),
                           (latency_axis, 'latency_ms', 'batch-1 latency (ms, log scale)')):
    for name, figures, colour in rows:
      low, high = _interval(figures)
      accuracy = figures['accuracy']
      axis.errorbar(figures[key], accuracy, yerr=[[accuracy - low], [high - accuracy]],
                    fmt='*' if name == decision.get('chosen') else 'o', color=colour,
                    markersize=13 if name == decision.get('chosen') else 9, capsize=4,
                    elinewidth=1.2)
    axis.axhline(floor, linestyle='--', color='grey', linewidth=1)
    axis.set_ylim(bottom, top)
    if bottom <= majority <= top:
      axis.axhline(majority, linestyle=':', color='grey', linewidth=1)
    else:
      # Off the zoomed axis: named at the edge it lies beyond.
      axis.annotate(f'majority class {majority:.3f} ({"below" if majority < bottom else "above"})',
                    xy=(0.01, 0.015 if majority < bottom else 0.94), xycoords='axes fraction',
                    fontsize=8, color='dimgrey')
    axis.set_xscale('log')
    values = [figures[key] for _, figures, _ in rows]
    # A decade's share either side, so that names beside the outermost points fit.
    axis.set_xlim(min(values) / 10 ** (0.35 + 0.2 * _decades(values)),
                  max(values) * 10 ** (0.35 + 0.2 * _decades(values)))
    axis.set_xlabel(label)
    axis.set_ylabel(f"{decision.get('split', 'eval')} accuracy (95% interval)")
    names[axis] = [(name, (figures[key], figures['accuracy'])) for name, figures, _ in rows]
    bars[axis] = [((figures[key], figures['accuracy']), _interval(figures))
                  for _, figures, _ in rows]
  size_axis.set_title('accuracy vs size (dashed: gate floor, dotted: majority class)',
                      fontsize=9)
  latency_axis.set_title('accuracy vs latency (green passed, red rejected, * chosen)',
                         fontsize=9)
  figure.tight_layout()
  figure.canvas.draw()
  renderer = figure.canvas.get_renderer()
  placed = {}
  for axis, points in names.items():
    inside = axis.get_window_extent(renderer)
    # Each point's marker and interval bar, which no name may cover either.
    taken, placed[axis] = [_bar_box(axis, key_point, interval)
                           for key_point, interval in bars[axis]], []
    for name, point in points:
      for offset_x, offset_y in _LABEL_OFFSETS:
        # Further from its point than the first spot: a thin line says whose name it is.
        leader = ({} if (offset_x, offset_y) == _LABEL_OFFSETS[0] else
                  {'arrowprops': {'arrowstyle': '-', 'color': 'grey', 'linewidth': 0.6,
                                  'shrinkA': 1, 'shrinkB': 5}})
        text = axis.annotate(name, point, textcoords='offset points',
                             xytext=(offset_x, offset_y), fontsize=9, va='center',
                             ha='left' if offset_x > 0 else 'right' if offset_x < 0 else 'center',
                             **leader)
        box = name_box(text, renderer)
        fits = (box.x0 >= inside.x0 and box.x1 <= inside.x1 and box.y0 >= inside.y0
                and box.y1 <= inside.y1)
        if fits and not any(box.overlaps(other) for other in taken):
          break
        if (offset_x, offset_y) != _LABEL_OFFSETS[-1]:
          text.remove()
      taken.append(box)
      placed[axis].append(text)
  return figure, placed


def name_box(text, renderer):
  """Where a point's name is drawn on the screen: the text alone, not its leader line."""
  from matplotlib import text as text_lib  # pylint: disable=g-import-not-at-top
  text.update_positions(renderer)  # An annotation finds its place from its point and offset.
  return text_lib.Text.get_window_extent(text, renderer)


def _bar_box(axis, point, interval):
  """A point's marker and interval bar on the screen: what a name must not cover."""
  from matplotlib import transforms  # pylint: disable=g-import-not-at-top
  (x, low), (_, high) = axis.transData.transform([(point[0], interval[0]),
                                                  (point[0], interval[1])])
  half_width = 8  # pixels: the marker's radius and the bar's caps
  return transforms.Bbox([[x - half_width, low - half_width],
                          [x + half_width, high + half_width]])


def _decades(values: Sequence[float]) -> float:
  import math  # pylint: disable=g-import-not-at-top
  return math.log10(max(values) / min(values)) if min(values) > 0 else 1.0


def _plot(decision: Dict[str, Any], path: str) -> None:
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  figure, _ = layout(decision)
  temporary = path + '.tmp.png'
  figure.savefig(temporary, dpi=110)
  pyplot.close(figure)
  tf.io.gfile.rename(temporary, path, overwrite=True)


def render_html(decision: Dict[str, Any], pushed_destination: Optional[str]) -> str:
  """The report page; every value from data or parameters is escaped."""
  escape = lambda value: html.escape(str(value), quote=True)  # pylint: disable=unnecessary-lambda-assignment
  if decision['blessed']:
    verdict = f'Blessed: <b>{escape(decision["chosen"])}</b>.'
  else:
    verdict = '<b>No model passed the gate; nothing was pushed.</b>'
  if pushed_destination:
    pushed = f'Pushed to <code>{escape(pushed_destination)}</code>.'
  elif decision['blessed']:
    pushed = 'Pusher runs after the gate; see the pipeline summary for the destination.'
  else:
    pushed = 'Nothing was pushed.'
  limit = decision.get('max_model_bytes')
  split = decision.get('split', 'eval')
  split_note = ('' if split == 'test' else
                f'<p><b>These examples have no held-out test split, so the gate decided on '
                f'{escape(split)}</b>, the split that tuning and the sparsity search chose by; '
                'add a test split to ExampleGen for an unbiased figure.</p>')
  rows = []
  teacher = decision['teacher']
  rows.append(f'<tr><td>teacher</td><td>{escape(teacher["format"])}</td>'
              f'<td>{teacher["accuracy"]:.4f}</td>'
              f'<td>{interval_text(teacher.get("accuracy_interval"))}</td><td>-</td>'
              f'<td>-</td><td>{teacher["size_bytes"]}</td>'
              f'<td>{teacher["latency_ms"]:.3f}</td><td>-</td><td>-</td><td>baseline</td>'
              '<td></td></tr>')
  device_note = ''
  chosen = next((candidate for candidate in decision['candidates']
                 if candidate['name'] == decision.get('chosen')), None)
  if chosen and chosen.get('folder'):
    device_note = (
        f'<p>What a device downloads: <code>model_raw.tflite</code> alone, '
        f'{chosen["size_bytes"]} bytes (transform inside; it runs with LiteRT and numpy), '
        f'against the float SavedModel folder of the teacher, {teacher["size_bytes"]} bytes '
        f'({teacher["size_bytes"] / max(1, chosen["size_bytes"]):.1f}x). Batch-1 latency on '
        f'raw columns {chosen["latency_ms"]:.3f} ms, against {teacher["latency_ms"]:.3f} ms for '
        'the SavedModel on one serialized raw example.</p>')
  for candidate in decision['candidates']:
    status = ('chosen' if candidate['name'] == decision.get('chosen') else
              'passed' if candidate['passed'] else 'rejected')
    # Which rule passed it: the budget, or the parent rule (within noise of its parent).
    rule = ' (parent rule)' if candidate.get('passed_by') == 'parent' else ''
    notes = ([candidate['parent_rule']] if rule else []) + candidate['reasons']
    rows.append(
        f'<tr class="{status}"><td>{escape(candidate["name"])}</td>'
        f'<td>{escape(model_format(candidate))}</td><td>{candidate["accuracy"]:.4f}</td>'
        f'<td>{interval_text(candidate.get("accuracy_interval"))}</td>'
        f'<td>{candidate["accuracy_drop"]:+.4f}</td>'
        f'<td>{difference_text(candidate.get("versus_teacher"))}</td>'
        f'<td>{candidate["size_bytes"]}</td>'
        f'<td>{candidate["latency_ms"]:.3f}</td>'
        f'<td>{candidate["folder"]["size_bytes"] if candidate.get("folder") else "-"}</td>'
        f'<td>{format(candidate["folder"]["latency_ms"], ".3f") if candidate.get("folder") else "-"}</td>'
        f'<td>{status}{rule}</td><td>{escape("; ".join(notes))}</td></tr>')
  for left_out in decision.get('left_out', []):
    rows.append(f'<tr class="left-out"><td>{escape(left_out["name"])}</td><td>-</td><td>-</td>'
                '<td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td>'
                '<td>not a candidate</td>'
                f'<td>{escape(left_out["reason"])}</td></tr>')
  sparsity_rows = [
      f'<tr><td>{escape(candidate["name"])}</td><td>{escape(layer)}</td><td>{value:.3f}</td></tr>'
      for candidate in decision['candidates']
      for layer, value in sorted((candidate.get('layer_sparsity') or {}).items())]
  sparsity_table = ('' if not sparsity_rows else
                    '<h2>Per-layer sparsity of the pruned candidates</h2>\n<table><tr><th>model'
                    '</th><th>weight</th><th>sparsity</th></tr>\n' + '\n'.join(sparsity_rows)
                    + '\n</table>')
  # The built-in student's plan: one per run (the Pruner and the Quantizer carry the
  # student's), shown from the first candidate that has it.
  plan = next((candidate['feature_plan'] for candidate in decision['candidates']
               if candidate.get('feature_plan')), None)
  plan_table = ('' if not plan else
                '<h2>What the built-in student made of each feature</h2>\n<table><tr><th>'
                'feature</th><th>encoded as</th></tr>\n' + '\n'.join(
                    f'<tr><td>{escape(name)}</td><td>{escape(what)}</td></tr>'
                    for name, what in sorted(plan.items())) + '\n</table>')
  return f'''<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>tfx-distillery report</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}} td:first-child,td:last-child{{text-align:left}}
tr.chosen{{background:#e6ffe6}} tr.rejected{{background:#ffecec}}</style></head>
<body><h1>tfx-distillery report</h1>
<p>{verdict} {pushed}</p>
<p>Gate: accuracy drop at most {decision["max_accuracy_drop"]:.4f} against the teacher
{f"and size at most {int(limit)} bytes" if limit is not None else "(no size limit)"}, on
{decision["eval_examples"]} {escape(decision.get("split", "eval"))} examples (majority class {decision["majority_accuracy"]:.4f}).</p>
{split_note}{device_note}
<p>Accuracy intervals are Wilson's 95%; "vs teacher" is the paired difference on the same
examples with its 95% interval. A candidate whose lead over the majority class fails
McNemar's test at 5% is not blessed.</p>
<table><tr><th>model</th><th>format</th><th>accuracy</th><th>95% interval</th><th>drop</th>
<th>vs teacher (95% interval)</th><th>bytes</th>
<th>latency (ms)</th><th>folder bytes</th><th>folder latency (ms)</th><th>gate</th><th>why</th></tr>
{chr(10).join(rows)}
</table>
{sparsity_table}
{plan_table}
<p><img src="{PNG_FILE_NAME}" alt="accuracy vs size and latency"></p>
</body></html>
'''


def write(decision: Dict[str, Any], output_dir: str,
          pushed_destination: Optional[str] = None) -> str:
  """Writes report.html and report.png into `output_dir`; returns the HTML path."""
  tf.io.gfile.makedirs(output_dir)
  _plot(decision, os.path.join(output_dir, PNG_FILE_NAME))
  html_path = os.path.join(output_dir, HTML_FILE_NAME)
  measuring.write_atomically(html_path, render_html(decision, pushed_destination))
  return html_path
