"""Runs the pipeline locally: LocalDagRunner, Beam DirectRunner, SQLite ML Metadata.

`distillery run` is this runner (`python -m tfx_distillery.pipelines.local_runner`
takes the same flags):

  distillery run --dataset taxi|digits|mnist1d|csv [--data DIR --label COLUMN]
      [--pipeline-root DIR] [--serving-dir DIR] [--train-steps N]
      [--student-train-steps N] [--num-workers N] [--max-accuracy-drop F] [--verbose]

Outputs go under the distillery home, `$DISTILLERY_HOME` (default
`~/.local/share/tfx-distillery`): `runs/<name>` and `serving/<name>`, whatever the
current directory.

Exit status:
  0  a model passed the gate and was pushed;
  1  the pipeline failed (a component raised; the lines above name it);
  2  bad input (arguments, data, label), refused before or during the run;
  3  the run completed but no candidate passed the gate, so nothing was pushed;
  130  interrupted (Ctrl-C); finished components are reused by the next run.
"""

import argparse
import _thread
import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Dict, Iterator, List, Optional, Tuple

# TensorFlow's C++ INFO/WARNING lines drown the progress lines; errors still show.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from tfx_distillery.components.common import progress  # pylint: disable=g-import-not-at-top
from tfx_distillery.components.common import seeding  # pylint: disable=g-import-not-at-top
from tfx_distillery.pipelines import csv_preflight
from tfx_distillery.pipelines import datasets

PIPELINE_NAME_PREFIX = 'distillery'
MNIST1D_STUDENT_STEPS = 6000
MNIST1D_STUDENT_CONFIG = {'epochs': 6, 'learning_rate': 3e-3, 'batch_size': 128}
DEFAULT_TRAIN_STEPS = {'taxi': 1500, 'digits': 1000, 'mnist1d': 4000, 'csv': 1000}
# The taxi student's budget, as the distillation benchmark measures it: the early-stopped
# teacher is within about 0.01 of a student trained for 1,500 steps at 1e-3. A csv student
# gets 3,000 steps too: on the taxi-like CSV at 10x the rows, 1,000 left the distilled
# student 0.003 to 0.017 below the teacher on eval (seeds 1-3); 3,000 brought it level.
# The MNIST-1D student's budget is benchmarks/mnist1d.py's.
DEFAULT_STUDENT_TRAINING = {'taxi': (3000, {'epochs': 3, 'learning_rate': 3e-3}),
                            'csv': (3000, None),
                            'mnist1d': (MNIST1D_STUDENT_STEPS, MNIST1D_STUDENT_CONFIG)}
# The gate's budget below the teacher. MNIST-1D's student is 1.7% of its teacher and
# shows what an unlabelled pool buys; one point from a teacher at 0.97 is not its aim.
DEFAULT_MAX_ACCURACY_DROP = {'mnist1d': 0.1}
EXIT_PUSHED = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_NOTHING_PASSED = 3
EXIT_INTERRUPTED = 130
HOME_VARIABLE = 'DISTILLERY_HOME'
# A local run's peak resident memory: about the 1x run's (1.5 GB), plus what grows with
# the data (the DirectRunner keeps collections between stages in memory): 1.2 to 1.5 GB
# more at 100x the taxi-like rows (1,500,200 rows of 18 columns), 48 to 57 bytes a cell in
# three runs of `python -m benchmarks.scale --scales 1,100` (docs/scaling-out.md).
DIRECT_RUNNER_BASE_BYTES = 2 * 2**30
DIRECT_RUNNER_BYTES_PER_CELL = 60
# The growth was measured on one dataset's shape; leave room for others.
MEMORY_HEADROOM = 1.25
# A run on a local Flink or Spark cluster holds the cluster's JVMs too. Each process's peak
# resident memory (GiB) at 15,002 and 1,500,200 rows of 18 columns (270,036 and 27,003,600
# cells), the larger of parallelism 1 and 2, from `python -m benchmarks.recorded beam_engines`
# at 8052fb7 (docs/results/beam_engines.json). `per_slot` processes run once per slot (Flink's
# TaskManagers); the run's own process holds the SDK harness (LOOPBACK), not the data.
# Between and past the two points a process grows linearly in cells.
LOCAL_CLUSTER_PEAK_GB = {
    'flink': {'distillery run': (1.57, 2.22), 'flink job server': (1.39, 1.54),
              'flink jobmanager': (1.31, 1.07), 'per_slot flink taskmanager': (2.07, 3.23)},
    'spark': {'distillery run': (1.32, 1.75), 'spark job server': (2.39, 2.42),
              'spark master': (0.20, 0.21), 'spark worker': (0.19, 0.19),
              'spark executor': (0.71, 1.61)},
}
LOCAL_CLUSTER_MEASURED_CELLS = (270_036, 27_003_600)
# Written into the pipeline root, and pointed at from the home, for `distillery report`.
RUN_RECORD_FILE_NAME = 'run.json'
LAST_RUN_FILE_NAME = 'last_run.json'


def distillery_home() -> str:
  """The folder that holds `runs/` and `serving/` unless flags say otherwise."""
  home = os.environ.get(HOME_VARIABLE)
  if home:
    return os.path.abspath(home)
  data_home = os.environ.get('XDG_DATA_HOME') or os.path.join(os.path.expanduser('~'),
                                                              '.local', 'share')
  return os.path.join(data_home, 'tfx-distillery')


# The component that was running when the run stopped, for the interrupt message.
_running_node: Optional[str] = None
# Whether the run got past its checks to the pipeline: exit 2 is for what was refused
# before it, and for what our own components refuse by name within it.
_pipeline_started = False
# Our code's folders: siblings of this one, installed (tfx_distillery/) or in a checkout.
_OUR_FOLDERS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), name) + os.sep
    for name in ('components', 'pipelines', 'trainer_modules'))


def is_bad_input(error: BaseException) -> bool:
  """Whether `error` refuses the user's input (exit 2), not a failure (exit 1).

  Before the pipeline starts, every ValueError and FileNotFoundError comes from checking the
  arguments and the data. Once it runs, only a ValueError that our own code raised (a
  validator, a label or shape check, each naming what to fix) is one: a library's
  ValueError, or a file gone missing meanwhile (another run's), is a failure.
  """
  if not isinstance(error, (ValueError, FileNotFoundError)):
    return False
  if not _pipeline_started:
    return True
  if isinstance(error, FileNotFoundError):
    return False
  frames = traceback.extract_tb(error.__traceback__)
  return bool(frames) and os.path.abspath(frames[-1].filename).startswith(_OUR_FOLDERS)


class ComponentProgressHandler(logging.Handler):
  """Turns LocalDagRunner's start/finish records into lines with wall time.

  A component whose result comes from the cache says so: TFX's launcher logs "A cached
  execution %d is used." between the node's start and finish (nodes run one at a time).
  """

  def __init__(self):
    super().__init__(logging.INFO)
    self.started = {}
    self.wall_seconds = {}
    self.cached = []
    self._running = None

  def emit(self, record):
    global _running_node
    if record.msg == 'Component %s is running.':
      node_id = record.args[0]
      self.started[node_id] = time.monotonic()
      self._running = _running_node = node_id
      progress.get_logger().info('%s: started', node_id)
    elif record.msg == 'A cached execution %d is used.' and self._running:
      self.cached.append(self._running)
    elif record.msg == 'Component %s is finished.':
      node_id = record.args[0]
      self.wall_seconds[node_id] = time.monotonic() - self.started.get(node_id, time.monotonic())
      _running_node = None
      if node_id in self.cached:
        progress.get_logger().info('%s: reused from the cache (%.1f s)', node_id,
                                   self.wall_seconds[node_id])
      else:
        progress.get_logger().info('%s: finished in %.1f s', node_id,
                                   self.wall_seconds[node_id])


class HidesDataPlaneHangUps(logging.Filter):
  """Keeps off the console the SDK harness's "Failed to read inputs in the data plane."
  when its gRPC stream was CANCELLED: on Flink and Spark the engine hangs up each bundle's
  data channel when the bundle is done ("Multiplexer hanging up"), and Beam logs that as
  an error with a traceback, dozens per run. The log file keeps them; a stage that really
  fails still fails, and its error reaches the console.
  """

  LOGGER = 'apache_beam.runners.worker.data_plane'

  def filter(self, record: logging.LogRecord) -> bool:
    if record.name != self.LOGGER or not record.exc_info:
      return True
    error = record.exc_info[1]
    code = getattr(error, 'code', None)
    try:
      cancelled = callable(code) and getattr(code(), 'name', None) == 'CANCELLED'
    except Exception:  # pylint: disable=broad-except
      cancelled = False
    return not cancelled


class HidesInterruptedSteps(logging.Filter):
  """Keeps off the console a library's error record of a step that Ctrl-C (or a lost engine
  process) interrupted: Beam logs the interrupted DoFn with its traceback before it re-raises.
  The log file keeps it; the console gets the run's one line (`interrupted during ...`).
  """

  def filter(self, record: logging.LogRecord) -> bool:
    if not record.exc_info or record.exc_info[1] is None:
      return True
    if _control_c_pressed.is_set():
      return False
    return not _caused_by(record.exc_info[1], (KeyboardInterrupt, _EngineProcessLost))


@contextlib.contextmanager
def console_shows_progress_only(log_path: str,
                                verbose: bool = False) -> Iterator[ComponentProgressHandler]:
  """Console: our progress lines and errors. `log_path`: everything else.

  Enter it before TensorFlow or TFX is imported: their start-up lines (CUDA plugin
  registrations, google.api_core's Python-version FutureWarnings) are written to the
  process's file descriptors at import time.

  Args:
    log_path: File that receives every other line, library logs at INFO included.
    verbose: Show everything on the console too, and redirect nothing.

  Yields:
    The handler that logs component start and end, keeping their wall times.
  """
  if verbose:
    with _console_shows_everything(log_path) as handler:
      yield handler
    return
  log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  root_logger = logging.getLogger()
  root_logger.setLevel(logging.INFO)
  file_handler = logging.FileHandler(log_path)
  file_handler.setFormatter(logging.Formatter('%(asctime)s %(levelname)s %(name)s %(message)s'))
  root_logger.addHandler(file_handler)
  import absl.logging  # pylint: disable=g-import-not-at-top
  # Through the flag, not setLevel: Transform saves and restores the verbosity.
  absl.logging.set_verbosity(absl.logging.INFO)
  handler = ComponentProgressHandler()
  logging.getLogger('absl').addHandler(handler)
  console_errors = os.fdopen(os.dup(2), 'w', buffering=1)
  errors_handler = logging.StreamHandler(console_errors)
  errors_handler.setLevel(logging.ERROR)
  errors_handler.addFilter(HidesDataPlaneHangUps())
  errors_handler.addFilter(HidesInterruptedSteps())
  root_logger.addHandler(errors_handler)
  try:
    with progress.process_output_to(log_fd, include_stderr=True):
      yield handler
  finally:
    root_logger.removeHandler(errors_handler)
    console_errors.close()
    os.close(log_fd)
    logging.getLogger('absl').removeHandler(handler)
    root_logger.removeHandler(file_handler)
    file_handler.close()


@contextlib.contextmanager
def _console_shows_everything(log_path: str) -> Iterator[ComponentProgressHandler]:
  """`--verbose`: every library line on the console, and in `log_path` as well."""
  root_logger = logging.getLogger()
  root_logger.setLevel(logging.INFO)
  handlers = [logging.FileHandler(log_path), logging.StreamHandler(sys.stderr)]
  for handler in handlers:
    handler.setFormatter(logging.Formatter('%(asctime)s %(levelname)s %(name)s %(message)s'))
    root_logger.addHandler(handler)
  import absl.logging  # pylint: disable=g-import-not-at-top
  absl.logging.set_verbosity(absl.logging.INFO)
  component_progress = ComponentProgressHandler()
  logging.getLogger('absl').addHandler(component_progress)
  try:
    yield component_progress
  finally:
    logging.getLogger('absl').removeHandler(component_progress)
    for handler in handlers:
      root_logger.removeHandler(handler)
      handler.close()


DEFAULT_SHARES_TEXT = ','.join(f'{share:g}' for share in datasets.DEFAULT_STUDENT_PARAMETER_SHARES)


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """Adds the local run's flags to `parser` (this module's and `distillery run`'s)."""
  parser.add_argument('--dataset', required=True, choices=datasets.DATASET_NAMES)
  parser.add_argument('--data', help='csv only: folder of CSV files')
  parser.add_argument('--label', help='csv only: the label column')
  parser.add_argument('--unlabelled', help='csv only: folder of CSV files of rows without '
                      'labels (serving logs, rows not yet labelled), with the columns of --data '
                      'but the label; the student learns the teacher\'s answers on them')
  parser.add_argument('--pool-rows', type=int, help='mnist1d only: rows of the unlabelled '
                      f'pool the student learns the teacher on (default '
                      f'{datasets.MNIST1D_POOL_ROWS:,}; 0 for none)')
  parser.add_argument('--student-shares', type=parse_shares, help='csv only: the built-in '
                      'student\'s sizes the Distiller tries, as shares of the teacher\'s '
                      'parameters, comma-separated and increasing; it hands on the smallest '
                      'within --max-accuracy-drop of the teacher on eval (default '
                      f'{DEFAULT_SHARES_TEXT})')
  parser.add_argument('--schema', help='csv only: schema.pbtxt the data must match (taxi '
                      'and digits use the curated ones shipped in the package)')
  parser.add_argument('--pipeline-root', help='outputs and ML Metadata (default '
                      f'${HOME_VARIABLE}/runs/DATASET; ${HOME_VARIABLE} defaults to '
                      '~/.local/share/tfx-distillery)')
  parser.add_argument('--serving-dir', help='where the pushed model goes '
                      f'(default ${HOME_VARIABLE}/serving/DATASET)')
  parser.add_argument('--train-steps', type=int, help='teacher training steps')
  parser.add_argument('--student-train-steps', type=int,
                      help='student training steps (default: 3000 for taxi and csv, '
                      f'{MNIST1D_STUDENT_STEPS} for mnist1d, the teacher\'s for digits)')
  parser.add_argument('--num-workers', type=int, default=1, help='training workers')
  parser.add_argument('--no-cache', action='store_true', help='re-execute every component')
  parser.add_argument('--max-accuracy-drop', type=float,
                      help='the gate passes a candidate at most this far below the teacher '
                      '(a fraction: 0.01 is one point; default 0.01, and '
                      f'{DEFAULT_MAX_ACCURACY_DROP["mnist1d"]} for mnist1d)')
  parser.add_argument('--beam-runner', default='direct', choices=('direct',) + BEAM_ENGINES,
                      help='where the Beam stages run: Beam\'s DirectRunner in this process '
                      '(default), or Apache Flink or Apache Spark through Beam\'s portable '
                      'runner: the job server at --beam-endpoint, else a local cluster '
                      'started for the run and stopped after it (docs/scaling-out.md)')
  add_beam_engine_arguments(parser, 'LOOPBACK')
  add_seed_argument(parser)
  parser.add_argument('--verbose', action='store_true',
                      help='show every TFX, Beam and TensorFlow line on the console too '
                      '(they always go to PIPELINE_ROOT/pipeline.log)')


def parse_shares(text: str) -> Tuple[float, ...]:
  """`--student-shares`: increasing fractions in (0, 1], e.g. `0.01,0.03,0.1`."""
  try:
    shares = tuple(float(part) for part in text.split(','))
  except ValueError:
    shares = ()
  if not shares or any(not 0 < share <= 1 for share in shares) or list(shares) != sorted(
      set(shares)):
    raise argparse.ArgumentTypeError(
        f'expected increasing fractions in (0, 1] separated by commas, e.g. 0.01,0.03,0.1; '
        f'got {text!r}')
  return shares


def add_seed_argument(parser: argparse.ArgumentParser) -> None:
  """`--seed`, for `distillery run` and `distillery compile` alike."""
  parser.add_argument('--seed', type=int, help='one seed for every component that draws '
                      'random numbers, with TensorFlow\'s op determinism: the same seed and data '
                      'on the same machine give the same models (default: each component draws '
                      'one and records it)')


def check_seed(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
  """Refuses a negative or too large `--seed` (argparse already refuses a non-integer)."""
  try:
    seeding.validate(args.seed)
  except ValueError as error:
    parser.error(f'--seed: {error}')


def add_beam_engine_arguments(parser: argparse.ArgumentParser,
                              default_environment: str) -> None:
  """--beam-endpoint and the SDK harness's environment (`run`'s and `compile`'s)."""
  parser.add_argument('--beam-endpoint', metavar='HOST:PORT',
                      help='with --beam-runner flink|spark: the job server of your cluster')
  parser.add_argument('--beam-environment-type',
                      choices=('LOOPBACK', 'PROCESS', 'EXTERNAL', 'DOCKER'),
                      help='with --beam-endpoint: where the cluster runs the Python SDK '
                      f'harness (default {default_environment}; docs/scaling-out.md)')
  parser.add_argument('--beam-environment-config', metavar='CONFIG',
                      help='the worker pool\'s HOST:PORT (EXTERNAL), the image (DOCKER) or '
                      'Beam\'s boot JSON (PROCESS)')
  parser.add_argument('--beam-parallelism', type=int, metavar='N',
                      help='Flink and Spark: run each Beam stage N ways (default 2; the local '
                      'cluster has N TaskManagers of one slot, or a worker of N cores). '
                      'DirectRunner: 1 runs in the stage\'s process (the default of run), '
                      'N > 1 in N worker processes')


def check_beam_engine_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace,
                                endpoint_required: bool) -> None:
  """Refuses an endpoint or environment without an engine, or a malformed one, by name."""
  from tfx_distillery.pipelines import beam_cluster  # pylint: disable=g-import-not-at-top
  beam_runner = getattr(args, 'beam_runner', 'direct')
  parallelism = getattr(args, 'beam_parallelism', None)
  if parallelism is not None and parallelism < 1:
    parser.error(f'--beam-parallelism must be >= 1; got {parallelism}')
  if beam_runner != 'direct' and not endpoint_required and not args.beam_endpoint:
    for flag, value in (('--beam-environment-type', args.beam_environment_type),
                        ('--beam-environment-config', args.beam_environment_config)):
      if value:
        parser.error(f'{flag} is for --beam-endpoint (your cluster): the local cluster runs '
                     'the SDK harness in each Beam stage\'s own process (LOOPBACK)')
    return
  try:
    beam_cluster.engine_beam_args(beam_runner, args.beam_endpoint, args.beam_environment_type,
                                  args.beam_environment_config, (), parallelism)
  except ValueError as error:
    message = str(error)
    for name in ('beam_environment_type', 'beam_environment_config', 'beam_endpoint',
                 'beam_runner', 'beam_parallelism'):
      message = message.replace(name, '--' + name.replace('_', '-'))
    parser.error(message)


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
  """Refuses bad flag values and combinations through `parser.error` (exit status 2)."""
  if args.train_steps is not None and args.train_steps < 1:
    parser.error(f'--train-steps must be >= 1; got {args.train_steps}')
  if args.student_train_steps is not None and args.student_train_steps < 1:
    parser.error(f'--student-train-steps must be >= 1; got {args.student_train_steps}')
  if args.num_workers < 1:
    parser.error(f'--num-workers must be >= 1; got {args.num_workers}')
  if args.dataset != 'csv' and (args.data or args.label or args.schema or
                                getattr(args, 'unlabelled', None) or
                                getattr(args, 'student_shares', None)):
    parser.error('--data, --label, --schema, --unlabelled and --student-shares are for '
                 '--dataset csv only')
  if getattr(args, 'pool_rows', None) is not None:
    if args.dataset != 'mnist1d':
      parser.error('--pool-rows is for --dataset mnist1d only')
    if args.pool_rows < 0:
      parser.error(f'--pool-rows must be >= 0; got {args.pool_rows}')
  check_seed(parser, args)
  if hasattr(args, 'beam_runner'):
    check_beam_engine_arguments(parser, args, endpoint_required=False)
  if args.max_accuracy_drop is None:
    args.max_accuracy_drop = DEFAULT_MAX_ACCURACY_DROP.get(args.dataset, 0.01)
  if not 0.0 <= args.max_accuracy_drop <= 1.0:
    parser.error(f'--max-accuracy-drop must be a fraction in [0, 1]; got '
                 f'{args.max_accuracy_drop}')


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(
      prog='python -m tfx_distillery.pipelines.local_runner',
      description='Train a teacher, distil and compress it, and push the small model.')
  add_arguments(parser)
  args = parser.parse_args(argv)
  check_arguments(parser, args)
  return args


class MetadataInUse(ValueError):
  """Another local run holds the SQLite ML Metadata file."""


@contextlib.contextmanager
def exclusive_metadata(metadata_path: str) -> Iterator[None]:
  """Holds a lock beside the SQLite ML Metadata file for the whole run.

  SQLite ML Metadata is not safe for two pipelines writing at once (each opens
  its own connection, and concurrent writers fail with "database is locked" in
  the middle of a run), so a second run against the same file is refused at
  once, with the holder named, instead of failing half-way.

  Raises:
    MetadataInUse: when another process holds the lock.
  """
  lock_path = metadata_path + '.lock'
  handle = open(lock_path, 'a+')  # pylint: disable=consider-using-with
  try:
    try:
      fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as error:
      handle.seek(0)
      holder = handle.read().strip() or 'another process'
      raise MetadataInUse(
          f'{metadata_path} is in use by {holder}. SQLite ML Metadata takes one pipeline '
          'run at a time: wait for it to finish, give this run its own --pipeline-root, or '
          'use a MySQL ML Metadata store for concurrent pipelines.') from error
    handle.seek(0)
    handle.truncate()
    handle.write(f'pid {os.getpid()}\n')
    handle.flush()
    yield
  finally:
    handle.close()  # Closing releases the lock.


def write_json_record(path: str, record: Dict[str, Any]) -> None:
  """Writes `record` to `path` through a temporary file of its own, then an atomic replace:
  two runs writing the same record (the home's last run) each rename a whole file."""
  folder = os.path.dirname(path)
  os.makedirs(folder, exist_ok=True)
  handle, temporary = tempfile.mkstemp(prefix=os.path.basename(path) + '.', suffix='.tmp',
                                       dir=folder)
  try:
    with os.fdopen(handle, 'w') as output:
      json.dump(record, output, indent=2, sort_keys=True)
    os.replace(temporary, path)
  except BaseException:
    with contextlib.suppress(OSError):
      os.remove(temporary)
    raise


@contextlib.contextmanager
def recorded_run(pipeline_root: str, pipeline_name: str, serving_dir: str) -> Iterator[None]:
  """Notes the run in its root, and in the home as the last run, for `distillery report`.

  Entered once the run holds its root's metadata (`exclusive_metadata`), so a refused run
  leaves the root's record to the one that holds it.
  """
  record = {'pipeline_name': pipeline_name, 'pipeline_root': pipeline_root,
            'serving_dir': serving_dir,
            'metadata': os.path.join(pipeline_root, 'metadata.sqlite')}
  write_json_record(os.path.join(pipeline_root, RUN_RECORD_FILE_NAME), record)
  write_json_record(os.path.join(distillery_home(), LAST_RUN_FILE_NAME), record)
  yield


def read_run_record(pipeline_root: Optional[str] = None) -> Dict[str, str]:
  """The record of the run in `pipeline_root`, or of the last run under the home.

  Raises:
    FileNotFoundError: naming the file, when there is no such run.
  """
  if pipeline_root:
    path = os.path.join(os.path.abspath(pipeline_root), RUN_RECORD_FILE_NAME)
    hint = f'--pipeline-root {pipeline_root!r} holds no run of `distillery run`'
  else:
    path = os.path.join(distillery_home(), LAST_RUN_FILE_NAME)
    hint = (f'no run recorded under ${HOME_VARIABLE} ({distillery_home()}); run '
            '`distillery run` first, or give --pipeline-root')
  if not os.path.isfile(path):
    raise FileNotFoundError(f'{path} is missing: {hint}.')
  with open(path) as handle:
    return json.load(handle)


@dataclasses.dataclass
class RunResult:
  """What one local run did: its summary, wall times, and where the report is."""
  summary: Any
  wall_seconds: float
  component_seconds: Dict[str, float]
  report_path: Optional[str]


def run_folder_name(args: argparse.Namespace) -> str:
  """`taxi`, `digits`, or for csv `csv-<data folder name>`: runs of other data don't share."""
  if args.dataset != 'csv':
    return args.dataset
  name = os.path.basename(os.path.normpath(os.path.abspath(args.data)))
  return 'csv-' + (''.join(character if character.isalnum() or character in '-_' else '-'
                           for character in name) or 'data')


def pipeline_root_of(args: argparse.Namespace) -> str:
  return os.path.abspath(args.pipeline_root or
                         os.path.join(distillery_home(), 'runs', run_folder_name(args)))


def report_preflight(preflight: csv_preflight.Preflight, what: str = 'data') -> None:
  """One console line per file: its rows and what was handled; refusals raise."""
  logger = progress.get_logger()
  for name in preflight.ignored:
    logger.warning('%s: %s is not .csv or .csv.gz; ExampleGen will not read it.', what, name)
  for verdict in preflight.verdicts:
    if verdict.status == csv_preflight.RUNS:
      logger.info('%s: %s: %d rows%s', what, os.path.basename(verdict.path), verdict.rows,
                  f' ({"; ".join(verdict.notes)})' if verdict.notes else '')
  preflight.raise_if_refused()
  if what != 'data':
    return
  kinds = preflight.column_kinds
  for kind, what in ((csv_preflight.NUMBER, 'numbers'), (csv_preflight.CATEGORY, 'categories')):
    names = [name for name in preflight.header if kinds.get(name) == kind]
    if names:
      logger.info('data: read as %s: %s', what, ', '.join(names))
  for name, share, value, file_name, line in preflight.mostly_numbers:
    logger.warning('data: %r is read as categories, yet %.0f%% of its values are numbers; the '
                   'first that is not is %r (%s, line %d). Fix or empty such cells if the '
                   'column holds numbers.', name, 100 * share, value, file_name, line)


def available_memory_bytes() -> Optional[int]:
  """Memory this process can still take: MemAvailable, lowered by a cgroup v2 limit."""
  available = None
  try:
    with open('/proc/meminfo') as handle:
      for line in handle:
        if line.startswith('MemAvailable:'):
          available = int(line.split()[1]) * 1024
  except OSError:
    return None
  try:
    with open('/sys/fs/cgroup/memory.max') as limit, open(
        '/sys/fs/cgroup/memory.current') as current:
      limit_text = limit.read().strip()
      if limit_text != 'max' and available is not None:
        available = min(available, int(limit_text) - int(current.read().strip()))
  except (OSError, ValueError):
    pass
  return available


def _grown_gb(measured: Tuple[float, float], cells: int) -> float:
  """A process's peak (GB) at `cells`, linear in cells through the two measured points, and
  never below the smaller one: a JVM's heap does not shrink with the data."""
  small, large = LOCAL_CLUSTER_MEASURED_CELLS
  at_small, at_large = measured
  return max(min(measured), at_small + (at_large - at_small) / (large - small) * (cells - small))


def local_cluster_bytes(engine: str, cells: int, slots: int) -> int:
  """The peak memory of a run on a local `engine` cluster of `slots` slots over `cells` cells."""
  return int(2**30 * sum(
      _grown_gb(measured, cells) * (slots if role.startswith('per_slot') else 1)
      for role, measured in LOCAL_CLUSTER_PEAK_GB[engine].items()))


def check_memory(preflight: csv_preflight.Preflight, engine: str = 'direct',
                 slots: int = 2, local_cluster: bool = True) -> None:
  """Refuses data whose DirectRunner run would not fit in memory, before anything starts;
  warns when a local cluster's JVMs may not.

  A JVM takes the heap it is allowed and collects more often when it has less, so the
  clusters' measured peaks (LOCAL_CLUSTER_PEAK_GB) are what they used, not what they need:
  a run short of them may still pass, and is warned, not refused.

  Args:
    preflight: The checked CSV folder.
    engine: `--beam-runner`: 'direct' keeps the data between stages in this process; 'flink'
      and 'spark' run a local cluster's JVMs beside it.
    slots: `--beam-parallelism` (Flink runs a TaskManager per slot).
    local_cluster: False with `--beam-endpoint`: the cluster is elsewhere, and only the
      run's own process (its SDK harness) is here.

  Raises:
    ValueError: DirectRunner only: naming the folder, its rows and columns, the memory the
      run needs and the memory available, and where to run instead.
  """
  rows = sum(verdict.rows for verdict in preflight.verdicts
             if verdict.status == csv_preflight.RUNS)
  cells = rows * len(preflight.header)
  available = available_memory_bytes()
  if engine == 'direct':
    needed = DIRECT_RUNNER_BASE_BYTES + DIRECT_RUNNER_BYTES_PER_CELL * cells
    if available is None or needed * MEMORY_HEADROOM <= available:
      return
    raise ValueError(
        f'data: {preflight.data_root} holds {rows:,} rows of {len(preflight.header)} columns. '
        f'A local run needs about {needed / 2**30:.1f} GB of memory for that (Beam\'s '
        f'DirectRunner keeps the data between stages in memory), and this machine has '
        f'{available / 2**30:.1f} GB available. Run the pipeline on Flink, Spark or Dataflow '
        '(create_pipeline(beam_pipeline_args=[...]), docs/scaling-out.md), or give '
        '`distillery run` a sample of the rows.')
  if local_cluster:
    peak = local_cluster_bytes(engine, cells, slots)
    what = f'the local {engine} cluster\'s JVMs at parallelism {slots} and this run'
    instead = ('a lower --beam-parallelism, or --beam-endpoint for a cluster elsewhere'
               if engine == 'flink' and slots > 1 else '--beam-endpoint for a cluster elsewhere')
  else:
    peak = int(2**30 * _grown_gb(LOCAL_CLUSTER_PEAK_GB[engine]['distillery run'], cells))
    what = 'this run\'s own process, which runs the SDK harness'
    instead = 'a machine with more memory'
  if available is None or peak <= available:
    return
  progress.get_logger().warning(
      'memory: %s rows of %d columns: %s peaked at about %.1f GB at this size where we '
      'measured it (docs/results/beam_engines.json), and this machine has %.1f GB available. '
      'The run may fail for memory (a Java heap error, or a process killed and named); if it '
      'does, try %s.', f'{rows:,}', len(preflight.header), what, peak / 2**30,
      available / 2**30, instead)


def stage_csv(preflight: csv_preflight.Preflight, pipeline_root: str,
              what: str = 'data') -> str:
  """Writes the checked rows under the pipeline root; says how the inputs changed."""
  staging_root = os.path.join(pipeline_root, 'inputs' if what == 'data' else f'inputs-{what}')
  changes = csv_preflight.changed_inputs(preflight, staging_root)
  if changes:
    progress.get_logger().info('%s: inputs changed since the last run (%s); ExampleGen '
                               'reads them again.', what, ', '.join(changes))
  elif changes is not None:
    progress.get_logger().info('%s: inputs unchanged since the last run.', what)
  return csv_preflight.stage(preflight, staging_root)


# The engines `--beam-runner` names besides Beam's DirectRunner (beam_cluster.ENGINES,
# spelled here so that `--help` does not import Beam).
BEAM_ENGINES = ('flink', 'spark')
DIRECT_RUNNER_ARGS = ('--direct_running_mode=in_memory', '--direct_num_workers=1')


# From the line that names a lost engine process to the run's exit. The job's cancel and
# the cluster's stop take their own bounds (beam_cluster) within it; should the stage's
# thread still not have unwound by then, the process ends without it.
LOST_PROCESS_EXIT_S = 20
# What the watchdog sends the run's main thread when the cluster loses a process. Not
# SIGINT: a run started in the background (`cmd &` from a script) has SIGINT ignored from
# birth, Python then never raises KeyboardInterrupt, and the stage went on for minutes.
LOSS_SIGNAL = signal.SIGUSR2
# The message of the run's lost engine process, once one is lost.
_lost_process_message: Optional[str] = None
_loss_raised = threading.Event()
_failure_reported = threading.Event()
# Set by Ctrl-C: whatever the run raises after it is the interrupt's doing. A signal handler
# that raises inside a C++ extension's error path loses the KeyboardInterrupt: pybind11
# replaces the pair with a RuntimeError ("MISMATCH of original and normalized active
# exception types ... REPLACED BY KeyboardInterrupt") that is not chained to it.
_control_c_pressed = threading.Event()


class LostEngineProcess(RuntimeError):
  """The local cluster lost a process: the run stops, and the same command reruns it."""

  says_what_to_do = True


class _EngineProcessLost(BaseException):
  """Raised in the run's main thread by LOSS_SIGNAL; a BaseException, as KeyboardInterrupt
  is, so that no library's `except Exception` keeps the stage going."""


def _raise_in_main_thread(unused_signum, unused_frame):
  # Once, and only for a recorded loss: a stray signal changes nothing.
  if _lost_process_message is not None and not _loss_raised.is_set():
    _loss_raised.set()
    raise _EngineProcessLost(_lost_process_message)


def install_loss_handler() -> None:
  """Makes LOSS_SIGNAL raise in the main thread (from the main thread; elsewhere a no-op).

  Left in place after the run: it raises only for a recorded loss, once.
  """
  if threading.current_thread() is threading.main_thread():
    signal.signal(LOSS_SIGNAL, _raise_in_main_thread)


def lost_process_message(engine: str, process) -> str:
  return (f'the local {engine} cluster lost its {process.role} (exit status '
          f'{process.popen.returncode}){f" during {_running_node}" if _running_node else ""}; '
          f'its log is {process.log_path}. Nothing was pushed: rerun the same command '
          '(finished components come from the cache, on a new cluster).')


def end_run_after_loss(message: str, bound_s: float) -> None:
  """Interrupts the run's main thread, and ends the process if it has not in `bound_s`.

  A real signal to the main thread, where `beam_engine` set its handler: a thread in a
  system call (a subprocess, a lock) returns from it to raise. `_thread.interrupt_main()`
  only where that handler could not be set (a run outside the main thread).
  """
  global _lost_process_message
  _lost_process_message = message
  if signal.getsignal(LOSS_SIGNAL) is _raise_in_main_thread:
    signal.pthread_kill(threading.main_thread().ident, LOSS_SIGNAL)
  else:
    _thread.interrupt_main()

  def exit_now():
    if _failure_reported.is_set():
      return
    progress.get_logger().error('error: the pipeline failed: %s', message)
    exit_at_once(EXIT_FAILED)

  guard = threading.Timer(max(0.0, bound_s), exit_now)
  guard.daemon = True
  guard.start()


def exit_at_once(status: int) -> None:
  """Flushes the logs and ends the process without waiting on library threads.

  After a lost engine process or Ctrl-C, Beam's SDK harness and gRPC's threads may never
  end, and the interpreter would wait on them at exit.
  """
  logging.shutdown()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(status)  # pylint: disable=protected-access


def must_exit_at_once() -> bool:
  """Whether the run lost an engine process (its library threads may linger)."""
  return _lost_process_message is not None


@contextlib.contextmanager
def beam_engine(args: argparse.Namespace) -> Iterator[Dict[str, Any]]:
  """`create_pipeline`'s Beam arguments for the run's engine, with a local cluster running
  while they are used.

  DirectRunner in memory on one worker by default. With `--beam-runner flink|spark`, the
  job server at `--beam-endpoint` once it answers (a bounded wait), else a local cluster
  (beam_cluster.start) that stops when the block ends: on success, failure or Ctrl-C.
  """
  engine = getattr(args, 'beam_runner', 'direct')
  parallelism = getattr(args, 'beam_parallelism', None)
  if engine == 'direct':
    yield ({'beam_parallelism': parallelism} if parallelism
           else {'beam_pipeline_args': list(DIRECT_RUNNER_ARGS)})
    return
  from tfx_distillery.pipelines import beam_cluster  # pylint: disable=g-import-not-at-top
  logger = progress.get_logger()
  if getattr(args, 'beam_endpoint', None):
    endpoint = beam_cluster.check_endpoint(args.beam_endpoint)
    logger.info('beam: %s job server at %s, SDK harness %s', engine, endpoint,
                args.beam_environment_type or 'LOOPBACK')
    yield {'beam_runner': engine, 'beam_endpoint': endpoint,
           'beam_environment_type': args.beam_environment_type,
           'beam_environment_config': args.beam_environment_config,
           'beam_parallelism': parallelism}
    return
  install_loss_handler()
  with beam_cluster.start(engine, log=logger.info,
                          slots=parallelism or beam_cluster.SLOTS) as cluster:
    logger.info('beam: the SDK harness runs in each Beam stage\'s own process (LOOPBACK): '
                'the local cluster needs no Docker and no Python workers of its own')

    def on_loss(process):
      # The engine may fail the job, retry it or wait for lost slots, and the stage's
      # thread may sit in Beam or gRPC: end the engine's side here, then the run's.
      message = lost_process_message(engine, process)
      logger.error('beam: %s; stopping the run', message.split('; its log')[0])
      named = time.monotonic()
      cancelled = cluster.cancel_jobs()
      if cancelled:
        logger.info('beam: cancelled the %s job %s', engine, ', '.join(cancelled))
      end_run_after_loss(message, LOST_PROCESS_EXIT_S - (time.monotonic() - named))
      cluster.stop()
      logger.info('beam: the local %s cluster is stopped', engine)

    try:
      # The endpoint reaches the stages through the environment, not the pipeline: each
      # run's cluster has its own port, and a port in the pipeline would miss the cache.
      from tfx.dsl.placeholder import runtime_placeholders  # pylint: disable=g-import-not-at-top
      os.environ[beam_cluster.ENDPOINT_VARIABLE] = cluster.endpoint
      with cluster.watched(on_loss):
        yield {'beam_runner': engine,
               'beam_endpoint': runtime_placeholders.environment_variable(
                   beam_cluster.ENDPOINT_VARIABLE),
               'beam_parallelism': cluster.slots,
               'beam_pipeline_args': cluster.staging_args()}
    except BaseException as error:
      lost = cluster.lost()
      if lost is None:
        raise
      raise LostEngineProcess(_lost_process_message or lost_process_message(engine, lost)) \
          from error
  logger.info('beam: the local %s cluster is stopped', engine)


def execute(args: argparse.Namespace) -> RunResult:
  """Builds and runs the pipeline; writes the report into the pipeline root."""
  global _pipeline_started
  preflight = unlabelled = None
  if args.dataset == 'csv':
    # Checked before anything is created, so a typo or a bad file costs nothing.
    datasets.resolve('csv', '', args.data, args.label, args.schema)
    preflight = csv_preflight.preflight_csv(args.data, args.label)
    report_preflight(preflight)
    from tfx_distillery.pipelines import beam_cluster  # pylint: disable=g-import-not-at-top
    check_memory(preflight, getattr(args, 'beam_runner', 'direct'),
                 getattr(args, 'beam_parallelism', None) or beam_cluster.SLOTS,
                 local_cluster=not getattr(args, 'beam_endpoint', None))
    if getattr(args, 'unlabelled', None):
      unlabelled = csv_preflight.preflight_unlabelled(args.unlabelled, preflight)
      report_preflight(unlabelled, 'unlabelled')
      for name in csv_preflight.shared_files(preflight, unlabelled):
        progress.get_logger().warning(
            'unlabelled: %s holds the same rows as a file of --data, so the pool includes the '
            'rows the gate reports on (test). No label leaks (the Distiller never reads labels '
            'from the pool), but the student has seen the teacher\'s answers on them.', name)
  run_name = run_folder_name(args)
  pipeline_name = f'{PIPELINE_NAME_PREFIX}-{run_name}'
  pipeline_root = pipeline_root_of(args)
  serving_dir = os.path.abspath(args.serving_dir or
                                os.path.join(distillery_home(), 'serving', run_name))
  metadata_path = os.path.join(pipeline_root, 'metadata.sqlite')
  log_path = os.path.join(pipeline_root, 'pipeline.log')
  os.makedirs(pipeline_root, exist_ok=True)
  logger = progress.get_logger()
  logger.info('pipeline %s: root %s', pipeline_name, pipeline_root)
  logger.info('full log: %s', log_path)
  # The console set up before TensorFlow loads, so its loggers write to the file.
  with exclusive_metadata(metadata_path), recorded_run(
      pipeline_root, pipeline_name, serving_dir), console_shows_progress_only(
          log_path, getattr(args, 'verbose', False)) as component_progress:
    # Imported here so `--help` and argument errors answer without loading TFX.
    # TFX's modules, not `tfx.v1`, which loads its cloud extensions and kfp too (pipeline.py).
    from tfx.orchestration import metadata  # pylint: disable=g-import-not-at-top
    from tfx.orchestration.local import local_dag_runner  # pylint: disable=g-import-not-at-top
    from tfx_distillery.pipelines import pipeline  # pylint: disable=g-import-not-at-top
    from tfx_distillery.pipelines import summary  # pylint: disable=g-import-not-at-top

    pool_rows = getattr(args, 'pool_rows', None)
    dataset = datasets.resolve(args.dataset, pipeline_root, args.data, args.label, args.schema,
                               datasets.MNIST1D_POOL_ROWS if pool_rows is None else pool_rows)
    if preflight is not None:
      # ExampleGen reads the checked copy: plain UTF-8, NaN read as empty, labels present.
      dataset = dataclasses.replace(dataset, data_root=stage_csv(preflight, pipeline_root))
    logger.info('data: %s (label column %r)', dataset.data_root, dataset.label_column)
    unlabelled_root = (stage_csv(unlabelled, pipeline_root, 'unlabelled') if unlabelled
                       else dataset.unlabelled_data_root)
    if unlabelled_root:
      logger.info('unlabelled: %s (the Distiller\'s transfer set)', unlabelled_root)
    start = time.monotonic()
    with beam_engine(args) as beam_arguments:
      _pipeline_started = True
      local_dag_runner.LocalDagRunner().run(pipeline.create_pipeline(
          pipeline_name=pipeline_name,
          pipeline_root=pipeline_root,
          data_root=dataset.data_root,
          transform_module_file=dataset.transform_module_file,
          teacher_module_file=dataset.teacher_module_file,
          student_module_file=dataset.student_module_file,
          student_parameter_shares=(getattr(args, 'student_shares', None)
                                    or dataset.student_parameter_shares),
          label_column=dataset.label_column,
          label_key=dataset.label_key,
          serving_model_dir=serving_dir,
          max_accuracy_drop=getattr(args, 'max_accuracy_drop', 0.01),
          train_steps=args.train_steps or DEFAULT_TRAIN_STEPS[args.dataset],
          student_train_steps=args.student_train_steps or DEFAULT_STUDENT_TRAINING.get(
              args.dataset, (DEFAULT_TRAIN_STEPS[args.dataset],))[0],
          student_config=DEFAULT_STUDENT_TRAINING.get(args.dataset, (None, None))[1],
          metadata_connection_config=metadata.sqlite_metadata_connection_config(metadata_path),
          **beam_arguments,
          enable_cache=not args.no_cache,
          num_workers=args.num_workers,
          schema_path=dataset.schema_file,
          unlabelled_data_root=unlabelled_root,
          input_splits=dataset.input_splits,
          random_seed=getattr(args, 'seed', None)))
    wall_seconds = time.monotonic() - start
    logger.info('pipeline %s: finished in %.1f s', pipeline_name, wall_seconds)
    if component_progress.cached:
      logger.info('reused from the cache: %s', ', '.join(component_progress.cached))
    run_summary = summary.summarize_run(metadata_path, pipeline_name)
    report_path = None
    if run_summary.gate_decision is not None:
      from tfx_distillery.components.gate import report  # pylint: disable=g-import-not-at-top
      report_path = report.write(run_summary.gate_decision, pipeline_root,
                                 run_summary.pushed_destination)
  return RunResult(run_summary, wall_seconds, dict(component_progress.wall_seconds),
                   report_path)


def run(args: argparse.Namespace) -> int:
  """Runs the pipeline, prints the summary table and the report's path; returns the exit status."""
  result = execute(args)
  # Imported after the run: it loads TensorFlow, whose start-up lines go to the log file.
  from tfx_distillery.pipelines import summary  # pylint: disable=g-import-not-at-top
  print(summary.format_table(result.summary), flush=True)
  if result.report_path:
    print(f'report: {result.report_path}', flush=True)
  return EXIT_PUSHED if result.summary.pushed_destination else EXIT_NOTHING_PASSED


def main(argv: Optional[List[str]] = None) -> int:
  return run_with_exit_status(parse_args(argv))


def run_with_exit_status(args: argparse.Namespace) -> int:
  """Runs the pipeline; a refused input, a failure or Ctrl-C becomes an exit status.

  The console gets one message, never a Python traceback; an unexpected error's
  traceback goes to the run's log file, which the message names.
  """
  _control_c_pressed.clear()
  previous = _catch_control_c()
  try:
    return run(args)
  except KeyboardInterrupt:
    return _report_interrupt()
  except Exception as error:  # pylint: disable=broad-except
    if _control_c_pressed.is_set() or _caused_by(error, KeyboardInterrupt):
      # Beam re-raises a DoFn's KeyboardInterrupt as a RuntimeError naming the step, and
      # pybind11 may replace it with a RuntimeError of its own (see _control_c_pressed).
      return _report_interrupt()
    if is_bad_input(error):
      _failure_reported.set()
      print(f'error: {error}', file=sys.stderr)
      return EXIT_BAD_INPUT
    if isinstance(error, RuntimeError):
      _failure_reported.set()
      advice = ('' if getattr(error, 'says_what_to_do', False) else
                '\nThe lines above name the component that failed; fix its input and rerun '
                '(finished components are taken from the cache).')
      print(f'error: the pipeline failed: {error}{advice}', file=sys.stderr)
      return EXIT_FAILED
    return _report_failure(args, error)
  finally:
    if previous is not None:
      signal.signal(signal.SIGINT, previous)


# From Ctrl-C to the run's exit, should a library swallow the KeyboardInterrupt: pyarrow's
# first look for pandas ignores any exception raised in it ("Exception ignored in:
# 'pyarrow.lib._PandasAPIShim._have_pandas_internal'"), and the run went on for minutes.
INTERRUPT_EXIT_S = 10


def _catch_control_c():
  """Ctrl-C raises KeyboardInterrupt as before, and the run ends within INTERRUPT_EXIT_S
  even if a library swallows it. Returns the handler it replaced (None: left as it was,
  outside the main thread or where SIGINT is ignored, as in a background job)."""
  if threading.current_thread() is not threading.main_thread():
    return None
  previous = signal.getsignal(signal.SIGINT)
  if previous is not signal.default_int_handler:
    return None

  def on_control_c(signum, frame):
    _control_c_pressed.set()
    guard = threading.Timer(INTERRUPT_EXIT_S, _exit_interrupted)
    guard.daemon = True
    guard.start()
    signal.default_int_handler(signum, frame)

  signal.signal(signal.SIGINT, on_control_c)
  return previous


def _exit_interrupted() -> None:
  if _failure_reported.is_set():
    return
  # Through the progress logger: the process's stderr still goes to the run's log file.
  where = f' during {_running_node}' if _running_node else ''
  progress.get_logger().error('interrupted%s: nothing was pushed. The next run reuses every '
                              'component that finished, from the cache.', where)
  exit_at_once(EXIT_INTERRUPTED)


def _caused_by(error: BaseException, kind: type) -> bool:
  """Whether `error`, or an exception it was raised from or while handling, is a `kind`."""
  seen = set()
  while error is not None and id(error) not in seen:
    if isinstance(error, kind):
      return True
    seen.add(id(error))
    error = error.__cause__ or error.__context__
  return False


def _report_interrupt() -> int:
  _failure_reported.set()
  where = f' during {_running_node}' if _running_node else ''
  print(f'\ninterrupted{where}: nothing was pushed. The next run reuses every component '
        'that finished, from the cache.', file=sys.stderr, flush=True)
  return EXIT_INTERRUPTED


def _report_failure(args: argparse.Namespace, error: BaseException) -> int:
  """An unexpected failure: one console line, the traceback in the run's log file."""
  _failure_reported.set()
  log_path = os.path.join(pipeline_root_of(args), 'pipeline.log')
  try:
    with open(log_path, 'a') as handle:
      traceback.print_exception(type(error), error, error.__traceback__, file=handle)
  except OSError:
    log_path = 'nowhere (the log file could not be written)'
  print(f'error: the pipeline failed{f" in {_running_node}" if _running_node else ""}: '
        f'{type(error).__name__}: {error}\nThe traceback is in {log_path}.',
        file=sys.stderr)
  return EXIT_FAILED


if __name__ == '__main__':
  sys.exit(main())
