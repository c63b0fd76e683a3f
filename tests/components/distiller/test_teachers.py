"""Teacher outputs: logits used as they are, probabilities detected, mismatches refused."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from components.distiller import teachers as teachers_lib


def saved_model(path, units, activation=None):
  inputs = {'x': tf_keras.Input(shape=(4,), name='x')}
  hidden = tf_keras.layers.Dense(8, activation='relu')(inputs['x'])
  outputs = tf_keras.layers.Dense(units, activation=activation)(hidden)
  model = tf_keras.Model(inputs, outputs)
  model.save(str(path), save_format='tf')
  return model


FEATURES = {'x': tf.random.stateless_normal([32, 4], seed=[3, 4]) * 5.0}


@pytest.mark.parametrize('units,activation', [(3, 'softmax'), (1, 'sigmoid')])
def test_a_probability_output_is_detected_and_its_logits_recovered(tmp_path, units, activation):
  model = saved_model(tmp_path / 'teacher', units, activation)
  teacher = teachers_lib.load_teacher(str(tmp_path / 'teacher'))
  assert teacher.output_kind == 'probabilities'
  teachers_lib.check_teacher(teacher, FEATURES, units, max(units, 2))
  probabilities = model(FEATURES).numpy()
  logits = teacher.logits(FEATURES).numpy()
  if units == 1:
    np.testing.assert_allclose(1 / (1 + np.exp(-logits)), probabilities, rtol=1e-3, atol=1e-6)
  else:
    np.testing.assert_allclose(tf.nn.softmax(logits).numpy(), probabilities, rtol=1e-3,
                               atol=1e-6)


def test_a_logits_output_is_used_as_it_is(tmp_path):
  model = saved_model(tmp_path / 'teacher', 3)
  teacher = teachers_lib.load_teacher(str(tmp_path / 'teacher'))
  assert teacher.output_kind == 'logits'
  np.testing.assert_allclose(teacher.logits(FEATURES).numpy(), model(FEATURES).numpy(),
                             rtol=1e-5)


def test_declaring_logits_for_a_softmax_teacher_is_refused(tmp_path):
  saved_model(tmp_path / 'teacher', 3, 'softmax')
  with pytest.raises(ValueError, match='teacher_output is "logits".*softmax'):
    teachers_lib.load_teacher(str(tmp_path / 'teacher'), 'logits')


def test_declaring_probabilities_for_a_linear_output_is_refused_at_load(tmp_path):
  saved_model(tmp_path / 'teacher', 3)
  with pytest.raises(ValueError, match='teacher_output is "probabilities".*emits logits'):
    teachers_lib.load_teacher(str(tmp_path / 'teacher'), 'probabilities')


def test_outputs_that_contradict_the_declared_kind_are_refused_at_the_first_batch(tmp_path):
  model = saved_model(tmp_path / 'teacher', 3)
  # The layer gives no hint (as for a custom output op); the values decide.
  with pytest.raises(ValueError, match='outside \\[0, 1\\]: it emits logits'):
    teachers_lib.check_teacher(teachers_lib.Teacher(model, 'probabilities', 'custom'),
                               FEATURES, 3, 3)
  softmax_model = saved_model(tmp_path / 'softmax', 3, 'softmax')
  with pytest.raises(ValueError, match='read as logits but every row'):
    teachers_lib.check_teacher(teachers_lib.Teacher(softmax_model, 'logits', 'custom'),
                               FEATURES, 3, 3)


def test_a_teacher_with_another_number_of_classes_is_refused(tmp_path):
  saved_model(tmp_path / 'teacher', 3)
  teacher = teachers_lib.load_teacher(str(tmp_path / 'teacher'))
  with pytest.raises(ValueError, match='emits 3 outputs but the labels have 2 classes'):
    teachers_lib.check_teacher(teacher, FEATURES, 1, 2)


def test_a_folder_without_a_keras_model_is_a_clear_error(tmp_path):
  with pytest.raises(ValueError, match='is not a Keras SavedModel'):
    teachers_lib.load_teacher(str(tmp_path))
