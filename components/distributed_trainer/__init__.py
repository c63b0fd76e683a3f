"""DistributedTrainer: a drop-in TFX Trainer that trains on many workers."""

from tfx_distillery.components.distributed_trainer.component import DistributedTrainer
from tfx_distillery.components.common.modeling import early_stopping_callback
from tfx_distillery.components.common.strategy import backup_dir
from tfx_distillery.components.common.strategy import strategy_for

__all__ = ['DistributedTrainer', 'backup_dir', 'early_stopping_callback', 'strategy_for']
