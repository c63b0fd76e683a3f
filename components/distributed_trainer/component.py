"""DistributedTrainer: TFX's Trainer, trained with tf.distribute on one or many workers."""

import json
from typing import Any, Dict, Optional

from tfx.components import Trainer
from tfx.dsl.components.base import executor_spec
from tfx.proto import trainer_pb2
from tfx.types import Channel

from tfx_distillery.components.common import modeling
from tfx_distillery.components.common import modules
from tfx_distillery.components.common import parameters
from tfx_distillery.components.common import seeding
from tfx_distillery.components.distributed_trainer import executor
from tfx_distillery.components.distributed_trainer import micro_batches as micro_batches_lib
from tfx_distillery.components.distributed_trainer import spec as trainer_spec
from tfx_distillery.components.common import strategy as strategy_lib


class DistributedTrainer(Trainer):
  """A drop-in for `tfx.components.Trainer` that distributes training itself.

  Inputs, outputs and the module contract are the Trainer's: `run_fn(fn_args)`
  in `module_file` (or `run_fn` as a dotted path), `model` and `model_run` out.
  A stock module file runs unchanged with one worker. Module files that want the
  distribution call `components.distributed_trainer.strategy_for(fn_args)` for a
  ready strategy and `backup_dir(fn_args)` for BackupAndRestore; they never see
  a TF_CONFIG. `early_stopping_patience` reaches run_fn as custom_config's
  `early_stopping_patience`: our module files (through `train_and_export`) stop
  on the eval loss and keep the best epoch; a user's run_fn adds
  `early_stopping_callback(fn_args)` to its `fit`.

  With `num_workers` > 1 (or the `parameter_server` strategy) the executor starts
  one process per task on free loopback ports, streams their progress lines with
  a `[worker i]` prefix, stops all of them as soon as one fails, and keeps only
  the chief's model and TensorBoard logs.

  Example:

    trainer = DistributedTrainer(
        module_file='trainer_modules/taxi_teacher.py',
        examples=transform.outputs['transformed_examples'],
        transform_graph=transform.outputs['transform_graph'],
        train_args=trainer_pb2.TrainArgs(num_steps=1000),
        eval_args=trainer_pb2.EvalArgs(num_steps=50),
        strategy='multi_worker_mirrored', num_workers=2)
  """

  def __init__(self,
               examples: Optional[Channel] = None,
               transform_graph: Optional[Channel] = None,
               schema: Optional[Channel] = None,
               base_model: Optional[Channel] = None,
               hyperparameters: Optional[Channel] = None,
               module_file: Optional[str] = None,
               run_fn: Optional[str] = None,
               train_args: Optional[trainer_pb2.TrainArgs] = None,
               eval_args: Optional[trainer_pb2.EvalArgs] = None,
               custom_config: Optional[Dict[str, Any]] = None,
               strategy: str = 'multi_worker_mirrored',
               num_workers: int = 1,
               num_parameter_servers: int = 0,
               communication: str = 'auto',
               micro_batches: int = 1,
               stages: Optional[int] = None,
               recompute: bool = False,
               logical_devices: bool = False,
               vertex_training: Optional[Dict[str, Any]] = None,
               early_stopping_patience: Optional[int] = None,
               progress_timeout_seconds: float = (
                   strategy_lib.DEFAULT_PROGRESS_TIMEOUT_SECONDS),
               random_seed: Optional[int] = None):
    """Constructs a DistributedTrainer.

    Args:
      examples: Examples channel, as for Trainer.
      transform_graph: TransformGraph channel, as for Trainer.
      schema: Schema channel, as for Trainer.
      base_model: Model channel to warm-start from, as for Trainer.
      hyperparameters: HyperParameters channel, as for Trainer.
      module_file: File exposing `run_fn`, as for Trainer.
      run_fn: Dotted path of `run_fn`, as for Trainer.
      train_args: Training steps and splits, as for Trainer.
      eval_args: Evaluation steps and splits, as for Trainer.
      custom_config: Passed to run_fn as `fn_args.custom_config`.
      strategy: `one_device`, `mirrored`, `multi_worker_mirrored` or
        `parameter_server`, as tf.distribute names them, or `pipeline`: GPipe's
        pipeline parallelism over `stages` devices with `micro_batches`
        micro-batches, for a Sequential or functional model that is a chain of layers
        (gpipe.py).
      num_workers: Training workers (>= 1). For `parameter_server` these are the
        workers beside the chief, which coordinates.
      num_parameter_servers: Parameter servers; only for `parameter_server` (>= 1).
      communication: How gradients are summed: `auto` (NCCL on GPUs; ring under
        multi_worker_mirrored, reduce_to_one_device under mirrored on CPUs), `ring`
        or `nccl` (multi_worker_mirrored), `nccl` or `reduce_to_one_device`
        (mirrored).
      micro_batches: Splits each batch into this many micro-batches (sizes differ by
        at most one), accumulates their gradients and applies them once per step: one
        all-reduce per step under the mirrored strategies. The update is the whole
        batch's (BatchNormalization excepted: its statistics are per micro-batch),
        with a micro-batch's activations in memory instead of the batch's. Works with
        any module file whose model trains with Keras' own `fit` and train_step.
        At most the batch size (custom_config's `batch_size` where given). Default 1.
        Under `pipeline`, GPipe's M.
      stages: Pipeline stages, one per device (strategy `pipeline` only; required there).
      recompute: Pipeline stages recompute their activations in the backward pass
        (`tf.recompute_grad`), keeping only each stage's input (strategy `pipeline`).
      logical_devices: Split the CPU into `stages` logical devices, so that a pipeline
        runs on a machine with fewer devices (tests; no speed-up). Strategy `pipeline`.
      vertex_training: Train on Vertex AI worker pools instead of local
        processes: `project`, `region` and `image` (with TFX and this package),
        optionally `machine_type`, `accelerator_type`, `accelerator_count`.
      early_stopping_patience: Epochs without a lower eval loss before training
        stops; the best epoch's weights are kept. None (the default) leaves it to
        the module: off for a user's run_fn, on in our module files.
      progress_timeout_seconds: With several processes, a process that makes no
        progress (set-up, a training or validation step, export) for this long
        fails the run, naming it, its phase and its stack, and every process is
        stopped. Default 600.
      random_seed: Seeds Python, NumPy and TensorFlow in every training process
        (run_fn's included) and turns on op determinism: the same seed on the
        same machine trains the same weights. None draws a seed, used without
        op determinism; either way it is recorded on the model in ML Metadata.

    Raises:
      ValueError: naming the argument that is not allowed.
    """
    strategy_lib.validate(strategy, num_workers, num_parameter_servers, communication)
    strategy_lib.validate_progress_timeout(progress_timeout_seconds)
    seeding.validate(random_seed)
    if strategy == 'pipeline':
      # Only pipelined runs load GPipe's module.
      from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
      gpipe.validate_stages(stages)
    else:
      for name, value, unset in (('stages', stages, None), ('recompute', recompute, False),
                                 ('logical_devices', logical_devices, False)):
        if value != unset:
          raise ValueError(f"{name} is only used by strategy 'pipeline'; got {name}={value!r} "
                           f'with strategy {strategy!r}.')
    for name, value in (('recompute', recompute), ('logical_devices', logical_devices)):
      if not isinstance(value, bool):
        raise ValueError(f'{name} must be True or False; got {value!r}.')
    batch_size = (custom_config or {}).get('batch_size')
    micro_batches_lib.validate(micro_batches,
                               batch_size if isinstance(batch_size, int) else None)
    vertex_json = None
    if module_file and not run_fn:
      modules.check_module_defines(module_file, 'run_fn', '(fn_args)')
    parameters.refuse_secrets('custom_config', custom_config)
    parameters.refuse_secrets('vertex_training', vertex_training)
    if early_stopping_patience is not None:
      modeling.validate_patience(early_stopping_patience)
      given = (custom_config or {}).get(modeling.EARLY_STOPPING_PATIENCE_KEY)
      if given is not None and given != early_stopping_patience:
        raise ValueError(f'early_stopping_patience={early_stopping_patience} and custom_config'
                         f"['{modeling.EARLY_STOPPING_PATIENCE_KEY}']={given!r} disagree; "
                         'give one.')
      custom_config = {**(custom_config or {}),
                       modeling.EARLY_STOPPING_PATIENCE_KEY: early_stopping_patience}
    if vertex_training is not None:
      missing = [key for key in ('project', 'region', 'image') if not vertex_training.get(key)]
      if missing:
        raise ValueError(f'vertex_training needs {", ".join(missing)}; got keys '
                         f'{sorted(vertex_training)}.')
      vertex_json = json.dumps({
          'project': vertex_training['project'],
          'region': vertex_training['region'],
          'worker_pool_specs': strategy_lib.worker_pool_specs(
              strategy, num_workers, num_parameter_servers, vertex_training['image'],
              vertex_training.get('machine_type', 'n1-standard-8'),
              vertex_training.get('accelerator_type'),
              int(vertex_training.get('accelerator_count', 0))),
      }, sort_keys=True)
    super().__init__(examples=examples, transform_graph=transform_graph, schema=schema,
                     base_model=base_model, hyperparameters=hyperparameters,
                     module_file=module_file, run_fn=run_fn, train_args=train_args,
                     eval_args=eval_args, custom_config=custom_config)
    # Trainer builds a stock TrainerSpec; ours extends it and keeps the channels.
    stock_spec = self.spec
    self.spec = trainer_spec.DistributedTrainerSpec(
        **stock_spec.exec_properties, **stock_spec.inputs, **stock_spec.outputs,
        **{trainer_spec.STRATEGY_KEY: strategy,
           trainer_spec.NUM_WORKERS_KEY: num_workers,
           trainer_spec.NUM_PARAMETER_SERVERS_KEY: num_parameter_servers,
           trainer_spec.COMMUNICATION_KEY: communication,
           trainer_spec.MICRO_BATCHES_KEY: micro_batches,
           trainer_spec.STAGES_KEY: stages,
           trainer_spec.RECOMPUTE_KEY: int(recompute),
           trainer_spec.LOGICAL_DEVICES_KEY: int(logical_devices),
           trainer_spec.PROGRESS_TIMEOUT_KEY: float(progress_timeout_seconds),
           trainer_spec.VERTEX_TRAINING_KEY: vertex_json,
           seeding.RANDOM_SEED_KEY: random_seed})

  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)
