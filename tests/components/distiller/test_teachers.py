"""Teacher outputs: logits used as they are, probabilities detected, mismatches refused."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
import tfx
from tfx.utils import import_utils

from tfx_distillery.components.common import measuring
from tfx_distillery.components.distiller import teachers as teachers_lib
from tests import helpers


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


def without_a_hint(model):
  """A teacher whose layers say nothing of its output (as for a custom output op)."""
  teacher = measuring.keras_scorer(model)
  teacher.output_kind = None
  return teacher


def test_outputs_that_contradict_the_declared_kind_are_refused_at_the_first_batch(tmp_path):
  model = saved_model(tmp_path / 'teacher', 3)
  with pytest.raises(ValueError, match='read as probabilities, but it emits values from .* '
                                       'those are logits'):
    teachers_lib.check_teacher(without_a_hint(model), FEATURES, 3, 3, 'probabilities')
  softmax_model = saved_model(tmp_path / 'softmax', 3, 'softmax')
  with pytest.raises(ValueError, match='read as logits, but every row'):
    teachers_lib.check_teacher(without_a_hint(softmax_model), FEATURES, 3, 3, 'logits')
  auto = without_a_hint(softmax_model)
  teachers_lib.check_teacher(auto, FEATURES, 3, 3)
  assert auto.output_kind == 'probabilities'  # `auto` settled by the batch.


def test_a_teacher_with_another_number_of_classes_is_refused(tmp_path):
  saved_model(tmp_path / 'teacher', 3)
  teacher = teachers_lib.load_teacher(str(tmp_path / 'teacher'))
  with pytest.raises(ValueError, match='emits 3 outputs but the labels have 2 classes'):
    teachers_lib.check_teacher(teacher, FEATURES, 1, 2)


@pytest.mark.parametrize('activation', [None, 'softmax'])
def test_a_binary_labels_teacher_with_one_output_per_class_gives_one_logit(tmp_path, activation):
  """TFX's penguin module copied for a two-class table ends in Dense(2): its logit for the
  binary student is z1 - z0, whose sigmoid is the softmax's second column."""
  model = saved_model(tmp_path / 'teacher', 2, activation)
  teacher = teachers_lib.load_teacher(str(tmp_path / 'teacher'))
  teachers_lib.check_teacher(teacher, FEATURES, 1, 2)
  logits = teachers_lib.frozen_logits(teacher, FEATURES).numpy()
  assert logits.shape == (32, 1)
  second = model(FEATURES).numpy()
  second = second if activation else tf.nn.softmax(second).numpy()
  np.testing.assert_allclose(1 / (1 + np.exp(-logits[:, 0])), second[:, 1], rtol=1e-3,
                             atol=1e-6)
  # Three outputs for two classes are still refused.
  saved_model(tmp_path / 'three', 3)
  with pytest.raises(ValueError, match='emits 3 outputs but the labels have 2 classes'):
    teachers_lib.check_teacher(teachers_lib.load_teacher(str(tmp_path / 'three')), FEATURES,
                               1, 2)


def test_a_folder_without_a_model_is_a_clear_error(tmp_path):
  with pytest.raises(ValueError, match='teacher_model: .* holds no SavedModel'):
    teachers_lib.load_teacher(str(tmp_path))


def test_the_stock_taxi_model_reads_as_probabilities_through_its_reshape():
  # TFX's own module file, unchanged: Dense(1, sigmoid) then Reshape((1,)).
  build_keras_model = import_utils.import_func_from_source(os.path.join(
      os.path.dirname(tfx.__file__), 'examples', 'chicago_taxi_pipeline',
      'taxi_utils_native_keras.py'), '_build_keras_model')
  model = build_keras_model()
  assert type(model.layers[-1]).__name__ == 'Reshape'
  assert measuring.output_activation(model) == 'sigmoid'
  assert measuring.keras_scorer(model).output_kind == 'probabilities'


def test_a_teacher_saved_with_tf_saved_model_save_is_read_through_its_traced_call(tmp_path):
  # As the stock penguin module saves: list inputs, no Keras metadata.
  inputs = [tf_keras.Input(shape=(1,), name=f'f{index}_xf') for index in range(4)]
  hidden = tf_keras.layers.Dense(8, activation='relu')(
      tf_keras.layers.concatenate(inputs))
  model = tf_keras.Model(inputs, tf_keras.layers.Dense(3)(hidden))
  model.compile(optimizer='adam', loss='mse')
  columns = {f'f{index}_xf': np.random.default_rng(index).normal(size=(16, 1)).astype('float32')
             for index in range(4)}
  model.fit([columns[f'f{index}_xf'] for index in range(4)], np.zeros((16, 3)), verbose=0)
  tf.saved_model.save(model, str(tmp_path / 'stock'))
  teacher = teachers_lib.load_teacher(str(tmp_path / 'stock'))
  assert teacher.format == 'saved_model' and teacher.num_outputs == 3
  teachers_lib.check_teacher(teacher, {**columns, 'extra_xf': columns['f0_xf']}, 3, 3)
  assert teacher.output_kind == 'logits'
  np.testing.assert_allclose(teacher.logits(columns).numpy(),
                             model([columns[f'f{index}_xf'] for index in range(4)]).numpy(),
                             rtol=1e-5)


def test_a_binary_teacher_read_as_logits_whose_outputs_all_lie_in_0_1_is_warned_about(tmp_path):
  model = saved_model(tmp_path / 'teacher', 1)
  hidden_sigmoid = measuring.Scorer('hidden', lambda features: tf.sigmoid(model(features)),
                                    'keras', ['x'], 1, None)
  with helpers.ProgressLines() as lines:
    teachers_lib.check_teacher(hidden_sigmoid, FEATURES, 1, 2, 'logits')
    teachers_lib.check_teacher(measuring.keras_scorer(model), FEATURES, 1, 2, 'logits')
  # Only the hidden sigmoid is warned about; the real logits (some outside [0, 1]) are not.
  assert len([line for line in lines if "as a sigmoid's would" in line]) == 1
