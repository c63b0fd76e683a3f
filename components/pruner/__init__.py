"""Pruner: tfmot magnitude pruning as a TFX component."""

from components.pruner.component import Pruner

__all__ = ['Pruner']
