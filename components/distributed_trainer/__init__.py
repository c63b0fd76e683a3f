"""DistributedTrainer: a drop-in TFX Trainer that trains on many workers.

The names load on first use: a worker process imports this package's `worker`, and the
component's module loads TFX's stock components (the Trainer, and with them TFMA and Beam),
which a worker never uses: seconds of start-up for each worker.
"""

from tfx_distillery import lazy

_EXPORTS = {
    'DistributedTrainer': f'{__name__}.component',
    'backup_dir': 'tfx_distillery.components.common.strategy',
    'early_stopping_callback': 'tfx_distillery.components.common.modeling',
    'strategy_for': 'tfx_distillery.components.common.strategy',
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS, globals())
