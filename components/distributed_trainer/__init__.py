"""DistributedTrainer: a drop-in TFX Trainer that trains on many workers."""

from components.distributed_trainer.component import DistributedTrainer
from components.distributed_trainer.strategy import backup_dir
from components.distributed_trainer.strategy import strategy_for

__all__ = ['DistributedTrainer', 'backup_dir', 'strategy_for']
