"""The dataset choices (taxi, digits, mnist1d, csv) and the module files each uses.

Everything here is local: the taxi CSV ships inside the tfx wheel, the digits
come with scikit-learn and MNIST-1D is drawn by the `mnist1d` package's generator,
so nothing is downloaded at run time.
"""

import csv
import dataclasses
import os
from typing import List, Optional, Tuple

from tfx_distillery import trainer_modules
DATASET_NAMES = ('taxi', 'digits', 'mnist1d', 'csv')
# The unlabelled pool of `--dataset mnist1d` unless --pool-rows says otherwise.
MNIST1D_POOL_ROWS = 50000

# Curated schemas ship as package data in this folder (see write_schemas.py).
SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'schemas')

# The label every transform module of ours writes, whatever the raw column is.
TRANSFORMED_LABEL_KEY = 'label'

# A CSV of the user's own gets no student module file: the Distiller tries the built-in
# student at these shares of the teacher's parameters, smallest first, and hands on the
# one that ships the fewest bytes within the gate's budget (#36, #61): the Distiller's
# own default. On the taxi-like CSV at 10x the rows, one fixed student fell 0.014 short
# of the 0.01 budget; a search grows it until it fits.
# The same as components/distiller/training.py's, which loads TensorFlow (a test keeps
# them equal): listing datasets must stay cheap.
DEFAULT_STUDENT_PARAMETER_SHARES = (0.01, 0.03, 0.1, 0.3)


@dataclasses.dataclass(frozen=True)
class Dataset:
  """Where a dataset's CSV files are and which module files handle it.

  Attributes:
    name: One of `DATASET_NAMES`.
    data_root: Folder of CSV files that CsvExampleGen ingests.
    label_column: Raw CSV column the label comes from.
    transform_module_file: Module file exposing `preprocessing_fn`.
    teacher_module_file: Module file exposing `run_fn` for the teacher.
    student_module_file: Module file exposing `build_student` for the Distiller; None
      for the Distiller's built-in student, sized by `student_parameter_shares`.
    schema_file: Curated schema the data must match; None infers one from the data.
    label_key: The transformed label its transform module emits.
    input_splits: Splits that `data_root` holds as folders of their own (ExampleGen
      reads them as they are); empty splits the rows by hash.
    unlabelled_data_root: Folder of CSV files of rows without labels for the
      Distiller's transfer set; None for none.
    student_parameter_shares: With no student module file, the built-in student's
      sizes the Distiller tries (shares of the teacher's parameters), keeping the
      smallest within the gate's budget.
  """
  name: str
  data_root: str
  label_column: str
  transform_module_file: str
  teacher_module_file: str
  student_module_file: Optional[str]
  schema_file: Optional[str] = None
  label_key: str = TRANSFORMED_LABEL_KEY
  input_splits: Tuple[str, ...] = ()
  unlabelled_data_root: Optional[str] = None
  student_parameter_shares: Tuple[float, ...] = ()


def module_file(module_name: str) -> str:
  """Returns the path of a module file in the `trainer_modules` package."""
  return os.path.join(os.path.dirname(trainer_modules.__file__), f'{module_name}.py')


def curated_schema_path(dataset_name: str) -> str:
  """Returns where the curated schema of `taxi` or `digits` lives in the package."""
  return os.path.join(SCHEMA_DIR, f'{dataset_name}.pbtxt')


def schema_file(dataset_name: str) -> str:
  """Returns the curated schema of `taxi` or `digits`.

  Raises:
    FileNotFoundError: naming the file, when the package was installed without it;
      the run would otherwise lose its data check without a word.
  """
  path = curated_schema_path(dataset_name)
  if not os.path.isfile(path):
    raise FileNotFoundError(
        f'The curated {dataset_name} schema {path} is missing from the installed '
        'tfx_distillery package; reinstall it (the wheel ships pipelines/schemas/*.pbtxt '
        'as package data).')
  return path


def taxi_data_dir() -> str:
  """Returns the folder of the Chicago taxi CSV that ships inside the tfx wheel."""
  import tfx  # Imported here so that merely listing datasets stays cheap.
  path = os.path.join(os.path.dirname(tfx.__file__), 'examples', 'chicago_taxi_pipeline',
                      'data', 'simple')
  if not os.path.isfile(os.path.join(path, 'data.csv')):
    raise FileNotFoundError(
        f'The taxi CSV is not where the tfx wheel puts it ({path}/data.csv); '
        'reinstall tfx==1.16.0 with `make venv`.')
  return path


def write_digits_csv(output_dir: str) -> str:
  """Writes scikit-learn's bundled 8x8 digits as one CSV file.

  Columns are `pixel_00` .. `pixel_63` (0..16 intensities) and `label` (0..9).

  Args:
    output_dir: Folder to write `data.csv` into; created if missing.

  Returns:
    `output_dir`.
  """
  from sklearn import datasets as sklearn_datasets
  digits = sklearn_datasets.load_digits()
  os.makedirs(output_dir, exist_ok=True)
  header = [f'pixel_{index:02d}' for index in range(digits.data.shape[1])] + ['label']
  path = os.path.join(output_dir, 'data.csv')
  temporary_path = path + '.tmp'
  with open(temporary_path, 'w', newline='') as handle:
    writer = csv.writer(handle)
    writer.writerow(header)
    for pixels, label in zip(digits.data, digits.target):
      writer.writerow([int(value) for value in pixels] + [int(label)])
  os.replace(temporary_path, path)
  return output_dir


def csv_files(data_root: str) -> List[str]:
  """Returns the CSV files directly inside `data_root`, sorted."""
  return sorted(
      os.path.join(data_root, name)
      for name in os.listdir(data_root)
      if name.endswith('.csv') and os.path.isfile(os.path.join(data_root, name)))


def sample_csv(source_dir: str, output_dir: str, rows: int) -> str:
  """Copies the first `rows` data rows of each CSV in `source_dir` (tests and demos)."""
  os.makedirs(output_dir, exist_ok=True)
  for path in csv_files(source_dir):
    with open(path, newline='') as source, open(
        os.path.join(output_dir, os.path.basename(path)), 'w', newline='') as target:
      for index, line in enumerate(source):
        if index > rows:
          break
        target.write(line)
  return output_dir


def csv_dataset(data_root: str, label: str, schema: Optional[str] = None) -> Dataset:
  """A CSV folder of the user's own: our tabular transform and teacher, and no student
  module file: the Distiller sizes its built-in student (`DEFAULT_STUDENT_PARAMETER_SHARES`).
  """
  return Dataset('csv', data_root, label, module_file('tabular_transform'),
                 module_file('tabular_teacher'), None, schema,
                 student_parameter_shares=DEFAULT_STUDENT_PARAMETER_SHARES)


def resolve(name: str,
            work_dir: str,
            data: Optional[str] = None,
            label: Optional[str] = None,
            schema: Optional[str] = None,
            pool_rows: int = MNIST1D_POOL_ROWS) -> Dataset:
  """Builds the `Dataset` for a `--dataset` choice.

  Args:
    name: `taxi`, `digits`, `mnist1d` or `csv`.
    work_dir: Folder where generated data (digits, mnist1d) is written.
    data: For `csv`, the folder of CSV files; `csv_preflight` checks what is in it.
    label: For `csv`, the label column.
    schema: For `csv`, an optional curated schema.pbtxt.
    pool_rows: For `mnist1d`, rows of the unlabelled pool (0 for none).

  Returns:
    The resolved `Dataset`.

  Raises:
    ValueError: for an unknown name or missing/invalid `csv` arguments.
  """
  if name == 'taxi':
    return Dataset('taxi', taxi_data_dir(), 'tips', module_file('taxi_transform'),
                   module_file('taxi_teacher'), module_file('taxi_student'),
                   schema_file('taxi'))
  if name == 'digits':
    data_root = write_digits_csv(os.path.join(work_dir, 'data', 'digits'))
    return Dataset('digits', data_root, 'label', module_file('digits_transform'),
                   module_file('digits_teacher'), module_file('digits_cnn_student'),
                   schema_file('digits'))
  if name == 'mnist1d':
    from tfx_distillery.pipelines import mnist1d_data  # pylint: disable=g-import-not-at-top
    folders = mnist1d_data.write_csv(os.path.join(work_dir, 'data', 'mnist1d'), pool_rows)
    return Dataset('mnist1d', folders.labelled_root, mnist1d_data.LABEL_COLUMN,
                   module_file('mnist1d_transform'), module_file('mnist1d_teacher'),
                   module_file('mnist1d_student'),
                   # Drawn by our own generator, so SchemaGen's inference is the schema.
                   None,
                   input_splits=tuple(mnist1d_data.SPLITS),
                   unlabelled_data_root=folders.unlabelled_root)
  if name == 'csv':
    if not data or not label:
      raise ValueError('--dataset csv needs --data DIR (a folder of CSV files) and '
                       '--label COLUMN (the label column).')
    if not os.path.isdir(data):
      raise ValueError(f'--data: {data!r} is not a folder; give a folder of CSV files.')
    if schema is not None and not os.path.isfile(schema):
      raise ValueError(f'--schema: {schema!r} is not a file; give a schema.pbtxt, such as '
                       "the SchemaGen output of a good run.")
    return csv_dataset(os.path.abspath(data), label,
                       os.path.abspath(schema) if schema else None)
  raise ValueError(f'--dataset must be one of {", ".join(DATASET_NAMES)}; got {name!r}.')
