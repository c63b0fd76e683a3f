"""Distiller: teacher-to-student knowledge distillation as a TFX component."""

from tfx_distillery.components.distiller.component import Distiller
from tfx_distillery.components.distiller.executor import read_metrics
from tfx_distillery.components.distiller.loss import distillation_loss
from tfx_distillery.components.distiller.loss import soft_targets

__all__ = ['Distiller', 'distillation_loss', 'read_metrics', 'soft_targets']
