"""Serves a Quantizer's TFLite model on raw tf.Examples (copied beside model.tflite).

The model reads transformed features; `serving.json` beside it names the transform
graph that turns raw examples into them, and how each input and output is quantized.

Example:

  predictor = TFLitePredictor('/path/to/model')   # the folder holding model.tflite
  classes = predictor.predict_raw([serialized_example, ...])['classes']
"""

import json
import os
from typing import Dict, List

import numpy as np

MODEL_FILE_NAME = 'model.tflite'
SERVING_FILE_NAME = 'serving.json'
SIGNATURE = 'serving_default'


def quantize(values: np.ndarray, detail: dict) -> np.ndarray:
  """Float values to an int8/uint8 input's integers; other inputs are cast."""
  scale, zero_point = detail['quantization']
  dtype = detail['dtype']
  if np.issubdtype(dtype, np.integer) and scale and not np.issubdtype(values.dtype, np.integer):
    info = np.iinfo(dtype)
    return np.clip(np.round(values / scale + zero_point), info.min, info.max).astype(dtype)
  return values.astype(dtype)


def dequantize(values: np.ndarray, detail: dict) -> np.ndarray:
  """An int8/uint8 output back to floats; float outputs unchanged."""
  scale, zero_point = detail['quantization']
  if scale and np.issubdtype(values.dtype, np.integer):
    return (values.astype(np.float32) - zero_point) * scale
  return values.astype(np.float32)


class TFLitePredictor:
  """A TFLite classifier over transformed features, with the transform for raw examples."""

  def __init__(self, model_dir: str, num_threads: int = 1):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    with tf.io.gfile.GFile(os.path.join(model_dir, MODEL_FILE_NAME), 'rb') as handle:
      self.model_content = handle.read()
    with tf.io.gfile.GFile(os.path.join(model_dir, SERVING_FILE_NAME)) as handle:
      self.serving = json.load(handle)
    self.interpreter = tf.lite.Interpreter(model_content=self.model_content,
                                           num_threads=num_threads)
    self.interpreter.allocate_tensors()
    self.runner = self.interpreter.get_signature_runner(SIGNATURE)
    self.input_details = self.runner.get_input_details()
    self.output_details = self.runner.get_output_details()
    self._transform = None

  @property
  def input_names(self) -> List[str]:
    return sorted(self.input_details)

  def logits_one(self, features: Dict[str, np.ndarray]) -> np.ndarray:
    """Logits of one example; `features` maps input names to arrays of batch 1."""
    inputs = {name: quantize(np.asarray(features[name]).reshape(detail['shape']),
                             detail) for name, detail in self.input_details.items()}
    outputs = self.runner(**inputs)
    name = 'logits' if 'logits' in outputs else next(iter(outputs))
    return dequantize(outputs[name], self.output_details[name])

  def logits(self, features: Dict[str, np.ndarray]) -> np.ndarray:
    """Logits of a batch, one interpreter call per example (the model has batch 1)."""
    count = len(next(iter(features.values())))
    return np.concatenate([self.logits_one({name: np.asarray(values)[index:index + 1]
                                            for name, values in features.items()})
                           for index in range(count)])

  def predict_raw(self, serialized_examples: List[bytes]) -> Dict[str, np.ndarray]:
    """Logits and classes for serialized raw tf.Examples, through the transform graph."""
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
    if self._transform is None:
      transform_output = tft.TFTransformOutput(self.serving['transform_graph_uri'])
      raw_spec = dict(transform_output.raw_feature_spec())
      raw_spec.pop(self.serving.get('label_column', ''), None)
      layer = transform_output.transform_features_layer()
      self._transform = (raw_spec, layer)
    raw_spec, layer = self._transform
    transformed = layer(tf.io.parse_example(tf.constant(serialized_examples), raw_spec))
    logits = self.logits({name: transformed[name].numpy() for name in self.input_names})
    classes = ((logits[:, 0] > 0).astype(np.int64) if logits.shape[-1] == 1
               else logits.argmax(axis=-1))
    return {'logits': logits, 'classes': classes}
