"""Serves a Quantizer's TFLite model on raw tf.Examples (copied beside the flatbuffer).

The folder is self-contained: the flatbuffer `tflite` (the name TFX's TFLite
rewriter gives it, and where TFMA's `model_type: tf_lite` looks) reads transformed features, the
`transform_graph/` folder beside it turns raw examples into them, and
`serving.json` is its manifest: the format and quantization mode, the model's input
names, the class count and label vocabulary, the label column serving requests
lack, and what the model emits. Copy the folder anywhere and it still serves.

Example:

  import tfx_distillery
  predictor = tfx_distillery.load_tflite('/path/to/model')  # the folder with the flatbuffer
  outputs = predictor.predict_raw([serialized_example, ...])
  outputs['classes']   # class indices; outputs['labels'] gives the raw label values
"""

import json
import os
from typing import Dict, List

import numpy as np

try:
  from tfx_distillery.components.common import shapes
except ImportError:  # A copied folder, outside the package: its own copy beside this file.
  import shapes  # pylint: disable=g-import-not-at-top

MODEL_FORMAT = 'tflite'
# TFX's TFLiteRewriter and TFMA's TFLite evaluation both read Format-Serving/tflite.
MODEL_FILE_NAME = 'tflite'
SERVING_FILE_NAME = 'serving.json'
SIGNATURE = 'serving_default'
TRANSFORM_GRAPH_FOLDER = 'transform_graph'
# The flatbuffer over raw columns (transform inside), when the transform converts.
RAW_MODEL_FILE_NAME = 'model_raw.tflite'
RAW_OUTPUT_NAME = 'logits'


def signature_input_names(flatbuffer: bytes) -> List[str]:
  """The input names of a flatbuffer's serving signature, sorted."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  interpreter = tf.lite.Interpreter(model_content=flatbuffer)
  return sorted(interpreter.get_signature_runner(SIGNATURE).get_input_details())


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
    with tf.io.gfile.GFile(os.path.join(model_dir, SERVING_FILE_NAME)) as handle:
      self.serving = json.load(handle)
    # The manifest names the flatbuffer (folders before 0.1 called it model.tflite).
    model_file = self.serving.get('model_file', MODEL_FILE_NAME)
    with tf.io.gfile.GFile(os.path.join(model_dir, model_file), 'rb') as handle:
      self.model_content = handle.read()
    self.interpreter = tf.lite.Interpreter(model_content=self.model_content,
                                           num_threads=num_threads)
    self.interpreter.allocate_tensors()
    self.runner = self.interpreter.get_signature_runner(SIGNATURE)
    self.input_details = self.runner.get_input_details()
    self.output_details = self.runner.get_output_details()
    self._transform = None
    # Relative to the folder, so a copied folder still finds its transform graph.
    self.transform_graph_dir = os.path.join(
        model_dir, self.serving.get('transform_graph', TRANSFORM_GRAPH_FOLDER))
    self.output_kind = self.serving.get('output_kind', 'logits')
    self.model_dir = model_dir
    # The rank and dtype each interpreter input takes: a flatbuffer is as strict as its trace.
    self.input_specs = shapes.tflite_specs(self.input_details)

  @property
  def input_names(self) -> List[str]:
    return sorted(self.input_details)

  @property
  def num_outputs(self) -> int:
    detail = next(iter(self.output_details.values()))
    return int(detail['shape'][-1])

  def logits_one(self, features: Dict[str, np.ndarray]) -> np.ndarray:
    """Logits of one example; `features` maps input names to arrays of batch 1."""
    conformed = shapes.conform(features, self.input_specs,
                               f'TFLite interpreter of {self.model_dir}')
    inputs = {name: quantize(value, self.input_details[name])
              for name, value in conformed.items()}
    outputs = self.runner(**inputs)
    name = 'logits' if 'logits' in outputs else sorted(outputs)[0]
    return dequantize(outputs[name], self.output_details[name])

  def logits(self, features: Dict[str, np.ndarray]) -> np.ndarray:
    """Logits of a batch, one interpreter call per example (the model has batch 1)."""
    count = len(next(iter(features.values())))
    return np.concatenate([self.logits_one({name: np.asarray(values)[index:index + 1]
                                            for name, values in features.items()})
                           for index in range(count)])

  def predict_raw(self, serialized_examples: List[bytes]) -> Dict[str, np.ndarray]:
    """Scores and classes for serialized raw tf.Examples, through the transform graph.

    Args:
      serialized_examples: Raw `tf.Example`s as the CSV columns (the label may be absent).

    Returns:
      `logits` (or `probabilities`), `classes` (class indices) and, when a vocabulary
      built the label, `labels` (the raw label value of each class).
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
    if self._transform is None:
      transform_output = tft.TFTransformOutput(self.transform_graph_dir)
      raw_spec = dict(transform_output.raw_feature_spec())
      raw_spec.pop(self.serving.get('label_column', ''), None)
      layer = transform_output.transform_features_layer()
      self._transform = (raw_spec, layer)
    raw_spec, layer = self._transform
    transformed = layer(tf.io.parse_example(tf.constant(serialized_examples), raw_spec))
    scores = self.logits({name: transformed[name].numpy() for name in self.input_names})
    return scores_to_outputs(scores, self.output_kind, self.serving.get('label_vocabulary'))


def classes_of(scores: np.ndarray, output_kind: str) -> np.ndarray:
  """Class indices: one score against its threshold, or the largest of several."""
  threshold = 0.5 if output_kind == 'probabilities' else 0.0
  return ((scores[:, 0] > threshold).astype(np.int64) if scores.shape[-1] == 1
          else scores.argmax(axis=-1))


def scores_to_outputs(scores: np.ndarray, output_kind: str, vocabulary) -> Dict[str, np.ndarray]:
  """`logits` (or `probabilities`), `classes` and, with a label vocabulary, `labels`."""
  classes = classes_of(scores, output_kind)
  outputs = {'logits' if output_kind == 'logits' else 'probabilities': scores,
             'classes': classes}
  if vocabulary:
    outputs['labels'] = np.array([vocabulary[index] for index in classes], dtype=object)
  return outputs


def interpreter_class():
  """LiteRT's interpreter where it is installed (a device), else TensorFlow's (the same kernels)."""
  return _runtime()[0]


def _runtime():
  """(Interpreter class, its OpResolverType enum): LiteRT's, else TensorFlow's."""
  try:
    from ai_edge_litert import interpreter as litert  # pylint: disable=g-import-not-at-top
    return litert.Interpreter, litert.OpResolverType
  except ImportError:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    return tf.lite.Interpreter, tf.lite.experimental.OpResolverType


class RawFlatbufferPredictor:
  """`model_raw.tflite`: raw columns in, scores out; needs a TFLite runtime and numpy only.

  `serving.json`'s `raw_model.inputs` lists each input: the raw `column`, the input
  `name`, its `dtype` and `shape`, and `optional` (a `[1, n]` input, `n = 0` when the
  value is missing).
  """

  def __init__(self, model_dir: str, num_threads: int = 1):
    with open(os.path.join(model_dir, SERVING_FILE_NAME)) as handle:
      self.serving = json.load(handle)
    raw_model = self.serving.get('raw_model')
    if not raw_model:
      raise FileNotFoundError(
          f'{model_dir} holds no raw-input flatbuffer: '
          f'{self.serving.get("raw_model_refused", "its serving.json names none")}')
    self.path = os.path.join(model_dir, raw_model['file'])
    self.inputs = raw_model['inputs']
    interpreter, resolvers = _runtime()
    options = {}
    if not raw_model.get('xnnpack', True):
      # Sparse weights: LiteRT's XNNPACK delegate fails to prepare them; the builtin kernels run.
      options['experimental_op_resolver_type'] = resolvers.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    self.interpreter = interpreter(model_path=self.path, num_threads=num_threads, **options)
    self.runner = self.interpreter.get_signature_runner(SIGNATURE)
    self.output_kind = self.serving.get('output_kind', 'logits')

  def row_inputs(self, row: Dict[str, object]) -> Dict[str, np.ndarray]:
    """One raw row ({column: value, or None/absent when missing}) as the flatbuffer's inputs.

    Raises:
      ValueError: naming a column that every example must have and this row lacks.
    """
    inputs = {}
    for entry in self.inputs:
      value = row.get(entry['column'])
      dtype = object if entry['dtype'] == 'string' else np.dtype(entry['dtype'])
      if value is None or (isinstance(value, (list, tuple)) and not value):
        if not entry['optional']:
          raise ValueError(f'raw column {entry["column"]!r} is missing; the model needs it '
                           'in every example.')
        inputs[entry['name']] = np.zeros([1, 0], dtype)
        continue
      values = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
      if dtype is object:
        values = [item.encode() if isinstance(item, str) else item for item in values]
      inputs[entry['name']] = np.asarray(values, dtype).reshape(entry['shape'])
    return inputs

  def scores_one(self, inputs: Dict[str, np.ndarray]) -> np.ndarray:
    """Scores of one example, given the flatbuffer's inputs (`row_inputs` or `raw_rows`)."""
    return np.asarray(self.runner(**inputs)[RAW_OUTPUT_NAME], np.float32)

  def classes_of(self, scores: np.ndarray) -> np.ndarray:
    return classes_of(scores, self.output_kind)

  def predict_rows(self, rows: List[Dict[str, object]]) -> Dict[str, np.ndarray]:
    """Scores, classes and (with a label vocabulary) labels of raw rows, one call each."""
    scores = np.concatenate([self.scores_one(self.row_inputs(row)) for row in rows])
    return scores_to_outputs(scores, self.output_kind, self.serving.get('label_vocabulary'))


def load_raw_flatbuffer(model_dir: str, num_threads: int = 1) -> RawFlatbufferPredictor:
  """Loads a folder's `model_raw.tflite` (LiteRT or TensorFlow's interpreter, and numpy).

  Raises:
    FileNotFoundError: when the folder has no raw-input flatbuffer (its `serving.json`
      says why: an op of the transform with no TFLite builtin, named).
  """
  return RawFlatbufferPredictor(model_dir, num_threads=num_threads)


def load_tflite(model_dir: str, num_threads: int = 1) -> TFLitePredictor:
  """Loads a pushed (or Quantizer-written) TFLite folder that answers raw tf.Examples.

  The folder needs nothing outside itself: the flatbuffer `tflite`, the `transform_graph/`
  it reads through, and `serving.json` (format, inputs, label vocabulary).

  Args:
    model_dir: The folder holding the flatbuffer, wherever it was copied to.
    num_threads: Interpreter threads.

  Returns:
    A `TFLitePredictor`; `predict_raw(serialized_examples)` gives scores and classes.

  Raises:
    FileNotFoundError: naming the file the folder lacks.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  manifest = os.path.join(model_dir, SERVING_FILE_NAME)
  names = [SERVING_FILE_NAME]
  if tf.io.gfile.exists(manifest):
    with tf.io.gfile.GFile(manifest) as handle:
      names.append(json.load(handle).get('model_file', MODEL_FILE_NAME))
  for name in names:
    path = os.path.join(model_dir, name)
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError(f'{path} is missing: load_tflite needs a folder written by the '
                              f'Quantizer ({MODEL_FILE_NAME}, {SERVING_FILE_NAME}, '
                              f'{TRANSFORM_GRAPH_FOLDER}/).')
  return TFLitePredictor(model_dir, num_threads=num_threads)
