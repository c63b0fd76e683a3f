"""The one rule for feature shapes: each model gets each feature as its own signature wants it.

Transformed examples mix ranks: TFX's taxi module emits some features as
`(batch,)` and others as `(batch, 1)`. A Keras model forgives that; a model
restored from `tf.saved_model.save` (the stock Trainer's) and a TFLite
interpreter do not, they take exactly the shapes they were traced with. So
every model we call (Keras teacher or student, restored teacher, TFLite
interpreter during calibration, evaluation and serving) gets its features
through `conform`:

- a unit axis is added or dropped at the end, so the rank matches;
- then the value is cast to the signature's dtype;
- anything else (a sparse or ragged value where the model wants dense, a
  length that differs) raises `FeatureShapeError`, naming the feature, both
  shapes and who asked, never a raw TensorFlow traceback.

This file imports only numpy at the top (TensorFlow only when it is given
tensors), because the Quantizer copies it beside `predict.py` into every
TFLite folder, which must run without our package.
"""

import dataclasses
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

# What `plan` answers: leave the value, add a trailing unit axis, or drop it.
KEEP, ADD_UNIT_AXIS, DROP_UNIT_AXIS = 'keep', 'add', 'drop'


class FeatureShapeError(ValueError):
  """A feature that no unit axis or cast can bring to a model's input signature."""


@dataclasses.dataclass(frozen=True)
class InputSpec:
  """One input of a model's signature: shape with the batch axis first (None: any), dtype.

  Attributes:
    name: The feature the input reads.
    shape: Dimensions, batch first; None where any size is accepted.
    dtype: A numpy dtype name (`float32`, `int64`, `bytes`/`object` for strings).
  """
  name: str
  shape: Tuple[Optional[int], ...]
  dtype: str

  def describe(self) -> str:
    return f'{_shape_text(self.shape)} {self.dtype}'


def _shape_text(shape) -> str:
  return '(' + ', '.join('None' if size is None else str(size) for size in shape) + (
      ',)' if len(shape) == 1 else ')')


def _compatible(actual, wanted) -> bool:
  return len(actual) == len(wanted) and all(
      want is None or have is None or int(have) == int(want) for have, want in zip(actual, wanted))


def plan(name: str, actual_shape: Sequence[Optional[int]], spec: InputSpec, who: str) -> str:
  """How `actual_shape` becomes `spec.shape`: KEEP, ADD_UNIT_AXIS or DROP_UNIT_AXIS.

  Args:
    name: The feature.
    actual_shape: Its shape (batch first), None where unknown.
    spec: The model's input for it.
    who: The component and model asking, for the message.

  Raises:
    FeatureShapeError: when only a reshape that changes the values' layout would do.
  """
  actual = tuple(actual_shape)
  wanted = tuple(spec.shape)
  if _compatible(actual, wanted):
    return KEEP
  if len(actual) + 1 == len(wanted) and wanted[-1] in (1, None) and _compatible(
      actual + (1,), wanted):
    return ADD_UNIT_AXIS
  if len(actual) == len(wanted) + 1 and actual[-1] in (1, None) and _compatible(
      actual[:-1], wanted):
    return DROP_UNIT_AXIS
  raise FeatureShapeError(
      f'{who}: feature {name!r} is {_shape_text(actual)} in the examples but the model takes '
      f'{spec.describe()}; only a trailing axis of size 1 can be added or dropped. Emit it at '
      'the shape the model was traced with, or retrain the model on these examples.')


def _is_tensor(value) -> bool:
  return type(value).__module__.startswith('tensorflow')


def _refuse_sparse(name: str, value, spec: InputSpec, who: str) -> None:
  kind = type(value).__name__
  if kind in ('SparseTensor', 'RaggedTensor', 'SparseTensorValue', 'RaggedTensorValue'):
    raise FeatureShapeError(
        f'{who}: feature {name!r} is a {kind} in the examples but the model takes a dense '
        f'{spec.describe()}. Make it dense in your preprocessing_fn (e.g. fill missing values '
        'and reshape), so every example has a value.')


def conform_one(name: str, value, spec: InputSpec, who: str):
  """`value` at `spec`'s rank and dtype (numpy in, numpy out; tensor in, tensor out)."""
  _refuse_sparse(name, value, spec, who)
  if _is_tensor(value):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    step = plan(name, tuple(value.shape.as_list()), spec, who)
    if step == ADD_UNIT_AXIS:
      value = tf.expand_dims(value, -1)
    elif step == DROP_UNIT_AXIS:
      value = tf.squeeze(value, -1)
    wanted = tf.as_dtype(spec.dtype if spec.dtype not in ('bytes', 'object') else 'string')
    if value.dtype != wanted:
      if wanted == tf.string:
        raise FeatureShapeError(
            f'{who}: feature {name!r} is {value.dtype.name} in the examples but the model takes '
            f'{spec.describe()}; numbers are not read as strings.')
      if value.dtype == tf.string:
        # Numbers written as text (an empty column infers as one); checked on numpy first.
        value = tf.strings.to_number(tf.where(tf.equal(value, ''), '0', value), tf.float64)
      value = tf.cast(value, wanted)
    return value
  array = np.asarray(value)
  step = plan(name, array.shape, spec, who)
  if step == ADD_UNIT_AXIS:
    array = array[..., np.newaxis]
  elif step == DROP_UNIT_AXIS:
    array = array[..., 0]
  wanted = np.dtype(object if spec.dtype in ('bytes', 'object', 'string') else spec.dtype)
  if array.dtype != wanted:
    if wanted.kind in 'OSU' and array.dtype.kind not in 'OSU':
      raise FeatureShapeError(
          f'{who}: feature {name!r} is {array.dtype.name} in the examples but the model takes '
          f'{spec.describe()}; numbers are not read as strings.')
    if array.dtype.kind in 'OSU' and wanted.kind not in 'OSU':
      array = _numbers_from_text(name, array, spec, who)
    array = array.astype(wanted)
  return array


def _numbers_from_text(name: str, array: np.ndarray, spec: InputSpec, who: str) -> np.ndarray:
  """Numbers written as text ('' read as 0, as an empty CSV column gives), else refused."""
  texts = [item.decode() if isinstance(item, bytes) else str(item) for item in array.ravel()]
  try:
    return np.array([float(text) if text else 0.0 for text in texts]).reshape(array.shape)
  except ValueError:
    bad = next(text for text in texts if text and not _is_number(text))
    raise FeatureShapeError(  # pylint: disable=raise-missing-from
        f'{who}: feature {name!r} holds text such as {bad!r} in the examples but the model '
        f'takes {spec.describe()}; only numbers written as text can be read as numbers.')


def _is_number(text: str) -> bool:
  try:
    float(text)
  except ValueError:
    return False
  return True


def conform(features: Mapping[str, Any], specs: Mapping[str, InputSpec], who: str
           ) -> Dict[str, Any]:
  """Every input of `specs`, from `features`, at the rank and dtype the model wants.

  Args:
    features: Feature values by name (numpy arrays or tensors; extra ones are ignored).
    specs: The model's inputs by name (`keras_specs`, `function_specs`, `tflite_specs`).
    who: The component and model, named in every refusal (e.g. 'Distiller, teacher at ...').

  Returns:
    One value per input of `specs`.

  Raises:
    FeatureShapeError: naming a feature the model needs that is missing, sparse,
      of another length, or of a kind that does not cast.
  """
  missing = sorted(set(specs) - set(features))
  if missing:
    raise FeatureShapeError(f'{who}: the model reads {missing}, which the examples do not have '
                            f'(they have {sorted(features)}).')
  return {name: conform_one(name, features[name], spec, who) for name, spec in specs.items()}


def _dtype_name(dtype) -> str:
  name = getattr(dtype, 'name', None) or np.dtype(dtype).name
  return 'object' if name in ('string', 'bytes_', 'str_') or name.startswith('bytes') else name


def keras_specs(model) -> Dict[str, InputSpec]:
  """The inputs of a functional tf_keras model, by input name."""
  return {name: InputSpec(name, tuple(tensor.shape.as_list()), _dtype_name(tensor.dtype))
          for name, tensor in zip(model.input_names, model.inputs)}


def function_specs(structure, names: Optional[Sequence[str]] = None) -> Dict[str, InputSpec]:
  """The inputs of a traced function's signature (a dict, list or one TensorSpec).

  Args:
    structure: `structured_input_signature[0][0]` of a concrete function.
    names: Names for a list signature, in order (else each spec's own name).
  """
  if isinstance(structure, dict):
    items = sorted(structure.items())
  else:
    specs = list(structure) if isinstance(structure, (list, tuple)) else [structure]
    items = list(zip(names or [spec.name for spec in specs], specs))
  return {name: InputSpec(name, tuple(spec.shape.as_list()), _dtype_name(spec.dtype))
          for name, spec in items}


def tflite_specs(input_details: Mapping[str, dict]) -> Dict[str, InputSpec]:
  """The inputs of a TFLite signature runner (`get_input_details()`), batch axis free."""
  specs = {}
  for name, detail in input_details.items():
    shape = [int(size) for size in detail.get('shape_signature', detail['shape'])]
    shape = [None if size < 0 else size for size in shape]
    if shape:
      shape[0] = None  # The batch axis: we feed one example, or the batch the caller resized to.
    dtype = _dtype_name(detail['dtype'])
    scale = (detail.get('quantization') or (0.0, 0))[0]
    if scale and dtype in ('int8', 'uint8'):
      dtype = 'float32'  # An int8 input takes floats that the caller quantizes with its scale.
    specs[name] = InputSpec(name, tuple(shape), dtype)
  return specs
