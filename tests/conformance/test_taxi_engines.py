"""Same output, any engine: TFX's taxi pipeline's Beam stages, and our IngestionTransform, on
Beam's DirectRunner, on a local Apache Flink cluster and on a local Apache Spark cluster.

The stages are built as `taxi_pipeline_native_keras.py` builds them (its CsvExampleGen over
the taxi CSV in the wheel, its first SLICE_ROWS rows, StatisticsGen, SchemaGen with inferred shapes, ExampleValidator,
Transform with `taxi_utils_native_keras.py` unchanged), with our IngestionTransform on the
same examples and module file. Each engine's cluster is started and stopped here.

What Beam promises exactly is compared exactly: the examples (CsvExampleGen splits rows by
a hash of their content), the schema, the vocabularies, and every integer feature of the
transformed examples. Floating-point analyzers (means, variances) sum in whatever order the
engine combines, so their results and the features they make are compared to a relative
1e-6; statistics' quantiles come from sketches and are compared to a tolerance of the range.
"""

import collections
import csv
import filecmp
import functools
import glob
import json
import os
import subprocess
import sys

from google.protobuf import text_format
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx import v1 as tfx

from tfx_distillery.components import IngestionTransform
from tfx_distillery.components.common import beam_runner
from tfx_distillery.pipelines import beam_cluster
from tfx_distillery.pipelines import datasets
from tests import helpers
from tests.conformance import chain

# Long: make test-e2e. Three runs of the stages and two clusters' start-ups in the module's
# first test: 20 minutes on a busy 2-core machine.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3600)]

NAME = 'taxi-engines'
MODULE_FILE = os.path.join(chain.TFX_ROOT, 'examples', 'chicago_taxi_pipeline',
                           'taxi_utils_native_keras.py')
ENGINES = ('direct', 'flink', 'spark')
SPLITS = ('train', 'eval')
TRANSFORMS = ('Transform', 'IngestionTransform')
# The jobs an engine's job server ran, written beside its run.
JOBS_FILE = 'engine-jobs.json'
# What the cluster wrote beside its logs while the stages ran, and what it left after its stop.
DISK_FILE = 'engine-disk.json'
# Spark's executors fetched the job server's 420 MB classpath for each of the 4 jobs (1.7 GB);
# with nothing staged they write their logs and an empty jar.
SPARK_SCRATCH_BYTES = 50 * 2**20
# Flink's blob store held the job server's 150 MB classpath on the JobManager and on each
# TaskManager for each of the 4 jobs (about 1 GB); jobs that stage nothing leave Flink's own
# RPC jars and execution graphs (about 90 MB).
FLINK_SCRATCH_BYTES = 150 * 2**20
# The stages that are Beam jobs: CsvExampleGen, StatisticsGen, Transform, IngestionTransform.
BEAM_STAGES = 4
# One engine's run, its cluster's start and stop included (about 200 s beside the others).
CLUSTER_RUN_TIMEOUT_S = 1500
# Sums in another order: the same float to about 7 digits (float32), far below any signal.
FLOAT_TOLERANCE = 1e-6
# The taxi CSV's first rows, a third of its 15,002 (#82: the long suite's work): the same
# comparisons, each split still over 1,000 examples, and each engine's run and DirectRunner's
# reference compute and are decoded a third as much.
SLICE_ROWS = 5000


def write_taxi_slice(folder: str) -> str:
  """The taxi CSV in the wheel as `data.csv`: its header, its first SLICE_ROWS rows, and any
  later row that gives a value to a column those rows leave empty. TFX's taxi CSV has one
  pickup census tract in 15,002 rows: without its row that column would be empty, and the
  statistics' commonest value of it, which the comparison reads, would not exist."""
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(datasets.taxi_data_dir(), 'data.csv'), newline='') as source:
    lines = source.read().splitlines(keepends=True)
  header = next(csv.reader(lines[:1]))
  kept = lines[:SLICE_ROWS + 1]
  filled = set()
  for row in csv.reader(kept[1:]):
    filled.update(name for name, value in zip(header, row) if value)
  for line, row in zip(lines[SLICE_ROWS + 1:], csv.reader(lines[SLICE_ROWS + 1:])):
    found = {name for name, value in zip(header, row) if value} - filled
    if found:
      kept.append(line)
      filled |= found
  with open(os.path.join(folder, 'data.csv'), 'w', newline='') as target:
    target.writelines(kept)
  return folder


def taxi_beam_stages(data_dir: str):
  """TFX's taxi example up to its Transform, as its pipeline file wires them, and ours."""
  example_gen = tfx.components.CsvExampleGen(input_base=data_dir)
  statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs['statistics'],
                                        infer_feature_shape=True)
  example_validator = tfx.components.ExampleValidator(
      statistics=statistics_gen.outputs['statistics'], schema=schema_gen.outputs['schema'])
  transform = tfx.components.Transform(examples=example_gen.outputs['examples'],
                                       schema=schema_gen.outputs['schema'],
                                       module_file=MODULE_FILE)
  ours = IngestionTransform(examples=example_gen.outputs['examples'],
                            schema=schema_gen.outputs['schema'], module_file=MODULE_FILE,
                            statistics=statistics_gen.outputs['statistics'],
                            label_key='tips_xf')
  return [example_gen, statistics_gen, schema_gen, example_validator, transform, ours]


def run_on(engine: str, root: str, data_dir: str) -> str:
  components = taxi_beam_stages(data_dir)
  if engine == 'direct':
    arguments = beam_runner.with_direct_runner(['--direct_running_mode=in_memory',
                                                '--direct_num_workers=1'])
    tfx.orchestration.LocalDagRunner().run(_pipeline(root, components, arguments))
    return root
  with beam_cluster.start(engine, os.path.join(root, 'cluster')) as cluster:
    tfx.orchestration.LocalDagRunner().run(_pipeline(root, components,
                                                     cluster.beam_pipeline_args()))
    # What the engine itself ran, from its job server: the proof that the stages were
    # jobs on it, and not DirectRunner's in this process.
    with open(os.path.join(root, JOBS_FILE), 'w') as handle:
      json.dump(cluster.jobs(), handle)
    scratch = {'bytes_while_running': folder_bytes(cluster.work_dir,
                                                   beam_cluster.KEPT_AFTER_STOP)}
  scratch['left_after_stop'] = sorted(os.listdir(cluster.work_dir))
  with open(os.path.join(root, DISK_FILE), 'w') as handle:
    json.dump(scratch, handle)
  return root


def folder_bytes(folder, leaving_out=()):
  return sum(os.path.getsize(os.path.join(parent, name))
             for top in os.listdir(folder) if top not in leaving_out
             for parent, _, names in os.walk(os.path.join(folder, top)) for name in names)


def _pipeline(root, components, beam_pipeline_args):
  return chain.pipeline(NAME, root, components, beam_pipeline_args)


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """Each engine's run. Flink's and Spark's each in a process of its own, at the same time as
  DirectRunner's here: a run on a local cluster waits on its JVMs' scheduling more than it
  computes (alone, the three used about one of the two cores), so side by side they took
  about 240 s where one after another took 300."""
  roots = {engine: str(tmp_path_factory.mktemp(engine)) for engine in ENGINES}
  data_dir = write_taxi_slice(str(tmp_path_factory.mktemp('taxi-slice')))
  logs, clusters = {}, {}
  for engine in ENGINES[1:]:
    logs[engine] = os.path.join(roots[engine], 'run.log')
    with open(logs[engine], 'wb') as log:
      clusters[engine] = subprocess.Popen(
          [sys.executable, '-m', 'tests.conformance.test_taxi_engines', engine, roots[engine],
           data_dir],
          stdout=log, stderr=subprocess.STDOUT, **helpers.child_process_options())
  try:
    run_on('direct', roots['direct'], data_dir)
    for engine, process in clusters.items():
      process.wait(timeout=CLUSTER_RUN_TIMEOUT_S)
      with open(logs[engine], errors='replace') as log:
        assert process.returncode == 0, (engine, log.read()[-3000:])
  finally:
    for process in clusters.values():
      process.kill()
  return roots


def uri(root, node, type_name):
  return chain.output_uri(root, NAME, node, type_name)


def records(pattern):
  files = sorted(glob.glob(pattern))
  assert files, pattern
  return [record.numpy() for record in tf.data.TFRecordDataset(files, compression_type='GZIP')]


def canonical(serialized):
  # An engine may write a tf.Example's features in another order: the same example, other
  # bytes. Serialized deterministically, as ExampleGen hashes them to choose the split.
  return sorted(tf.train.Example.FromString(record).SerializeToString(deterministic=True)
                for record in serialized)


@functools.lru_cache(maxsize=None)
def transformed(root, node, split):
  """A split of `node`'s transformed examples, decoded once for every test that reads it.

  Returns (the count of examples, {(feature, kind): the values of every example}, a Counter
  of the examples' integer features as rows). DirectRunner's are compared with both other
  engines: decoding them once rather than once per engine and per check saves minutes.
  """
  columns, integer_rows = collections.defaultdict(list), collections.Counter()
  serialized = records(os.path.join(uri(root, node, 'Examples'), f'Split-{split}', '*'))
  for record in serialized:
    features = tf.train.Example.FromString(record).features.feature
    integers = []
    for name, feature in features.items():
      kind = feature.WhichOneof('kind')
      values = getattr(feature, kind).value
      columns[(name, kind)].extend(values)
      if kind == 'int64_list':
        integers.append((name, tuple(values)))
    integer_rows[tuple(sorted(integers))] += 1
  return len(serialized), dict(columns), integer_rows


@pytest.mark.parametrize('engine', ENGINES[1:])
def test_every_beam_stage_ran_as_a_job_on_the_engine(runs, engine):
  # From the engine's own job server: without the runner's arguments the stages would run on
  # DirectRunner in the run's process, the engine would list no job, and every comparison
  # below would compare DirectRunner with itself.
  with open(os.path.join(runs[engine], JOBS_FILE)) as handle:
    jobs = json.load(handle)
  done = [job for job in jobs if job['state'] == 'DONE']
  assert len(done) >= BEAM_STAGES and len(done) == len(jobs), jobs


@pytest.mark.parametrize('engine', ENGINES[1:])
def test_the_cluster_leaves_only_its_configuration_and_logs(runs, engine):
  # A full /tmp on CI's machine failed every test at its set-up.
  with open(os.path.join(runs[engine], DISK_FILE)) as handle:
    disk = json.load(handle)
  kept = ['conf', 'logs'] if engine == 'flink' else ['logs']  # Spark's needs no configuration.
  assert disk['left_after_stop'] == kept, disk
  assert disk['bytes_while_running'] < (SPARK_SCRATCH_BYTES if engine == 'spark'
                                       else FLINK_SCRATCH_BYTES), disk


@pytest.mark.parametrize('engine', ENGINES[1:])
def test_the_examples_are_the_same_on_every_engine(runs, engine):
  for split in SPLITS:
    direct = records(os.path.join(uri(runs['direct'], 'CsvExampleGen', 'Examples'),
                                  f'Split-{split}', '*'))
    other = records(os.path.join(uri(runs[engine], 'CsvExampleGen', 'Examples'),
                                 f'Split-{split}', '*'))
    assert len(direct) > 1000
    assert canonical(other) == canonical(direct), split


def statistics(root, split):
  path = os.path.join(uri(root, 'StatisticsGen', 'ExampleStatistics'), f'Split-{split}',
                      'FeatureStats.pb')
  with open(path, 'rb') as handle:
    whole = statistics_pb2.DatasetFeatureStatisticsList.FromString(handle.read())
  [dataset] = whole.datasets
  return dataset


@pytest.mark.parametrize('engine', ENGINES[1:])
def test_the_statistics_agree_exactly_where_counted_and_to_tolerance_where_sketched(
    runs, engine):
  for split in SPLITS:
    direct, other = statistics(runs['direct'], split), statistics(runs[engine], split)
    assert other.num_examples == direct.num_examples
    features = {feature.path.step[0]: feature for feature in direct.features}
    assert {feature.path.step[0] for feature in other.features} == set(features)
    for feature in other.features:
      name, expected = feature.path.step[0], features[feature.path.step[0]]
      if expected.HasField('num_stats'):
        got, want = feature.num_stats, expected.num_stats
        assert got.common_stats.num_non_missing == want.common_stats.num_non_missing, name
        assert (got.num_zeros, got.min, got.max) == (want.num_zeros, want.min, want.max), name
        np.testing.assert_allclose([got.mean, got.std_dev], [want.mean, want.std_dev],
                                   rtol=FLOAT_TOLERANCE, err_msg=name)
        # The median comes from a quantiles sketch: within 1% of the feature's range.
        assert abs(got.median - want.median) <= 0.01 * max(1e-9, want.max - want.min), name
      else:
        got, want = feature.string_stats, expected.string_stats
        assert got.common_stats.num_non_missing == want.common_stats.num_non_missing, name
        assert got.unique == want.unique, name
        assert got.avg_length == pytest.approx(want.avg_length, rel=FLOAT_TOLERANCE), name
        # The commonest value and its count (ties below the top may order either way).
        assert ((got.top_values[0].value, got.top_values[0].frequency) ==
                (want.top_values[0].value, want.top_values[0].frequency)), name


@pytest.mark.parametrize('engine', ENGINES[1:])
def test_the_inferred_schema_is_the_same_on_every_engine(runs, engine):
  # SchemaGen lists features, and a domain's values, in the order the engine's statistics
  # gave them (ties among the commonest values fall either way): compared in sorted order.
  parsed = []
  for root in (runs['direct'], runs[engine]):
    with open(os.path.join(uri(root, 'SchemaGen', 'Schema'), 'schema.pbtxt')) as handle:
      schema = text_format.Parse(handle.read(), schema_pb2.Schema())
    features = sorted(schema.feature, key=lambda feature: feature.name)
    domains = sorted(schema.string_domain, key=lambda domain: domain.name)
    for domain in domains:
      domain.value[:] = sorted(domain.value)
    del schema.feature[:], schema.string_domain[:]
    schema.feature.extend(features)
    schema.string_domain.extend(domains)
    parsed.append(schema)
  assert parsed[1] == parsed[0]


@pytest.mark.parametrize('engine', ENGINES[1:])
@pytest.mark.parametrize('node', TRANSFORMS)
def test_the_vocabularies_are_the_same_files_on_every_engine(runs, engine, node):
  direct_assets = os.path.join(uri(runs['direct'], node, 'TransformGraph'), 'transform_fn',
                               'assets')
  other_assets = os.path.join(uri(runs[engine], node, 'TransformGraph'), 'transform_fn',
                              'assets')
  names = sorted(os.listdir(direct_assets))
  assert names and sorted(os.listdir(other_assets)) == names
  _, mismatch, errors = filecmp.cmpfiles(direct_assets, other_assets, names, shallow=False)
  assert not mismatch and not errors


@pytest.mark.parametrize('engine', ENGINES[1:])
@pytest.mark.parametrize('node', TRANSFORMS)
def test_the_analyzers_transform_the_same_raw_rows_alike(runs, engine, node):
  # Each engine's transform graph, applied to the same raw rows: every analyzer's result
  # (vocabulary ids, buckets, means and variances) shows in what it makes of them.
  raw = records(os.path.join(uri(runs['direct'], 'CsvExampleGen', 'Examples'), 'Split-eval',
                             '*'))[:500]
  outputs = []
  for root in (runs['direct'], runs[engine]):
    output = tft.TFTransformOutput(uri(root, node, 'TransformGraph'))
    spec = output.raw_feature_spec()
    spec.pop('tips', None)  # The label is not needed to transform features.
    features = tf.io.parse_example(tf.constant(raw), spec)
    outputs.append({name: tf.sparse.to_dense(value).numpy()
                    if isinstance(value, tf.sparse.SparseTensor) else value.numpy()
                    for name, value in output.transform_raw_features(features).items()})
  direct, other = outputs
  assert set(other) == set(direct)
  for name, values in direct.items():
    if np.issubdtype(values.dtype, np.integer) or values.dtype == object:
      np.testing.assert_array_equal(other[name], values, err_msg=name)
    else:
      np.testing.assert_allclose(other[name], values, rtol=FLOAT_TOLERANCE, atol=1e-6,
                                 err_msg=name)


@pytest.mark.parametrize('engine', ENGINES[1:])
@pytest.mark.parametrize('node', TRANSFORMS)
def test_the_transformed_examples_are_the_same_on_every_engine(runs, engine, node):
  # Engines write rows in their own order: each feature's values are compared as a sorted
  # column, integers exactly and floats to the analyzers' tolerance, and the integer
  # features together as a multiset of rows.
  for split in SPLITS:
    count, direct, direct_rows = transformed(runs['direct'], node, split)
    other_count, other, other_rows = transformed(runs[engine], node, split)
    assert other_count == count and count > 1000
    assert set(other) == set(direct)
    for (name, kind), values in direct.items():
      if kind == 'float_list':
        np.testing.assert_allclose(np.sort(other[(name, kind)]), np.sort(values),
                                   rtol=FLOAT_TOLERANCE, atol=1e-6, err_msg=name)
      else:
        assert sorted(other[(name, kind)]) == sorted(values), name
    assert other_rows == direct_rows, split


if __name__ == '__main__':
  # One engine's run, as the `runs` fixture starts it: ENGINE ROOT DATA_DIR.
  run_on(sys.argv[1], sys.argv[2], sys.argv[3])
