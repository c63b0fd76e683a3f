"""Pieces the benchmarks share: transformed data from the real pipeline, quiet output, saving."""

import argparse
import concurrent.futures
import contextlib
import ctypes
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional

from tfx import v1 as tfx

from benchmarks import results

from tfx_distillery import components
from tfx_distillery.components.common import progress
from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import pipeline
from tfx_distillery.pipelines import summary


# Linux's prctl option: the signal a process gets when the thread that started it ends.
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
  """A pool worker's initializer: the kernel kills the worker when its benchmark ends."""
  if sys.platform.startswith('linux'):
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@contextlib.contextmanager
def process_pool(processes: int):
  """Spawned worker processes for work that is measured by accuracy only, never by time.

  Each worker dies with the benchmark; a caller waits on each result with a bound.
  """
  with concurrent.futures.ProcessPoolExecutor(
      processes, mp_context=multiprocessing.get_context('spawn'),
      initializer=die_with_parent) as pool:
    yield pool


def transform_dataset(dataset_name: str, work_dir: str, num_shards: int = 8,
                      data_root: Optional[str] = None):
  """Runs CsvExampleGen -> StatisticsGen -> SchemaGen -> IngestionTransform once.

  The examples are split as the pipeline splits them (train, eval and a held-out
  test split, by hash), unless `data_root` holds `train/`, `eval/` and `test/`
  folders of CSV files, which become those splits (a cross-validation fold).

  Args:
    dataset_name: `taxi`, `digits` or `mnist1d`.
    work_dir: Folder for the pipeline root and ML Metadata; reused when present.
    num_shards: Transformed-example shards per split.
    data_root: A folder of pre-split CSV files, instead of the dataset's own data.

  Returns:
    (transformed examples URI, transform graph URI, raw examples URI).
  """
  # Only the module files are read: mnist1d's pool is not drawn for that.
  dataset = datasets.resolve(dataset_name, work_dir, pool_rows=0)
  metadata_path = os.path.join(work_dir, 'metadata.sqlite')
  if data_root:
    example_gen = tfx.components.CsvExampleGen(
        input_base=data_root, input_config=tfx.proto.Input(splits=[
            tfx.proto.Input.Split(name=name, pattern=f'{name}/*') for name in SPLITS]))
  else:
    example_gen = tfx.components.CsvExampleGen(
        input_base=dataset.data_root,
        output_config=tfx.proto.Output(split_config=tfx.proto.SplitConfig(splits=[
            tfx.proto.SplitConfig.Split(name=name, hash_buckets=buckets)
            for name, buckets in pipeline.SPLIT_BUCKETS])))
  statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs['statistics'])
  transform = components.IngestionTransform(
      examples=example_gen.outputs['examples'], schema=schema_gen.outputs['schema'],
      module_file=dataset.transform_module_file,
      custom_config={'label_column': dataset.label_column}, num_shards=num_shards)
  pipeline_name = f'benchmark-{dataset_name}'
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name=pipeline_name, pipeline_root=os.path.join(work_dir, 'root'),
      components=[example_gen, statistics_gen, schema_gen, transform], enable_cache=True,
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path)))
  store = summary.open_store(metadata_path)

  def newest(type_name, producer):
    return [artifact for artifact in summary.pipeline_artifacts(store, pipeline_name, type_name)
            if summary.producer_node(store, artifact) == producer][-1].uri

  return (newest('Examples', 'IngestionTransform'),
          newest('TransformGraph', 'IngestionTransform'),
          newest('Examples', 'CsvExampleGen'))


SPLITS = ('train', 'eval', 'test')


def artifact(artifact_class, uri: str):
  """An artifact at `uri` (created), as the orchestrator would hand it to an executor."""
  instance = artifact_class()
  instance.uri = uri
  os.makedirs(uri, exist_ok=True)
  return instance


def executor_inputs(transformed_uri: str, graph_uri: str) -> dict:
  """The `examples` and `transform_graph` inputs of a trainer-like executor."""
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  examples = standard_artifacts.Examples()
  examples.uri = transformed_uri
  examples.split_names = json.dumps(list(SPLITS))
  graph = standard_artifacts.TransformGraph()
  graph.uri = graph_uri
  return {'examples': [examples], 'transform_graph': [graph]}


def litert_python(work_dir: str) -> str:
  """A virtual environment with requirements/litert.txt only (LiteRT, numpy): a device's.

  Made once under `work_dir` and reused; returns its python.
  """
  environment = os.path.join(work_dir, 'litert-venv')
  python = os.path.join(environment, 'bin', 'python')
  marker = os.path.join(environment, '.installed')
  if not os.path.exists(marker):
    subprocess.run([sys.executable, '-m', 'venv', '--clear', environment], check=True)
    subprocess.run([python, '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check',
                    '-r', os.path.join(results.REPOSITORY, 'requirements', 'litert.txt')],
                   check=True, stdout=subprocess.DEVNULL)
    open(marker, 'w').close()
  return python


class Stopwatch:
  """Context manager measuring wall time in seconds."""

  def __enter__(self):
    self.start = time.perf_counter()
    return self

  def __exit__(self, *exc_info):
    self.seconds = time.perf_counter() - self.start


@contextlib.contextmanager
def package_at_commit(commit: str, work_dir: str):
  """Yields (folder to run from, environment) that import tfx_distillery at `commit`.

  The commit is checked out into a git worktree (removed on exit); its folders are put
  under the import name tfx_distillery through links, ahead of the installed (editable)
  package.
  """
  checkout = os.path.join(work_dir, f'checkout-{commit}')
  package_root = os.path.join(work_dir, f'package-{commit}')
  subprocess.run(['git', 'worktree', 'remove', '--force', checkout], cwd=results.REPOSITORY,
                 capture_output=True, check=False)
  shutil.rmtree(package_root, ignore_errors=True)
  subprocess.run(['git', 'worktree', 'add', '--detach', checkout, commit],
                 cwd=results.REPOSITORY, check=True, capture_output=True)
  try:
    package = os.path.join(package_root, 'tfx_distillery')
    os.makedirs(package)
    for name in os.listdir(os.path.join(checkout, 'tfx_distillery')):
      os.symlink(os.path.join(checkout, 'tfx_distillery', name), os.path.join(package, name))
    for folder in ('components', 'pipelines', 'trainer_modules'):
      os.symlink(os.path.join(checkout, folder), os.path.join(package, folder))
    yield package_root, {**os.environ, 'PYTHONPATH': os.pathsep.join([package_root, checkout])}
  finally:
    subprocess.run(['git', 'worktree', 'remove', '--force', checkout], cwd=results.REPOSITORY,
                   capture_output=True, check=False)


def print_result(run: Callable[[], dict], args: argparse.Namespace, name: str) -> None:
  """Runs a benchmark with library and subprocess chatter on stderr, then prints its result.

  stdout carries only the result: one JSON object (`--json`) or the same indented.
  With `--save`, the result also goes to docs/results/<name>.json with its provenance.
  """
  with progress.process_output_to(2, include_stderr=False):
    progress.set_console(sys.stderr)
    with Stopwatch() as stopwatch:
      result = run()
  print(json.dumps(result) if args.json else json.dumps(result, indent=2), flush=True)
  if args.save:
    argv = [argument for argument in sys.argv[1:] if argument not in ('--save', '--json')]
    path = results.save(name, argv, result, stopwatch.seconds)
    print(f'saved {path}', file=sys.stderr)


def argument_parser(docstring: str, work_dir_name: str) -> argparse.ArgumentParser:
  """The options every benchmark has: `--json`, `--save` and `--work-dir` (reused between runs)."""
  parser = argparse.ArgumentParser(description=docstring.splitlines()[0])
  parser.add_argument('--json', action='store_true', help='print one JSON object')
  parser.add_argument('--save', action='store_true',
                      help='also write docs/results/<name>.json (what make bench does)')
  parser.add_argument('--work-dir', default=os.path.join(tempfile.gettempdir(), work_dir_name))
  return parser
