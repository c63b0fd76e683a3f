"""A check of a folder of CSV files before any component runs, and the copy ExampleGen reads.

Spreadsheets and exports write CSV files in many ways. CsvExampleGen takes some of them
as they are and turns others into a failure deep in the run (a byte-order mark becomes
part of the first column's name; NaN reaches the int8 conversion). `preflight_csv` reads
every file with the standard library's `csv` parser, row by row (memory does not grow
with the rows), and gives one verdict per file:

* runs: CRLF line endings, a UTF-8 byte-order mark, quoted fields with commas or
  newlines, empty feature cells, unicode values, column names with spaces, several files
  with one header, gzip-compressed `.csv.gz` files. NaN, infinity and pandas' missing-value
  markers (`NA`, `N/A`, `null`, `?` and the like) in a numeric column are read as empty
  cells (the transform fills them in like any other missing value), and rows without a
  label are left out; both are counted. A column is numeric when every other value in
  the folder is a number; `column_kinds` says which columns are numbers and which are
  categories, and `mostly_numbers` names a text column whose values are mostly numbers.
* refused, naming the file, the line and the column, and what to do: a file that is not
  UTF-8 text, a delimiter other than a comma, a column without a name, a duplicate column
  name, a missing label column, a ragged row, a header with no rows, headers that differ
  between files, a label with one value, or a label with a different value in every row
  (an ID, not a class).

`stage` then reads the files again, row by row, and writes what runs as plain UTF-8 CSV
under the pipeline root, in a folder named by the content of the inputs, so that a rerun
on the same files reuses the same folder (and ExampleGen's cache) and a changed file
gets a new one.
"""

import csv
import dataclasses
import gzip
import hashlib
import json
import math
import os
import shutil
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

RUNS = 'runs'
REFUSED = 'refused'
NUMBER = 'number'
CATEGORY = 'category'
SUFFIXES = ('.csv', '.csv.gz')
# Delimiters that exports use instead of commas; CsvExampleGen reads commas only.
OTHER_DELIMITERS = (';', '\t', '|')
BYTE_ORDER_MARK = b'\xef\xbb\xbf'
MANIFEST_FILE_NAME = 'inputs.json'
# Bumped when staging writes differently, so an old staged copy is not reused.
STAGING_VERSION = '2'
# pandas' default missing-value markers (`pandas.read_csv`'s na_values) that `float`
# does not already read as NaN, and `?`, which exports also write.
MISSING_MARKERS = frozenset(('#N/A', '#N/A N/A', '#NA', '-1.#IND', '-1.#QNAN', '1.#IND',
                             '1.#QNAN', '<NA>', 'N/A', 'NA', 'NULL', 'None', 'n/a', 'null',
                             '?'))
# A text column with at least this share of numbers is named: likely one bad cell.
MOSTLY_NUMBERS_SHARE = 0.5
# Distinct label values counted; more is no classification label.
MAX_LABEL_VALUES = 10_000
DIGEST_CHUNK_BYTES = 1 << 20


class CsvRefused(ValueError):
  """At least one file can not run; the message has one line per refused file."""

  def __init__(self, verdicts: Sequence['FileVerdict']):
    self.verdicts = [verdict for verdict in verdicts if verdict.status == REFUSED]
    super().__init__('\n'.join(verdict.message for verdict in self.verdicts))


@dataclasses.dataclass
class FileVerdict:
  """What the preflight found in one file.

  Attributes:
    path: The file.
    status: `runs` or `refused`.
    message: For a refused file, the file, line and column and what to do; for a file
      that runs, what was handled (empty when nothing was).
    line: The line of the problem (1 is the header), when there is one.
    column: The column of the problem, when there is one.
    rows: Data rows that go on to ExampleGen.
    dropped_rows: Rows left out because their label was empty.
    blanked_cells: Per column, NaN, infinite or missing-marker cells read as empty.
    notes: What was handled, one phrase each.
  """
  path: str
  status: str = RUNS
  message: str = ''
  line: Optional[int] = None
  column: Optional[str] = None
  rows: int = 0
  dropped_rows: int = 0
  blanked_cells: Dict[str, int] = dataclasses.field(default_factory=dict)
  notes: List[str] = dataclasses.field(default_factory=list)

  def refuse(self, what: str, line: Optional[int] = None, column: Optional[str] = None):
    self.status = REFUSED
    self.line = line
    self.column = column
    where = self.path + (f', line {line}' if line is not None else '') + (
        f', column {column!r}' if column is not None else '')
    self.message = f'{where}: {what}'
    return self


@dataclasses.dataclass
class ColumnCounts:
  """What one pass over a column found, in one file or (summed) in the folder."""
  values: int = 0  # Non-empty cells.
  numbers: int = 0  # Cells `float` reads (NaN and infinity included).
  non_finite: int = 0  # NaN and infinity.
  markers: int = 0  # Missing-value markers.
  first_text: Optional[Tuple[str, str, int]] = None  # (value, file, line) of the first non-number.

  def add(self, other: 'ColumnCounts') -> None:
    self.values += other.values
    self.numbers += other.numbers
    self.non_finite += other.non_finite
    self.markers += other.markers
    self.first_text = self.first_text or other.first_text

  @property
  def is_number(self) -> bool:
    """Every value is a number once missing markers are set aside (and there is one)."""
    return self.numbers > 0 and self.numbers + self.markers == self.values


@dataclasses.dataclass
class Preflight:
  """The verdicts for a folder, and what `stage` needs to write the rows that run.

  Attributes:
    data_root: The folder checked.
    label_column: The label column.
    verdicts: One per `.csv` or `.csv.gz` file, sorted by path.
    ignored: Files in the folder that are neither, which ExampleGen will not read.
    header: The columns every file shares (empty when refused before it was known).
    digest: Content digest of the files, the label column and the staging version.
    file_digests: Per file name, the digest of its bytes.
    column_kinds: Per column, `number` or `category`, as ExampleGen will read it.
    mostly_numbers: Text columns whose values are mostly numbers:
      (column, share of numbers, first non-number, its file, its line).
  """
  data_root: str
  label_column: str
  verdicts: List[FileVerdict]
  ignored: List[str]
  header: List[str]
  digest: str
  file_digests: Dict[str, str]
  column_kinds: Dict[str, str] = dataclasses.field(default_factory=dict)
  mostly_numbers: List[Tuple[str, float, str, str, int]] = dataclasses.field(
      default_factory=list)

  @property
  def refused(self) -> bool:
    return any(verdict.status == REFUSED for verdict in self.verdicts)

  def raise_if_refused(self) -> None:
    if self.refused:
      raise CsvRefused(self.verdicts)

  def stage(self, staging_root: str) -> str:
    """Writes the copy CsvExampleGen reads (see the module's `stage`); returns its folder."""
    return stage(self, staging_root)


def list_files(data_root: str) -> Tuple[List[str], List[str]]:
  """The `.csv`/`.csv.gz` files directly inside `data_root`, and the other files, sorted."""
  names = sorted(name for name in os.listdir(data_root)
                 if os.path.isfile(os.path.join(data_root, name)) and not name.startswith('.'))
  data = [os.path.join(data_root, name) for name in names if name.lower().endswith(SUFFIXES)]
  others = [name for name in names if not name.lower().endswith(SUFFIXES)]
  return data, others


def _file_digest(path: str) -> str:
  digest = hashlib.sha256()
  with open(path, 'rb') as handle:
    for chunk in iter(lambda: handle.read(DIGEST_CHUNK_BYTES), b''):
      digest.update(chunk)
  return digest.hexdigest()


class _Unreadable(Exception):
  """The bytes of a file can not be read as UTF-8 CSV text; carries the refusal."""

  def __init__(self, what: str, line: Optional[int] = None):
    super().__init__(what)
    self.what = what
    self.line = line


def _text_lines(path: str, verdict: FileVerdict) -> Iterator[str]:
  """The file's lines as text, decompressed and without a byte-order mark, one at a time.

  Raises:
    _Unreadable: for a broken gzip file, NUL bytes or bytes that are not UTF-8.
  """
  compressed = path.lower().endswith('.gz')
  opener = gzip.open if compressed else open
  with opener(path, 'rb') as handle:
    if compressed:
      verdict.notes.append('decompressed (gzip)')
    number = 0
    try:
      for raw in handle:
        number += 1
        if number == 1 and raw.startswith(BYTE_ORDER_MARK):
          raw = raw[len(BYTE_ORDER_MARK):]
          verdict.notes.append('UTF-8 byte-order mark removed from the first column name')
        if b'\x00' in raw:
          raise _Unreadable('is not text: it holds NUL bytes (a binary file, or UTF-16 '
                            'text); give a CSV file saved as UTF-8.', line=number)
        try:
          text = raw.decode('utf-8')
        except UnicodeDecodeError as error:
          # A binary file fails here too; a NUL byte further on says it is not text at all.
          for later, rest in enumerate(handle, start=number + 1):
            if b'\x00' in rest:
              raise _Unreadable('is not text: it holds NUL bytes (a binary file, or UTF-16 '
                                'text); give a CSV file saved as UTF-8.', line=later) from error
          raise _Unreadable(f'is not UTF-8 text: byte 0x{raw[error.start]:02x} can not be '
                            'read; save the file as "CSV UTF-8".', line=number) from error
        yield text
    except (OSError, EOFError) as error:
      if not compressed:
        raise
      raise _Unreadable(f'is named .gz but is not a complete gzip file ({error}); compress '
                        'it with gzip, or name it .csv if it is plain text.') from error


def _check_header(header: List[str], label_column: str, verdict: FileVerdict) -> bool:
  if len(header) == 1:
    for delimiter in OTHER_DELIMITERS:
      if delimiter in header[0]:
        verdict.refuse(f'the header is one column holding {delimiter!r}: the file is '
                       f'{delimiter!r}-separated, and CsvExampleGen reads commas only; save '
                       'it with commas as the delimiter.', line=1)
        return False
  for position, name in enumerate(header, start=1):
    if not name.strip():
      verdict.refuse(f'column {position} has no name; give every column a name in the '
                     'header (a trailing comma makes an unnamed column).', line=1)
      return False
  seen = {}
  for position, name in enumerate(header, start=1):
    if name in seen:
      verdict.refuse(f'the name is used by columns {seen[name]} and {position}; give each '
                     'column its own name.', line=1, column=name)
      return False
    seen[name] = position
  if label_column is not None and label_column not in header:
    verdict.refuse(f'has no label column {label_column!r}; its columns are '
                   f'{", ".join(header)}. Give --label one of them.', line=1)
    return False
  return True


def _rows(path: str, label_column: str, verdict: FileVerdict,
          expected_header: Optional[List[str]] = None) -> Iterator[Tuple[int, List[str]]]:
  """Yields the header (line 1) and then each data row with its line, checked as read.

  Raises:
    _Unreadable: with the refusal, for anything that stops the file from running.
  """
  reader = csv.reader(_text_lines(path, verdict), strict=True)
  try:
    header = next(reader, None)
    if header is None:
      raise _Unreadable('is empty; expected a header row'
                        + (f' with the label column {label_column!r}' if label_column else '')
                        + ', then rows.')
    if expected_header is None and not _check_header(header, label_column, verdict):
      return
    yield 1, header
    rows = 0
    for row in reader:
      if not row or all(not value.strip() for value in row) and len(row) == 1:
        continue  # A blank line.
      if len(row) != len(header):
        if len(row) > len(header):
          what, column = (f'field {len(header) + 1} ({row[len(header)]!r}) has no column',
                          None)
        else:
          what, column = 'the row ends before this column', header[len(row)]
        verdict.refuse(f'the row has {len(row)} fields but the header has {len(header)}: '
                       f'{what} (a missing or extra comma, or a comma inside an unquoted '
                       'value); fix the row, or quote the value.', line=reader.line_num,
                       column=column)
        return
      rows += 1
      yield reader.line_num, row
  except csv.Error as error:
    raise _Unreadable(f'is not readable as CSV ({error}); check the quoting on that line.',
                      line=reader.line_num) from error
  if not rows:
    raise _Unreadable('has a header but no rows; add rows, or remove the file from the '
                      'folder.', line=1)


def _is_number(value: str) -> bool:
  try:
    float(value)
  except ValueError:
    return False
  return True


@dataclasses.dataclass
class _FileCounts:
  """One file's first pass: per column counts, and the label's values."""
  columns: List[ColumnCounts]
  rows: int = 0
  empty_labels: int = 0
  label_values: Dict[str, int] = dataclasses.field(default_factory=dict)


def _count(path: str, label_column: str, verdict: FileVerdict,
           first_header: Optional[List[str]], first_path: Optional[str]
           ) -> Optional[Tuple[List[str], _FileCounts]]:
  """Reads a file once, row by row; returns its header and counts, or None when refused."""
  rows = _rows(path, label_column, verdict)
  try:
    first = next(rows, None)
    if first is None:
      return None
    header = first[1]
    if first_header is not None and header != first_header:
      differences = [name for name in header if name not in first_header] + [
          name for name in first_header if name not in header]
      verdict.refuse(
          f'its header differs from that of {os.path.basename(first_path)} '
          + (f'({", ".join(map(repr, differences))} in one file only)' if differences
             else '(the same columns in another order)')
          + '; every file of the folder needs the same header.', line=1,
          column=differences[0] if differences else None)
      return None
    # Rows without labels (a transfer set) may lack the column.
    label_position = header.index(label_column) if label_column in header else None
    counts = _FileCounts([ColumnCounts() for _ in header])
    name = os.path.basename(path)
    for line, row in rows:
      counts.rows += 1
      for position, raw in enumerate(row):
        value = raw.strip()
        if not value:
          continue
        column = counts.columns[position]
        column.values += 1
        if value in MISSING_MARKERS:
          column.markers += 1
          continue
        try:
          number = float(value)
        except ValueError:
          if column.first_text is None:
            column.first_text = (value, name, line)
          continue
        column.numbers += 1
        if not math.isfinite(number):
          column.non_finite += 1
      if label_position is None:
        continue
      label = row[label_position].strip()
      if not label:
        counts.empty_labels += 1
      elif label in counts.label_values or len(counts.label_values) < MAX_LABEL_VALUES:
        counts.label_values[label] = counts.label_values.get(label, 0) + 1
  except _Unreadable as error:
    verdict.refuse(error.what, line=error.line)
    return None
  if verdict.status == REFUSED:
    return None
  return header, counts


def _is_missing(value: str) -> bool:
  """A missing marker, NaN or infinity: read as an empty cell in a numeric column."""
  if value in MISSING_MARKERS:
    return True
  try:
    return not math.isfinite(float(value))
  except ValueError:
    return False


def _count_folder(data_root: str, flag: str, label_column: Optional[str], digest_salt: str):
  """Reads every CSV file of a folder once: verdicts, digests, the header and counts.

  Returns:
    (verdicts, other files, digest per file, digest of the whole folder, the first
    header, counts per file that runs so far).

  Raises:
    ValueError: naming `flag`, when the folder is not one or holds no CSV files.
  """
  if not os.path.isdir(data_root):
    raise ValueError(f'{flag}: {data_root!r} is not a folder; give a folder of CSV files.')
  paths, ignored = list_files(data_root)
  if not paths:
    raise ValueError(f'{flag}: {data_root!r} holds no .csv or .csv.gz files'
                     + (f' (it has {", ".join(ignored)})' if ignored else '') + '.')
  verdicts, file_digests, counted = [], {}, {}
  first_header, first_path = None, None
  whole = hashlib.sha256(f'{STAGING_VERSION}\0{digest_salt}\0'.encode())
  for path in paths:
    verdict = FileVerdict(path)
    verdicts.append(verdict)
    file_digest = _file_digest(path)
    file_digests[os.path.basename(path)] = file_digest
    whole.update(f'{os.path.basename(path)}\0{file_digest}\0'.encode())
    result = _count(path, label_column, verdict, first_header, first_path)
    if result is None:
      continue
    header, counts = result
    if first_header is None:
      first_header, first_path = header, path
    counted[path] = counts
  return verdicts, ignored, file_digests, whole.hexdigest(), first_header or [], counted


def preflight_csv(data_root: str, label_column: str) -> Preflight:
  """Reads every CSV file of a folder and gives each a verdict: runs, or refused and why.

  Each file is read row by row; nothing but counts is kept, so memory does not grow
  with the rows.

  Args:
    data_root: Folder of `.csv` (or `.csv.gz`) files, as given to CsvExampleGen.
    label_column: The raw label column.

  Returns:
    A `Preflight`; `raise_if_refused()` raises `CsvRefused` when any file is refused.

  Raises:
    ValueError: naming the folder, when it is not a folder or holds no CSV files.
  """
  verdicts, ignored, file_digests, digest, header, counted = _count_folder(
      data_root, '--data', label_column, label_column)
  preflight = Preflight(os.path.abspath(data_root), label_column, verdicts, ignored,
                        header, digest, file_digests)
  if counted:
    _decide_kinds(preflight, counted)
  if not preflight.refused:
    _check_label(preflight, counted)
  return preflight


def preflight_unlabelled(data_root: str, labelled: Preflight) -> Preflight:
  """Checks a folder of rows without labels (a transfer set) against the labelled folder.

  The files may lack the label column, or carry it (it is ignored). Every other column
  of the labelled data must be there, and no other: the transform and the teacher know
  only those. A column that holds numbers in the labelled data must hold numbers here.

  Args:
    data_root: Folder of `.csv` (or `.csv.gz`) files of unlabelled rows.
    labelled: The labelled folder's `Preflight`, already checked.

  Returns:
    A `Preflight` of the folder, with the labelled folder's column kinds;
    `raise_if_refused()` names each refused file, line and column.

  Raises:
    ValueError: naming `--unlabelled`, when it is not a folder or holds no CSV files.
  """
  label = labelled.label_column
  features = [name for name in labelled.header if name != label]
  verdicts, ignored, file_digests, digest, header, counted = _count_folder(
      data_root, '--unlabelled', None, 'unlabelled')
  for verdict in verdicts:
    counts = counted.get(verdict.path)
    if counts is None:
      continue
    extra = [name for name in header if name not in labelled.header]
    missing = [name for name in features if name not in header]
    if extra:
      verdict.refuse(f'column {extra[0]!r} is not a column of the labelled data in '
                     f'{labelled.data_root}; the transform and the teacher know only '
                     f'{", ".join(features)}. Remove it from the unlabelled rows.', line=1,
                     column=extra[0])
      continue
    if missing:
      verdict.refuse(f'lacks column {missing[0]!r}, which the labelled data has and the '
                     'transform reads; give the unlabelled rows every column but the label.',
                     line=1, column=missing[0])
      continue
    for name, column in zip(header, counts.columns):
      if labelled.column_kinds.get(name) == NUMBER and column.first_text is not None:
        value, _, line = column.first_text
        verdict.refuse(f'{value!r} is not a number, but {name!r} holds numbers in the '
                       'labelled data; fix or empty the cell.', line=line, column=name)
        break
    else:
      for name, column in zip(header, counts.columns):
        blanked = column.non_finite + column.markers
        if labelled.column_kinds.get(name) == NUMBER and blanked:
          verdict.blanked_cells[name] = blanked
          verdict.notes.append(f'{blanked} NaN, infinite or missing-marker value(s) in '
                               f'{name!r} read as empty')
      verdict.rows = counts.rows
      if label in header:
        verdict.notes.append(f'its {label!r} column is ignored: transfer rows teach through '
                             "the teacher's answers only")
  preflight = Preflight(os.path.abspath(data_root), label, verdicts, ignored, header, digest,
                        file_digests)
  preflight.column_kinds = {name: kind for name, kind in labelled.column_kinds.items()
                            if name in preflight.header}
  return preflight


def shared_files(labelled: Preflight, unlabelled: Preflight) -> List[str]:
  """Unlabelled files whose content is that of a labelled file (its rows reach `test`)."""
  labelled_digests = set(labelled.file_digests.values())
  return sorted(name for name, digest in unlabelled.file_digests.items()
                if digest in labelled_digests)


def _decide_kinds(preflight: Preflight, counted: Dict[str, _FileCounts]) -> None:
  """Numbers or categories per column over the folder; then each file's rows and notes."""
  header = preflight.header
  totals = [ColumnCounts() for _ in header]
  for counts in counted.values():
    for total, column in zip(totals, counts.columns):
      total.add(column)
  for name, total in zip(header, totals):
    preflight.column_kinds[name] = NUMBER if total.is_number else CATEGORY
    if not total.is_number and total.values:
      share = total.numbers / max(1, total.values - total.markers)
      if share >= MOSTLY_NUMBERS_SHARE and total.first_text:
        value, file_name, line = total.first_text
        preflight.mostly_numbers.append((name, share, value, file_name, line))
  label_position = header.index(preflight.label_column)
  label_is_number = preflight.column_kinds[preflight.label_column] == NUMBER
  for verdict in preflight.verdicts:
    counts = counted.get(verdict.path)
    if counts is None:
      continue
    for name, column in zip(header, counts.columns):
      if preflight.column_kinds[name] != NUMBER:
        continue  # A text column: 'NA' or 'nan' there is a category like any other.
      blanked = column.non_finite + column.markers
      if blanked:
        verdict.blanked_cells[name] = blanked
        verdict.notes.append(
            f'{blanked} NaN, infinite or missing-marker value(s) in {name!r} read as empty')
    dropped = counts.empty_labels
    if label_is_number:
      dropped += counts.columns[label_position].non_finite + counts.columns[
          label_position].markers
    verdict.dropped_rows = dropped
    if dropped:
      verdict.notes.append(f'{dropped} row(s) with no {preflight.label_column!r} left out')
    verdict.rows = counts.rows - dropped
    if not verdict.rows:
      verdict.refuse(f'no row has a {preflight.label_column!r} value; give each row its '
                     'label.', column=preflight.label_column)


def _check_label(preflight: Preflight, counted: Dict[str, _FileCounts]) -> None:
  """Refuses a label with one value, or with a different value in every row."""
  label_is_number = preflight.column_kinds[preflight.label_column] == NUMBER
  counts: Dict[str, int] = {}
  for file_counts in counted.values():
    for value, count in file_counts.label_values.items():
      if label_is_number and _is_missing(value):
        continue
      counts[value] = counts.get(value, 0) + count
  total = sum(verdict.rows for verdict in preflight.verdicts)
  verdict = preflight.verdicts[0]
  if len(counts) == 1:
    verdict.refuse(f'the label has one value ({next(iter(counts))!r}) in all {total} rows of '
                   'the folder; a classifier needs two or more classes.',
                   column=preflight.label_column)
  elif len(counts) == total or len(counts) >= MAX_LABEL_VALUES:
    verdict.refuse(f'the label has a different value in '
                   + (f'every one of the {total} rows' if len(counts) == total else
                      f'{len(counts)} or more of the {total} rows')
                   + ' of the folder: it looks like an ID or a measurement, not a class. Give '
                   '--label the column that holds the classes.', column=preflight.label_column)


def changed_inputs(preflight: Preflight, staging_root: str) -> Optional[List[str]]:
  """How the files differ from the last staged run: None for a first run, else phrases."""
  path = os.path.join(staging_root, MANIFEST_FILE_NAME)
  if not os.path.isfile(path):
    return None
  with open(path) as handle:
    before = json.load(handle).get('files', {})
  now = preflight.file_digests
  changes = [f'added {name}' for name in sorted(set(now) - set(before))]
  changes += [f'removed {name}' for name in sorted(set(before) - set(now))]
  changes += [f'changed {name}' for name in sorted(set(now) & set(before))
              if now[name] != before[name]]
  return changes


def _staged_rows(preflight: Preflight, verdict: FileVerdict) -> Iterator[List[str]]:
  """The file's rows that run, read again row by row: missing values blanked, no empty label."""
  numeric = [position for position, name in enumerate(preflight.header)
             if preflight.column_kinds.get(name) == NUMBER]
  label_position = (preflight.header.index(preflight.label_column)
                    if preflight.label_column in preflight.header else None)
  rows = _rows(verdict.path, preflight.label_column, FileVerdict(verdict.path),
               expected_header=preflight.header)
  next(rows)  # The header, checked in the first pass.
  for _, row in rows:
    for position in numeric:
      if _is_missing(row[position].strip()):
        row[position] = ''
    if label_position is None or row[label_position].strip():
      yield row


def stage(preflight: Preflight, staging_root: str) -> str:
  """Writes the rows that run as UTF-8 CSV files for CsvExampleGen; returns their folder.

  The folder is named by the content digest: a rerun on the same files finds it and
  leaves it untouched, so ExampleGen's input fingerprint (paths, sizes and times) and
  its cache hold. It is written under a temporary name and renamed, so a killed run
  never leaves a half-written copy behind; copies of other inputs are removed. Rows are
  read and written one at a time.

  Args:
    preflight: A `Preflight` with no refused file.
    staging_root: Folder for staged copies (the runner uses PIPELINE_ROOT/inputs).

  Returns:
    The folder to give CsvExampleGen as `input_base`.
  """
  preflight.raise_if_refused()
  os.makedirs(staging_root, exist_ok=True)
  folder = os.path.join(staging_root, preflight.digest[:16])
  if not os.path.isdir(folder):
    temporary = folder + f'.incomplete-{os.getpid()}'
    shutil.rmtree(temporary, ignore_errors=True)
    os.makedirs(temporary)
    for index, verdict in enumerate(preflight.verdicts):
      name = os.path.basename(verdict.path)
      name = name[:-len('.gz')] if name.lower().endswith('.gz') else name
      with open(os.path.join(temporary, f'{index:03d}-{name}'), 'w', newline='',
                encoding='utf-8') as handle:
        writer = csv.writer(handle, lineterminator='\n')
        writer.writerow(preflight.header)
        writer.writerows(_staged_rows(preflight, verdict))
    os.rename(temporary, folder)
  for name in os.listdir(staging_root):
    if name not in (os.path.basename(folder), MANIFEST_FILE_NAME):
      shutil.rmtree(os.path.join(staging_root, name), ignore_errors=True)
  manifest = os.path.join(staging_root, MANIFEST_FILE_NAME)
  with open(manifest + '.tmp', 'w') as handle:
    json.dump({'data_root': preflight.data_root, 'staged': folder,
               'files': preflight.file_digests}, handle, indent=2, sort_keys=True)
  os.replace(manifest + '.tmp', manifest)
  return folder
