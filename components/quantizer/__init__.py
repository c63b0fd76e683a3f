"""Quantizer: TFLite conversion with dynamic-range, float16, full-int8 and QAT modes."""

from components.quantizer.component import Quantizer
from components.quantizer.predict import TFLitePredictor

__all__ = ['Quantizer', 'TFLitePredictor']
