"""MNIST-1D (Greydanus, "Scaling down deep learning") as CSV files, generated offline.

The `mnist1d` package's procedural `make_dataset` draws every row from a seed; its
`get_dataset` downloads a pickle, and is never called here. Drawing is slow (about
40 s for 50,000 rows), so each draw is cached in a `.npz` named after all of its
arguments, and a cached draw is only ever read back, never redrawn.

- `train` and `test`: the paper's own split of its default draw (seed 42, 5,000 rows:
  4,000 and 1,000).
- `eval`: 1,000 rows of another draw (seed 41), since the paper has no eval split and
  the pipeline chooses on eval, never on test.
- the unlabelled pool: draws of `POOL_CHUNK_ROWS` rows with seeds 1000, 1001, ...,
  so a smaller pool is the start of a larger one and none shares a seed with the
  labelled rows.
"""

import csv
import dataclasses
import hashlib
import json
import os
import random
from typing import Dict, Optional, Tuple

import numpy as np

# The paper's draw (its train/test split) and the seeds of the other draws.
PAPER_SEED = 42
EVAL_SEED = 41
EVAL_ROWS = 1000
POOL_FIRST_SEED = 1000
POOL_CHUNK_ROWS = 10000
NUM_CLASSES = 10
SIGNAL_LENGTH = 40
SIGNAL_COLUMNS = tuple(f'x_{index:02d}' for index in range(SIGNAL_LENGTH))
LABEL_COLUMN = 'label'
# The labelled folder's splits, one folder each.
SPLITS = ('train', 'eval', 'test')
CACHE_VARIABLE = 'DISTILLERY_CACHE'
# Six significant digits: the CSV is a quarter of full precision's size, and the
# rounding (1e-6 of a unit-variance signal) is far below the data's own noise.
VALUE_FORMAT = '{:.6g}'


def default_cache_dir() -> str:
  """`$DISTILLERY_CACHE`, else `~/.cache/tfx-distillery`: where draws are kept."""
  return os.environ.get(CACHE_VARIABLE) or os.path.join(
      os.path.expanduser('~'), '.cache', 'tfx-distillery')


def dataset_arguments(num_samples: int, seed: int, train_split: float) -> Dict[str, object]:
  """The paper's default `make_dataset` arguments, with these three changed."""
  from mnist1d import data as mnist1d_data  # pylint: disable=g-import-not-at-top
  arguments = mnist1d_data.get_dataset_args(as_dict=True)
  arguments.pop('url')  # Only get_dataset reads it; a draw never downloads.
  arguments.update(num_samples=int(num_samples), seed=int(seed), train_split=float(train_split))
  return arguments


def draw(num_samples: int, seed: int, train_split: float = 1.0,
         cache_dir: Optional[str] = None) -> Dict[str, np.ndarray]:
  """One `make_dataset` draw, from the cache when it was drawn before.

  Args:
    num_samples: Rows drawn, a multiple of 10 (the package draws as many of each digit).
    seed: The draw's seed.
    train_split: The share of rows in `x`/`y`; the rest go to `x_test`/`y_test`.
    cache_dir: Folder of cached draws; `default_cache_dir()` when None.

  Returns:
    `x`, `y`, `x_test`, `y_test` as float32 and int64 arrays.

  Raises:
    ValueError: naming `num_samples` when it is not a positive multiple of 10.
  """
  if not isinstance(num_samples, int) or num_samples < NUM_CLASSES or num_samples % NUM_CLASSES:
    raise ValueError(f'num_samples must be a positive multiple of {NUM_CLASSES} (as many rows '
                     f'of each digit); got {num_samples!r}.')
  arguments = dataset_arguments(num_samples, seed, train_split)
  key = hashlib.sha256(json.dumps(arguments, sort_keys=True).encode()).hexdigest()[:16]
  cache_dir = cache_dir or default_cache_dir()
  path = os.path.join(cache_dir, f'mnist1d-{num_samples}-seed{seed}-{key}.npz')
  if os.path.isfile(path):
    with np.load(path) as cached:
      return {name: cached[name] for name in cached.files}
  from mnist1d import data as mnist1d_data  # pylint: disable=g-import-not-at-top
  from mnist1d import utils as mnist1d_utils  # pylint: disable=g-import-not-at-top
  # make_dataset seeds the global generators; leave the caller's as they were.
  python_state, numpy_state = random.getstate(), np.random.get_state()
  try:
    generated = mnist1d_data.make_dataset(mnist1d_utils.ObjectView(dict(arguments)))
  finally:
    random.setstate(python_state)
    np.random.set_state(numpy_state)
  arrays = {'x': generated['x'].astype(np.float32), 'y': generated['y'].astype(np.int64),
            'x_test': generated['x_test'].astype(np.float32),
            'y_test': generated['y_test'].astype(np.int64)}
  os.makedirs(cache_dir, exist_ok=True)
  temporary_path = f'{path}.{os.getpid()}.tmp.npz'
  np.savez(temporary_path, **arrays)
  os.replace(temporary_path, path)
  return arrays


def pool(rows: int, cache_dir: Optional[str] = None) -> Tuple[np.ndarray, np.ndarray]:
  """The first `rows` rows of the pool: (signals, labels); only a reference reads the labels."""
  signals, labels, remaining, seed = [], [], rows, POOL_FIRST_SEED
  while remaining > 0:
    size = min(POOL_CHUNK_ROWS, remaining)
    # Always the whole chunk, cut: so any smaller pool is the start of a larger one.
    chunk = draw(POOL_CHUNK_ROWS, seed, cache_dir=cache_dir)
    signals.append(chunk['x'][:size])
    labels.append(chunk['y'][:size])
    remaining -= size
    seed += 1
  if not signals:
    return np.zeros((0, SIGNAL_LENGTH), np.float32), np.zeros((0,), np.int64)
  return np.concatenate(signals), np.concatenate(labels)


def write_rows(path: str, signals: np.ndarray, labels: Optional[np.ndarray]) -> None:
  """Writes one CSV file of signals, with a `label` column when `labels` is given."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  temporary_path = f'{path}.{os.getpid()}.tmp'
  with open(temporary_path, 'w', newline='') as handle:
    writer = csv.writer(handle)
    writer.writerow(list(SIGNAL_COLUMNS) + ([LABEL_COLUMN] if labels is not None else []))
    for index, signal in enumerate(signals):
      row = [VALUE_FORMAT.format(value) for value in signal.tolist()]
      writer.writerow(row + ([int(labels[index])] if labels is not None else []))
  os.replace(temporary_path, path)


@dataclasses.dataclass(frozen=True)
class Mnist1dFolders:
  """Where `write_csv` put the rows.

  Attributes:
    labelled_root: Folder with `train/`, `eval/` and `test/`, one `data.csv` each.
    unlabelled_root: Folder with the pool's `data.csv` (no label column); None without one.
    split_rows: Rows per labelled split, and `unlabelled`.
  """
  labelled_root: str
  unlabelled_root: Optional[str]
  split_rows: Dict[str, int]


def labelled_splits(cache_dir: Optional[str] = None
                    ) -> Dict[str, Tuple[np.ndarray, np.ndarray]]:
  """{split: (signals, labels)}: the paper's train and test, and the eval draw."""
  paper = draw(5000, PAPER_SEED, train_split=0.8, cache_dir=cache_dir)
  evaluation = draw(EVAL_ROWS, EVAL_SEED, cache_dir=cache_dir)
  return {'train': (paper['x'], paper['y']), 'eval': (evaluation['x'], evaluation['y']),
          'test': (paper['x_test'], paper['y_test'])}


def write_csv(output_dir: str, pool_rows: int = 0, cache_dir: Optional[str] = None,
              labelled_pool: bool = False) -> Mnist1dFolders:
  """Writes MNIST-1D's labelled splits and an unlabelled pool as CSV folders.

  Columns are `x_00` .. `x_39` (the signal, standardized by the package) and, in the
  labelled folders, `label` (0..9).

  Args:
    output_dir: Where `labelled/` and `unlabelled/` go; a folder already written with
      the same arguments is reused.
    pool_rows: Rows of the unlabelled pool; 0 writes none.
    cache_dir: Folder of cached draws; `default_cache_dir()` when None.
    labelled_pool: Also write the pool's true labels, into `labelled/train/pool.csv`:
      the reference student that is given the pool's labels (benchmarks only).

  Returns:
    The folders written.

  Raises:
    ValueError: naming `pool_rows` when it is negative.
  """
  if not isinstance(pool_rows, int) or pool_rows < 0:
    raise ValueError(f'pool_rows must be an integer >= 0; got {pool_rows!r}.')
  splits = labelled_splits(cache_dir)
  labelled_root = os.path.join(output_dir, 'labelled')
  for split, (signals, split_labels) in splits.items():
    write_rows(os.path.join(labelled_root, split, 'data.csv'), signals, split_labels)
  split_rows = {split: len(split_labels) for split, (_, split_labels) in splits.items()}
  unlabelled_root = None
  if pool_rows:
    unlabelled_root = os.path.join(output_dir, 'unlabelled')
    signals, true_labels = pool(pool_rows, cache_dir)
    write_rows(os.path.join(unlabelled_root, 'data.csv'), signals, None)
    split_rows['unlabelled'] = len(signals)
    if labelled_pool:
      write_rows(os.path.join(labelled_root, 'train', 'pool.csv'), signals, true_labels)
      split_rows['train'] += len(signals)
  return Mnist1dFolders(labelled_root, unlabelled_root, split_rows)
