"""Distiller: teacher-to-student knowledge distillation as a TFX component.

The names load on first use: a worker process runs this package's executor, and the
component's module loads TFX's component framework, which a worker never uses.
"""

from tfx_distillery import lazy

_EXPORTS = {
    'Distiller': f'{__name__}.component',
    'distillation_loss': f'{__name__}.loss',
    'read_metrics': f'{__name__}.executor',
    'soft_targets': f'{__name__}.loss',
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS, globals())
