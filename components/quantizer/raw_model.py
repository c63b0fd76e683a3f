"""One flatbuffer that takes raw columns: the transform graph traced together with the model.

A device that ships `model_raw.tflite` needs only a TFLite runtime (LiteRT) and
numpy: the z-scores, vocabularies and buckets of the user's preprocessing_fn run
inside it, as TFLite builtins, so training and serving cannot drift apart. Inputs
are the raw columns (the label column excluded), one tensor per column, batch 1:

- a column every example has (`FixedLenFeature` of shape `s`): shape `[1, *s]`;
- a column that may be missing (`VarLenFeature`): shape `[1, n]`, `n = 0` when the
  value is missing, so the transform fills it in exactly as it does in TensorFlow.

A transform op with no TFLite builtin is refused by name (`RawInputUnsupported`);
the Quantizer then keeps the folder route alone and says so in `serving.json`.
"""

import re
import tempfile
from typing import Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.lite.python import convert as lite_convert

from tfx_distillery.components.common import shapes
from tfx_distillery.components.quantizer import conversion
from tfx_distillery.components.quantizer import predict

RAW_MODEL_FILE_NAME = predict.RAW_MODEL_FILE_NAME
SIGNATURE = 'serving_default'
OUTPUT_NAME = 'logits'
# The converter's summary line of ops that only Flex (TensorFlow) kernels could run.
FLEX_SUMMARY = re.compile(r'TF Select ops: ([^\n]+)')


class RawInputUnsupported(ValueError):
  """The transform (or model) holds an op with no TFLite builtin, so no raw-input flatbuffer."""


def input_name(column: str) -> str:
  """The flatbuffer input of a raw column (signature names take only `[A-Za-z0-9_]`)."""
  name = re.sub(r'[^A-Za-z0-9_]', '_', column)
  return name if re.match(r'[A-Za-z]', name) else 'c' + name


def raw_inputs(tf_transform_output, label_column: str) -> List[dict]:
  """The flatbuffer's inputs, one per raw column but the label: what `serving.json` lists.

  Raises:
    RawInputUnsupported: for a raw feature that is neither fixed nor variable length
      (sparse or ragged features of several dimensions), or two columns that would
      get one input name.
  """
  inputs = []
  taken = {}
  for column, spec in sorted(tf_transform_output.raw_feature_spec().items()):
    if column == label_column:
      continue
    if isinstance(spec, tf.io.FixedLenFeature):
      # As tf.io.parse_example gives it, at batch 1: what the transform was traced with.
      shape = [1] + [int(size) for size in spec.shape]
      optional = False
    elif isinstance(spec, tf.io.VarLenFeature):
      shape, optional = [1, -1], True
    else:
      raise RawInputUnsupported(f'raw column {column!r} is a {type(spec).__name__}; a raw-input '
                                'flatbuffer takes fixed or variable length columns only.')
    name = input_name(column)
    if name in taken:
      raise RawInputUnsupported(f'raw columns {taken[name]!r} and {column!r} both become the '
                                f'flatbuffer input {name!r}.')
    taken[name] = column
    inputs.append({'column': column, 'name': name, 'dtype': tf.as_dtype(spec.dtype).name
                   if spec.dtype != tf.string else 'string', 'shape': shape,
                   'optional': optional})
  return inputs


def _composite(model, tf_transform_output, inputs: List[dict]) -> tf.Module:
  """A module whose `serve` parses nothing: raw column tensors in, the model's logits out."""
  layer = tf_transform_output.transform_features_layer()
  model_specs = shapes.keras_specs(model)
  signature = {entry['name']: tf.TensorSpec([1, None] if entry['optional'] else entry['shape'],
                                            tf.as_dtype(entry['dtype']), name=entry['name'])
               for entry in inputs}

  class RawInputModel(tf.Module):
    """The transform layer, then the model, traced as one function."""

    def __init__(self):
      super().__init__()
      self.transform = layer
      self.model = model

    @tf.function(input_signature=[signature])
    def serve(self, raw):
      columns = {}
      for entry in inputs:
        value = raw[entry['name']]
        if entry['optional']:
          # [1, n] -> the SparseTensor tf.io.parse_example gives a variable length column.
          value = tf.SparseTensor(tf.where(tf.ones_like(value, tf.bool)),
                                  tf.reshape(value, [-1]), tf.shape(value, out_type=tf.int64))
        columns[entry['column']] = value
      transformed = self.transform(columns)
      transformed = {name: tf.sparse.to_dense(value) if isinstance(value, tf.SparseTensor)
                     else value for name, value in transformed.items()}
      features = shapes.conform(transformed, model_specs, 'Quantizer (raw-input flatbuffer)')
      return {OUTPUT_NAME: self.model(features, training=False)}

  return RawInputModel()


def calibration_rows(rows: List[Dict[str, np.ndarray]], inputs: List[dict]
                     ) -> List[Dict[str, np.ndarray]]:
  """Rows of one shape for the calibrator: each optional input as exactly one value.

  The converter's calibrator sizes the interpreter's inputs from the first row it is
  fed and refuses rows of other shapes, while a row with a missing value has a
  `[1, 0]` input where another has `[1, 1]`. Keeping only rows of one pattern biases
  the activation ranges (on taxi, rows without a company are mostly cash trips, and
  the calibrated logits lost every big tipper), so a missing value is given the
  column's zero ('' or 0) for calibration only: ranges come from every row.
  """
  shaped = []
  for row in rows:
    row = dict(row)
    for entry in inputs:
      if not entry['optional']:
        continue
      value = row[entry['name']]
      if value.shape[-1] == 0:
        value = np.zeros([1, 1], value.dtype) if value.dtype != object else np.array(
            [[b'']], dtype=object)
      row[entry['name']] = value[:, :1]
    for entry in inputs:
      if entry['dtype'] == 'string':
        # The calibrator reads numpy object arrays of bytes wrongly (every string then
        # missed the vocabulary, and the calibrated logits lost one class): fixed-width bytes.
        row[entry['name']] = row[entry['name']].astype(np.bytes_)
    shaped.append(row)
  return shaped


def flex_ops(message: str) -> List[str]:
  """The TensorFlow ops a conversion error names as having no TFLite builtin."""
  found = FLEX_SUMMARY.findall(message)
  if found:
    return sorted({name.strip() for name in found[-1].split(',') if name.strip()})
  return sorted(set(re.findall(r"'tf\.(\w+)' op is " + conversion.NO_KERNEL_MESSAGE, message)))


def convert(model, tf_transform_output, label_column: str, mode: Optional[str] = None,
            representative_rows: Optional[Callable[[], Iterable[Dict[str, np.ndarray]]]] = None,
            sparse: bool = False, float_layers: Sequence[str] = ()) -> bytes:
  """Converts the transform and `model` into one flatbuffer over raw columns.

  The model part is quantized as `mode` says (full integer modes: int8 weights and
  activations, calibrated on raw rows through the transform); the transform part
  keeps whatever types its TFLite builtins take (strings into hash tables, floats
  for z-scores).

  Args:
    model: The Keras model over transformed features (the one the Quantizer converts).
    tf_transform_output: The transform graph the model was trained behind.
    label_column: The raw label column, which is not an input.
    mode: None (float32), or one of `conversion.MODES`.
    representative_rows: For full integer modes: yields raw rows as `raw_row` gives them.
    sparse: Also ask for TFLite's sparse weight encoding (pruned models).
    float_layers: For full integer modes: the model's layers kept in float, as
      `conversion.convert` keeps them (selective quantization).

  Returns:
    The flatbuffer bytes.

  Raises:
    RawInputUnsupported: naming each op with no TFLite builtin, and why it matters.
  """
  inputs = raw_inputs(tf_transform_output, label_column)
  module = _composite(model, tf_transform_output, inputs)
  with tempfile.TemporaryDirectory() as saved_model_dir:
    # Saved with its assets, so the converter reads each vocabulary file into a hash table;
    # without Keras' trace of each layer's call, which the converter never reads (on the
    # taxi student 4 s against 15 s; the flatbuffer differs only in its constants' names).
    with conversion.without_layer_traces():
      tf.saved_model.save(module, saved_model_dir, signatures={SIGNATURE: module.serve})
    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.optimizations = conversion.optimizations(mode, sparse)
    if mode == 'float16':
      converter.target_spec.supported_types = [tf.float16]
    if mode in ('full_integer', 'qat'):
      if representative_rows is None:
        raise ValueError(f'mode {mode!r} needs representative_rows for calibration.')
      rows = calibration_rows(list(representative_rows()), inputs)

      def representative_dataset():
        for row in rows:
          yield {entry['name']: row[entry['name']] for entry in inputs}

      converter.representative_dataset = representative_dataset
      # Calibrate only, then quantize the model's part: see `model_part_only`.
      converter.optimizations = conversion.optimizations(mode, sparse=False)
      converter._experimental_calibrate_only = True  # pylint: disable=protected-access
    try:
      content = converter.convert()
    except Exception as error:  # pylint: disable=broad-except
      # The converter raises its own ConverterError (not exported under a stable name).
      found = flex_ops(str(error))
      if not found:
        raise
      raise RawInputUnsupported(
          'the transform and model hold ops with no TFLite builtin, so they can not run in '
          f'one flatbuffer on LiteRT: {", ".join(found)}. The folder route (the flatbuffer '
          '`tflite` with `transform_graph/`) still serves raw examples with TensorFlow. To ship '
          'the raw-input flatbuffer, express those steps of the preprocessing_fn with ops '
          'TFLite has (for example integer vocabularies without tf.strings.as_string, '
          'num_oov_buckets=0, and boundaries compared with tf.greater_equal instead of '
          'tft.bucketize).') from error
    if mode in ('full_integer', 'qat'):
      content = model_part_only(content, model.name, model, float_layers)
      if sparse:
        content = lite_convert.mlir_sparsify(content)
    return content


def transform_nodes(calibrated: bytes, model_scope: str) -> List[str]:
  """Output tensor names of the transform's ops: those upstream of the model's ops.

  The model's ops are those whose outputs carry the Keras model's name scope, the op
  that gives the signature's output (the converter names it after the output, not the
  layer) and every op after them.
  """
  interpreter = tf.lite.Interpreter(model_content=calibrated)
  operations = interpreter._get_ops_details()  # pylint: disable=protected-access

  def names(tensors):
    return [interpreter._get_tensor_details(index, 0)['name']  # pylint: disable=protected-access
            for index in tensors if index >= 0]

  outputs = {detail['index'] for detail in
             interpreter.get_signature_runner(SIGNATURE).get_output_details().values()}
  producer = {tensor: op['index'] for op in operations for tensor in op['outputs']}
  consumers = {}
  for op in operations:
    for tensor in op['inputs']:
      consumers.setdefault(tensor, []).append(op['index'])
  pending = [op['index'] for op in operations
             if outputs.intersection(op['outputs'])
             or any(name.startswith(model_scope + '/') for name in names(op['outputs']))]
  in_model = set()
  while pending:
    index = pending.pop()
    if index not in in_model:
      in_model.add(index)
      pending.extend(consumer for tensor in operations[index]['outputs']
                     for consumer in consumers.get(tensor, []))
  pending = [tensor for index in in_model for tensor in operations[index]['inputs']]
  upstream = set()
  while pending:
    index = producer.get(pending.pop())
    if index is None or index in upstream or index in in_model:
      continue
    upstream.add(index)
    pending.extend(operations[index]['inputs'])
  return [name for index in sorted(upstream) for name in names(operations[index]['outputs'])]


def model_part_only(calibrated: bytes, model_scope: str, model=None,
                    float_layers: Sequence[str] = ()) -> bytes:
  """Quantizes a calibrated flatbuffer's model ops to int8 and leaves the transform in float.

  Quantizing the transform too is wrong, not only wasteful: TFLite's int8 SELECT
  takes one scale for its inputs and output, and tft.scale_to_z_score ends in
  `where(std > 0, (x - mean) / std, x - mean)`, so `x - mean` got the z-score's
  range and was clipped before the division (a penguin model's raw flatbuffer then
  agreed with the folder route on 41% of eval). `float_layers` of `model` stay in float
  too (selective quantization).
  """
  denylisted = transform_nodes(calibrated, model_scope)
  if float_layers:
    denylisted += conversion.layer_nodes(calibrated, model, float_layers, scope=model_scope)
  return lite_convert.mlir_quantize(calibrated, denylisted_nodes=denylisted or None)


def check_runs(flatbuffer: bytes, rows: List[Dict[str, np.ndarray]]) -> None:
  """Invokes the flatbuffer on a few raw rows; a conversion can succeed and still not run.

  Raises:
    RawInputUnsupported: naming the op that failed. A vocabulary that
      `tft.compute_and_apply_vocabulary` reads from a file becomes a TFLite hash
      table that the converter leaves empty ("hashtable need to be initialized").
  """
  runner = tf.lite.Interpreter(model_content=flatbuffer).get_signature_runner(SIGNATURE)
  for row in rows:
    try:
      runner(**row)
    except (RuntimeError, ValueError) as error:
      advice = ''
      if 'hashtable' in str(error).lower():
        advice = (' A vocabulary read from a file (tft.compute_and_apply_vocabulary) becomes a '
                  'TFLite hash table that the converter leaves empty; keep the vocabulary in '
                  'the graph instead (tft.count_per_key and tf.equal, as '
                  'trainer_modules/base.vocabulary_ids does).')
      raise RawInputUnsupported(
          f'the raw-input flatbuffer converts but does not run in TFLite: '
          f'{str(error).strip()}.{advice} The folder route still serves raw examples with '
          'TensorFlow.') from error


def raw_rows(serialized_examples: List[bytes], inputs: List[dict]) -> List[Dict[str, np.ndarray]]:
  """Serialized raw tf.Examples as the flatbuffer's inputs, one dict per example.

  A fixed column gives `[1, 1]`; a variable one `[1, n]` (n = 0 where the value is missing).
  """
  spec = {}
  for entry in inputs:
    dtype = tf.as_dtype(entry['dtype'])
    spec[entry['column']] = (tf.io.VarLenFeature(dtype) if entry['optional'] else
                             tf.io.FixedLenFeature(entry['shape'][1:], dtype))
  parsed = tf.io.parse_example(tf.constant(serialized_examples), spec)
  rows = [dict() for _ in serialized_examples]
  for entry in inputs:
    value = parsed[entry['column']]
    numpy_dtype = object if entry['dtype'] == 'string' else np.dtype(entry['dtype'])
    if isinstance(value, tf.SparseTensor):
      row_ids = value.indices.numpy()[:, 0]
      values = value.values.numpy()
      for index, row in enumerate(rows):
        row[entry['name']] = np.asarray(values[row_ids == index], dtype=numpy_dtype)[None, :]
    else:
      values = value.numpy()
      for index, row in enumerate(rows):
        row[entry['name']] = np.asarray(values[index], dtype=numpy_dtype).reshape(
            entry['shape'])
  return rows


def transform_ops(flatbuffer: bytes) -> List[str]:
  """The op names a flatbuffer runs, sorted (what a device's runtime must have)."""
  interpreter = tf.lite.Interpreter(model_content=flatbuffer)
  return sorted({op['op_name'] for op in interpreter._get_ops_details()})  # pylint: disable=protected-access
