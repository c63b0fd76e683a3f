"""Transform module for any CSV: derived from the columns' types, no per-dataset code.

Numbers are z-scored, strings get a vocabulary, and the label (integer or string
classes) is mapped to class indices through a vocabulary named `label`.
"""

import tensorflow as tf
import tensorflow_transform as tft

from tfx_distillery.trainer_modules import base

VOCABULARY_SIZE = 1000


# Called by Transform with custom_config={'label_column': ...}.
def preprocessing_fn(inputs, custom_config):
  """Transforms every raw column by its type and maps the label to class indices.

  Args:
    inputs: Raw columns, dense or sparse where values are missing.
    custom_config: Must hold `label_column`, the raw label column.

  Returns:
    Transformed features (`<column>_xf`) and `label`.
  """
  label_column = custom_config['label_column']
  if label_column not in inputs:
    raise ValueError(f'label_column {label_column!r} is not a column of the data; columns '
                     f'are {sorted(inputs)}.')
  outputs = {}
  names = base.transformed_names(key for key in inputs if key != label_column)
  for key, name in names.items():
    if inputs[key].dtype == tf.string:
      # Ids with TFLite builtins only (missing, out of vocabulary, then the vocabulary).
      outputs[name] = base.vocabulary_ids(inputs[key], VOCABULARY_SIZE)
    else:
      outputs[name] = tft.scale_to_z_score(tf.cast(base.fill_in_missing(inputs[key]),
                                                   tf.float32))
  label = base.fill_in_missing(inputs[label_column])
  if label.dtype != tf.string:
    label = tf.strings.as_string(label)
  # Class indices follow this vocabulary file, which also names the classes.
  label_index = tft.compute_and_apply_vocabulary(
      label, vocab_filename=base.LABEL_VOCABULARY, default_value=-1, num_oov_buckets=0)
  class_count = tf.cast(tft.experimental.get_vocabulary_size_by_name(base.LABEL_VOCABULARY),
                        tf.int64)
  tft.schema_inference.set_tensor_schema_override(
      label_index, tf.constant(0, tf.int64), class_count - 1)
  outputs[base.LABEL_KEY] = label_index
  return outputs
