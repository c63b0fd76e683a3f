"""Fixtures shared by the component tests: synthetic transformed data and a teacher on it."""

import pytest

from tests import helpers


@pytest.fixture(scope='session')
def data(tmp_path_factory):
  """Examples and TransformGraph artifacts of synthetic data, once per run: tests only read them."""
  return helpers.transformed_artifacts(str(tmp_path_factory.mktemp('data')))


@pytest.fixture(scope='session')
def teacher(data, tmp_path_factory):  # pylint: disable=redefined-outer-name
  """The tabular teacher trained on `data`, once per run: tests only read it."""
  return helpers.train_synthetic_teacher(data, str(tmp_path_factory.mktemp('teacher')))
