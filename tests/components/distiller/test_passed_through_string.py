"""#84: a string the user's transform passes through with no vocabulary reaches the built-in
student as an embedding of its most frequent values, down to the int8 flatbuffer the chain
ships (no Flex op: a string hash has no TFLite builtin)."""

import os

import numpy as np
import tensorflow as tf

from tfx_distillery.components.quantizer import predict
from tests import helpers
from tests.components.distiller import test_distiller
from tests.components.quantizer import test_quantizer


def test_a_passed_through_string_is_embedded_distilled_and_served_in_int8(tmp_path):
  (tmp_path / 'data').mkdir()
  data = helpers.transformed_artifacts(
      str(tmp_path / 'data'), train_rows=400, eval_rows=100,
      extra_outputs=lambda inputs: {'colour_name_xf': tf.identity(inputs['colour'])})
  teacher = helpers.train_synthetic_teacher(
      data, str(tmp_path / 'teacher'), train_steps=40,
      module_file=os.path.join(test_distiller.MODULES, 'numbers_teacher.py'))
  model_artifacts = []
  model_uri, metrics = test_distiller.run_distiller(
      data, [teacher], str(tmp_path), module_file=None, train_steps=60, train_baseline=False,
      student_hidden_units=(4,), model_artifacts=model_artifacts)
  # The statistics the Distiller computed hold the string's values: each gets its own id.
  plan = metrics['student']['features']['colour_name_xf']
  assert plan.startswith('string with no vocabulary: its 3 most frequent values (of 3, 100%')
  outputs = test_distiller.serve(model_uri, data[2][:10])
  assert outputs['logits'].shape == (10, 1)
  model_dir, quantized = test_quantizer.run_quantizer(data, model_artifacts[0],
                                                      str(tmp_path / 'int8'), 'full_integer')
  interpreter = tf.lite.Interpreter(model_path=os.path.join(model_dir, predict.MODEL_FILE_NAME))
  assert not [op for op in interpreter._get_ops_details()  # pylint: disable=protected-access
              if op['op_name'].startswith('Flex')]
  assert any(detail['dtype'] == np.bytes_ for detail in interpreter.get_input_details())
  # The folder route serves raw examples with the string in them, as the float model does.
  expected = outputs['logits'].numpy().ravel() > 0
  got = predict.TFLitePredictor(model_dir).predict_raw(
      test_quantizer.raw_examples(data, 10))['classes'].ravel()
  assert np.mean(got == expected) >= 0.9
  assert quantized['accuracy'] > quantized['majority_accuracy']
