"""tfx-distillery's components, one subpackage each; the classes load on first use.

Importing a shared piece (`tfx_distillery.components.common.progress`) must not load
TFX, so a command can send TensorFlow's start-up noise to its log file first.
"""

from tfx_distillery import lazy

_COMPONENTS = {
    'AccuracyGate': f'{__name__}.gate',
    'ArrowCsvExampleGen': f'{__name__}.csv_example_gen',
    'AtomicPusher': f'{__name__}.pusher',
    'Distiller': f'{__name__}.distiller',
    'DistributedTrainer': f'{__name__}.distributed_trainer',
    'IngestionTransform': f'{__name__}.ingest_transform',
    'Pruner': f'{__name__}.pruner',
    'Quantizer': f'{__name__}.quantizer',
    'StrictExampleValidator': f'{__name__}.example_validator',
}

__all__ = sorted(_COMPONENTS)

__getattr__, __dir__ = lazy.exports(__name__, _COMPONENTS, globals())
