"""One training process of a DistributedTrainer (started by cluster.run, not by users).

Usage: python -m tfx_distillery.components.distributed_trainer.worker JOB_JSON JOB_NAME TASK_INDEX
"""

import ctypes
import faulthandler
import os
import signal
import sys

# Linux's prctl option: the signal this process gets when the thread that started it ends.
_PR_SET_PDEATHSIG = 1
# As cluster.PARENT_VARIABLE; not imported, so that nothing slow runs before the prctl.
_PARENT_VARIABLE = 'DISTILLERY_PARENT_PID'


def die_with_parent() -> None:
  """SIGKILL this process when its parent ends, however it ends (SIGKILL included).

  A worker stuck in a collective ignores SIGTERM handlers (they run between Python
  bytecodes), so the kernel's SIGKILL is the one signal that always works. A parent
  that died before the prctl took effect is caught by comparing the parent's pid.
  """
  parent = os.environ.get(_PARENT_VARIABLE)
  if sys.platform.startswith('linux'):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
  if parent and os.getppid() != int(parent):
    os._exit(1)  # pylint: disable=protected-access


die_with_parent()
# `kill -USR1` prints every thread's stack to stderr: the executor asks for it when a
# process is stuck, and the stack names the op it waits in.
faulthandler.register(signal.SIGUSR1, all_threads=True)

# Before anything imports TensorFlow: only progress lines reach stdout (the
# executor shows them with a prefix); TensorFlow, absl and pip write to stderr.
_PROGRESS_STREAM = os.fdopen(os.dup(1), 'w', buffering=1)
os.dup2(2, 1)

import json  # pylint: disable=g-import-not-at-top,wrong-import-position
import shutil  # pylint: disable=g-import-not-at-top,wrong-import-position
import tempfile  # pylint: disable=g-import-not-at-top,wrong-import-position

from tfx_distillery.components.common import heartbeat  # pylint: disable=g-import-not-at-top,wrong-import-position
from tfx_distillery.components.common import modules  # pylint: disable=g-import-not-at-top,wrong-import-position
from tfx_distillery.components.common import progress  # pylint: disable=g-import-not-at-top,wrong-import-position
from tfx_distillery.components.common import strategy as strategy_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from tfx_distillery.components.distributed_trainer import micro_batches  # pylint: disable=g-import-not-at-top,wrong-import-position


# Cores the local processes share between them; unset means every core of the machine.
CORES_VARIABLE = 'DISTILLERY_CORES'


def shard_by_data_when_files_are_few(num_workers: int) -> None:
  """Makes TFX's data_accessor datasets shard by record when a split has too few files.

  MultiWorkerMirroredStrategy shards a dataset by file, one file per worker. TFX's
  Transform writes one file per split (penguin's does), and a stock run_fn then fails
  in its first step ("Could not apply FILE based sharding"). With fewer files than
  workers every worker reads the files and keeps every num_workers-th record.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx.components.trainer import fn_args_utils  # pylint: disable=g-import-not-at-top
  original = fn_args_utils.get_common_fn_args

  def with_record_sharding(*args, **kwargs):
    fn_args = original(*args, **kwargs)
    accessor = fn_args.data_accessor
    if accessor is None:
      return fn_args
    factory = accessor.tf_dataset_factory

    def dataset_factory(file_pattern, *factory_args, **factory_kwargs):
      dataset = factory(file_pattern, *factory_args, **factory_kwargs)
      patterns = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
      files = sum(len(tf.io.gfile.glob(pattern)) for pattern in patterns)
      if files < num_workers:
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA)
        dataset = dataset.with_options(options)
      return dataset

    fn_args.data_accessor = accessor._replace(tf_dataset_factory=dataset_factory)  # pylint: disable=protected-access
    return fn_args

  fn_args_utils.get_common_fn_args = with_record_sharding


def main(job_path: str, job_name: str, task_index: int) -> int:
  progress.set_console(_PROGRESS_STREAM)
  heartbeat.beat(heartbeat.SET_UP, 'importing TensorFlow')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.common import tracing  # pylint: disable=g-import-not-at-top
  tracing.trace_keras_as_written()  # As in-process runs: a user's run_fn traces Keras as written.

  training = strategy_lib.settings()
  if training.strategy == 'parameter_server' and job_name in ('worker', 'ps'):
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=job_name,
                                  task_index=task_index, protocol='grpc', start=True)
    server.join()  # Serves until the executor stops this process.
    return 0
  # Local processes share this machine's cores: without a cap each one sizes its
  # thread pools for all of them, and the oversubscribed workers then wait for
  # each other at every all-reduce.
  # DISTILLERY_CORES caps the cores the whole local cluster may use (default: all).
  cores = int(os.environ.get(CORES_VARIABLE) or os.cpu_count() or 1)
  cores_per_process = max(1, cores // max(1, training.num_workers))
  tf.config.threading.set_intra_op_parallelism_threads(cores_per_process)
  tf.config.threading.set_inter_op_parallelism_threads(cores_per_process)
  if training.strategy == 'pipeline' and training.logical_devices:
    # Before TensorFlow's context starts: one logical device per stage.
    from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
    gpipe.split_into_logical_devices(training.stages)
  # Collective ops must be configured before any other TensorFlow work, so the
  # strategy is created now; run_fn gets this instance from strategy_for(), and a
  # module that builds its own MultiWorkerMirroredStrategy gets it too.
  if training.random_seed is not None:
    # Every process alike: replicas start from equal weights and draw the same way.
    from tfx_distillery.components.common import seeding  # pylint: disable=g-import-not-at-top
    seeding.seed_process(training.random_seed, training.deterministic)
  heartbeat.beat(heartbeat.SET_UP, 'joining the cluster (waiting for every worker)')
  strategy_lib.strategy_for()
  if training.strategy == 'multi_worker_mirrored':
    strategy_lib.one_strategy_per_process()
    if training.num_workers > 1:
      shard_by_data_when_files_are_few(training.num_workers)
  heartbeat.beat(heartbeat.SET_UP, 'reading the inputs and building the model')
  heartbeat.beat_in_every_fit()

  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  from tfx.utils import import_utils  # pylint: disable=g-import-not-at-top
  with open(job_path) as handle:
    job = json.load(handle)
  input_dict = artifact_utils.parse_artifact_dict(job['input_dict'])
  output_dict = artifact_utils.parse_artifact_dict(job['output_dict'])
  scratch_dir = None
  if not training.is_chief:
    # tf.distribute needs every worker to save; only the chief's copy is kept. In the job's
    # folder, which the executor removes however the worker ended (even by SIGKILL).
    scratch_dir = tempfile.mkdtemp(prefix=f'{job_name}-{task_index}-',
                                   dir=os.path.dirname(job_path))
    for key, artifacts in output_dict.items():
      for position, artifact in enumerate(artifacts):
        artifact.uri = os.path.join(scratch_dir, key, str(position))
        os.makedirs(artifact.uri, exist_ok=True)
  try:
    # The component's in-process executor (Trainer's GenericExecutor, or the Distiller's).
    process_executor = import_utils.import_class_by_path(job['process_executor'])
    with modules.user_module_first(job['exec_properties']), \
        micro_batches.training_step(training):
      process_executor().Do(input_dict, output_dict, job['exec_properties'])
    heartbeat.beat(heartbeat.EXPORT, 'done')
  finally:
    if scratch_dir:
      shutil.rmtree(scratch_dir, ignore_errors=True)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
