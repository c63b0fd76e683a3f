"""What a module's run_fn calls to get its distribution strategy and backup folder.

The executor describes the training (strategy, communication, backup folder) in
one environment variable of every process it starts; TF_CONFIG carries the
cluster. No module file ever builds a TF_CONFIG itself.
"""

import dataclasses
import json
import os
from typing import Optional

STRATEGIES = ('one_device', 'mirrored', 'multi_worker_mirrored', 'parameter_server')
COMMUNICATIONS = ('auto', 'ring', 'nccl')
ENVIRONMENT_VARIABLE = 'DISTILLERY_TRAINING'

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
  """
  strategy: str = 'multi_worker_mirrored'
  communication: str = 'auto'
  num_workers: int = 1
  num_parameter_servers: int = 0
  backup_dir: str = ''
  is_chief: bool = True

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
  if strategy == 'parameter_server' and num_parameter_servers < 1:
    raise ValueError("strategy 'parameter_server' needs num_parameter_servers >= 1; got "
                     f'{num_parameter_servers}.')
  if strategy != 'parameter_server' and num_parameter_servers:
    raise ValueError(f'num_parameter_servers is only used by strategy \'parameter_server\'; '
                     f'got {num_parameter_servers} with strategy {strategy!r}.')
  if strategy in ('one_device', 'mirrored') and num_workers > 1:
    raise ValueError(f'strategy {strategy!r} runs on one machine; use '
                     "'multi_worker_mirrored' or 'parameter_server' for num_workers > 1 "
                     f'(got num_workers={num_workers}).')


def settings(fn_args=None) -> TrainingSettings:
  """The settings of this training process (defaults outside a DistributedTrainer)."""
  del fn_args  # The settings travel in the environment, for every process alike.
  return TrainingSettings.from_environment() or TrainingSettings(strategy='one_device')


def strategy_for(fn_args=None):
  """Returns the ready `tf.distribute.Strategy` a run_fn should train under.

  Args:
    fn_args: The `FnArgs` given to run_fn (accepted for a uniform call site).

  Returns:
    The strategy; created once per process, as tf.distribute requires.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  current = settings(fn_args)
  key = (current.strategy, current.communication)
  if key in _strategy_cache:
    return _strategy_cache[key]
  # Physical, not logical: listing logical devices starts the eager context, after
  # which MultiWorkerMirroredStrategy can no longer configure its collectives.
  gpus = tf.config.list_physical_devices('GPU')
  if current.strategy == 'one_device':
    strategy = tf.distribute.OneDeviceStrategy('/gpu:0' if gpus else '/cpu:0')
  elif current.strategy == 'mirrored':
    cross_device_ops = None  # TF picks NCCL on several GPUs.
    if current.communication == 'ring' or (current.communication == 'auto' and not gpus):
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
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=implementation))
  else:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
  _strategy_cache[key] = strategy
  return strategy


def uses_all_reduce(fn_args, strategy) -> bool:
  """Whether gradients are all-reduced across several replicas (synchronous strategies)."""
  synchronous = settings(fn_args).strategy in ('mirrored', 'multi_worker_mirrored')
  return synchronous and (strategy.num_replicas_in_sync > 1 or settings(fn_args).num_workers > 1)


def backup_dir(fn_args=None) -> Optional[str]:
  """Folder for `tf_keras.callbacks.BackupAndRestore`, or None outside a DistributedTrainer."""
  return settings(fn_args).backup_dir or None
