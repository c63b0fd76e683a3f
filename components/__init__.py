"""tfx-distillery's components, one subpackage each; the classes load on first use.

Importing a shared piece (`tfx_distillery.components.common.progress`) must not load
TFX, so a command can send TensorFlow's start-up noise to its log file first.
"""

import importlib

_COMPONENTS = {
    'AccuracyGate': 'gate',
    'AtomicPusher': 'pusher',
    'Distiller': 'distiller',
    'DistributedTrainer': 'distributed_trainer',
    'IngestionTransform': 'ingest_transform',
    'Pruner': 'pruner',
    'Quantizer': 'quantizer',
    'StrictExampleValidator': 'example_validator',
}

__all__ = sorted(_COMPONENTS)


def __getattr__(name):
  if name in _COMPONENTS:
    value = getattr(importlib.import_module(f'{__name__}.{_COMPONENTS[name]}'), name)
    globals()[name] = value
    return value
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__():
  return sorted(set(globals()) | set(__all__))
