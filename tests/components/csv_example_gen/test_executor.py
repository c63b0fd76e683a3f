"""ArrowCsvExampleGen writes what TFX's CsvExampleGen writes, from Arrow blocks."""

import collections
import os

import pytest
import tensorflow as tf
from tfx.components.example_gen.csv_example_gen import executor as stock_executor
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx.utils import proto_utils

from tfx_distillery.components.csv_example_gen import executor as arrow_executor
from tfx_distillery.pipelines import datasets

SPLITS = (('train', 6), ('eval', 2), ('test', 2))


def run_executor(executor_class, input_base, output_uri, splits=SPLITS, input_splits=None):
  """Runs an ExampleGen executor in memory; returns {split: [tf.Example, ...]}."""
  examples = standard_artifacts.Examples()
  examples.uri = output_uri
  if input_splits:
    input_config = example_gen_pb2.Input(splits=[
        example_gen_pb2.Input.Split(name=name, pattern=pattern) for name, pattern in input_splits])
    output_config = example_gen_pb2.Output()
  else:
    input_config = example_gen_pb2.Input(splits=[
        example_gen_pb2.Input.Split(name='single_split', pattern='*')])
    output_config = example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(splits=[
        example_gen_pb2.SplitConfig.Split(name=name, hash_buckets=buckets)
        for name, buckets in splits]))
  properties = {
      'input_base': str(input_base),
      'input_config': proto_utils.proto_to_json(input_config),
      'output_config': proto_utils.proto_to_json(output_config),
      'output_data_format': example_gen_pb2.FORMAT_TF_EXAMPLE,
      'output_file_format': example_gen_pb2.FORMAT_TFRECORDS_GZIP,
  }
  context = executor_class.Context(
      beam_pipeline_args=['--direct_running_mode=in_memory', '--direct_num_workers=1'])
  executor_class(context).Do({}, {'examples': [examples]}, properties)
  names = [name for name, _ in input_splits] if input_splits else [name for name, _ in splits]
  return {name: [tf.train.Example.FromString(record) for record in tf.data.TFRecordDataset(
      tf.io.gfile.glob(os.path.join(output_uri, f'Split-{name}', '*')),
      compression_type='GZIP').as_numpy_iterator()] for name in names}


def canonical(examples):
  return collections.Counter(example.SerializeToString(deterministic=True)
                             for example in examples)


def everything(by_split):
  return canonical([example for examples in by_split.values() for example in examples])


def test_taxi_csv_gives_the_examples_csv_example_gen_gives(tmp_path):
  taxi = datasets.taxi_data_dir()
  ours = run_executor(arrow_executor.Executor, taxi, str(tmp_path / 'arrow'))
  stock = run_executor(stock_executor.Executor, taxi, str(tmp_path / 'stock'))
  assert everything(ours) == everything(stock)
  total = sum(len(examples) for examples in ours.values())
  assert total == 15002
  # The hash buckets' shares (6:2:2), within a few standard errors.
  assert abs(len(ours['train']) / total - 0.6) < 0.02
  assert abs(len(ours['test']) / total - 0.2) < 0.02


def test_types_empty_cells_and_quoted_newlines_as_csv_example_gen_reads_them(tmp_path):
  data = tmp_path / 'data'
  data.mkdir()
  (data / 'a.csv').write_text(
      'count,price,name,mixed,never,note\n'
      '1,2.5,north,3,,"two\nlines"\n'
      ',7,south,x,,plain\n'
      '3,,,4.5,,"with, comma"\n')
  (data / 'b.csv').write_text('count,price,name,mixed,never,note\n12,0.125,east,7,,\n')
  ours = run_executor(arrow_executor.Executor, data, str(tmp_path / 'arrow'))
  stock = run_executor(stock_executor.Executor, data, str(tmp_path / 'stock'))
  assert everything(ours) == everything(stock)
  example = next(example for examples in ours.values() for example in examples
                 if example.features.feature['name'].bytes_list.value == [b'north'])
  feature = example.features.feature
  assert list(feature['count'].int64_list.value) == [1]
  assert list(feature['price'].float_list.value) == [2.5]
  assert list(feature['mixed'].bytes_list.value) == [b'3']
  assert feature['note'].bytes_list.value == [b'two\nlines']
  assert feature['never'].WhichOneof('kind') is None


def test_a_split_is_the_same_on_every_run_and_identical_rows_share_it(tmp_path):
  data = tmp_path / 'data'
  data.mkdir()
  rows = [f'{index % 7},{index % 3}.5,city{index % 5}' for index in range(400)]
  (data / 'data.csv').write_text('a,b,c\n' + '\n'.join(rows) + '\n')
  first = run_executor(arrow_executor.Executor, data, str(tmp_path / 'first'))
  second = run_executor(arrow_executor.Executor, data, str(tmp_path / 'second'))
  for name in first:
    assert canonical(first[name]) == canonical(second[name])
  owners = collections.defaultdict(set)
  for name, examples in first.items():
    for example in examples:
      owners[example.SerializeToString(deterministic=True)].add(name)
  assert len(owners) == 105 and all(len(names) == 1 for names in owners.values())


def test_input_splits_are_kept_as_given(tmp_path):
  for name, count in (('train', 5), ('eval', 3)):
    (tmp_path / name).mkdir()
    (tmp_path / name / 'data.csv').write_text(
        'x,y\n' + ''.join(f'{index},{name}\n' for index in range(count)))
  ours = run_executor(arrow_executor.Executor, tmp_path, str(tmp_path / 'out'),
                      input_splits=[('train', 'train/*'), ('eval', 'eval/*')])
  assert {name: len(examples) for name, examples in ours.items()} == {'train': 5, 'eval': 3}
  assert {example.features.feature['y'].bytes_list.value[0] for example in ours['eval']} == {
      b'eval'}


def test_files_with_different_headers_are_refused_naming_the_pattern(tmp_path):
  data = tmp_path / 'data'
  data.mkdir()
  (data / 'a.csv').write_text('x,y\n1,2\n')
  (data / 'b.csv').write_text('x,z\n1,2\n')
  with pytest.raises(RuntimeError, match='different header'):
    run_executor(arrow_executor.Executor, data, str(tmp_path / 'out'))


def test_written_files_are_renamed_into_place_leaving_no_temporary_file(tmp_path):
  data = tmp_path / 'data'
  data.mkdir()
  for index in range(3):
    (data / f'part{index}.csv').write_text('x\n' + ''.join(f'{row}\n' for row in range(30)))
  # What a retried bundle would leave: a temporary file nobody yielded.
  leftover = tmp_path / 'out' / 'Split-eval' / f'{arrow_executor.TEMPORARY_PREFIX}00000-old.gz'
  leftover.parent.mkdir(parents=True)
  leftover.write_bytes(b'half a file')
  run_executor(arrow_executor.Executor, data, str(tmp_path / 'out'))
  for name, _ in SPLITS:
    files = sorted(os.listdir(tmp_path / 'out' / f'Split-{name}'))
    assert files == [f'data_tfrecord-{shard:05d}-of-00003.gz' for shard in range(3)]


def test_the_per_record_transform_composes_with_tfx_splitting(tmp_path):
  """GetInputSourceToExamplePTransform, for a user's own ExampleGen: TFX's per-record path."""
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  from apache_beam.testing import util as beam_testing  # pylint: disable=g-import-not-at-top
  data = tmp_path / 'data'
  data.mkdir()
  (data / 'a.csv').write_text('x,y\n1,north\n2,\n')
  to_examples = arrow_executor.Executor().GetInputSourceToExamplePTransform()

  def as_values(records):
    return sorted((example.features.feature['x'].int64_list.value[0],
                   list(example.features.feature['y'].bytes_list.value))
                  for example in map(tf.train.Example.FromString, records))

  with beam.Pipeline() as pipeline:
    records = pipeline | to_examples({'input_base': str(data)}, '*')  # pylint: disable=no-value-for-parameter
    beam_testing.assert_that(records | beam.combiners.ToList() | beam.Map(as_values),
                             beam_testing.equal_to([[(1, [b'north']), (2, [])]]))


@pytest.mark.parametrize('content', ['', 'x,y\n'], ids=['empty_file', 'header_only'])
def test_a_file_without_rows_gives_no_examples_as_csv_example_gen_does(tmp_path, content):
  data = tmp_path / 'data'
  data.mkdir()
  (data / 'data.csv').write_text(content)
  ours = run_executor(arrow_executor.Executor, data, str(tmp_path / 'arrow'))
  stock = run_executor(stock_executor.Executor, data, str(tmp_path / 'stock'))
  assert {name: len(examples) for name, examples in ours.items()} == {
      name: len(examples) for name, examples in stock.items()} == {
          'train': 0, 'eval': 0, 'test': 0}
