"""AccuracyGate: a standard ModelBlessing for the smallest model within budget."""

from tfx_distillery.components.gate.component import AccuracyGate

__all__ = ['AccuracyGate']
