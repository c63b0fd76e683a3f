"""The label, named once: class counts from each source, and labels refused before training."""

import collections

import pytest
import tensorflow as tf
import tensorflow_transform as tft

from tfx_distillery.components.common import labels
from tests import helpers

RAW_SPEC = {'x': tf.io.FixedLenFeature([], tf.float32),
            'grade': tf.io.FixedLenFeature([], tf.int64)}
ROWS = [{'x': float(index), 'grade': 1 + index % 3} for index in range(30)]


def transform_output(tmp_path, preprocessing_fn):
  output, _ = helpers.run_transform(preprocessing_fn, ROWS, RAW_SPEC, str(tmp_path), 1)
  return output


def test_an_integer_domain_whose_min_is_not_zero_gives_max_plus_one_classes(tmp_path):
  def preprocessing_fn(inputs):
    grade = inputs['grade']
    tft.schema_inference.set_tensor_schema_override(grade, tf.constant(1, tf.int64),
                                                    tf.constant(3, tf.int64))
    return {'x_xf': inputs['x'], 'grade_xf': grade}

  count = labels.resolve(transform_output(tmp_path, preprocessing_fn), 'grade_xf')
  assert (count.num_classes, count.source) == (4, 'schema')
  assert 'integer domain [1, 3]' in count.detail


def test_a_vocabulary_label_takes_its_size_from_the_schema(tmp_path):
  def preprocessing_fn(inputs):
    return {'x_xf': inputs['x'], 'grade_xf': tft.compute_and_apply_vocabulary(
        tf.strings.as_string(inputs['grade']), vocab_filename='grade')}

  count = labels.resolve(transform_output(tmp_path, preprocessing_fn), 'grade_xf')
  assert (count.num_classes, count.source) == (3, 'schema')


def test_without_a_domain_the_teacher_width_answers_and_without_one_the_error_names_the_key(
    tmp_path):
  def preprocessing_fn(inputs):
    return {'x_xf': inputs['x'], 'grade_xf': inputs['grade']}

  output = transform_output(tmp_path, preprocessing_fn)
  assert labels.resolve(output, 'grade_xf', teacher_width=1).describe() == {
      'num_classes': 2, 'num_classes_source': 'teacher', 'num_classes_detail': 'output width 1'}
  assert labels.resolve(output, 'grade_xf', teacher_width=4).num_classes == 4
  assert labels.resolve(output, 'grade_xf', num_classes=5).source == 'num_classes'
  with pytest.raises(labels.LabelError, match=r"label_key 'grade_xf'.*num_classes"):
    labels.resolve(output, 'grade_xf')


def test_a_label_key_the_transform_does_not_emit_is_named_with_what_it_does_emit(tmp_path):
  def preprocessing_fn(inputs):
    return {'x_xf': inputs['x'], 'grade_xf': inputs['grade']}

  with pytest.raises(labels.LabelError, match=r"'label' is not a transformed feature.*grade_xf"):
    labels.resolve(transform_output(tmp_path, preprocessing_fn), 'label')


def test_a_single_class_is_refused_naming_the_column_and_the_count():
  with pytest.raises(labels.LabelError,
                     match=r"label_key 'label' \(raw column 'kind'\) has 1 class.*0 on 40 rows"):
    labels.check_counts({'train': collections.Counter({0: 40})}, 'label', 'kind')


def test_a_continuous_label_is_refused_naming_the_count():
  train = collections.Counter(range(200))
  with pytest.raises(labels.LabelError, match=r'200 distinct values on 200 train rows.*continuous'):
    labels.check_counts({'train': train}, 'label', 'price')
  labels.check_counts({'train': collections.Counter({value: 5 for value in range(60)})},
                      'label', 'kind')  # 60 classes of 5 rows each are classes.


def test_a_value_unknown_to_the_train_vocabulary_never_reaches_the_loss():
  counts = {'train': collections.Counter({0: 10, 1: 10}),
            'eval': collections.Counter({0: 3, -1: 1})}
  with pytest.raises(labels.LabelError, match=r'holds \[-1\] in the eval split'):
    labels.check_counts(counts, 'label', 'kind', num_classes=2)


def test_unmapped_raw_values_are_named(tmp_path):
  def preprocessing_fn(inputs):
    return {'x_xf': inputs['x'], 'grade_xf': tft.compute_and_apply_vocabulary(
        tf.strings.as_string(inputs['grade']), vocab_filename='grade', default_value=-1)}

  output = transform_output(tmp_path, preprocessing_fn)
  examples = [helpers.serialize({'x': 1.0, 'grade': grade}) for grade in (1, 7, 2, 9)]
  assert labels.unmapped_raw_values(examples, output, 'grade_xf', 'grade') == ['7', '9']
