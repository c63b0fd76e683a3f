"""Small-data builders shared by the tests (transform outputs, sampled CSVs)."""

import os
import tempfile

import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata
from tensorflow_transform.tf_metadata import schema_utils

from tfx_distillery.pipelines import datasets


def run_transform(preprocessing_fn, rows, raw_feature_spec, output_dir,
                  num_shards: int = 4):
  """Runs a preprocessing_fn with tf.Transform on in-memory rows.

  Writes the transform graph to `output_dir/transform_graph` and the
  transformed examples as GZIP shards under `output_dir/examples`.

  Returns:
    (tft.TFTransformOutput, file pattern of the transformed shards).
  """
  metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(
      raw_feature_spec))
  graph_dir = os.path.join(output_dir, 'transform_graph')
  examples_prefix = os.path.join(output_dir, 'examples', 'part')
  with tft_beam.Context(temp_dir=tempfile.mkdtemp(dir=output_dir)):
    import apache_beam as beam
    with beam.Pipeline() as pipeline:
      raw = pipeline | beam.Create(rows)
      (transformed, transformed_metadata), transform_fn = (
          (raw, metadata) | tft_beam.AnalyzeAndTransformDataset(preprocessing_fn))
      coder = tft.coders.ExampleProtoCoder(transformed_metadata.schema)
      _ = (transformed | beam.Map(coder.encode)
           | beam.io.WriteToTFRecord(examples_prefix, num_shards=num_shards,
                                     file_name_suffix='.gz',
                                     compression_type=beam.io.filesystem.CompressionTypes.GZIP))
      _ = transform_fn | tft_beam.WriteTransformFn(graph_dir)
  # Transform also records the raw schema, which serving signatures parse with.
  from tensorflow_transform.tf_metadata import metadata_io
  metadata_io.write_metadata(metadata, os.path.join(graph_dir, tft.TFTransformOutput.RAW_METADATA_DIR))
  return tft.TFTransformOutput(graph_dir), examples_prefix + '*'


def serialize(feature_values: dict) -> bytes:
  """A tf.Example from {name: python value or list}."""
  features = {}
  for name, value in feature_values.items():
    values = value if isinstance(value, (list, tuple)) else [value]
    if isinstance(values[0], str):
      features[name] = tf.train.Feature(bytes_list=tf.train.BytesList(
          value=[item.encode() for item in values]))
    elif isinstance(values[0], float):
      features[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    else:
      features[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
  return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


SYNTHETIC_RAW_SPEC = {'x1': tf.io.FixedLenFeature([], tf.float32),
                      'x2': tf.io.FixedLenFeature([], tf.float32),
                      'colour': tf.io.FixedLenFeature([], tf.string),
                      'species': tf.io.FixedLenFeature([], tf.int64)}


def synthetic_rows(count: int, seed: int = 0):
  """Rows whose label is learnable: species = 1 when x1 + x2 > 0."""
  import numpy as np
  generator = np.random.default_rng(seed)
  rows = []
  for _ in range(count):
    x1, x2 = (float(value) for value in generator.normal(size=2))
    rows.append({'x1': x1, 'x2': x2, 'colour': ['red', 'blue', 'green'][int(x1 > 0.5) +
                                                                       int(x2 > 0.5)],
                 'species': int(x1 + x2 > 0)})
  return rows


def write_raw_examples(uri: str, rows_by_split) -> str:
  """Rows as ExampleGen lays raw examples out: `Split-<name>/data.gz`, label column included."""
  for split, rows in rows_by_split.items():
    os.makedirs(os.path.join(uri, f'Split-{split}'), exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(uri, f'Split-{split}', 'data.gz'), 'GZIP') as writer:
      for row in rows:
        writer.write(serialize(row))
  return uri


def write_transformed(tf_transform_output, rows, split_dir: str) -> None:
  """Synthetic raw rows through a transform graph, written as one transformed shard."""
  transform = tf_transform_output.transform_features_layer()
  raw = tf.io.parse_example(tf.constant([serialize(row) for row in rows]), SYNTHETIC_RAW_SPEC)
  transformed = transform(raw)
  with tf.io.TFRecordWriter(os.path.join(split_dir, 'part-00000.gz'), 'GZIP') as writer:
    for index in range(len(rows)):
      features = {}
      for name, values in transformed.items():
        value = values[index].numpy()
        if values.dtype == tf.string:
          features[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
        elif values.dtype.is_integer:
          features[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
        else:
          features[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
      writer.write(tf.train.Example(
          features=tf.train.Features(feature=features)).SerializeToString())


def transformed_artifacts(output_dir: str, train_rows: int = 800, eval_rows: int = 200,
                          num_shards: int = 4, rows=None, extra_outputs=None):
  """Examples and TransformGraph artifacts of synthetic data, as Transform lays them out.

  `rows` replaces the synthetic rows (train_rows + eval_rows of them). `extra_outputs`,
  a function of the raw inputs, adds transformed features to the tabular transform's.

  Returns:
    (examples artifact, transform graph artifact, raw eval rows).
  """
  from tfx.types import standard_artifacts
  from tfx_distillery.trainer_modules import tabular_transform

  def preprocessing_fn(inputs):
    outputs = tabular_transform.preprocessing_fn(inputs, {'label_column': 'species'})
    return {**outputs, **(extra_outputs(inputs) if extra_outputs else {})}

  rows = rows or synthetic_rows(train_rows + eval_rows)
  tf_transform_output, pattern = run_transform(
      preprocessing_fn, rows[:train_rows], SYNTHETIC_RAW_SPEC, output_dir, num_shards)
  examples_uri = os.path.join(output_dir, 'examples')
  os.makedirs(os.path.join(examples_uri, 'Split-train'))
  for path in tf.io.gfile.glob(pattern):
    os.rename(path, os.path.join(examples_uri, 'Split-train', os.path.basename(path)))
  eval_dir = os.path.join(examples_uri, 'Split-eval')
  os.makedirs(eval_dir)
  write_transformed(tf_transform_output, rows[train_rows:], eval_dir)
  examples = standard_artifacts.Examples()
  examples.uri = examples_uri
  examples.split_names = '["train", "eval"]'
  graph = standard_artifacts.TransformGraph()
  graph.uri = os.path.join(output_dir, 'transform_graph')
  return examples, graph, rows[train_rows:]


def executions_by_node(metadata_path):
  """Executions recorded in ML Metadata, grouped by pipeline node (component) id."""
  from tfx_distillery.pipelines import summary
  store = summary.open_store(metadata_path)
  by_node = {}
  for execution in store.get_executions():
    for context in store.get_contexts_by_execution(execution.id):
      # LocalDagRunner records a 'node' context; InteractiveContext a 'component_run'.
      if store.get_context_types_by_id([context.type_id])[0].name in ('node', 'component_run'):
        by_node.setdefault(context.name.split('.')[-1], []).append(execution)
  return by_node


def latest_state(metadata_path, node):
  """The state of a node's latest execution in ML Metadata, or None if it never ran."""
  executions = executions_by_node(metadata_path).get(node, [])
  return executions[-1].last_known_state if executions else None


def artifact(artifact_class, uri: str):
  """An artifact of `artifact_class` at `uri` (created), as the orchestrator hands them out."""
  instance = artifact_class()
  instance.uri = uri
  os.makedirs(uri, exist_ok=True)
  return instance


def train_synthetic_teacher(data, output_dir: str, train_steps: int = 60, module_file=None):
  """Trains the tabular teacher (or `module_file`'s) on `transformed_artifacts` data; returns
  its Model artifact."""
  import json
  from tfx.types import standard_artifacts
  from tfx_distillery.components.distributed_trainer import executor as trainer_executor
  from tfx_distillery.pipelines import datasets
  examples, graph, _ = data
  model = artifact(standard_artifacts.Model, os.path.join(output_dir, 'model'))
  model_run = artifact(standard_artifacts.ModelRun, os.path.join(output_dir, 'model_run'))
  trainer_executor.Executor().Do(
      {'examples': [examples], 'transform_graph': [graph]},
      {'model': [model], 'model_run': [model_run]},
      {'train_args': json.dumps({'num_steps': train_steps}),
       'eval_args': json.dumps({'num_steps': 2}),
       'module_file': module_file or datasets.module_file('tabular_teacher'),
       'custom_config': json.dumps({'label_column': 'species', 'epochs': 2, 'batch_size': 32}),
       'strategy': 'one_device', 'num_workers': 1, 'num_parameter_servers': 0,
       'communication': 'auto'})
  return model


def write_iris_csv(folder) -> str:
  """scikit-learn's iris as one CSV whose string label column is `variety`; returns `folder`."""
  import csv  # pylint: disable=import-outside-toplevel
  from sklearn import datasets as sklearn_datasets  # pylint: disable=import-outside-toplevel
  iris = sklearn_datasets.load_iris()
  os.makedirs(folder)
  with open(os.path.join(folder, 'iris.csv'), 'w', newline='') as handle:
    writer = csv.writer(handle)
    writer.writerow(['sepal_length', 'sepal_width', 'petal_length', 'petal_width', 'variety'])
    for measurements, target in zip(iris.data, iris.target):
      writer.writerow([float(value) for value in measurements] + [iris.target_names[target]])
  return str(folder)


REPOSITORY_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_process_options():
  """cwd and env for a child Python process that imports this repository's packages."""
  return {'cwd': REPOSITORY_ROOT, 'env': {**os.environ, 'PYTHONPATH': REPOSITORY_ROOT}}


def answer_control_c():
  """In a child, before exec: SIGINT as a terminal leaves it. A suite started in the
  background (`make test-e2e &` from a script) has SIGINT ignored, every child inherits that,
  and a Python that starts with SIGINT ignored never raises KeyboardInterrupt: the run would
  go on. Pass as Popen's `preexec_fn`."""
  import signal  # pylint: disable=import-outside-toplevel
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def channel(artifact_type):
  """A channel of `artifact_type` for constructing a component in a test."""
  from tfx import v1 as tfx
  return tfx.dsl.Channel(type=artifact_type)


class ProgressLines:
  """Collects the lines the project logger shows a person, while in a `with` block."""

  def __init__(self):
    import logging  # pylint: disable=import-outside-toplevel

    class Handler(logging.Handler):

      def emit(handler, record):  # pylint: disable=no-self-argument
        self.lines.append(record.getMessage())

    self.lines = []
    self._handler = Handler()

  def __enter__(self):
    from tfx_distillery.components.common import progress  # pylint: disable=import-outside-toplevel
    progress.get_logger().addHandler(self._handler)
    return self.lines

  def __exit__(self, *exc_info):
    from tfx_distillery.components.common import progress  # pylint: disable=import-outside-toplevel
    progress.get_logger().removeHandler(self._handler)


def model_weights(model_uri):
  """Every variable of a Model artifact's SavedModel checkpoint, by name (numpy arrays)."""
  reader = tf.train.load_checkpoint(os.path.join(model_uri, 'Format-Serving', 'variables',
                                                 'variables'))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
          if not name.startswith('_CHECKPOINTABLE_OBJECT_GRAPH')}


def taxi_pipeline_arguments(tmp_path) -> dict:
  """`create_pipeline`'s arguments for the built-in taxi dataset under `tmp_path`, to build
  (not run) the pipeline."""
  taxi = datasets.resolve('taxi', str(tmp_path))
  return dict(pipeline_name='p', pipeline_root=str(tmp_path), data_root=taxi.data_root,
              transform_module_file=taxi.transform_module_file,
              teacher_module_file=taxi.teacher_module_file,
              label_column=taxi.label_column, serving_model_dir=str(tmp_path / 's'))
