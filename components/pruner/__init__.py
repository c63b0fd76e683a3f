"""Pruner: tfmot magnitude pruning as a TFX component."""

from tfx_distillery.components.pruner.component import Pruner

__all__ = ['Pruner']
