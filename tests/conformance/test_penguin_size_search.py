"""The size search on TFX's penguin example: its stock Trainer's model (penguin_utils_keras.py,
unchanged) as the teacher, the Distiller sizing the built-in student itself, as
`distillery run` does by default."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tfx import v1 as tfx

from tfx_distillery import Distiller
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.pipelines import datasets
from tests.conformance import chain

NAME = 'penguin-size-search'
MAX_ACCURACY_DROP = 0.05


@pytest.fixture(scope='module')
def run(tmp_path_factory):
  root = str(tmp_path_factory.mktemp('penguin-size'))
  front = chain.penguin_front(train_steps=200)
  _, _, _, transform, trainer = front
  distiller = Distiller(
      teacher_model=trainer.outputs['model'], examples=transform.outputs['transformed_examples'],
      transform_graph=transform.outputs['transform_graph'],
      statistics=transform.outputs['post_transform_stats'],
      train_args=tfx.proto.TrainArgs(num_steps=300), eval_args=tfx.proto.EvalArgs(num_steps=5),
      label_key='species_xf', label_column='species', module_file=None,
      student_parameter_shares=datasets.DEFAULT_STUDENT_PARAMETER_SHARES,
      max_accuracy_drop=MAX_ACCURACY_DROP)
  tfx.orchestration.LocalDagRunner().run(chain.pipeline(NAME, root, front + [distiller]))
  with open(os.path.join(chain.output_uri(root, NAME, 'Distiller', 'distillery.ModelMetrics'),
                         'metrics.json')) as handle:
    return root, json.load(handle)


def test_the_smallest_share_within_the_budget_goes_on_and_no_width_is_trained_twice(run):
  _, metrics = run
  search = metrics['size_search']
  assert search['shares'] == list(datasets.DEFAULT_STUDENT_PARAMETER_SHARES)
  trained = [trial for trial in search['trials'] if trial['trained']]
  widths = [tuple(trial['hidden_units']) for trial in trained]
  assert trained and len(set(widths)) == len(widths)
  # TFX's penguin model is small (two layers of 8 units): its 1% is below any student, so
  # the smallest student stands in for it, and a share that gives the same width is skipped.
  assert trained[0]['parameters'] < metrics['teacher_parameters'][0]
  bar = search['teacher_accuracy'] - MAX_ACCURACY_DROP
  within = [trial for trial in trained if trial['eval_accuracy'] >= bar]
  chosen = within[0] if within else max(trained, key=lambda trial: trial['eval_accuracy'])
  assert search['chosen_share'] == chosen['share']
  assert trained[-1] is chosen or not within
  assert metrics['student']['hidden_units'] == chosen['hidden_units']
  assert metrics['student_parameters'] == chosen['parameters']


def test_the_chosen_student_answers_raw_penguin_examples(run):
  root, metrics = run
  model_uri = chain.output_uri(root, NAME, 'Distiller', 'Model')
  raw = evaluation.read_serialized_examples(os.path.join(
      chain.output_uri(root, NAME, 'ImportExampleGen', 'Examples'), 'Split-eval', '*'), limit=40)
  labels = np.array([tf.train.Example.FromString(example).features.feature['species']
                     .int64_list.value[0] for example in raw])
  serving = [measuring.strip_feature(example, 'species') for example in raw]
  classes = tf.saved_model.load(evaluation.serving_model_path(model_uri)).signatures[
      'serving_default'](examples=tf.constant(serving))['classes'].numpy()
  assert classes.shape == (40,)
  assert np.mean(classes == labels) > metrics['majority_accuracy']
