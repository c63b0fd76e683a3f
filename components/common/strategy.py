"""What a module's run_fn calls to get its distribution strategy and backup folder.

The executor describes the training (strategy, communication, backup folder) in
one environment variable of every process it starts; TF_CONFIG carries the
cluster. No module file ever builds a TF_CONFIG itself.
"""

import dataclasses
import json
import os
from typing import List, Optional

STRATEGIES = ('one_device', 'mirrored', 'multi_worker_mirrored', 'parameter_server', 'pipeline')
# How gradients are summed. `ring` and `nccl` are MultiWorkerMirroredStrategy's collective
# implementations; on one machine MirroredStrategy offers NCCL or a reduction to one
# device (`reduce_to_one_device`), which is no ring.
COMMUNICATIONS = ('auto', 'ring', 'nccl', 'reduce_to_one_device')
ENVIRONMENT_VARIABLE = 'DISTILLERY_TRAINING'
# A training process whose last heartbeat is older than this fails the run: well above
# a first step (tracing) on a slow CPU, far below "for ever".
DEFAULT_PROGRESS_TIMEOUT_SECONDS = 600.0

_strategy_cache = {}


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
  """How one training process should distribute its work.

  Attributes:
    strategy: One of `STRATEGIES`.
    communication: One of `COMMUNICATIONS`.
    num_workers: Workers in the cluster (the chief included).
    num_parameter_servers: Parameter servers (parameter_server strategy only).
    backup_dir: BackupAndRestore folder that survives a failed execution.
    is_chief: Whether this process writes the model and TensorBoard logs.
    progress_timeout_seconds: Seconds a process may go without progress; 0 for none.
    random_seed: The run's seed, which every process applies; None leaves them unseeded.
    deterministic: Whether processes turn on op determinism (the seed was given).
    micro_batches: Micro-batches per step, their gradients applied once (1: none).
    stages: Pipeline stages (strategy `pipeline` only; 0 otherwise).
    recompute: Whether pipeline stages recompute their activations in the backward pass.
    logical_devices: Whether the process splits its CPU into `stages` logical devices.
    plan_path: Where the pipeline's plan is written (model_run/pipeline_plan.json).
  """
  strategy: str = 'multi_worker_mirrored'
  communication: str = 'auto'
  num_workers: int = 1
  num_parameter_servers: int = 0
  backup_dir: str = ''
  is_chief: bool = True
  progress_timeout_seconds: float = 0.0
  random_seed: Optional[int] = None
  deterministic: bool = False
  micro_batches: int = 1
  stages: int = 0
  recompute: bool = False
  logical_devices: bool = False
  plan_path: str = ''

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), sort_keys=True)

  @classmethod
  def from_environment(cls) -> Optional['TrainingSettings']:
    text = os.environ.get(ENVIRONMENT_VARIABLE)
    return cls(**json.loads(text)) if text else None


def validate(strategy: str, num_workers: int, num_parameter_servers: int,
             communication: str) -> None:
  """Raises ValueError naming the first argument that is not allowed.

  Args:
    strategy: One of `STRATEGIES`.
    num_workers: Integer >= 1.
    num_parameter_servers: Integer >= 0; >= 1 exactly when strategy is parameter_server.
    communication: One of `COMMUNICATIONS`.
  """
  if strategy not in STRATEGIES:
    raise ValueError(f'strategy must be one of {", ".join(STRATEGIES)}; got {strategy!r}.')
  if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 1:
    raise ValueError(f'num_workers must be an integer >= 1; got {num_workers!r}.')
  if (not isinstance(num_parameter_servers, int) or isinstance(num_parameter_servers, bool)
      or num_parameter_servers < 0):
    raise ValueError('num_parameter_servers must be an integer >= 0; got '
                     f'{num_parameter_servers!r}.')
  if communication not in COMMUNICATIONS:
    raise ValueError(f'communication must be one of {", ".join(COMMUNICATIONS)}; '
                     f'got {communication!r}.')
  if strategy == 'mirrored' and communication == 'ring':
    raise ValueError("communication 'ring' is a multi-worker collective; strategy 'mirrored' "
                     "offers 'nccl' (GPUs) or 'reduce_to_one_device', and 'auto' picks NCCL on "
                     'GPUs and reduce_to_one_device on CPUs.')
  if strategy != 'mirrored' and communication == 'reduce_to_one_device':
    raise ValueError("communication 'reduce_to_one_device' is strategy 'mirrored''s; got "
                     f"strategy {strategy!r} (use 'auto', 'ring' or 'nccl').")
  if strategy == 'parameter_server' and num_parameter_servers < 1:
    raise ValueError("strategy 'parameter_server' needs num_parameter_servers >= 1; got "
                     f'{num_parameter_servers}.')
  if strategy != 'parameter_server' and num_parameter_servers:
    raise ValueError(f'num_parameter_servers is only used by strategy \'parameter_server\'; '
                     f'got {num_parameter_servers} with strategy {strategy!r}.')
  if strategy == 'pipeline' and num_workers > 1:
    raise ValueError("strategy 'pipeline' runs its stages in one process, on that machine's "
                     f'devices; got num_workers={num_workers}.')
  if strategy in ('one_device', 'mirrored') and num_workers > 1:
    raise ValueError(f'strategy {strategy!r} runs on one machine; use '
                     "'multi_worker_mirrored' or 'parameter_server' for num_workers > 1 "
                     f'(got num_workers={num_workers}).')


def validate_progress_timeout(progress_timeout_seconds) -> None:
  """Raises ValueError naming `progress_timeout_seconds` unless it is a number > 0."""
  if (isinstance(progress_timeout_seconds, bool)
      or not isinstance(progress_timeout_seconds, (int, float))
      or not progress_timeout_seconds > 0 or progress_timeout_seconds == float('inf')):
    raise ValueError('progress_timeout_seconds must be a number of seconds > 0 (the bound on '
                     'a training process without progress); got '
                     f'{progress_timeout_seconds!r}.')


def settings(fn_args=None) -> TrainingSettings:
  """The settings of this training process.

  Local processes of a DistributedTrainer get them in `DISTILLERY_TRAINING`. On a
  cluster backend (Vertex AI worker pools) only TF_CONFIG is set, and the cluster
  it describes decides. Outside both, training uses one device.
  """
  del fn_args  # The settings travel in the environment, for every process alike.
  from_environment = TrainingSettings.from_environment()
  if from_environment:
    return from_environment
  tf_config = json.loads(os.environ.get('TF_CONFIG') or '{}')
  cluster = tf_config.get('cluster', {})
  task_type = tf_config.get('task', {}).get('type', 'chief')
  if cluster.get('ps'):
    return TrainingSettings(strategy='parameter_server',
                            num_workers=len(cluster.get('worker', [])),
                            num_parameter_servers=len(cluster['ps']),
                            is_chief=task_type == 'chief')
  workers = len(cluster.get('chief', [])) + len(cluster.get('worker', []))
  if workers > 1:
    is_chief = task_type == 'chief' or (
        not cluster.get('chief') and tf_config.get('task', {}).get('index', 0) == 0)
    return TrainingSettings(num_workers=workers, is_chief=is_chief)
  return TrainingSettings(strategy='one_device')


def worker_pool_specs(strategy: str, num_workers: int, num_parameter_servers: int,
                      image: str, machine_type: str = 'n1-standard-8',
                      accelerator_type: Optional[str] = None,
                      accelerator_count: int = 0) -> List[dict]:
  """Vertex AI CustomJob worker pools for the same cluster the local run would start.

  Pool 0 is the chief, pool 1 the other workers and pool 2 the parameter servers,
  as Vertex AI lays them out (it then sets each replica's TF_CONFIG).

  Args:
    strategy: `multi_worker_mirrored` or `parameter_server` (others run on one replica).
    num_workers: As for DistributedTrainer.
    num_parameter_servers: As for DistributedTrainer.
    image: Container image with TFX and this package installed.
    machine_type: Compute Engine machine type of every replica.
    accelerator_type: E.g. `NVIDIA_TESLA_T4`; None for CPUs.
    accelerator_count: Accelerators per training replica.

  Returns:
    The `worker_pool_specs` list.
  """
  training_machine = {'machine_type': machine_type}
  if accelerator_type:
    training_machine.update(accelerator_type=accelerator_type,
                            accelerator_count=accelerator_count)

  def pool(replicas, machine):
    return {'machine_spec': machine, 'replica_count': replicas,
            'container_spec': {'image_uri': image}}

  if strategy == 'parameter_server':
    return [pool(1, training_machine), pool(num_workers, training_machine),
            pool(num_parameter_servers, {'machine_type': machine_type})]
  pools = [pool(1, training_machine)]
  if strategy == 'multi_worker_mirrored' and num_workers > 1:
    pools.append(pool(num_workers - 1, training_machine))
  return pools


def strategy_for(fn_args=None):
  """Returns the ready `tf.distribute.Strategy` a run_fn should train under.

  Args:
    fn_args: The `FnArgs` given to run_fn (accepted for a uniform call site).

  Returns:
    The strategy; created once per process, as tf.distribute requires.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  _remember_multi_worker_class()
  current = settings(fn_args)
  key = (current.strategy, current.communication)
  if key in _strategy_cache:
    return _strategy_cache[key]
  # Physical, not logical: listing logical devices starts the eager context, after
  # which MultiWorkerMirroredStrategy can no longer configure its collectives.
  gpus = tf.config.list_physical_devices('GPU')
  if current.strategy == 'pipeline':
    # The stages place their own variables and ops on their devices (gpipe.py).
    strategy = tf.distribute.get_strategy()
  elif current.strategy == 'one_device':
    strategy = tf.distribute.OneDeviceStrategy('/gpu:0' if gpus else '/cpu:0')
  elif current.strategy == 'mirrored':
    cross_device_ops = None  # TF picks NCCL on several GPUs.
    if current.communication == 'reduce_to_one_device' or (current.communication == 'auto'
                                                           and not gpus):
      cross_device_ops = tf.distribute.ReductionToOneDevice()
    elif current.communication == 'nccl':
      cross_device_ops = tf.distribute.NcclAllReduce()
    strategy = tf.distribute.MirroredStrategy(cross_device_ops=cross_device_ops)
  elif current.strategy == 'multi_worker_mirrored':
    implementation = {
        'auto': tf.distribute.experimental.CommunicationImplementation.AUTO,
        'ring': tf.distribute.experimental.CommunicationImplementation.RING,
        'nccl': tf.distribute.experimental.CommunicationImplementation.NCCL,
    }[current.communication]
    # No `timeout_seconds`: TensorFlow keeps a thread per collective for that long
    # (timeout x collectives per second), and a two-worker run of 3,000 steps aborted
    # with "Resource temporarily unavailable" in its third epoch. The executor's
    # heartbeat watch bounds a stuck collective instead (cluster.py).
    strategy = _MULTI_WORKER_MIRRORED[0](
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=implementation))
  else:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
  _strategy_cache[key] = strategy
  return strategy


# The class tf.distribute exports, kept before `one_strategy_per_process` replaces it.
_MULTI_WORKER_MIRRORED = []


def _remember_multi_worker_class():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  if not _MULTI_WORKER_MIRRORED:
    _MULTI_WORKER_MIRRORED.append(tf.distribute.MultiWorkerMirroredStrategy)


def one_strategy_per_process() -> None:
  """Makes a module's own `MultiWorkerMirroredStrategy()` the process's one instance.

  Stock TFX module files build `tf.distribute.MultiWorkerMirroredStrategy()` in run_fn.
  A worker has already built one (collectives must be configured before other
  TensorFlow work), and a second instance in the same process starts with the same
  collective keys and configures the collective runtime again while the other
  worker may already be broadcasting: an intermittent hang in the first variable's
  broadcast. Every later construction returns the first instance instead, with a log
  line when its arguments differ.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  _remember_multi_worker_class()
  original = _MULTI_WORKER_MIRRORED[0]
  if getattr(tf.distribute.MultiWorkerMirroredStrategy, '_distillery_one_per_process', False):
    return

  class OnePerProcess(original):  # pylint: disable=abstract-method
    """Constructing it returns this process's MultiWorkerMirroredStrategy."""
    _distillery_one_per_process = True

    def __new__(cls, *args, **kwargs):
      if args or kwargs:
        from tfx_distillery.components.common import progress  # pylint: disable=g-import-not-at-top
        progress.get_logger().info(
            'MultiWorkerMirroredStrategy(%s): this process already has its strategy (from the '
            "DistributedTrainer's communication setting); run_fn gets that one.",
            ', '.join([repr(arg) for arg in args]
                      + [f'{key}={value!r}' for key, value in kwargs.items()]))
      return strategy_for()

  OnePerProcess.__name__ = original.__name__
  OnePerProcess.__qualname__ = original.__qualname__
  tf.distribute.MultiWorkerMirroredStrategy = OnePerProcess
  tf.distribute.experimental.MultiWorkerMirroredStrategy = OnePerProcess


def uses_all_reduce(fn_args, strategy) -> bool:
  """Whether gradients are all-reduced across several replicas (synchronous strategies)."""
  synchronous = settings(fn_args).strategy in ('mirrored', 'multi_worker_mirrored')
  return synchronous and (strategy.num_replicas_in_sync > 1 or settings(fn_args).num_workers > 1)


def backup_dir(fn_args=None) -> Optional[str]:
  """Folder for `tf_keras.callbacks.BackupAndRestore`, or None outside a DistributedTrainer."""
  return settings(fn_args).backup_dir or None
