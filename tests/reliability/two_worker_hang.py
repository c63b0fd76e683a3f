"""Runs the two-worker penguin case of issue 38 many times and counts hangs.

TFX's penguin test data (ImportExampleGen, StatisticsGen, SchemaGen and Transform with
TFX's own penguin_utils_keras.py, as its pipeline wires them), then the DistributedTrainer
executor with `num_workers=2` and a stock-style module: penguin_utils_keras.py with
`tf.distribute.MultiWorkerMirroredStrategy()` where it builds `MirroredStrategy()`. Each
training run has a bound; a run past it counts as hung and its processes are stopped.

Usage: python -m tests.reliability.two_worker_hang WORKSPACE [--runs 30] [--bound 180] [--steps 60]
  [--shards 4]
Prints one JSON line per run and a summary line.
"""

import argparse
import json
import logging
import os
import sys
import time

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
REENABLED_WARNING = 'Enabling collective ops after program startup'
MODULE_FILE_NAME = 'penguin_mwms_module.py'


def write_multi_worker_module(workspace: str) -> str:
  """TFX's penguin_utils_keras.py with its MirroredStrategy() made MultiWorkerMirroredStrategy()
  (what a user does to train on several workers), written into `workspace`; returns its path."""
  import tfx as tfx_package  # pylint: disable=g-import-not-at-top
  stock_module = os.path.join(os.path.dirname(tfx_package.__file__), 'examples', 'penguin',
                              'penguin_utils_keras.py')
  module = os.path.join(workspace, MODULE_FILE_NAME)
  with open(stock_module) as handle:
    text = handle.read()
  assert 'tf.distribute.MirroredStrategy()' in text
  with open(module, 'w') as handle:
    handle.write(text.replace('tf.distribute.MirroredStrategy()',
                              'tf.distribute.MultiWorkerMirroredStrategy()'))
  return module


def prepare(workspace: str, shards: int = 4) -> dict:
  """Transform outputs of TFX's penguin test data, made once per workspace.

  Transform writes one file per split; with `shards` > 1 the examples are also written as
  that many files (as a larger ExampleGen would), with 1 they stay as Transform wrote them.
  """
  import tfx as tfx_package  # pylint: disable=g-import-not-at-top
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  tfx_root = os.path.dirname(tfx_package.__file__)
  stock_module = os.path.join(tfx_root, 'examples', 'penguin', 'penguin_utils_keras.py')
  write_multi_worker_module(workspace)
  done = os.path.join(workspace, 'prepared.json')
  if os.path.exists(done):
    with open(done) as handle:
      return json.load(handle)
  from benchmarks import corpus  # pylint: disable=g-import-not-at-top
  # The stock front as TFX wires it, without its Trainer: this script trains with the
  # DistributedTrainer's executor instead.
  front, _ = corpus.stock_front(corpus.penguin_example_gen(), stock_module, train_steps=1,
                                eval_steps=1)
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name='penguin-front', pipeline_root=os.path.join(workspace, 'root'),
      components=front[:-1],
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          os.path.join(workspace, 'metadata.sqlite'))))

  def latest(node, key):
    folder = os.path.join(workspace, 'root', node, key)
    return os.path.join(folder, max(os.listdir(folder), key=int))

  examples = latest('Transform', 'transformed_examples')
  if shards > 1:
    examples = reshard(examples, os.path.join(workspace, 'resharded'), shards)
  prepared = {'examples': examples,
              'transform_graph': latest('Transform', 'transform_graph'),
              'schema': latest('SchemaGen', 'schema')}
  with open(done, 'w') as handle:
    json.dump(prepared, handle)
  return prepared


def reshard(examples_uri: str, output_uri: str, shards: int) -> str:
  """The examples of each split as `shards` files."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  for split in ('train', 'eval'):
    records = list(tf.data.TFRecordDataset(
        tf.io.gfile.glob(os.path.join(examples_uri, f'Split-{split}', '*')),
        compression_type='GZIP').as_numpy_iterator())
    folder = os.path.join(output_uri, f'Split-{split}')
    os.makedirs(folder, exist_ok=True)
    for shard in range(shards):
      path = os.path.join(folder, f'part-{shard:05d}.gz')
      with tf.io.TFRecordWriter(path, options='GZIP') as writer:
        for record in records[shard::shards]:
          writer.write(record)
  return output_uri


def train_once(workspace: str, prepared: dict, run: int, steps: int, bound: float) -> dict:
  """One two-worker training; returns its outcome and the model folder."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_component_specs as keys  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import cluster  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import executor  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import spec  # pylint: disable=g-import-not-at-top
  examples = standard_artifacts.Examples()
  examples.uri = prepared['examples']
  examples.split_names = '["train", "eval"]'
  graph = standard_artifacts.TransformGraph()
  graph.uri = prepared['transform_graph']
  schema = standard_artifacts.Schema()
  schema.uri = prepared['schema']
  model = standard_artifacts.Model()
  model.uri = os.path.join(workspace, 'runs', str(run), 'model')
  model_run = standard_artifacts.ModelRun()
  model_run.uri = os.path.join(workspace, 'runs', str(run), 'model_run', '1')
  for artifact in (model, model_run):
    os.makedirs(artifact.uri, exist_ok=True)
  properties = {
      'train_args': json.dumps({'num_steps': steps}),
      'eval_args': json.dumps({'num_steps': 5}),
      'module_file': os.path.join(workspace, MODULE_FILE_NAME),
      'custom_config': 'null',
      spec.STRATEGY_KEY: 'multi_worker_mirrored', spec.NUM_WORKERS_KEY: 2,
      spec.NUM_PARAMETER_SERVERS_KEY: 0, spec.COMMUNICATION_KEY: 'auto',
  }
  if hasattr(spec, 'PROGRESS_TIMEOUT_KEY'):
    properties[spec.PROGRESS_TIMEOUT_KEY] = bound
  else:  # Code from before the progress bound: bound the whole run instead.
    if not getattr(cluster.run, 'bounded', False):
      unbounded = cluster.run

      def bounded_run(training, job_path, timeout_seconds=None):
        return unbounded(training, job_path, timeout_seconds=timeout_seconds or bound)
      bounded_run.bounded = True
      cluster.run = bounded_run
  # The workers' own output (TensorFlow's log included), to see what each run went through.
  worker_lines = []

  class Collect(logging.Handler):

    def emit(self, record):
      worker_lines.append(record.getMessage())

  worker_logger = logging.getLogger(cluster.WORKER_OUTPUT_LOGGER)
  worker_logger.setLevel(logging.INFO)
  handler = Collect()
  worker_logger.addHandler(handler)
  start = time.monotonic()
  try:
    executor.Executor().Do(
        {keys.EXAMPLES_KEY: [examples], keys.TRANSFORM_GRAPH_KEY: [graph],
         keys.SCHEMA_KEY: [schema]},
        {keys.MODEL_KEY: [model], keys.MODEL_RUN_KEY: [model_run]}, properties)
    outcome, message = 'completed', ''
  except RuntimeError as error:
    message = str(error)
    stuck = 'did not finish' in message or 'no progress' in message
    outcome = 'hung' if stuck else 'failed'
  finally:
    worker_logger.removeHandler(handler)
  # TensorFlow's warning when a second MultiWorkerMirroredStrategy enables collective ops
  # again in a process whose runtime already runs.
  reenabled = sum(REENABLED_WARNING in line for line in worker_lines)
  return {'run': run, 'outcome': outcome, 'seconds': round(time.monotonic() - start, 1),
          'collective_ops_enabled_again': reenabled, 'message': message[:2000],
          'model': model.uri}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('workspace')
  parser.add_argument('--runs', type=int, default=30)
  parser.add_argument('--bound', type=float, default=180.0)
  parser.add_argument('--steps', type=int, default=60)
  parser.add_argument('--shards', type=int, default=4,
                      help='files per split (1: as Transform wrote them)')
  args = parser.parse_args(argv)
  os.makedirs(args.workspace, exist_ok=True)
  prepared = prepare(args.workspace, args.shards)
  counts, reenabled = {}, 0
  for run in range(args.runs):
    result = train_once(args.workspace, prepared, run, args.steps, args.bound)
    counts[result['outcome']] = counts.get(result['outcome'], 0) + 1
    reenabled += result['collective_ops_enabled_again'] > 0
    print(json.dumps(result), flush=True)
  print(json.dumps({'summary': counts, 'runs_that_enabled_collective_ops_again': reenabled,
                    'runs': args.runs, 'bound_seconds': args.bound, 'steps': args.steps}),
        flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())
