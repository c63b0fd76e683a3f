"""One training process of a DistributedTrainer (started by cluster.run, not by users).

Usage: python -m tfx_distillery.components.distributed_trainer.worker JOB_JSON JOB_NAME TASK_INDEX
"""

import os
import sys

# Before anything imports TensorFlow: only progress lines reach stdout (the
# executor shows them with a prefix); TensorFlow, absl and pip write to stderr.
_PROGRESS_STREAM = os.fdopen(os.dup(1), 'w', buffering=1)
os.dup2(2, 1)

import json  # pylint: disable=g-import-not-at-top,wrong-import-position
import shutil  # pylint: disable=g-import-not-at-top,wrong-import-position
import tempfile  # pylint: disable=g-import-not-at-top,wrong-import-position

from tfx_distillery.components.common import modules  # pylint: disable=g-import-not-at-top,wrong-import-position
from tfx_distillery.components.common import progress  # pylint: disable=g-import-not-at-top,wrong-import-position
from tfx_distillery.components.common import strategy as strategy_lib  # pylint: disable=g-import-not-at-top,wrong-import-position


# Cores the local processes share between them; unset means every core of the machine.
CORES_VARIABLE = 'DISTILLERY_CORES'


def main(job_path: str, job_name: str, task_index: int) -> int:
  progress.set_console(_PROGRESS_STREAM)
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
  # Collective ops must be configured before any other TensorFlow work, so the
  # strategy is created now; run_fn gets this instance from strategy_for().
  strategy_lib.strategy_for()

  from tfx.types import artifact_utils  # pylint: disable=g-import-not-at-top
  from tfx.utils import import_utils  # pylint: disable=g-import-not-at-top
  with open(job_path) as handle:
    job = json.load(handle)
  input_dict = artifact_utils.parse_artifact_dict(job['input_dict'])
  output_dict = artifact_utils.parse_artifact_dict(job['output_dict'])
  scratch_dir = None
  if not training.is_chief:
    # tf.distribute needs every worker to save; only the chief's copy is kept.
    scratch_dir = tempfile.mkdtemp(prefix=f'distillery-{job_name}-{task_index}-')
    for key, artifacts in output_dict.items():
      for position, artifact in enumerate(artifacts):
        artifact.uri = os.path.join(scratch_dir, key, str(position))
        os.makedirs(artifact.uri, exist_ok=True)
  try:
    # The component's in-process executor (Trainer's GenericExecutor, or the Distiller's).
    process_executor = import_utils.import_class_by_path(job['process_executor'])
    with modules.user_module_first(job['exec_properties']):
      process_executor().Do(input_dict, output_dict, job['exec_properties'])
  finally:
    if scratch_dir:
      shutil.rmtree(scratch_dir, ignore_errors=True)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
