"""AccuracyGate: a standard ModelBlessing for the smallest model within budget."""

from components.gate.component import AccuracyGate

__all__ = ['AccuracyGate']
