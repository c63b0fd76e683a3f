"""Distiller: teacher-to-student knowledge distillation as a TFX component."""

from components.distiller.component import Distiller
from components.distiller.executor import read_metrics
from components.distiller.loss import distillation_loss
from components.distiller.loss import soft_targets

__all__ = ['Distiller', 'distillation_loss', 'read_metrics', 'soft_targets']
