"""MNIST-1D drawn offline: the paper's split, an eval draw, a pool on other seeds, cached."""

import csv
import os
import random

import numpy as np
import pytest

from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import mnist1d_data


@pytest.fixture(scope='module')
def cache_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp('mnist1d-cache'))


def read_csv(path):
  with open(path, newline='') as handle:
    return list(csv.reader(handle))


def test_the_labelled_splits_are_the_papers_train_and_test_and_an_eval_draw(cache_dir):
  splits = mnist1d_data.labelled_splits(cache_dir)
  assert {split: len(labels) for split, (_, labels) in splits.items()} == {
      'train': 4000, 'eval': 1000, 'test': 1000}
  for signals, labels in splits.values():
    assert signals.shape[1] == 40 and signals.dtype == np.float32
    assert set(np.unique(labels)) == set(range(10))
  # The package's own default arguments give the same train rows.
  from mnist1d import data as mnist1d_package  # pylint: disable=g-import-not-at-top
  paper = mnist1d_package.make_dataset(mnist1d_package.get_dataset_args())
  np.testing.assert_allclose(splits['train'][0], paper['x'], rtol=1e-6, atol=1e-6)
  np.testing.assert_array_equal(splits['test'][1], paper['y_test'])


def test_a_draw_is_read_back_from_the_cache_and_leaves_the_global_generators_alone(
    cache_dir, monkeypatch):
  random.seed(5)
  np.random.seed(5)
  expected = (random.random(), np.random.rand())
  random.seed(5)
  np.random.seed(5)
  first = mnist1d_data.draw(20, 7, cache_dir=cache_dir)
  # make_dataset seeds numpy's and Python's generators; the caller's draws are unchanged.
  assert (random.random(), np.random.rand()) == expected
  from mnist1d import data as mnist1d_package  # pylint: disable=g-import-not-at-top

  def no_drawing(*unused_arguments, **unused_keywords):
    raise AssertionError('drew again instead of reading the cache')

  monkeypatch.setattr(mnist1d_package, 'make_dataset', no_drawing)
  again = mnist1d_data.draw(20, 7, cache_dir=cache_dir)
  np.testing.assert_array_equal(first['x'], again['x'])
  with pytest.raises(AssertionError, match='drew again'):
    mnist1d_data.draw(20, 8, cache_dir=cache_dir)


def test_the_pool_comes_from_other_seeds_and_a_smaller_pool_starts_a_larger_one(
    cache_dir, monkeypatch):
  monkeypatch.setattr(mnist1d_data, 'POOL_CHUNK_ROWS', 30)
  small, _ = mnist1d_data.pool(20, cache_dir)
  large, large_labels = mnist1d_data.pool(70, cache_dir)
  assert small.shape == (20, 40) and large.shape == (70, 40) and len(large_labels) == 70
  np.testing.assert_array_equal(large[:20], small)
  np.testing.assert_array_equal(large[:45], mnist1d_data.pool(45, cache_dir)[0])
  labelled = np.concatenate([signals for signals, _ in
                             mnist1d_data.labelled_splits(cache_dir).values()])
  shared = {row.tobytes() for row in labelled} & {row.tobytes() for row in large}
  assert not shared


def test_write_csv_gives_split_folders_and_a_pool_without_the_label(cache_dir, tmp_path,
                                                                     monkeypatch):
  monkeypatch.setattr(mnist1d_data, 'POOL_CHUNK_ROWS', 50)
  folders = mnist1d_data.write_csv(str(tmp_path / 'out'), pool_rows=50, cache_dir=cache_dir)
  assert sorted(os.listdir(folders.labelled_root)) == ['eval', 'test', 'train']
  train = read_csv(os.path.join(folders.labelled_root, 'train', 'data.csv'))
  assert train[0] == [f'x_{index:02d}' for index in range(40)] + ['label']
  assert len(train) - 1 == 4000
  pool = read_csv(os.path.join(folders.unlabelled_root, 'data.csv'))
  assert pool[0] == train[0][:-1] and len(pool) - 1 == 50
  assert folders.split_rows == {'train': 4000, 'eval': 1000, 'test': 1000, 'unlabelled': 50}
  assert not [name for name in os.listdir(folders.unlabelled_root) if 'tmp' in name]
  # The reference's folder: the pool with its true labels beside the training rows.
  labelled = mnist1d_data.write_csv(str(tmp_path / 'reference'), pool_rows=50,
                                    cache_dir=cache_dir, labelled_pool=True)
  assert len(read_csv(os.path.join(labelled.labelled_root, 'train', 'pool.csv'))) - 1 == 50
  assert labelled.split_rows['train'] == 4050


@pytest.mark.parametrize('bad', [0, 15, -10, 2.5])
def test_a_draw_of_rows_not_a_multiple_of_ten_is_refused_by_name(bad, cache_dir):
  with pytest.raises(ValueError, match='num_samples must be a positive multiple of 10'):
    mnist1d_data.draw(bad, 1, cache_dir=cache_dir)


def test_a_negative_pool_is_refused_by_name(tmp_path):
  with pytest.raises(ValueError, match='pool_rows must be an integer >= 0'):
    mnist1d_data.write_csv(str(tmp_path), pool_rows=-1)


def test_the_mnist1d_dataset_reads_its_split_folders_and_feeds_its_pool(tmp_path, monkeypatch,
                                                                         cache_dir):
  monkeypatch.setenv(mnist1d_data.CACHE_VARIABLE, cache_dir)
  monkeypatch.setattr(mnist1d_data, 'POOL_CHUNK_ROWS', 40)
  dataset = datasets.resolve('mnist1d', str(tmp_path), pool_rows=40)
  assert dataset.input_splits == ('train', 'eval', 'test')
  assert dataset.label_column == 'label' and dataset.schema_file is None
  assert os.path.isfile(os.path.join(dataset.unlabelled_data_root, 'data.csv'))
  assert datasets.resolve('mnist1d', str(tmp_path / 'none'), pool_rows=0).unlabelled_data_root is None
