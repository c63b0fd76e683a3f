"""The reading library: same examples as the naive reader, right sharding, clear option errors."""

import collections
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tfx_distillery.components.common import reading
from tests import helpers

RAW_SPEC = {'x': tf.io.FixedLenFeature([], tf.float32),
            'word': tf.io.FixedLenFeature([], tf.string),
            'label': tf.io.FixedLenFeature([], tf.int64)}


def preprocessing_fn(inputs):
  import tensorflow_transform as tft
  return {'x_xf': inputs['x'] * 2.0,
          'word_xf': tft.compute_and_apply_vocabulary(inputs['word']),
          'label': inputs['label']}


@pytest.fixture(scope='module')
def transformed(tmp_path_factory):
  rows = [{'x': float(index), 'word': f'w{index % 7}', 'label': index % 3}
          for index in range(500)]
  return helpers.run_transform(preprocessing_fn, rows, RAW_SPEC,
                               str(tmp_path_factory.mktemp('reading')), num_shards=4)


def as_records(dataset):
  records = collections.Counter()
  for features, labels in dataset.as_numpy_iterator():
    for x, word, label in zip(features['x_xf'], features['word_xf'], labels):
      records[(float(x), int(word), int(label))] += 1
  return records


def write_packed_copy(pattern, tf_transform_output, block_size, limit=None):
  """Packs the shards' examples the way IngestionTransform does, beside them."""
  records = list(tf.data.TFRecordDataset(reading.list_files(pattern),
                                         compression_type='GZIP').as_numpy_iterator())[:limit]
  split_folder = os.path.dirname(pattern)
  packed_folder = os.path.join(os.path.dirname(split_folder), reading.PACKED_FOLDER_NAME,
                               os.path.basename(split_folder))
  os.makedirs(packed_folder, exist_ok=True)
  spec = tf_transform_output.transformed_feature_spec()
  with tf.io.TFRecordWriter(os.path.join(packed_folder, 'packed-00000-of-00001.gz'),
                            tf.io.TFRecordOptions(compression_type='GZIP')) as writer:
    for start in range(0, len(records), block_size):
      writer.write(reading.pack_examples(records[start:start + block_size], spec))
  return packed_folder


@pytest.fixture(scope='module')
def packed(tmp_path_factory):
  """The fixture's rows in the IngestionTransform layout, with a packed copy (last block partial)."""
  rows = [{'x': float(index), 'word': f'w{index % 7}', 'label': index % 3}
          for index in range(500)]
  output_dir = str(tmp_path_factory.mktemp('packed'))
  tf_transform_output, pattern = helpers.run_transform(preprocessing_fn, rows, RAW_SPEC,
                                                       output_dir, num_shards=4)
  split_folder = os.path.join(output_dir, 'Split-train')
  os.rename(os.path.dirname(pattern), split_folder)
  pattern = os.path.join(split_folder, '*')
  write_packed_copy(pattern, tf_transform_output, block_size=32)
  return tf_transform_output, pattern


@pytest.mark.parametrize('cache', ['none', 'memory'])
def test_packed_copy_yields_the_same_multiset_as_the_naive_reader(packed, cache):
  tf_transform_output, pattern = packed
  assert reading.packed_files(pattern)
  tuned = reading.make_dataset(pattern, tf_transform_output, batch_size=64,
                               options=reading.IngestionOptions(cache=cache), num_epochs=1)
  sizes = [int(labels.shape[0]) for _, labels in tuned]
  assert sizes == [64] * 7 + [52]  # `rebatch` cuts exact batches out of 32-example blocks.
  tuned_records = as_records(tuned)
  assert sum(tuned_records.values()) == 500
  assert tuned_records == as_records(reading.naive_dataset(pattern, tf_transform_output, 64))


def test_reader_prefers_the_packed_copy_unless_told_not_to(tmp_path, transformed):
  tf_transform_output, pattern = transformed
  split_folder = tmp_path / 'Split-train'
  split_folder.mkdir()
  for path in reading.list_files(pattern):
    os.symlink(path, split_folder / os.path.basename(path))
  # A packed copy of only the first 96 examples shows which copy was read.
  write_packed_copy(str(split_folder / '*'), tf_transform_output, block_size=32, limit=96)

  def count(options):
    dataset = reading.make_dataset(str(split_folder / '*'), tf_transform_output, 64, options,
                                   num_epochs=1)
    return sum(as_records(dataset).values())

  assert count(reading.IngestionOptions()) == 96
  assert count(reading.IngestionOptions(packed=False)) == 500


@pytest.mark.parametrize('cache', ['none', 'memory'])
def test_packed_copy_drops_remainders_across_passes(packed, cache):
  tf_transform_output, pattern = packed
  dataset = reading.make_dataset(pattern, tf_transform_output, 300,
                                 reading.IngestionOptions(cache=cache), drop_remainder=True)
  sizes = [int(labels.shape[0]) for _, labels in dataset.take(4)]
  assert sizes == [300, 300, 300, 300]


def test_only_fixed_shape_features_can_be_packed():
  assert reading.can_pack({'a': tf.io.FixedLenFeature([3], tf.float32)})
  assert not reading.can_pack({'a': tf.io.FixedLenFeature([], tf.int64),
                               'b': tf.io.VarLenFeature(tf.int64)})


@pytest.mark.parametrize('cache', ['none', 'memory'])
def test_tuned_reader_yields_the_same_multiset_as_the_naive_one(transformed, cache):
  tf_transform_output, pattern = transformed
  tuned = reading.make_dataset(pattern, tf_transform_output, batch_size=64,
                               options=reading.IngestionOptions(cache=cache), num_epochs=1)
  naive = reading.naive_dataset(pattern, tf_transform_output, batch_size=64)
  tuned_records = as_records(tuned)
  assert sum(tuned_records.values()) == 500
  assert tuned_records == as_records(naive)


def test_file_cache_writes_cache_files_and_keeps_every_example(transformed, tmp_path):
  tf_transform_output, pattern = transformed
  options = reading.IngestionOptions(cache='file', cache_path=str(tmp_path / 'cache' / 'c'))
  dataset = reading.make_dataset(pattern, tf_transform_output, 50, options, num_epochs=2)
  assert sum(as_records(dataset).values()) == 1000
  assert list((tmp_path / 'cache').glob('c*'))


def test_feature_keys_parse_only_the_named_columns(transformed):
  tf_transform_output, pattern = transformed
  dataset = reading.make_dataset(pattern, tf_transform_output, 32, feature_keys=['x_xf'],
                                 num_epochs=1)
  features, _ = next(iter(dataset))
  assert set(features) == {'x_xf'}


def test_unknown_feature_key_is_named(transformed):
  tf_transform_output, pattern = transformed
  with pytest.raises(ValueError, match='nope'):
    reading.make_dataset(pattern, tf_transform_output, 32, feature_keys=['nope'])


def test_deterministic_reads_repeat_in_the_same_order(transformed):
  tf_transform_output, pattern = transformed
  options = reading.IngestionOptions(deterministic=True, seed=7)

  def first_labels():
    dataset = reading.make_dataset(pattern, tf_transform_output, 100, options, num_epochs=1)
    return np.concatenate([labels for _, labels in dataset.as_numpy_iterator()])

  np.testing.assert_array_equal(first_labels(), first_labels())


def test_auto_shard_policy_is_file_with_enough_shards_and_data_otherwise():
  assert reading.auto_shard_policy(8, 2) == tf.data.experimental.AutoShardPolicy.FILE
  assert reading.auto_shard_policy(2, 2) == tf.data.experimental.AutoShardPolicy.FILE
  assert reading.auto_shard_policy(1, 2) == tf.data.experimental.AutoShardPolicy.DATA


def test_workers_are_counted_from_tf_config(monkeypatch):
  monkeypatch.setenv('TF_CONFIG', json.dumps({
      'cluster': {'worker': ['localhost:1', 'localhost:2', 'localhost:3']},
      'task': {'type': 'worker', 'index': 0}}))
  assert reading.workers_in_cluster() == 3
  monkeypatch.delenv('TF_CONFIG')
  assert reading.workers_in_cluster() == 1


def test_options_round_trip_through_json():
  options = reading.IngestionOptions(cycle_length=4, cache='memory', seed=3)
  assert reading.IngestionOptions.from_json(options.to_json()) == options


@pytest.mark.parametrize('kwargs, message', [
    ({'cycle_length': 0}, 'cycle_length'),
    ({'cache': 'disk'}, "cache must be one of none, memory, file; got 'disk'"),
    ({'cache': 'file'}, 'cache_path must be set'),
    ({'compression': 'BZIP2'}, 'compression'),
    ({'shuffle_buffer': -1}, 'shuffle_buffer'),
])
def test_bad_options_are_rejected_by_name(kwargs, message):
  with pytest.raises(ValueError, match=message):
    reading.IngestionOptions(**kwargs)


def test_unwritable_cache_path_is_rejected(tmp_path):
  # A regular file where the cache folder should be: nothing can be created below it.
  (tmp_path / 'a_file').write_text('not a folder')
  with pytest.raises(ValueError, match='cache_path .* can not be written'):
    reading.IngestionOptions(cache='file', cache_path=str(tmp_path / 'a_file' / 'sub' / 'c'))


def test_no_matching_files_is_a_clear_error(transformed, tmp_path):
  tf_transform_output, _ = transformed
  with pytest.raises(FileNotFoundError, match='No files match'):
    reading.make_dataset(str(tmp_path / 'none*'), tf_transform_output, 8)


def test_batch_map_fn_runs_on_every_parsed_batch(transformed):
  tf_transform_output, pattern = transformed

  def add_one_to_labels(features, labels):
    return features, labels + 1

  dataset = reading.make_dataset(pattern, tf_transform_output, 100, num_epochs=1,
                                 batch_map_fn=add_one_to_labels)
  labels = np.concatenate([batch_labels for _, batch_labels in dataset.as_numpy_iterator()])
  assert sorted(set(labels.tolist())) == [1, 2, 3]


@pytest.mark.parametrize('cache', ['none', 'memory'])
def test_dropping_remainders_still_yields_batches_when_a_pass_is_smaller_than_one(
    transformed, cache):
  tf_transform_output, pattern = transformed
  # 500 examples, batch 300: every pass leaves a remainder, batches must span passes.
  dataset = reading.make_dataset(pattern, tf_transform_output, 300,
                                 reading.IngestionOptions(cache=cache), drop_remainder=True)
  sizes = [int(labels.shape[0]) for _, labels in dataset.take(4)]
  assert sizes == [300, 300, 300, 300]


def test_empty_shards_are_not_shared_out_to_workers(transformed, tmp_path):
  """A worker given only empty files would leave the others waiting in a collective."""
  output, pattern = transformed
  shards = sorted(tf.io.gfile.glob(pattern))
  empty = [str(tmp_path / f'empty-{index}.gz') for index in range(len(shards))]
  for path in empty:
    with tf.io.TFRecordWriter(path, options='GZIP'):
      pass
  # Alternating files: by FILE sharding, the second worker would get only the empty ones.
  files = [name for pair in zip(shards, empty) for name in pair]
  assert reading.files_with_records(files, 'GZIP') == shards
  options = reading.IngestionOptions(packed=False, cache='none', shuffle_files=False)
  dataset = reading.make_dataset(files, output, 16, options, num_workers=2)
  assert dataset.options().experimental_distribute.auto_shard_policy == (
      tf.data.experimental.AutoShardPolicy.FILE)
  dataset = reading.make_dataset(shards[:1] + empty, output, 16, options, num_workers=2)
  # One file with records for two workers: each reads it and keeps its own records.
  assert dataset.options().experimental_distribute.auto_shard_policy == (
      tf.data.experimental.AutoShardPolicy.DATA)
  single = reading.make_dataset(files, output, 16, options, num_workers=1)
  assert single.options().experimental_distribute.auto_shard_policy == (
      tf.data.experimental.AutoShardPolicy.FILE)
