"""Quantizer: TFLite conversion with dynamic-range, float16, full-int8 and QAT modes.

The names load on first use: `load_tflite` serves a pushed folder without the component's
module, which loads TFX and TensorFlow.
"""

from tfx_distillery import lazy

_EXPORTS = {
    'Quantizer': f'{__name__}.component',
    'TFLitePredictor': f'{__name__}.predict',
    'load_tflite': f'{__name__}.predict',
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS, globals())
