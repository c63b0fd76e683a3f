"""A check of a folder of CSV files before any component runs, and the copy ExampleGen reads.

Spreadsheets and exports write CSV files in many ways. CsvExampleGen takes some of them
as they are and turns others into a failure deep in the run (a byte-order mark becomes
part of the first column's name; NaN reaches the int8 conversion). `preflight_csv` reads
every file with the standard library's `csv` parser and gives one verdict per file:

* runs: CRLF line endings, a UTF-8 byte-order mark, quoted fields with commas or
  newlines, empty feature cells, unicode values, column names with spaces, several files
  with one header, gzip-compressed `.csv.gz` files. NaN and infinity in a numeric column
  are read as empty cells (the transform fills them in like any other missing value), and
  rows without a label are left out; both are counted.
* refused, naming the file, the line and the column, and what to do: a file that is not
  UTF-8 text, a delimiter other than a comma, a column without a name, a duplicate column
  name, a missing label column, a ragged row, a header with no rows, headers that differ
  between files, a label with one value, or a label with a different value in every row
  (an ID, not a class).

`stage` then writes what runs as plain UTF-8 CSV under the pipeline root, in a folder
named by the content of the inputs, so that a rerun on the same files reuses the same
folder (and ExampleGen's cache) and a changed file gets a new one.
"""

import csv
import dataclasses
import gzip
import hashlib
import io
import json
import math
import os
import shutil
from typing import Dict, List, Optional, Sequence, Tuple

RUNS = 'runs'
REFUSED = 'refused'
SUFFIXES = ('.csv', '.csv.gz')
# Delimiters that exports use instead of commas; CsvExampleGen reads commas only.
OTHER_DELIMITERS = (';', '\t', '|')
BYTE_ORDER_MARK = b'\xef\xbb\xbf'
MANIFEST_FILE_NAME = 'inputs.json'
# Bumped when staging writes differently, so an old staged copy is not reused.
STAGING_VERSION = '1'


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
    blanked_cells: Per column, NaN or infinity cells read as empty.
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
class Preflight:
  """The verdicts for a folder, and the rows that run (for `stage`).

  Attributes:
    data_root: The folder checked.
    label_column: The label column.
    verdicts: One per `.csv` or `.csv.gz` file, sorted by path.
    ignored: Files in the folder that are neither, which ExampleGen will not read.
    header: The columns every file shares (empty when refused before it was known).
    digest: Content digest of the files, the label column and the staging version.
    file_digests: Per file name, the digest of its bytes.
  """
  data_root: str
  label_column: str
  verdicts: List[FileVerdict]
  ignored: List[str]
  header: List[str]
  digest: str
  file_digests: Dict[str, str]
  _rows: Dict[str, List[List[str]]] = dataclasses.field(default_factory=dict, repr=False)

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


def _unwrap(path: str, content: bytes, verdict: FileVerdict) -> Optional[bytes]:
  """The file's text bytes: decompressed, without a byte-order mark."""
  if path.lower().endswith('.gz'):
    try:
      content = gzip.decompress(content)
    except (OSError, EOFError) as error:
      verdict.refuse(f'is named .gz but is not a complete gzip file ({error}); compress it '
                     'with gzip, or name it .csv if it is plain text.')
      return None
    verdict.notes.append('decompressed (gzip)')
  if content.startswith(BYTE_ORDER_MARK):
    content = content[len(BYTE_ORDER_MARK):]
    verdict.notes.append('UTF-8 byte-order mark removed from the first column name')
  return content


def _decode(content: bytes, verdict: FileVerdict) -> Optional[str]:
  if b'\x00' in content:
    line = content[:content.index(b'\x00')].count(b'\n') + 1
    verdict.refuse('is not text: it holds NUL bytes (a binary file, or UTF-16 text); give '
                   'a CSV file saved as UTF-8.', line=line)
    return None
  try:
    return content.decode('utf-8')
  except UnicodeDecodeError as error:
    line = content[:error.start].count(b'\n') + 1
    verdict.refuse(f'is not UTF-8 text: byte 0x{content[error.start]:02x} can not be read; '
                   'save the file as "CSV UTF-8".', line=line)
    return None


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
  if label_column not in header:
    verdict.refuse(f'has no label column {label_column!r}; its columns are '
                   f'{", ".join(header)}. Give --label one of them.', line=1)
    return False
  return True


def _read_rows(text: str, label_column: str,
               verdict: FileVerdict) -> Optional[Tuple[List[str], List[List[str]]]]:
  reader = csv.reader(io.StringIO(text, newline=''), strict=True)
  try:
    header = next(reader, None)
    if header is None:
      verdict.refuse(f'is empty; expected a header row with the label column '
                     f'{label_column!r}, then rows.')
      return None
    if not _check_header(header, label_column, verdict):
      return None
    rows = []
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
        return None
      rows.append(row)
  except csv.Error as error:
    verdict.refuse(f'is not readable as CSV ({error}); check the quoting on that line.',
                   line=reader.line_num)
    return None
  if not rows:
    verdict.refuse('has a header but no rows; add rows, or remove the file from the folder.',
                   line=1)
    return None
  return header, rows


def _is_number(value: str) -> bool:
  try:
    float(value)
  except ValueError:
    return False
  return True


def _clean(header: List[str], rows: List[List[str]], label_column: str,
           verdict: FileVerdict) -> List[List[str]]:
  """Reads NaN and infinity in numeric columns as empty; leaves out rows with no label."""
  for position, name in enumerate(header):
    values = [row[position].strip() for row in rows if row[position].strip()]
    if not values or not all(_is_number(value) for value in values):
      continue  # A text column: 'nan' there is a category like any other.
    blanked = 0
    for row in rows:
      value = row[position].strip()
      if value and not math.isfinite(float(value)):
        row[position] = ''
        blanked += 1
    if blanked:
      verdict.blanked_cells[name] = blanked
      verdict.notes.append(f'{blanked} NaN or infinite value(s) in {name!r} read as empty')
  label_position = header.index(label_column)
  kept = [row for row in rows if row[label_position].strip()]
  verdict.dropped_rows = len(rows) - len(kept)
  if verdict.dropped_rows:
    verdict.notes.append(f'{verdict.dropped_rows} row(s) with no {label_column!r} left out')
  return kept


def preflight_csv(data_root: str, label_column: str) -> Preflight:
  """Reads every CSV file of a folder and gives each a verdict: runs, or refused and why.

  Args:
    data_root: Folder of `.csv` (or `.csv.gz`) files, as given to CsvExampleGen.
    label_column: The raw label column.

  Returns:
    A `Preflight`; `raise_if_refused()` raises `CsvRefused` when any file is refused.

  Raises:
    ValueError: naming the folder, when it is not a folder or holds no CSV files.
  """
  if not os.path.isdir(data_root):
    raise ValueError(f'--data: {data_root!r} is not a folder; give a folder of CSV files.')
  paths, ignored = list_files(data_root)
  if not paths:
    raise ValueError(f'--data: {data_root!r} holds no .csv or .csv.gz files'
                     + (f' (it has {", ".join(ignored)})' if ignored else '') + '.')
  verdicts, all_rows, file_digests = [], {}, {}
  first_header, first_path = None, None
  whole = hashlib.sha256(f'{STAGING_VERSION}\0{label_column}\0'.encode())
  for path in paths:
    verdict = FileVerdict(path)
    verdicts.append(verdict)
    with open(path, 'rb') as handle:
      content = handle.read()
    file_digest = hashlib.sha256(content).hexdigest()
    file_digests[os.path.basename(path)] = file_digest
    whole.update(f'{os.path.basename(path)}\0{file_digest}\0'.encode())
    content = _unwrap(path, content, verdict)
    text = None if content is None else _decode(content, verdict)
    parsed = None if text is None else _read_rows(text, label_column, verdict)
    if parsed is None:
      continue
    header, rows = parsed
    if first_header is None:
      first_header, first_path = header, path
    elif header != first_header:
      differences = [name for name in header if name not in first_header] + [
          name for name in first_header if name not in header]
      verdict.refuse(
          f'its header differs from that of {os.path.basename(first_path)} '
          + (f'({", ".join(map(repr, differences))} in one file only)' if differences
             else '(the same columns in another order)')
          + '; every file of the folder needs the same header.', line=1,
          column=differences[0] if differences else None)
      continue
    rows = _clean(header, rows, label_column, verdict)
    if not rows:
      verdict.refuse(f'no row has a {label_column!r} value; give each row its label.',
                     column=label_column)
      continue
    verdict.rows = len(rows)
    all_rows[path] = rows
  preflight = Preflight(os.path.abspath(data_root), label_column, verdicts, ignored,
                        first_header or [], whole.hexdigest(), file_digests, all_rows)
  if not preflight.refused:
    _check_label(preflight)
  return preflight


def _check_label(preflight: Preflight) -> None:
  """Refuses a label with one value, or with a different value in every row."""
  position = preflight.header.index(preflight.label_column)
  counts: Dict[str, int] = {}
  for rows in preflight._rows.values():  # pylint: disable=protected-access
    for row in rows:
      value = row[position].strip()
      counts[value] = counts.get(value, 0) + 1
  total = sum(counts.values())
  verdict = preflight.verdicts[0]
  if len(counts) == 1:
    verdict.refuse(f'the label has one value ({next(iter(counts))!r}) in all {total} rows of '
                   'the folder; a classifier needs two or more classes.',
                   column=preflight.label_column)
  elif len(counts) == total:
    verdict.refuse(f'the label has a different value in every one of the {total} rows of the '
                   'folder: it looks like an ID or a measurement, not a class. Give --label '
                   'the column that holds the classes.', column=preflight.label_column)


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


def stage(preflight: Preflight, staging_root: str) -> str:
  """Writes the rows that run as UTF-8 CSV files for CsvExampleGen; returns their folder.

  The folder is named by the content digest: a rerun on the same files finds it and
  leaves it untouched, so ExampleGen's input fingerprint (paths, sizes and times) and
  its cache hold. It is written under a temporary name and renamed, so a killed run
  never leaves a half-written copy behind; copies of other inputs are removed.

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
        writer.writerows(preflight._rows[verdict.path])  # pylint: disable=protected-access
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
