"""Student modules read their size from the hyperparameters they are given."""

import os

import pytest

from tfx_distillery.trainer_modules import base
from tfx_distillery.trainer_modules import digits_cnn_student
from tfx_distillery.trainer_modules import digits_student


class _TenClasses:
  """A stand-in transform output: build_student asks it only for the class count."""


@pytest.mark.parametrize('hyperparameters, expected_parameters', [
    (None, 64 * 8 + 8 + 8 * 10 + 10),
    ({'hidden_units': 32}, 64 * 32 + 32 + 32 * 10 + 10),
    # A Tuner's best_hyperparameters config keeps its values under 'values'.
    ({'space': [], 'values': {'hidden_units': 128}}, 64 * 128 + 128 + 128 * 10 + 10),
])
def test_digits_student_width_comes_from_hyperparameters(hyperparameters, expected_parameters):
  given = {**(hyperparameters or {}), 'num_classes': 10}
  student = digits_student.build_student(_TenClasses(), given)
  assert student.count_params() == expected_parameters


@pytest.mark.parametrize('hyperparameters, expected_parameters', [
    # Two 3x3 convolutions (16 and 32 filters), two poolings to 2x2, then the logits.
    (None, (9 * 16 + 16) + (9 * 16 * 32 + 32) + (2 * 2 * 32 * 10 + 10)),
    ({'filters': 8}, (9 * 8 + 8) + (9 * 8 * 16 + 16) + (2 * 2 * 16 * 10 + 10)),
])
def test_the_digits_runs_cnn_student_is_small_and_its_width_comes_from_hyperparameters(
    hyperparameters, expected_parameters):
  given = {**(hyperparameters or {}), 'num_classes': 10}
  student = digits_cnn_student.build_student(_TenClasses(), given)
  assert student.count_params() == expected_parameters


def test_hyperparameter_falls_back_to_the_default():
  assert base.hyperparameter(None, 'hidden_units', 8) == 8
  assert base.hyperparameter({'values': {'other': 1}}, 'hidden_units', 8) == 8
  assert base.hyperparameter({'hidden_units': 4, 'values': {'hidden_units': 9}},
                             'hidden_units', 8) == 4


def test_mnist1d_students_are_a_cnn_under_two_percent_of_the_teacher_and_an_mlp():
  from tfx_distillery.trainer_modules import mnist1d_student  # pylint: disable=g-import-not-at-top
  from tfx_distillery.trainer_modules import mnist1d_teacher  # pylint: disable=g-import-not-at-top
  ten = {'num_classes': 10}
  teacher = mnist1d_teacher.build_teacher(_TenClasses(), ten)
  cnn = mnist1d_student.build_student(_TenClasses(), ten)
  mlp = mnist1d_student.build_student(_TenClasses(), {**ten, 'architecture': 'mlp'})
  # conv 1->10 (k5), conv 10->10 (k3), a max over time, dense 10->10.
  assert cnn.count_params() == (5 * 10 + 10) + (3 * 10 * 10 + 10) + (10 * 10 + 10)
  assert cnn.count_params() <= 0.02 * teacher.count_params()
  assert mlp.count_params() == 40 * 128 + 128 + 128 * 10 + 10
  with pytest.raises(ValueError, match='architecture must be one of cnn, mlp'):
    mnist1d_student.build_student(_TenClasses(), {**ten, 'architecture': 'rnn'})


def test_the_distillation_benchmarks_width_curve_trains_a_module_that_reads_its_setting():
  # #85: the curve's rows were one CNN, which ignores `hidden_units`.
  from benchmarks import distillation  # pylint: disable=import-outside-toplevel
  assert os.path.samefile(distillation.DIGITS_CURVE_MODULE, digits_student.__file__)
  counts = [digits_student.build_student(_TenClasses(), {
      distillation.DIGITS_CURVE_SETTING: width, 'num_classes': 10}).count_params()
            for width in distillation.DIGITS_WIDTHS]
  assert len(set(counts)) == len(distillation.DIGITS_WIDTHS), counts
