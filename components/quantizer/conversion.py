"""Keras model -> TFLite flatbuffer, for each quantization mode the Quantizer offers."""

from typing import Callable, Dict, Iterable, Optional

import numpy as np
import tensorflow as tf
import tf_keras

MODES = ('dynamic_range', 'float16', 'full_integer', 'qat')
IO_TYPES = ('float32', 'int8')
# Layers fake-quantized during QAT; others (embeddings) are quantized by the converter.
QAT_LAYERS = (tf_keras.layers.Dense, tf_keras.layers.Conv2D, tf_keras.layers.DepthwiseConv2D)


def convert(model: tf_keras.Model, mode: Optional[str] = None,
            representative_features: Optional[Callable[[], Iterable[Dict[str, np.ndarray]]]]
            = None, io_type: str = 'float32') -> bytes:
  """Converts `model` to TFLite.

  Args:
    model: A Keras model over transformed features that outputs logits.
    mode: None (plain float32), or one of `MODES`.
    representative_features: For `full_integer`/`qat`: yields single-example
      feature dicts for calibration.
    io_type: For `full_integer`/`qat`: `float32` keeps float inputs and outputs
      (quantize/dequantize inside the model), `int8` makes them int8 too.

  Returns:
    The flatbuffer bytes.
  """
  converter = tf.lite.TFLiteConverter.from_keras_model(model)
  if mode is None:
    return converter.convert()
  converter.optimizations = [tf.lite.Optimize.DEFAULT]
  if mode == 'float16':
    converter.target_spec.supported_types = [tf.float16]
  elif mode in ('full_integer', 'qat'):
    if representative_features is None:
      raise ValueError(f'mode {mode!r} needs representative_features for calibration.')

    def representative_dataset():
      for features in representative_features():
        yield {name: features[name] for name in model.input_names}

    converter.representative_dataset = representative_dataset
    # Only int8 kernels: conversion fails rather than leave a float op behind.
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if io_type == 'int8':
      converter.inference_input_type = tf.int8
      converter.inference_output_type = tf.int8
  return converter.convert()


def quantization_aware_model(model: tf_keras.Model, preserve_sparsity: bool = False
                            ) -> tf_keras.Model:
  """tfmot's quantize_apply over the Dense/Conv layers (pruning-preserving if asked).

  Raises:
    ValueError: when the model can not be cloned layer by layer (e.g. nested models).
  """
  import tensorflow_model_optimization as tfmot  # pylint: disable=g-import-not-at-top
  quantize = tfmot.quantization.keras

  def annotate(layer):
    if isinstance(layer, QAT_LAYERS):
      return quantize.quantize_annotate_layer(layer)
    return layer.__class__.from_config(layer.get_config())

  from components.common import modeling  # pylint: disable=g-import-not-at-top
  if modeling.nests_models(model):
    raise ValueError('mode "qat" needs a flat functional model; this one nests models (an '
                     'ensemble?). Use mode "full_integer" instead.')
  model = modeling.graph_model(model)
  annotated = tf_keras.models.clone_model(model, clone_function=annotate)
  modeling.copy_layer_weights(model, annotated)
  with quantize.quantize_scope():
    if preserve_sparsity:
      scheme = tfmot.experimental.combine.Default8BitPrunePreserveQuantizeScheme()
      return quantize.quantize_apply(annotated, scheme)
    return quantize.quantize_apply(annotated)


def tensor_dtypes(flatbuffer: bytes) -> Dict[str, int]:
  """How many tensors of each dtype the interpreter holds (int8 models hold no float32)."""
  interpreter = tf.lite.Interpreter(model_content=flatbuffer)
  counts = {}
  for detail in interpreter.get_tensor_details():
    name = np.dtype(detail['dtype']).name
    counts[name] = counts.get(name, 0) + 1
  return counts
