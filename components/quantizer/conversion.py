"""Keras model -> TFLite flatbuffer, for each quantization mode the Quantizer offers."""

import collections
import contextlib
import hashlib
import json
import logging
import re
import shutil
import tempfile
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.lite.python import convert as lite_convert
import tf_keras
from tf_keras.src.saving.legacy import saving_utils
from tf_keras.src.saving.legacy.saved_model import utils as keras_saved_model_utils

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


def without_layer_traces():
  """A scope in which Keras saves no trace of each layer's call into a SavedModel.

  Keras traces every layer's call for a later `tf_keras.models.load_model`, which the
  TFLite converter never does: saving the 62-layer taxi student for conversion took 7 to 15 s
  with the traces and 2 to 4 s without.
  """
  return keras_saved_model_utils.keras_option_scope(save_traces=False)


@contextlib.contextmanager
def _conversion_source(model: tf_keras.Model):
  """Yields `converter(ops)`, which makes TFLite converters of `model` saved once for them all.

  `TFLiteConverter.from_keras_model` saves the model as a SavedModel on every conversion,
  with the layer traces (`without_layer_traces`), and a full integer conversion converts
  twice. Here the model is saved on first use with its serving signature only, and every
  conversion in this `with` reads that. The flatbuffers hold the same ops and weights; one
  byte of conversion metadata says the source was a SavedModel, and a small model's
  constants may be stored in another order. A model Keras can not save that way (a layer
  with no config) goes the converter's own way.
  """
  directory = tempfile.mkdtemp(prefix='distillery-convert-')
  saved = None  # True or False once tried.

  def converter(ops) -> tf.lite.TFLiteConverter:
    nonlocal saved
    if saved is None:
      try:
        _save_for_conversion(model, directory)
        saved = True
      except Exception as error:  # pylint: disable=broad-except
        logging.getLogger(__name__).debug('converting from the Keras model itself: %s', error)
        saved = False
    return _converter(model, directory if saved else None, ops)

  try:
    yield converter
  finally:
    shutil.rmtree(directory, ignore_errors=True)


def _save_for_conversion(model: tf_keras.Model, directory: str) -> None:
  """`model` as a SavedModel with its serving signature and no layer traces."""
  model.save(directory, save_format='tf', save_traces=False, include_optimizer=False,
             # The signature tf.saved_model.save gives a Keras model by default.
             signatures=saving_utils.trace_model_call(model))


def _converter(model: tf_keras.Model, saved_model_dir: Optional[str], ops
               ) -> tf.lite.TFLiteConverter:
  """A converter of `model`, read from `saved_model_dir` when it was saved there."""
  if saved_model_dir:
    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
  else:
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


def _builtin_float_conversion(model: tf_keras.Model, converter: Optional[Callable] = None
                              ) -> Tuple[Optional[bytes], List[str]]:
  """The float flatbuffer with TFLite builtin ops only, else None and the ops that lack one.

  Args:
    model: The Keras model.
    converter: The caller's `_conversion_source` of `model`, if it has one.
  """
  digest = _model_digest(model)
  if digest is not None and digest in _float_conversions:
    _float_conversions.move_to_end(digest)
    return _float_conversions[digest]
  if converter is None:
    with _conversion_source(model) as own_converter:
      return _builtin_float_conversion(model, own_converter)
  try:
    result = (converter([tf.lite.OpsSet.TFLITE_BUILTINS]).convert(), [])
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
            per_channel: bool = True, sparse: bool = False,
            float_layers: Sequence[str] = ()) -> bytes:
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
    float_layers: For `full_integer`/`qat`: names of Keras layers whose ops stay in
      float (selective quantization, `layer_errors` ranks them); the rest are int8.

  Returns:
    The flatbuffer bytes.

  Raises:
    Int8Unsupported: naming the op that keeps the model from being fully int8
      (with `strict_int8`, or an op with no TFLite kernel at all).
    ValueError: when a full integer conversion holds no int8 tensor.
  """
  model = tflite_friendly(model)
  with _conversion_source(model) as converter:
    return _convert(model, converter, mode, representative_features, io_type, strict_int8,
                    per_channel, sparse, float_layers)


def _convert(model, converter, mode, representative_features, io_type, strict_int8,
             per_channel, sparse, float_layers) -> bytes:
  """`convert` of a model already made TFLite-friendly, with its `_conversion_source`."""
  builtins = [tf.lite.OpsSet.TFLITE_BUILTINS]
  if mode not in ('full_integer', 'qat'):

    def float_converter(ops):
      made = converter(ops)
      made.optimizations = optimizations(mode, sparse)
      if mode == 'float16':
        made.target_spec.supported_types = [tf.float16]
      return made

    if mode is None and not sparse:
      flatbuffer, _ = _builtin_float_conversion(model, converter)
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
  flex = _builtin_float_conversion(model, converter)[1]
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
    made = converter(ops)
    made.optimizations = optimizations(mode, sparse)
    made.representative_dataset = representative_dataset
    # The converter's only switch for per-tensor weight scales (a private attribute).
    made._experimental_disable_per_channel = not per_channel  # pylint: disable=protected-access
    if io_type == 'int8':
      made.inference_input_type = tf.int8
      made.inference_output_type = tf.int8
    return made

  if float_layers:
    # Selective quantization, as QuantizationDebugger does it: calibrate in float, then
    # quantize every op but those of `float_layers`.
    calibrating = int8_converter(builtins)
    calibrating._experimental_calibrate_only = True  # pylint: disable=protected-access
    calibrated = calibrating.convert()
    flatbuffer = lite_convert.mlir_quantize(
        calibrated, disable_per_channel=not per_channel, fully_quantize=io_type == 'int8',
        input_data_type=tf.int8 if io_type == 'int8' else tf.float32,
        output_data_type=tf.int8 if io_type == 'int8' else tf.float32,
        denylisted_nodes=layer_nodes(calibrated, model, float_layers))
    return lite_convert.mlir_sparsify(flatbuffer) if sparse else flatbuffer
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


def _layer_of(tensor_name: str, model: tf_keras.Model, scope: str,
              outputs: Iterable[str]) -> Optional[str]:
  """The Keras layer whose op writes `tensor_name`, by the layer's name scope.

  The converter names the op that gives a signature's output after the output, not the
  layer (`StatefulPartitionedCall:0`): that one is the model's output layer.
  """
  for layer in model.layers:
    if f'{scope}/{layer.name}/' in tensor_name:
      return layer.name
  return _output_layer(model) if tensor_name in outputs else None


def _output_layer(model: tf_keras.Model) -> str:
  """The layer that gives the model's output (a saved model may track others after it)."""
  history = getattr(model.outputs[0], '_keras_history', None) if model.outputs else None
  return history.layer.name if history is not None else model.layers[-1].name


def weight_layers(model: tf_keras.Model) -> List[str]:
  """The layers selective quantization may keep in float: those with weights.

  Structural layers are left to the quantizer: TF 2.16's `mlir_quantize` crashes the
  process (a segmentation fault) when a CONCATENATION is kept in float among int8 inputs.
  """
  return [layer.name for layer in model.layers if layer.weights]


def layer_nodes(calibrated: bytes, model: tf_keras.Model, layers: Sequence[str],
                scope: Optional[str] = None) -> List[str]:
  """Output tensor names, in a calibrated flatbuffer, of the ops of `layers` of `model`.

  Args:
    calibrated: A calibrate-only conversion (float ops with recorded ranges).
    model: The Keras model converted (alone, or inside the raw-input composite).
    layers: Names of its layers.
    scope: The name scope the model's ops carry (default: the model's name).

  Returns:
    The `denylisted_nodes` that keep those layers' ops in float.
  """
  wanted, scope = set(layers), scope or model.name
  interpreter = tf.lite.Interpreter(model_content=calibrated)
  outputs = {detail['name'] for detail in interpreter.get_output_details()}
  nodes = []
  for op in interpreter._get_ops_details():  # pylint: disable=protected-access
    for index in op['outputs']:
      name = interpreter._get_tensor_details(index, 0)['name']  # pylint: disable=protected-access
      if _layer_of(name, model, scope, outputs) in wanted:
        nodes.append(name)
  return nodes


def layer_errors(model: tf_keras.Model,
                 representative_features: Callable[[], Iterable[Dict[str, np.ndarray]]]
                 ) -> List[Dict[str, object]]:
  """How much of the int8 model's error each layer with weights causes, largest first.

  Calibrated once; then, layer by layer (`weight_layers`), the int8 model with only that layer kept in float
  (`mlir_quantize`'s `denylisted_nodes`, as selective quantization does it). A layer's
  error is how far that brings the outputs back towards the float model's on the
  calibration rows: the root mean square output difference of the all-int8 model minus
  that of the model with the layer in float (`gain`). This is NNCF's accuracy-control
  ranking (revert one layer, measure) rather than TFLite's QuantizationDebugger, whose
  instrumented model fails to prepare on our tabular models in TF 2.16 (a CONCATENATION of
  float and int8 inputs); it also ranks a layer by what it costs at the output, where the
  debugger's per-layer error is in each layer's own units.

  Args:
    model: A Keras model over transformed features.
    representative_features: Yields single-example feature dicts (calibration, and the
      rows compared).

  Returns:
    [{'layer', 'output_rmse', 'output_rmse_all_int8', 'gain'}], largest gain first; then
    the layers that can not be kept in float alone, with `gain` None and `refused`.
  """
  model = tflite_friendly(model)
  input_specs = shapes.keras_specs(model)
  rows = [shapes.conform(features, input_specs, 'Quantizer (layer errors)')
          for features in representative_features()]
  with _conversion_source(model) as converter:
    calibrating = converter([tf.lite.OpsSet.TFLITE_BUILTINS])
    calibrating.optimizations = [tf.lite.Optimize.DEFAULT]
    calibrating.representative_dataset = lambda: iter(rows)
    calibrating._experimental_calibrate_only = True  # pylint: disable=protected-access
    calibrated = calibrating.convert()

  def outputs(content: bytes) -> np.ndarray:
    runner = tf.lite.Interpreter(model_content=content).get_signature_runner()
    return np.concatenate([np.concatenate([np.ravel(value) for value in runner(**row).values()])
                           for row in rows])

  reference = outputs(calibrated)

  def output_rmse(content: bytes) -> float:
    return float(np.sqrt(np.mean(np.square(outputs(content) - reference))))

  all_int8 = output_rmse(lite_convert.mlir_quantize(calibrated))
  interpreter = tf.lite.Interpreter(model_content=calibrated)
  names = {detail['name'] for detail in interpreter.get_output_details()}
  candidates, layers = set(weight_layers(model)), []
  for op in interpreter._get_ops_details():  # pylint: disable=protected-access
    for index in op['outputs']:
      layer = _layer_of(interpreter._get_tensor_details(index, 0)['name'],  # pylint: disable=protected-access
                        model, model.name, names)
      if layer in candidates and layer not in layers:
        layers.append(layer)
  errors = []
  for layer in layers:
    try:
      rmse = output_rmse(lite_convert.mlir_quantize(
          calibrated, denylisted_nodes=layer_nodes(calibrated, model, [layer])))
    except (RuntimeError, ValueError) as error:
      # TF 2.16's quantizer can leave a float layer feeding an int8 op with no QUANTIZE
      # between them (a CONCATENATION of float and int8 inputs): such a layer can not be
      # kept in float alone, and is not ranked.
      errors.append({'layer': layer, 'gain': None,
                     'refused': first_line_naming_an_op(str(error))})
      continue
    errors.append({'layer': layer, 'output_rmse': rmse, 'output_rmse_all_int8': all_int8,
                   'gain': all_int8 - rmse})
  return sorted(errors, key=lambda entry: (entry['gain'] is None, -(entry['gain'] or 0.0)))


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
