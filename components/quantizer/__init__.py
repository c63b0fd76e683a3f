"""Quantizer: TFLite conversion with dynamic-range, float16, full-int8 and QAT modes."""

from tfx_distillery.components.quantizer.component import Quantizer
from tfx_distillery.components.quantizer.predict import TFLitePredictor
from tfx_distillery.components.quantizer.predict import load_tflite

__all__ = ['Quantizer', 'TFLitePredictor', 'load_tflite']
