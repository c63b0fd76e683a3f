"""Test set-up shared by the whole suite."""

import os
import tempfile

import pytest

# Must precede the first TensorFlow import anywhere in the suite.
os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
# The local Flink and Spark clusters of the engine tests (in this process, and in the
# `distillery run`s they start, which inherit it) are JVMs that live minutes over small data:
# C2's compiling and the parallel collector's threads cost them more than they win. With C1
# alone and the serial collector, TFX's taxi Beam stages used a third less CPU (at 074fbf8,
# alone: the Flink cluster 381 -> 248 CPU-seconds, Spark's 349 -> 186), and CPU is what
# make test-e2e waits on, two tests at a time on 2 cores. What the clusters compute is the
# same; the product's own clusters keep the JVM's defaults (pipelines/beam_cluster.py).
os.environ.setdefault('JAVA_TOOL_OPTIONS', '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC')

# `make test-e2e` hands whole modules to two xdist workers (`--dist loadscope`). Left to
# itself xdist sends the modules with the most tests first, and a module of one long test
# (the notebook, TFX's taxi chain) came last and ran alone at the end. These go first,
# longest first, by their seconds at two at a time (the sums of `--durations` per module of
# make test-e2e: the ten longest at 43c7f89, the rest at 1557f72); the other modules follow
# in their own order. Within a module the order never changes: some tests read what
# an earlier one left.
LONGEST_MODULES_FIRST = (
    # TFX's taxi Beam stages on DirectRunner, Flink and Spark (#62): about 16 minutes.
    'tests/conformance/test_taxi_engines.py',
    'tests/pipelines/test_beam_engine_faults.py',
    'tests/components/distributed_trainer/test_runs_end.py',
    'tests/pipelines/test_pipeline_end_to_end.py',
    # #84's corpus: wine through benchmarks/corpus.py's own run (three Distillers).
    'tests/conformance/test_corpus.py',
    'tests/reliability/test_faults.py',
    'tests/pipelines/test_own_pipeline.py',
    'tests/notebooks/test_walkthrough.py',
    'tests/conformance/test_imdb.py',
    'tests/conformance/test_penguin.py',
    'tests/components/distributed_trainer/test_pipeline_strategy.py',
    'tests/components/ingest_transform/test_component.py',
    'tests/pipelines/test_mnist1d_run.py',
    'tests/components/distributed_trainer/test_distributed_trainer.py',
    'tests/reliability/test_reruns.py',
    'tests/components/quantizer/test_raw_flatbuffer.py',
    'tests/components/distiller/test_distiller.py',
    'tests/pipelines/test_own_label.py',
)


def pytest_collection_modifyitems(config, items):
  """Puts the modules of `LONGEST_MODULES_FIRST` first, in that order (a stable sort)."""
  root = str(config.rootpath)
  missing = [module for module in LONGEST_MODULES_FIRST
             if not os.path.isfile(os.path.join(root, module))]
  if missing:
    raise ValueError(f'tests/conftest.py LONGEST_MODULES_FIRST names no such file: {missing}')
  rank = {module: position for position, module in enumerate(LONGEST_MODULES_FIRST)}
  items.sort(key=lambda item: rank.get(item.nodeid.split('::', 1)[0], len(rank)))


@pytest.fixture(scope='session', autouse=True)
def temporary_files_in_the_session_folder(tmp_path_factory):
  """Every temporary file of the session under pytest's own folder: ours, TFX's, the JVMs'.

  TFX packs a module file into a wheel in a folder it never removes, and a local cluster
  killed by a fault test leaves its scratch (Flink's blob store, hundreds of MB). Under
  pytest's folder they go when the session passes (`tmp_path_retention_policy = "failed"`),
  and stay beside a failure to be read. CI runs on a machine whose /tmp outlives the run: a
  full disk there failed every test at its set-up. The runs we start inherit the variables.
  """
  folder = tmp_path_factory.getbasetemp() / 'tmp'
  folder.mkdir(exist_ok=True)
  os.environ['TMPDIR'] = str(folder)
  tempfile.tempdir = str(folder)
  os.environ['JAVA_TOOL_OPTIONS'] = (os.environ.get('JAVA_TOOL_OPTIONS', '')
                                     + f' -Djava.io.tmpdir={folder}').strip()
  return folder


@pytest.fixture(scope='session')
def mnist1d_draw_cache(tmp_path_factory):
  """One `DISTILLERY_CACHE` for the session's MNIST-1D draws, shared by xdist's workers.

  The notebook and `distillery run --dataset mnist1d` draw the same rows, and a draw costs
  15 s (30 s beside another run). The cache writes a draw to a temporary file and renames
  it, so two workers may draw at once; every session starts with an empty one.
  """
  base = tmp_path_factory.getbasetemp()
  if os.environ.get('PYTEST_XDIST_WORKER'):
    base = base.parent  # The session's folder, which holds every worker's own.
  folder = base / 'mnist1d-draws'
  folder.mkdir(exist_ok=True)
  return folder


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
  """`--dist loadscope` that hands a worker its next module only when it starts its last test.

  xdist's own hands it over two tests before, so near the end a worker held a module behind a
  long test while the other one sat idle. Sooner is not possible: a worker holds its last
  test until it knows the next (pytest's `nextitem`).
  """
  if config.getvalue('dist') != 'loadscope':
    return None  # xdist's own scheduler for every other mode.
  from xdist.scheduler import LoadScopeScheduling  # pylint: disable=import-outside-toplevel

  class LastTestScopeScheduling(LoadScopeScheduling):
    """LoadScopeScheduling with one test held back instead of two."""

    def _reschedule(self, node):
      if node.shutting_down:
        return
      if not self.workqueue:
        node.shutdown()
        return
      if self._pending_of(self.assigned_work[node]) > 1:
        return
      self._assign_work_unit(node)

  return LastTestScopeScheduling(config, log)
