"""DistributedTrainer's executor: runs the module's run_fn on one or many processes."""

import contextlib
import hashlib
import json
import os
import tempfile
from typing import Any, Dict, Iterator, List

import tensorflow as tf
from tfx import types
from tfx.components.trainer import executor as trainer_executor
from tfx.types import artifact_utils
from tfx.types import standard_component_specs
from tfx.utils import import_utils

from tfx_distillery.components.common import modules
from tfx_distillery.components.common import progress
from tfx_distillery.components.distributed_trainer import cluster
from tfx_distillery.components.distributed_trainer import micro_batches
from tfx_distillery.components.distributed_trainer import spec as trainer_spec
from tfx_distillery.components.common import seeding
from tfx_distillery.components.common import strategy as strategy_lib
from tfx_distillery.components.common import tracing

OUR_KEYS = (trainer_spec.STRATEGY_KEY, trainer_spec.NUM_WORKERS_KEY,
            trainer_spec.NUM_PARAMETER_SERVERS_KEY, trainer_spec.COMMUNICATION_KEY,
            trainer_spec.VERTEX_TRAINING_KEY, trainer_spec.PROGRESS_TIMEOUT_KEY,
            trainer_spec.MICRO_BATCHES_KEY, trainer_spec.STAGES_KEY,
            trainer_spec.RECOMPUTE_KEY, trainer_spec.LOGICAL_DEVICES_KEY)


def backup_folder(input_dict: Dict[str, List[types.Artifact]],
                  output_dict: Dict[str, List[types.Artifact]],
                  exec_properties: Dict[str, Any]) -> str:
  """A BackupAndRestore folder that a rerun of the same training finds again.

  TFX gives every execution a fresh model_run URI, so a backup inside it would be
  lost with the failed execution. The folder sits beside those URIs instead,
  named by a fingerprint of the inputs and properties: a rerun on the same inputs
  resumes, a run on new inputs starts fresh.
  """
  fingerprint = hashlib.sha256(json.dumps({
      'inputs': {key: sorted(artifact.uri for artifact in artifacts)
                 for key, artifacts in sorted(input_dict.items())},
      'properties': {key: str(value) for key, value in sorted(exec_properties.items())},
  }, sort_keys=True).encode()).hexdigest()[:16]
  model_run_uri = artifact_utils.get_single_uri(
      output_dict[standard_component_specs.MODEL_RUN_KEY])
  return os.path.join(os.path.dirname(model_run_uri.rstrip('/')), f'backup-{fingerprint}')


def plan_path(output_dict: Dict[str, List[types.Artifact]],
              exec_properties: Dict[str, Any]) -> str:
  """Where strategy 'pipeline' writes its stage plan (in model_run); '' for the others."""
  if exec_properties[trainer_spec.STRATEGY_KEY] != 'pipeline':
    return ''
  # Only pipelined runs load GPipe's module.
  from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
  return os.path.join(artifact_utils.get_single_uri(
      output_dict[standard_component_specs.MODEL_RUN_KEY]), gpipe.PLAN_FILE_NAME)


@contextlib.contextmanager
def training_environment(training: strategy_lib.TrainingSettings) -> Iterator[None]:
  """Describes the training to an in-process run_fn, as worker processes get it."""
  previous = os.environ.get(strategy_lib.ENVIRONMENT_VARIABLE)
  os.environ[strategy_lib.ENVIRONMENT_VARIABLE] = training.to_json()
  try:
    yield
  finally:
    if previous is None:
      os.environ.pop(strategy_lib.ENVIRONMENT_VARIABLE, None)
    else:
      os.environ[strategy_lib.ENVIRONMENT_VARIABLE] = previous


class Executor(trainer_executor.GenericExecutor):
  """Trains in this process for one worker, or on a local cluster of processes.

  Subclasses (the Distiller) reuse the distribution and swap what runs inside
  each process by naming another `PROCESS_EXECUTOR`.
  """

  # Dotted path of the executor that trains inside one process.
  PROCESS_EXECUTOR = 'tfx.components.trainer.executor.GenericExecutor'
  COMPONENT_NAME = 'DistributedTrainer'

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    trainer_properties = {key: value for key, value in exec_properties.items()
                          if key not in OUR_KEYS}
    # A given seed makes the run repeatable; without one a seed is drawn and recorded.
    random_seed, deterministic = seeding.from_properties(exec_properties)
    training = strategy_lib.TrainingSettings(
        strategy=exec_properties[trainer_spec.STRATEGY_KEY],
        communication=exec_properties[trainer_spec.COMMUNICATION_KEY],
        num_workers=int(exec_properties[trainer_spec.NUM_WORKERS_KEY]),
        num_parameter_servers=int(exec_properties[trainer_spec.NUM_PARAMETER_SERVERS_KEY]),
        backup_dir=backup_folder(input_dict, output_dict, trainer_properties),
        progress_timeout_seconds=float(
            exec_properties.get(trainer_spec.PROGRESS_TIMEOUT_KEY)
            or strategy_lib.DEFAULT_PROGRESS_TIMEOUT_SECONDS),
        micro_batches=int(exec_properties.get(trainer_spec.MICRO_BATCHES_KEY) or 1),
        stages=int(exec_properties.get(trainer_spec.STAGES_KEY) or 0),
        recompute=bool(exec_properties.get(trainer_spec.RECOMPUTE_KEY)),
        logical_devices=bool(exec_properties.get(trainer_spec.LOGICAL_DEVICES_KEY)),
        plan_path=plan_path(output_dict, exec_properties),
        random_seed=random_seed, deterministic=deterministic)
    # A user's run_fn, which may import nothing of ours, gets the same short first step.
    tracing.trace_keras_as_written()
    with progress.component_timer(f'{self.COMPONENT_NAME} executor'):
      if exec_properties.get(trainer_spec.VERTEX_TRAINING_KEY):
        self._run_on_vertex(input_dict, output_dict, trainer_properties,
                            json.loads(exec_properties[trainer_spec.VERTEX_TRAINING_KEY]))
        return
      # Logical devices must be made before TensorFlow starts, so in a process of their own.
      if (cluster.processes_needed(training) == 1 and training.strategy != 'parameter_server'
          and not training.logical_devices):
        with training_environment(training), modules.user_module_first(trainer_properties), \
            seeding.seeded(training.random_seed, training.deterministic, self.COMPONENT_NAME), \
            micro_batches.training_step(training):
          process_executor = import_utils.import_class_by_path(self.PROCESS_EXECUTOR)
          process_executor(self._context).Do(input_dict, output_dict, trainer_properties)
      else:
        self._run_cluster(training, input_dict, output_dict, trainer_properties)
      seeding.record([artifact for artifacts in output_dict.values() for artifact in artifacts],
                     training.random_seed)
      # Training finished: the backup is only for resuming an interrupted run.
      if tf.io.gfile.exists(training.backup_dir):
        tf.io.gfile.rmtree(training.backup_dir)

  def _run_on_vertex(self, input_dict, output_dict, exec_properties, vertex_training) -> None:
    """Hands the worker pools to TFX's Vertex AI training extension instead of local processes."""
    from tfx.extensions.google_cloud_ai_platform import constants as vertex_constants  # pylint: disable=g-import-not-at-top
    from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_executor  # pylint: disable=g-import-not-at-top
    custom_config = json.loads(exec_properties.get('custom_config') or 'null') or {}
    custom_config[vertex_executor.TRAINING_ARGS_KEY] = {
        'project': vertex_training['project'],
        'worker_pool_specs': vertex_training['worker_pool_specs'],
    }
    custom_config[vertex_constants.ENABLE_VERTEX_KEY] = True
    custom_config[vertex_constants.VERTEX_REGION_KEY] = vertex_training['region']
    vertex_executor.GenericExecutor().Do(
        input_dict, output_dict, {**exec_properties, 'custom_config': json.dumps(custom_config)})

  def _run_cluster(self, training, input_dict, output_dict, exec_properties) -> None:
    job_dir = tempfile.mkdtemp(prefix='distillery-job-')
    job_path = os.path.join(job_dir, 'job.json')
    with open(job_path, 'w') as handle:
      json.dump({'input_dict': artifact_utils.jsonify_artifact_dict(input_dict),
                 'output_dict': artifact_utils.jsonify_artifact_dict(output_dict),
                 'exec_properties': exec_properties,
                 'process_executor': self.PROCESS_EXECUTOR}, handle)
    try:
      cluster.run(training, job_path)
    finally:
      tf.io.gfile.rmtree(job_dir)
    serving_model_dir = os.path.join(
        artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_KEY]),
        'Format-Serving')
    if not tf.io.gfile.exists(serving_model_dir):
      raise RuntimeError(f'{self.COMPONENT_NAME}: the chief finished without exporting a model '
                         f'to {serving_model_dir}; run_fn must save to '
                         'fn_args.serving_model_dir.')
