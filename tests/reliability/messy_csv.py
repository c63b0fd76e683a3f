"""Seeded generators of messy CSV folders, each with the verdict the preflight must give.

A case mixes up to four kinds that must run (a byte-order mark, CRLF, gzip, NaN, ...) and
at most one kind that must be refused (a ragged row, a binary file, ...). `python -m
tests.reliability.messy_csv` rewrites the catalogue in docs/bad-data-and-faults.md from
`KINDS` and the preflight's own messages; a test checks that the page matches. `--tally`
prints, per kind, how many of the 130 test cases ran and were refused.
"""

import csv
import dataclasses
import gzip
import io
import os
import random
import re
import sys
from typing import Dict, List, Optional

LABEL = 'species'
CLASSES = ('Adelie', 'Gentoo', 'Chinstrap')
PLAIN_CATEGORIES = ('Biscoe', 'Dream', 'Torgersen')
UNICODE_CATEGORIES = ('Île Biscoe', 'Dräum', 'Торгерсен', '夢島')
QUOTED_CATEGORIES = ('Biscoe, north', 'Dream\nsouth', 'the "big" one')

# kind -> (verdict, what it is), in the order the documentation lists them.
KINDS = {
    'crlf': ('runs', 'CRLF line endings (Windows)'),
    'bom': ('runs', 'a UTF-8 byte-order mark (Excel "CSV UTF-8")'),
    'quoted': ('runs', 'quoted fields holding commas, quotes and newlines'),
    'empty_cells': ('runs', 'empty cells in feature columns'),
    'unicode': ('runs', 'unicode categories'),
    'spaces_in_names': ('runs', 'column names with spaces'),
    'two_files': ('runs', 'several files with one header'),
    'gzip': ('runs', 'a gzip-compressed .csv.gz file'),
    'blank_lines': ('runs', 'blank lines'),
    'nan_inf': ('runs', 'NaN and infinity in a numeric column (read as empty, counted)'),
    'na_markers': ('runs', "pandas' missing-value markers (NA, N/A, null, ?) in a numeric column "
                   '(read as empty, counted)'),
    'empty_label': ('runs', 'rows with an empty label (left out, counted)'),
    'ragged': ('refused', 'a ragged row (one field too many)'),
    'bad_quote': ('refused', 'a stray quote inside a field'),
    'header_differs': ('refused', 'headers that differ between files'),
    'duplicate_names': ('refused', 'duplicate column names'),
    'unnamed_column': ('refused', 'a column without a name (a trailing comma)'),
    'header_only': ('refused', 'a header with no rows'),
    'empty_file': ('refused', 'an empty file'),
    'binary': ('refused', 'a binary file named .csv'),
    'latin1': ('refused', 'text that is not UTF-8 (Latin-1)'),
    'bad_gzip': ('refused', 'a .csv.gz that is not gzip'),
    'semicolon': ('refused', 'semicolons as the delimiter'),
    'tab': ('refused', 'tabs as the delimiter'),
    'missing_label': ('refused', 'no label column'),
    'all_labels_empty': ('refused', 'no row with a label'),
    'one_class': ('refused', 'a label with one value'),
    'id_label': ('refused', 'a label with a different value in every row (an ID)'),
}
RUN_KINDS = [kind for kind, (verdict, _) in KINDS.items() if verdict == 'runs']
REFUSED_KINDS = [kind for kind, (verdict, _) in KINDS.items() if verdict == 'refused']


@dataclasses.dataclass
class Case:
  """A folder's files and what the preflight must say about them."""
  kinds: List[str]
  files: Dict[str, bytes]
  refused_file: Optional[str] = None
  refused_column: Optional[str] = None
  refused_line: Optional[int] = None
  refused_phrase: Optional[str] = None
  rows: int = 0
  blanked: int = 0
  dropped: int = 0
  header: List[str] = dataclasses.field(default_factory=list)

  @property
  def refused(self) -> bool:
    return self.refused_file is not None

  def write(self, folder) -> str:
    os.makedirs(folder, exist_ok=True)
    for name, content in self.files.items():
      with open(os.path.join(folder, name), 'wb') as handle:
        handle.write(content)
    return str(folder)


def _render(header, rows, terminator='\n', delimiter=','):
  buffer = io.StringIO()
  writer = csv.writer(buffer, lineterminator=terminator, delimiter=delimiter)
  writer.writerow(header)
  writer.writerows(rows)
  return buffer.getvalue()


def make_case(seed: int, kinds: List[str], rows: Optional[int] = None) -> Case:
  """Builds the folder for `kinds` (run kinds and at most one refused kind) from `seed`.

  The species is learnable from the two measurements (three well separated clusters), so
  a folder that runs trains models that beat the majority class.
  """
  rng = random.Random(seed)
  refuse = [kind for kind in kinds if kind in REFUSED_KINDS]
  assert len(refuse) <= 1, kinds
  refuse = refuse[0] if refuse else None
  two_files = 'two_files' in kinds or refuse == 'header_differs'
  spaces = 'spaces_in_names' in kinds
  numbers = [('bill length' if spaces else 'bill_length'), ('flipper mm' if spaces else
                                                           'flipper_mm')]
  header = numbers + ['island', LABEL]
  categories = (UNICODE_CATEGORIES if 'unicode' in kinds else PLAIN_CATEGORIES) + (
      QUOTED_CATEGORIES if 'quoted' in kinds else ())
  count = rng.randint(24, 60)
  count = rows or count
  rows = []
  for index in range(count):
    label = CLASSES[index % len(CLASSES)] if index < 3 else rng.choice(CLASSES)
    cluster = CLASSES.index(label)
    rows.append([f'{rng.gauss(35 + 10 * cluster, 2):.2f}',
                 f'{rng.gauss(180 + 20 * cluster, 4):.1f}', rng.choice(categories), label])
  case = Case(kinds=sorted(kinds), files={}, header=list(header))
  if 'empty_cells' in kinds:
    for row in rng.sample(rows, 3):
      row[rng.randrange(2)] = ''
  if 'nan_inf' in kinds:
    spots = rng.sample(range(count), 3)
    for spot, text in zip(spots, ('NaN', 'inf', '-Infinity')):
      rows[spot][0] = text
    case.blanked += len(spots)
  if 'na_markers' in kinds:
    spots = rng.sample(range(count), 4)
    for spot, text in zip(spots, ('NA', 'N/A', 'null', '?')):
      rows[spot][1] = text
    case.blanked += len(spots)
  if 'empty_label' in kinds:
    for row in rng.sample(rows[3:], 2):
      row[3] = ''
  if refuse == 'one_class':
    for row in rows:
      row[3] = row[3] and 'Adelie'
  if refuse == 'id_label':
    for index, row in enumerate(rows):
      row[3] = row[3] and f'penguin-{index:04d}'
  if refuse == 'all_labels_empty':
    for row in rows:
      row[3] = ''
  case.dropped = sum(1 for row in rows if not row[3])
  case.rows = count - case.dropped

  terminator = '\r\n' if 'crlf' in kinds else '\n'
  split = count // 2 if two_files else count
  parts = [('a.csv', rows[:split])] + ([('b.csv', rows[split:])] if two_files else [])
  for position, (name, part) in enumerate(parts):
    part_header = list(header)
    if refuse == 'header_differs' and position == 1:
      part_header.append('extra')
      part = [row + ['1'] for row in part]
      case.refused_file, case.refused_column, case.refused_line = name, 'extra', 1
      case.refused_phrase = 'header differs'
    if refuse == 'duplicate_names':
      part_header[1] = part_header[0]
      case.refused_file, case.refused_column, case.refused_line = 'a.csv', part_header[0], 1
      case.refused_phrase = 'used by columns 1 and 2'
    if refuse == 'unnamed_column':
      part_header.append('')
      part = [row + [''] for row in part]
      case.refused_file, case.refused_line, case.refused_phrase = 'a.csv', 1, 'has no name'
    if refuse == 'missing_label':
      part_header[3] = 'kind'
      case.refused_file, case.refused_line = 'a.csv', 1
      case.refused_phrase = f"has no label column '{LABEL}'"
    delimiter = ','
    if refuse in ('semicolon', 'tab') and position == 0:
      delimiter = ';' if refuse == 'semicolon' else '\t'
      case.refused_file, case.refused_line = name, 1
      case.refused_phrase = f'{delimiter!r}-separated'
    text = _render(part_header, part, terminator, delimiter)
    if 'blank_lines' in kinds:
      lines = text.split(terminator)[:-1]
      lines.insert(len(lines) // 2, '')
      text = terminator.join(lines) + terminator
    if refuse == 'ragged' and position == len(parts) - 1:
      text += ','.join(['1', '2', 'Dream', 'Adelie', 'surplus']) + terminator
      case.refused_file, case.refused_line = name, text.count('\n')
      case.refused_phrase = 'has 5 fields but the header has 4'
    if refuse == 'bad_quote' and position == 0:
      text += '1,2,"Dre"am,Adelie' + terminator
      case.refused_file, case.refused_line = name, text.count('\n')
      case.refused_phrase = 'not readable as CSV'
    content = text.encode('utf-8')
    if refuse == 'latin1' and position == 0:
      content = text.encode('utf-8') + '3,4,Île,Adelie\n'.encode('latin-1')
      case.refused_file, case.refused_line = name, text.count('\n') + 1
      case.refused_phrase = 'not UTF-8'
    if 'bom' in kinds and position == 0:
      content = b'\xef\xbb\xbf' + content
    if 'gzip' in kinds and position == len(parts) - 1:
      name += '.gz'
      content = gzip.compress(content)
      if case.refused_file == name[:-3]:
        case.refused_file = name
    case.files[name] = content
  extra = {
      'header_only': ('c.csv', _render(header, []).encode(), 1, 'header but no rows'),
      'empty_file': ('c.csv', b'', None, 'is empty'),
      'binary': ('c.csv', bytes(rng.randrange(256) for _ in range(300)) + b'\x00', None,
                 'is not text'),
      'bad_gzip': ('c.csv.gz', b'not gzip at all', None, 'not a complete gzip file'),
  }
  if refuse in extra:
    name, content, line, phrase = extra[refuse]
    case.files[name] = content
    case.refused_file, case.refused_line, case.refused_phrase = name, line, phrase
  if refuse in ('one_class', 'id_label', 'all_labels_empty'):
    case.refused_file, case.refused_column = sorted(case.files)[0], LABEL
    case.refused_phrase = {'one_class': 'one value', 'id_label': 'different value in every',
                           'all_labels_empty': 'no row has'}[refuse]
  return case


def cases(count: int, seed: int = 2026) -> List[Case]:
  """`count` cases: every kind alone first, then seeded mixes of kinds."""
  rng = random.Random(seed)
  made = [make_case(seed + index, [kind]) for index, kind in enumerate(KINDS)]
  while len(made) < count:
    kinds = rng.sample(RUN_KINDS, rng.randint(1, 4))
    if rng.random() < 0.6:
      kinds.append(rng.choice(REFUSED_KINDS))
    made.append(make_case(seed + len(made), kinds))
  return made


# The catalogue in the documentation sits between these lines.
BEGIN = '<!-- messy CSV catalogue: python -m tests.reliability.messy_csv -->'
END = '<!-- end of the messy CSV catalogue -->'


def catalogue(work_dir: str) -> str:
  """The documentation's table: each kind alone, with the preflight's verdict and message."""
  from tfx_distillery.pipelines import csv_preflight  # pylint: disable=import-outside-toplevel
  lines = [BEGIN, '', '| CSV | verdict | message (file, line and column, then what to do) |',
           '|---|---|---|']
  for index, (kind, (_, description)) in enumerate(KINDS.items()):
    folder = make_case(index, [kind]).write(os.path.join(work_dir, kind))
    preflight = csv_preflight.preflight_csv(folder, LABEL)
    if preflight.refused:
      [verdict] = [verdict for verdict in preflight.verdicts
                   if verdict.status == csv_preflight.REFUSED]
      message = verdict.message.replace(folder + os.sep, '')
      shown = 'refused (exit 2)'
    else:
      message = '; '.join(note for verdict in preflight.verdicts for note in verdict.notes)
      shown = 'runs'
    message = re.sub(r'\s+', ' ', message).replace('|', '\\|') or '(nothing to say)'
    lines.append(f'| {description} | {shown} | {message} |')
  return '\n'.join(lines + ['', END])


def tally(count: int, work_dir: str) -> str:
  """Per kind: the generated cases holding it, how many ran and were refused, and how many
  raised anything but a clear refusal (a traceback a user would see)."""
  import traceback  # pylint: disable=import-outside-toplevel
  from tfx_distillery.pipelines import csv_preflight  # pylint: disable=import-outside-toplevel
  counts = {kind: [0, 0, 0] for kind in KINDS}
  for index, case in enumerate(cases(count)):
    folder = case.write(os.path.join(work_dir, str(index)))
    try:
      column = 1 if csv_preflight.preflight_csv(folder, LABEL).refused else 0
    except Exception:  # pylint: disable=broad-except
      traceback.print_exc()
      column = 2
    for kind in case.kinds:
      counts[kind][column] += 1
  lines = ['| kind | cases | ran | refused | tracebacks |', '|---|---|---|---|---|']
  for kind, (ran, refused, crashed) in counts.items():
    lines.append(f'| {kind} | {ran + refused + crashed} | {ran} | {refused} | {crashed} |')
  return '\n'.join(lines)


def main() -> None:
  import tempfile  # pylint: disable=import-outside-toplevel
  if sys.argv[1:] == ['--tally']:
    with tempfile.TemporaryDirectory() as work_dir:
      print(tally(130, work_dir))
    return
  path = os.path.join(os.path.dirname(__file__), '..', '..', 'docs', 'bad-data-and-faults.md')
  with open(path) as handle:
    text = handle.read()
  with tempfile.TemporaryDirectory() as work_dir:
    table = catalogue(work_dir)
  start, end = text.index(BEGIN), text.index(END) + len(END)
  with open(path, 'w') as handle:
    handle.write(text[:start] + table + text[end:])
  print(f'wrote the catalogue into {os.path.normpath(path)}', file=sys.stderr)


if __name__ == '__main__':
  main()
