"""Keras model -> TFLite flatbuffer, for each quantization mode the Quantizer offers."""

import collections
import hashlib
import json
import re
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
import tensorflow as tf
import tf_keras

from tfx_distillery.components.common import shapes

MODES = ('dynamic_range', 'float16', 'full_integer', 'qat')
IO_TYPES = ('float32', 'int8')
# Layers fake-quantized during QAT; others (embeddings) are quantized by the converter.
# How the converter says an op has no TFLite kernel in any type.
NO_KERNEL_MESSAGE = 'neither a custom op nor a flex op'
QAT_LAYERS = (tf_keras.layers.Dense, tf_keras.layers.Conv2D, tf_keras.layers.DepthwiseConv2D)


class Int8Unsupported(ValueError):
  """An op of the model has no int8 kernel and strict_int8 refuses float fallback."""


class OneHotEncoding(tf_keras.layers.Layer):
  """Keras' CategoryEncoding (multi_hot, count, or one_hot of one id) as one_hot and a reduce.

  CategoryEncoding lowers to tf.DenseBincount, which TFLite has no kernel for in
  any type; ONE_HOT and REDUCE_MAX/SUM are builtins with int8 kernels, and give
  the same values.
  """

  def __init__(self, num_tokens: int, output_mode: str = 'multi_hot', **kwargs):
    super().__init__(**kwargs)
    self.num_tokens = int(num_tokens)
    self.output_mode = output_mode

  def call(self, inputs):
    ids = tf.cast(inputs, tf.int32)
    if ids.shape.rank == 1:
      ids = tf.expand_dims(ids, -1)
    encoded = tf.one_hot(ids, self.num_tokens)
    if self.output_mode == 'count':
      return tf.reduce_sum(encoded, axis=-2)
    return tf.reduce_max(encoded, axis=-2)

  def get_config(self):
    return {**super().get_config(), 'num_tokens': self.num_tokens,
            'output_mode': self.output_mode}


def _rewritable(layer) -> bool:
  if not isinstance(layer, tf_keras.layers.CategoryEncoding):
    return False
  config = layer.get_config()
  if config.get('sparse'):
    return False
  if config['output_mode'] == 'one_hot':  # One id per row only: several ids keep their axis.
    return layer.input_shape[-1] in (1, None) and len(layer.input_shape) == 2
  return config['output_mode'] in ('multi_hot', 'count')


def tflite_friendly(model: tf_keras.Model) -> tf_keras.Model:
  """The same model with every CategoryEncoding it can replace swapped for `OneHotEncoding`.

  Returns the model itself when it has none.
  """
  if not any(_rewritable(layer) for layer in model.layers):
    return model
  from tfx_distillery.components.common import modeling  # pylint: disable=g-import-not-at-top

  def clone(layer):
    if _rewritable(layer):
      config = layer.get_config()
      return OneHotEncoding(config['num_tokens'], config['output_mode'], name=layer.name)
    return layer.__class__.from_config(layer.get_config())

  model = modeling.graph_model(model)
  rewritten = tf_keras.models.clone_model(model, clone_function=clone)
  modeling.copy_layer_weights(model, rewritten)
  return rewritten


def _converter(model: tf_keras.Model, ops) -> tf.lite.TFLiteConverter:
  converter = tf.lite.TFLiteConverter.from_keras_model(model)
  converter.target_spec.supported_ops = list(ops)
  return converter


def _model_digest(model: tf_keras.Model) -> Optional[str]:
  """A digest of the model's architecture and weights; None when Keras can not describe it."""
  from tfx_distillery.components.common import modeling  # pylint: disable=g-import-not-at-top
  try:
    # A loaded export also tracks its transform layer, which has no config and which
    # the converted call does not run: the graph from inputs to outputs is described.
    architecture = json.dumps(modeling.graph_model(model).get_config(), sort_keys=True,
                              default=str)
  except (NotImplementedError, TypeError, ValueError, AttributeError):
    return None
  digest = hashlib.sha256(architecture.encode())
  for weight in model.get_weights():
    digest.update(str(weight.shape).encode())
    digest.update(np.ascontiguousarray(weight).tobytes())
  return digest.hexdigest()


# Builtin-only float conversions already made, by the model's architecture and weights: a
# full integer conversion makes one first (to find ops with no kernel), the Quantizer's
# float reference is that same conversion, and under LocalDagRunner the Pruner and the
# Quantizers convert the same models in one process. Each costs seconds, even for a small
# model. Bounded, oldest out first.
_float_conversions = collections.OrderedDict()
FLOAT_CONVERSIONS_KEPT = 8


def _builtin_float_conversion(model: tf_keras.Model) -> Tuple[Optional[bytes], List[str]]:
  """The float flatbuffer with TFLite builtin ops only, else None and the ops that lack one."""
  digest = _model_digest(model)
  if digest is not None and digest in _float_conversions:
    _float_conversions.move_to_end(digest)
    return _float_conversions[digest]
  try:
    result = (_converter(model, [tf.lite.OpsSet.TFLITE_BUILTINS]).convert(), [])
  except Exception as error:  # pylint: disable=broad-except
    # The converter raises its own ConverterError (not exported under a stable name).
    found = re.findall(r"'(tf\.\w+)' op is " + NO_KERNEL_MESSAGE, str(error))
    if not found:
      raise
    result = (None, sorted(set(found)))
  if digest is not None:
    _float_conversions[digest] = result
    while len(_float_conversions) > FLOAT_CONVERSIONS_KEPT:
      _float_conversions.popitem(last=False)
  return result


def ops_without_tflite_kernel(model: tf_keras.Model) -> List[str]:
  """TensorFlow ops of the model that TFLite has no builtin kernel for, in any type.

  Keras' CategoryEncoding, for one, lowers to tf.DenseBincount: it converts only
  as a Flex (select TF) op.
  """
  return _builtin_float_conversion(model)[1]


def optimizations(mode: Optional[str], sparse: bool) -> list:
  """The converter's optimizations: quantization for any mode, and the sparse encoding."""
  chosen = [tf.lite.Optimize.DEFAULT] if mode is not None else []
  if sparse:
    chosen.append(tf.lite.Optimize.EXPERIMENTAL_SPARSITY)
  return chosen


def zero_weight_share(model: tf_keras.Model) -> float:
  """Share of zeros among the kernels (weights of rank >= 2): a pruned model's sparsity."""
  zeros = total = 0
  for weight in model.weights:
    if len(weight.shape) >= 2 and 'kernel' in weight.name:
      values = weight.numpy()
      zeros += int(np.sum(values == 0))
      total += values.size
  return zeros / max(1, total)


def convert(model: tf_keras.Model, mode: Optional[str] = None,
            representative_features: Optional[Callable[[], Iterable[Dict[str, np.ndarray]]]]
            = None, io_type: str = 'float32', strict_int8: bool = False,
            per_channel: bool = True, sparse: bool = False) -> bytes:
  """Converts `model` to TFLite.

  In the full integer modes every op is asked for an int8 kernel first. An op
  that has none makes the conversion fail; then, unless `strict_int8`, the
  model is converted again with float kernels allowed for such ops only (the
  rest stay int8), and `float_ops` names them. CategoryEncoding layers are
  first rewritten as ONE_HOT and a reduce (`tflite_friendly`), which have int8
  kernels. An op with no TFLite kernel at all still runs as a Flex op in the
  float and weight-only modes; full integer calibration can not run it (TF
  2.16's calibrator crashes the process), so those modes refuse it by name.

  Args:
    model: A Keras model over transformed features that outputs logits.
    mode: None (plain float32), or one of `MODES`.
    representative_features: For `full_integer`/`qat`: yields single-example
      feature dicts for calibration.
    io_type: For `full_integer`/`qat`: `float32` keeps float inputs and outputs
      (quantize/dequantize inside the model), `int8` makes them int8 too.
    strict_int8: Refuse instead of keeping ops without an int8 kernel in float.
    per_channel: For `full_integer`/`qat`: one scale per output channel of each
      weight (TFLite's default); False gives one scale per tensor.
    sparse: Also ask for TFLite's sparse weight encoding (`EXPERIMENTAL_SPARSITY`),
      which stores a pruned model's zeros compactly and densifies them at load.

  Returns:
    The flatbuffer bytes.

  Raises:
    Int8Unsupported: naming the op that keeps the model from being fully int8
      (with `strict_int8`, or an op with no TFLite kernel at all).
    ValueError: when a full integer conversion holds no int8 tensor.
  """
  builtins = [tf.lite.OpsSet.TFLITE_BUILTINS]
  model = tflite_friendly(model)
  if mode not in ('full_integer', 'qat'):

    def float_converter(ops):
      converter = _converter(model, ops)
      converter.optimizations = optimizations(mode, sparse)
      if mode == 'float16':
        converter.target_spec.supported_types = [tf.float16]
      return converter

    if mode is None and not sparse:
      flatbuffer, _ = _builtin_float_conversion(model)
      if flatbuffer is not None:
        return flatbuffer
      return float_converter(builtins + [tf.lite.OpsSet.SELECT_TF_OPS]).convert()
    try:
      return float_converter(builtins).convert()
    except Exception as error:  # pylint: disable=broad-except
      if NO_KERNEL_MESSAGE not in str(error):
        raise
      return float_converter(builtins + [tf.lite.OpsSet.SELECT_TF_OPS]).convert()
  if representative_features is None:
    raise ValueError(f'mode {mode!r} needs representative_features for calibration.')
  flex = ops_without_tflite_kernel(model)
  if flex:
    # TF 2.16's calibrator crashes the process on a Flex op, so this is checked first.
    raise Int8Unsupported(
        f'mode {mode!r}: the model has ops with no TFLite kernel in any type: '
        f'{", ".join(flex)}. Full integer calibration can not run them. Use mode '
        '"dynamic_range" or "float16" (they run such ops as Flex ops), or express them with '
        'TFLite builtin ops.')

  input_specs = shapes.keras_specs(model)

  def representative_dataset():
    # The calibrator resizes the interpreter's inputs to what it is fed, so each feature
    # must come at the rank the model was traced with.
    for features in representative_features():
      yield shapes.conform(features, input_specs, f'Quantizer ({mode}) calibration')

  def int8_converter(ops):
    converter = _converter(model, ops)
    converter.optimizations = optimizations(mode, sparse)
    converter.representative_dataset = representative_dataset
    # The converter's only switch for per-tensor weight scales (a private attribute).
    converter._experimental_disable_per_channel = not per_channel  # pylint: disable=protected-access
    if io_type == 'int8':
      converter.inference_input_type = tf.int8
      converter.inference_output_type = tf.int8
    return converter

  try:
    # Only int8 kernels first: the conversion fails on an op that has none.
    flatbuffer = int8_converter([tf.lite.OpsSet.TFLITE_BUILTINS_INT8]).convert()
  except Exception as error:  # pylint: disable=broad-except
    if strict_int8:
      raise Int8Unsupported(
          f'strict_int8: the model has an op with no int8 kernel, so it can not be fully '
          f'int8: {first_line_naming_an_op(str(error))} Set strict_int8=False to keep such '
          'ops in float inside the model.') from error
    flatbuffer = int8_converter([tf.lite.OpsSet.TFLITE_BUILTINS_INT8] + builtins).convert()
  if not tensor_dtypes(flatbuffer).get('int8'):
    raise ValueError(f'The {mode} conversion holds no int8 tensor; it is not written under '
                     'an int8 label.')
  return flatbuffer


def first_line_naming_an_op(message: str) -> str:
  """The converter's line that names the op without an int8 kernel (else its first line)."""
  lines = [line.strip() for line in message.splitlines() if line.strip()]
  for line in lines:
    if "'tfl." in line or "'tf." in line or 'op' in line.lower() and 'int8' in line.lower():
      return line[:300]
  return (lines[0] if lines else message)[:300]


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

  from tfx_distillery.components.common import modeling  # pylint: disable=g-import-not-at-top
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


def float_ops(flatbuffer: bytes) -> List[str]:
  """Ops that do not run an int8 kernel, by name: float outputs, or Flex (TensorFlow) ops.

  The quantize/dequantize ops at the edges are left out.
  """
  interpreter = tf.lite.Interpreter(model_content=flatbuffer)
  dtypes = {detail['index']: detail['dtype'] for detail in interpreter.get_tensor_details()}
  found = []
  for op in interpreter._get_ops_details():  # pylint: disable=protected-access
    if op['op_name'] in ('QUANTIZE', 'DEQUANTIZE'):
      continue
    if op['op_name'].startswith('Flex') or any(dtypes.get(index) == np.float32
                                               for index in op['outputs']):
      found.append(op['op_name'])
  return sorted(set(found))


def int8_weight_share(flatbuffer: bytes) -> float:
  """Share of constant tensor elements (weights, biases) stored as 8-bit integers."""
  interpreter = tf.lite.Interpreter(model_content=flatbuffer)
  details = interpreter.get_tensor_details()
  produced = set()
  for op in interpreter._get_ops_details():  # pylint: disable=protected-access
    produced.update(op['outputs'])
  inputs = {detail['index'] for detail in interpreter.get_input_details()}
  int8 = total = 0
  for detail in details:
    if detail['index'] in produced or detail['index'] in inputs:
      continue
    elements = int(np.prod(detail['shape'])) if len(detail['shape']) else 1
    total += elements
    if np.dtype(detail['dtype']) in (np.dtype(np.int8), np.dtype(np.uint8)):
      int8 += elements
  return int8 / max(1, total)
