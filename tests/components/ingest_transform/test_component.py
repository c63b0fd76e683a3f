"""IngestionTransform: drop-in for Transform, sharded output, recorded options, Beam args."""

import collections
import glob
import json
import os

import numpy as np
import pytest
import tensorflow_transform as tft
from tfx import v1 as tfx
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs

from tfx_distillery.components import IngestionTransform
from tfx_distillery.components.common import beam_runner
from tfx_distillery.components.common import reading
from tfx_distillery.components.ingest_transform import executor as ingest_executor
from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import summary
from tests import helpers

# TFX's own taxi module file, shipped in the wheel beside the taxi data.
STOCK_TAXI_MODULE = os.path.join(os.path.dirname(os.path.dirname(datasets.taxi_data_dir())),
                                 'taxi_utils_native_keras.py')


def channel(artifact_type):
  return tfx.dsl.Channel(type=artifact_type)


def make(**kwargs):
  return IngestionTransform(examples=channel(standard_artifacts.Examples),
                            schema=channel(standard_artifacts.Schema),
                            module_file=STOCK_TAXI_MODULE, **kwargs)


def test_it_has_every_input_and_output_of_transform():
  component = make()
  stock = tfx.components.Transform(examples=channel(standard_artifacts.Examples),
                                   schema=channel(standard_artifacts.Schema),
                                   module_file=STOCK_TAXI_MODULE)
  assert set(component.inputs) == set(stock.inputs)
  assert set(component.outputs) == set(stock.outputs)
  assert isinstance(component.spec, type(stock.spec))
  assert component.exec_properties['num_shards'] == 8


@pytest.mark.parametrize('kwargs, message', [
    ({'num_shards': 0}, 'num_shards must be an integer >= 1; got 0'),
    ({'cache': 'ssd'}, "cache must be one of auto, none, memory, file; got 'ssd'"),
    ({'shuffle_buffer': -5}, 'shuffle_buffer must be an integer >= 0'),
    ({'cache': 'file'}, 'cache_path must be set'),
    ({'cycle_length': 0}, 'cycle_length'),
    ({'direct_num_processes': 1}, 'direct_num_processes'),
    ({'packed_block_size': -1}, 'packed_block_size must be an integer >= 0'),
    ({'packed_block_size': True}, 'packed_block_size must be an integer >= 0'),
])
def test_bad_options_fail_at_construction_naming_the_option(kwargs, message):
  with pytest.raises(ValueError, match=message):
    make(**kwargs)


def test_unwritable_cache_path_fails_at_construction(tmp_path):
  (tmp_path / 'file').write_text('x')
  with pytest.raises(ValueError, match='cache_path .* can not be written'):
    make(cache='file', cache_path=str(tmp_path / 'file' / 'cache'))


RUNNER = beam_runner.RUNNER_ARGUMENT


@pytest.mark.parametrize('args, processes, size, expected', [
    ([], -1, 10, [RUNNER, '--direct_running_mode=in_memory', '--direct_num_workers=1']),
    ([], -1, ingest_executor.MULTI_PROCESSING_MIN_BYTES,
     [RUNNER, '--direct_running_mode=multi_processing', '--direct_num_workers=2']),
    ([], 4, 10, [RUNNER, '--direct_running_mode=multi_processing', '--direct_num_workers=4']),
    (['--runner=DataflowRunner'], -1, 10**12, []),
    (['--runner', 'DirectRunner'], 0, 10, ['--direct_running_mode=in_memory',
                                           '--direct_num_workers=1']),
    ([RUNNER], 0, 10, ['--direct_running_mode=in_memory', '--direct_num_workers=1']),
    (['--direct_running_mode=multi_threading'], 0, 10, [RUNNER]),
])
def test_direct_runner_mode_is_chosen_unless_the_user_chose(args, processes, size, expected):
  assert ingest_executor.direct_runner_args(args, processes, size) == expected


class RecordingExecutor(ingest_executor.Executor):
  """Keeps the options of every Beam pipeline the executor builds."""
  seen_options = []

  def _make_beam_pipeline(self):
    pipeline = super()._make_beam_pipeline()
    RecordingExecutor.seen_options.append(pipeline._options.get_all_options())  # pylint: disable=protected-access
    return pipeline


@pytest.fixture(scope='module')
def pipeline_run(tmp_path_factory):
  """CsvExampleGen -> SchemaGen -> IngestionTransform with TFX's own taxi module file."""
  tmp_path = tmp_path_factory.mktemp('ingest')
  data_root = datasets.sample_csv(datasets.taxi_data_dir(), str(tmp_path / 'data'), rows=600)
  example_gen = tfx.components.CsvExampleGen(input_base=data_root)
  statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs['statistics'])
  transform = IngestionTransform(examples=example_gen.outputs['examples'],
                                 schema=schema_gen.outputs['schema'],
                                 module_file=STOCK_TAXI_MODULE, num_shards=3)
  metadata_path = str(tmp_path / 'metadata.sqlite')
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name='ingest', pipeline_root=str(tmp_path / 'root'),
      components=[example_gen, statistics_gen, schema_gen, transform],
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path)))
  return tmp_path, metadata_path


def latest(metadata_path, type_name, producer=None):
  store = summary.open_store(metadata_path)
  return [artifact for artifact in summary.pipeline_artifacts(store, 'ingest', type_name)
          if producer is None or summary.producer_node(store, artifact) == producer]


@pytest.mark.e2e  # long: make test-e2e, beside the other tests of this run
def test_a_stock_preprocessing_fn_runs_and_writes_the_requested_shards(pipeline_run):
  _, metadata_path = pipeline_run
  assert helpers.executions_by_node(metadata_path)['IngestionTransform'][0].last_known_state == 3
  [artifact] = latest(metadata_path, 'Examples', 'IngestionTransform')
  for split in ('train', 'eval'):
    shards = sorted(glob.glob(os.path.join(artifact.uri, f'Split-{split}', '*.gz')))
    assert [os.path.basename(path)[-18:] for path in shards] == [
        f'-0000{index}-of-00003.gz' for index in range(3)]
  # Every bundle's files were renamed into place and the temporary folders removed.
  leftovers = [folder for folder, _, _ in os.walk(artifact.uri) if '.incomplete-' in folder]
  assert leftovers == []
  with open(os.path.join(artifact.uri, reading.OPTIONS_FILE_NAME)) as handle:
    recorded = json.load(handle)
  # cache='auto' chose memory: a 600-row sample is far below the size limit.
  assert recorded['cache'] == 'memory' and recorded['cycle_length'] == 8
  assert reading.read_options(artifact.uri) == reading.IngestionOptions(cache='memory')
  assert latest(metadata_path, 'TransformGraph')


@pytest.mark.e2e  # long: make test-e2e, beside the other tests of this run
def test_the_packed_copy_holds_exactly_the_transformed_examples(pipeline_run):
  _, metadata_path = pipeline_run
  [artifact] = latest(metadata_path, 'Examples', 'IngestionTransform')
  [graph] = latest(metadata_path, 'TransformGraph')
  tf_transform_output = tft.TFTransformOutput(graph.uri)
  for split in ('train', 'eval'):
    pattern = os.path.join(artifact.uri, f'Split-{split}', '*')
    packed = reading.packed_files(pattern)
    assert [os.path.basename(path)[-18:] for path in packed] == [
        f'-0000{index}-of-00003.gz' for index in range(3)]
    assert os.path.dirname(packed[0]) == os.path.join(artifact.uri, 'packed', f'Split-{split}')
    label_key = 'tips_xf'  # TFX's taxi module names its label this way.
    options = reading.IngestionOptions(shuffle_buffer=0)
    tuned = reading.make_dataset(pattern, tf_transform_output, 50, options,
                                 label_key=label_key, num_epochs=1)
    naive = reading.naive_dataset(pattern, tf_transform_output, 50, label_key=label_key)
    assert rows(tuned) == rows(naive) and sum(rows(naive).values()) > 100


def rows(dataset):
  """The multiset of examples a reader yields, each as a tuple of its values."""
  counted = collections.Counter()
  for features, labels in dataset.as_numpy_iterator():
    keys = sorted(features)
    for index, label in enumerate(labels):
      counted[tuple(str(np.asarray(features[key][index]).tolist()) for key in keys) + (int(label),)] += 1
  return counted


def run_inputs(metadata_path):
  """The fixture run's examples and schema as fresh artifacts, for calling the executor."""
  [examples] = latest(metadata_path, 'Examples', 'CsvExampleGen')
  [schema] = latest(metadata_path, 'Schema', 'SchemaGen')
  examples_artifact = standard_artifacts.Examples()
  examples_artifact.uri = examples.uri
  examples_artifact.split_names = '["train", "eval"]'
  schema_artifact = standard_artifacts.Schema()
  schema_artifact.uri = schema.uri
  return examples_artifact, schema_artifact


def transform_outputs(tmp_path, with_statistics):
  """Transform's outputs; with statistics, all of them (Transform writes all or none)."""
  kinds = [(standard_component_specs.TRANSFORM_GRAPH_KEY, standard_artifacts.TransformGraph),
           (standard_component_specs.TRANSFORMED_EXAMPLES_KEY, standard_artifacts.Examples)]
  if with_statistics:
    kinds += [(standard_component_specs.PRE_TRANSFORM_STATS_KEY,
               standard_artifacts.ExampleStatistics),
              (standard_component_specs.PRE_TRANSFORM_SCHEMA_KEY, standard_artifacts.Schema),
              (standard_component_specs.POST_TRANSFORM_STATS_KEY,
               standard_artifacts.ExampleStatistics),
              (standard_component_specs.POST_TRANSFORM_SCHEMA_KEY, standard_artifacts.Schema),
              (standard_component_specs.POST_TRANSFORM_ANOMALIES_KEY,
               standard_artifacts.ExampleAnomalies)]
  outputs = {}
  for key, artifact_type in kinds:
    artifact = artifact_type()
    artifact.uri = str(tmp_path / key)
    os.makedirs(artifact.uri)
    outputs[key] = [artifact]
  return outputs


def transformed_records(folder):
  """Every file's examples in the order it holds them, each serialized deterministically.

  (tfx_bsl's encoder writes a map's features in an order of its own, so the files' bytes
  are compared as parsed examples.)
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  records = {}
  for path in sorted(glob.glob(os.path.join(folder, '**', '*.gz'), recursive=True)):
    records[os.path.relpath(path, folder)] = [
        tf.train.Example.FromString(record.numpy()).SerializeToString(deterministic=True)
        for record in tf.data.TFRecordDataset(path, compression_type='GZIP')]
  return records


@pytest.fixture(scope='module')
def executor_runs(pipeline_run, tmp_path_factory):
  """The executor twice on the fixture run's examples, as a busy and an idle machine run it.

  Beam sizes its batches by their timing: 100 and 1,000 rows a batch stand for the two
  machines' choices, on about 400 train rows (four batches against one; at 25 rows a batch
  the run took 223 s). The first run also records its Beam pipelines' options, takes
  the user's Beam arguments and StatisticsGen's statistics; the second takes neither. Each
  Transform run costs about a minute of the suite, so the tests below share these two.
  """
  from apache_beam.transforms import util as beam_util  # pylint: disable=g-import-not-at-top
  _, metadata_path = pipeline_run
  tmp_path = tmp_path_factory.mktemp('executor-runs')
  examples_artifact, schema_artifact = run_inputs(metadata_path)
  RecordingExecutor.seen_options = []
  runs = []
  for index, (chosen_size, beam_arguments, executor_class) in enumerate((
      (100, ['--direct_num_workers=1', '--job_name=distillery-args-test'], RecordingExecutor),
      (1000, ['--direct_num_workers=1'], ingest_executor.Executor))):
    with_statistics = index == 0
    inputs = {standard_component_specs.EXAMPLES_KEY: [examples_artifact],
              standard_component_specs.SCHEMA_KEY: [schema_artifact]}
    if with_statistics:
      inputs['statistics'] = [marked_statistics(tmp_path / 'statistics', ['train', 'eval'])]
      component = make(num_shards=2, statistics=channel(standard_artifacts.ExampleStatistics))
      assert 'statistics' in component.inputs
    else:
      component = make(num_shards=2)
    exec_properties = dict(component.exec_properties)
    exec_properties['module_file'] = STOCK_TAXI_MODULE
    run_path = tmp_path / f'run-{index}'
    outputs = transform_outputs(run_path, with_statistics=with_statistics)
    context = executor_class.Context(beam_pipeline_args=beam_arguments,
                                     tmp_dir=str(run_path / 'tmp'), unique_id=str(index))
    with pytest.MonkeyPatch.context() as patch:
      patch.setattr(
          beam_util._BatchSizeEstimator, '_calculate_next_batch_size',  # pylint: disable=protected-access
          lambda self, size=chosen_size: max(self._min_batch_size,  # pylint: disable=protected-access
                                             min(size, self._max_batch_size)))  # pylint: disable=protected-access
      executor_class(context).Do(inputs, outputs, exec_properties)
    runs.append(run_path)
  return runs, list(RecordingExecutor.seen_options)


@pytest.mark.e2e  # long: make test-e2e
def test_beam_arguments_reach_the_beam_pipeline(executor_runs):
  [recorded_run, _], seen_options = executor_runs
  assert seen_options
  assert all(options['job_name'] == 'distillery-args-test' for options in seen_options)
  assert all(options['direct_running_mode'] == 'in_memory' for options in seen_options)
  train_shards = glob.glob(str(recorded_run / 'transformed_examples' / 'Split-train' / '*.gz'))
  assert len(train_shards) == 2


def test_a_block_is_packed_from_the_columns_and_a_ragged_feature_is_not():
  import pyarrow as pa  # pylint: disable=import-outside-toplevel
  batch = pa.RecordBatch.from_arrays(
      [pa.array([[float(row)] for row in range(5)], pa.large_list(pa.float32())),
       pa.array([[row, -row] for row in range(5)], pa.list_(pa.int64()))], ['x', 'pair'])
  packed = ingest_executor.pack_record_batch(batch, 2)
  assert packed.column(0).to_pylist() == [[0.0, 1.0], [2.0, 3.0], [4.0]]
  assert packed.column(1).to_pylist() == [[0, 0, 1, -1], [2, -2, 3, -3], [4, -4]]
  ragged = pa.RecordBatch.from_arrays([pa.array([[1], [2, 3]], pa.list_(pa.int64()))], ['x'])
  assert ingest_executor.pack_record_batch(ragged, 2) is None
  missing = pa.RecordBatch.from_arrays([pa.array([[1], None], pa.list_(pa.int64()))], ['x'])
  assert ingest_executor.pack_record_batch(missing, 2) is None


@pytest.mark.e2e  # long: make test-e2e
def test_sharded_writes_from_several_processes_keep_every_row_once(tmp_path):
  """Two DirectRunner processes, many bundles: every row in exactly one renamed file."""
  import apache_beam as beam  # pylint: disable=import-outside-toplevel
  from apache_beam.options import pipeline_options  # pylint: disable=import-outside-toplevel
  import pyarrow as pa  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tensorflow_transform.tf_metadata import schema_utils  # pylint: disable=import-outside-toplevel
  output_path = str(tmp_path / 'Split-train' / 'transformed_examples')
  names = [[f'{batch}-{index}'.encode() for index in range(7)] for batch in range(300)]
  feature_spec = {'name': tf.io.FixedLenFeature([], tf.string)}
  batches = [[pa.RecordBatch.from_arrays(
      [pa.array([[name] for name in batch], pa.large_list(pa.large_binary()))], ['name'])]
             for batch in names]
  options = pipeline_options.PipelineOptions(
      ['--direct_running_mode=multi_processing', '--direct_num_workers=2'])
  with beam.Pipeline(options=options) as pipeline:
    _ = (pipeline | beam.Create(batches, reshuffle=True)
         | beam.ParDo(ingest_executor.KeyRowsFn(schema_utils.schema_from_feature_spec(
             feature_spec)))
         | ingest_executor.WriteShardedTFRecords(
             output_path, 3, schema_utils.schema_from_feature_spec(feature_spec)))
  files = sorted(glob.glob(output_path + '-*'))
  assert [path[-18:] for path in files] == [f'-0000{index}-of-00003.gz' for index in range(3)]
  written = [tf.io.parse_single_example(record, feature_spec)['name'].numpy()
             for record in tf.data.TFRecordDataset(files, compression_type='GZIP')]
  assert sorted(written) == sorted(name for batch in names for name in batch)
  # Nothing else is left in the split's folder: no temporary folder, no stray file.
  assert sorted(os.listdir(tmp_path / 'Split-train')) == [os.path.basename(path) for path in files]


def record_batch(rows, column_order):
  import pyarrow as pa  # pylint: disable=import-outside-toplevel
  columns = {
      'x': pa.array([[float(row) / 3] for row in rows], pa.large_list(pa.float32())),
      'pair': pa.array([[row % 5, row % 7] for row in rows], pa.large_list(pa.int64())),
      'word': pa.array([[f'w{row % 11}'.encode()] * (row % 3) for row in rows],
                       pa.large_list(pa.large_binary())),
  }
  return pa.RecordBatch.from_arrays([columns[name] for name in column_order], column_order)


def test_a_rows_key_follows_its_values_not_its_batch_or_column_order():
  rows = list(range(200))
  whole = ingest_executor.row_keys(record_batch(rows, ['x', 'pair', 'word']))
  pieces = np.concatenate([ingest_executor.row_keys(record_batch(rows[start:start + 7],
                                                                 ['word', 'x', 'pair']))
                           for start in range(0, 200, 7)])
  assert whole.dtype == np.uint64 and np.array_equal(whole, pieces)
  # Every row of different values has its own key, and shards get a fair share.
  assert len(set(whole.tolist())) == 200
  assert min(np.bincount((whole % np.uint64(4)).astype(np.int64), minlength=4)) >= 30
  # The same values in another feature, or in another place of the row, are another row.
  import pyarrow as pa  # pylint: disable=import-outside-toplevel
  swapped = pa.RecordBatch.from_arrays(
      [pa.array([[1.0, 2.0], [2.0, 1.0]], pa.large_list(pa.float32())),
       pa.array([[3.0], [3.0]], pa.large_list(pa.float32()))], ['a', 'b'])
  renamed = pa.RecordBatch.from_arrays(list(swapped.columns), ['b', 'a'])
  keys = ingest_executor.row_keys(swapped).tolist() + ingest_executor.row_keys(renamed).tolist()
  assert len(set(keys)) == 4


@pytest.mark.e2e  # long: make test-e2e
def test_the_same_rows_in_other_batches_and_processes_make_the_same_shards(tmp_path):
  """Beam sizes batches and bundles by the machine's load: the shards must not care.

  The encoder orders features differently in each process, so the files are compared by
  what a reader parses from them, in order; the packed copy holds the same blocks.
  """
  import apache_beam as beam  # pylint: disable=import-outside-toplevel
  from apache_beam.options import pipeline_options  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tensorflow_transform.tf_metadata import schema_utils  # pylint: disable=import-outside-toplevel
  feature_spec = {'x': tf.io.FixedLenFeature([1], tf.float32),
                  'pair': tf.io.FixedLenFeature([2], tf.int64)}
  schema = schema_utils.schema_from_feature_spec(feature_spec)
  rows = list(range(500))

  def shards(batch_size, order, name, arguments):
    output_path = str(tmp_path / name / 'Split-train' / 'transformed_examples')
    # 'word' is not in the schema: the encoder leaves it out, as Transform's own key column.
    batches = [[record_batch(rows[start:start + batch_size], order)]
               for start in range(0, len(rows), batch_size)]
    with beam.Pipeline(options=pipeline_options.PipelineOptions(arguments)) as pipeline:
      _ = (pipeline | beam.Create(batches, reshuffle=True)
           | beam.ParDo(ingest_executor.KeyRowsFn(schema))
           | ingest_executor.WriteShardedTFRecords(output_path, 4, schema=schema,
                                                   packed_block_size=8))
    parsed = []
    for prefix in (output_path, ingest_executor.packed_output_path(output_path)):
      for path in sorted(glob.glob(prefix + '-*')):
        for record in tf.data.TFRecordDataset(path, compression_type='GZIP'):
          example = tf.io.parse_single_example(record, {
              key: tf.io.RaggedFeature(spec.dtype) for key, spec in feature_spec.items()})
          parsed.append((os.path.basename(path)[-18:],
                         {key: value.numpy().tolist() for key, value in example.items()}))
    return parsed

  one = shards(7, ['x', 'pair', 'word'], 'small', ['--direct_running_mode=in_memory'])
  other = shards(64, ['word', 'pair', 'x'], 'large', ['--direct_running_mode=multi_processing',
                                              '--direct_num_workers=2'])
  names = sorted({name for name, _ in one})
  assert names == [f'-0000{index}-of-00004.gz' for index in range(4)]
  # 500 examples and ceil(shard size / 8) blocks, the same on both runs and in the same order.
  assert sum(len(example['x']) for _, example in one) == 2 * 500 and one == other


def marked_statistics(folder, splits):
  """A statistics artifact whose files name themselves, so a copy is told from a computation."""
  from tensorflow_metadata.proto.v0 import statistics_pb2  # pylint: disable=import-outside-toplevel
  artifact = standard_artifacts.ExampleStatistics()
  artifact.uri = str(folder)
  artifact.split_names = json.dumps(splits)
  for split in splits:
    os.makedirs(folder / f'Split-{split}')
    statistics = statistics_pb2.DatasetFeatureStatisticsList()
    statistics.datasets.add(name=f'from StatisticsGen, {split}', num_examples=7)
    (folder / f'Split-{split}' / 'FeatureStats.pb').write_bytes(statistics.SerializeToString())
  return artifact


@pytest.mark.e2e  # long: make test-e2e
def test_statisticsgens_train_statistics_stand_for_the_pre_transform_ones(executor_runs):
  """One pass fewer over the rows: the file is copied; post-transform ones are computed."""
  from tensorflow_metadata.proto.v0 import statistics_pb2  # pylint: disable=import-outside-toplevel
  [run_path, _], _ = executor_runs

  def read(key):
    loaded = statistics_pb2.DatasetFeatureStatisticsList()
    loaded.ParseFromString((run_path / key / 'FeatureStats.pb').read_bytes())
    return loaded

  assert read('pre_transform_stats').datasets[0].name == 'from StatisticsGen, train'
  assert (run_path / 'pre_transform_schema' / 'schema.pbtxt').read_text().strip()
  post = read('post_transform_stats').datasets[0]
  assert post.num_examples > 300 and post.name != 'from StatisticsGen, train'
  assert sorted(os.listdir(run_path / 'pre_transform_stats')) == ['FeatureStats.pb']


@pytest.mark.parametrize('splits_config, statistics_splits', [
    (tfx.proto.SplitsConfig(analyze=['train', 'eval'], transform=['train', 'eval']),
     ['train', 'eval']),
    (None, ['eval']),
], ids=['two analyzed splits', 'no statistics of train'])
def test_pre_transform_statistics_are_computed_when_no_file_stands_for_them(
    tmp_path, splits_config, statistics_splits):
  from tfx.utils import proto_utils  # pylint: disable=import-outside-toplevel
  examples = standard_artifacts.Examples()
  examples.uri = str(tmp_path / 'examples')
  examples.split_names = '["train", "eval"]'
  exec_properties = {standard_component_specs.SPLITS_CONFIG_KEY:
                     proto_utils.proto_to_json(splits_config) if splits_config else None}
  inputs = {standard_component_specs.EXAMPLES_KEY: [examples],
            'statistics': [marked_statistics(tmp_path / 'statistics', statistics_splits)]}
  outputs = transform_outputs(tmp_path, with_statistics=True)
  assert ingest_executor.reusable_statistics(inputs, outputs, exec_properties) is None
  inputs['statistics'] = [marked_statistics(tmp_path / 'statistics-train', ['train'])]
  assert ingest_executor.reusable_statistics(inputs, outputs, {}) == (
      str(tmp_path / 'statistics-train' / 'Split-train' / 'FeatureStats.pb'),
      str(tmp_path / 'pre_transform_stats' / 'FeatureStats.pb'))


def keep_options(unused_stats_type, options):
  return options


def test_a_users_stats_options_updater_fn_has_them_computed():
  """A module's updater may change what the statistics hold, so no copy stands for them."""
  from tfx.components.transform import labels  # pylint: disable=import-outside-toplevel
  executor = ingest_executor.Executor()
  executor._copied_statistics = ingest_executor.CopiedStatistics('source', 'target')  # pylint: disable=protected-access
  assert executor._GetStatsOptionsUpdaterFn(  # pylint: disable=protected-access
      {labels.STATS_OPTIONS_UPDATER_FN: f'{__name__}.keep_options'}) is keep_options
  assert executor._copied_statistics.source is None  # pylint: disable=protected-access
  executor._copied_statistics = ingest_executor.CopiedStatistics('source', 'target')  # pylint: disable=protected-access
  assert executor._GetStatsOptionsUpdaterFn({}) is None  # pylint: disable=protected-access
  assert executor._copied_statistics.source == 'source'  # pylint: disable=protected-access


@pytest.mark.e2e  # long: make test-e2e
def test_the_same_rows_under_another_load_make_the_same_transform(executor_runs):
  """Beam sizes its batches by their timing; Transform's must not follow the machine's load.

  The two runs got batches of another size wherever Beam is left to choose (as a busy and
  an idle machine would); the transformed examples must come out the same, byte for byte.
  """
  run_paths, _ = executor_runs
  runs = [transformed_records(str(run_path / 'transformed_examples')) for run_path in run_paths]
  assert runs[0] and sum(len(records) for records in runs[0].values()) > 100
  assert runs[0] == runs[1]
