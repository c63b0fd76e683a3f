"""TFX's penguin example (penguin_utils_keras.py, unchanged; ImportExampleGen on the data that
ships in the tfx wheel), with our chain after its Trainer and our own student module file."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.components.quantizer import conversion
from tfx_distillery.components.quantizer import predict
from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import summary
from tests import helpers
from tests.conformance import chain

NAME = 'penguin-distilled'


@pytest.fixture(scope='module')
def run(tmp_path_factory):
  root = str(tmp_path_factory.mktemp('penguin'))
  front = chain.penguin_front(train_steps=100)
  example_gen, _, _, transform, trainer = front
  # The module-file route: our tabular student, not the built-in one.
  ours = chain.our_chain(example_gen, transform, trainer, 'species_xf', 'species',
                         os.path.join(root, 'serving'), student_steps=300,
                         module_file=datasets.module_file('tabular_student'))
  tfx.orchestration.LocalDagRunner().run(chain.pipeline(NAME, root, front + ours))
  return root


def test_every_stock_and_own_component_completes(run):
  by_node = helpers.executions_by_node(os.path.join(run, 'metadata.sqlite'))
  assert {'Transform', 'Trainer', *chain.CHAIN} <= set(by_node)
  for node, executions in by_node.items():
    assert executions[-1].last_known_state == metadata_store_pb2.Execution.COMPLETE, node


def test_the_stock_teacher_is_read_and_the_class_count_comes_from_its_width(run):
  with open(os.path.join(chain.output_uri(run, NAME, 'Distiller', 'distillery.ModelMetrics'),
                         'metrics.json')) as handle:
    metrics = json.load(handle)
  assert metrics['teacher_formats'] == ['saved_model']
  assert metrics['teacher_output_kinds'] == ['logits']
  assert metrics['num_classes'] == 3 and metrics['num_classes_source'] == 'teacher'
  assert metrics['teacher_accuracy'][0] > metrics['majority_accuracy'] + 0.2


def test_the_pushed_model_answers_raw_serialized_examples(run):
  run_summary = summary.summarize_run(os.path.join(run, 'metadata.sqlite'), NAME)
  assert run_summary.gate_decision['split'] == 'eval'  # No test split here.
  pushed = run_summary.pushed_destination
  assert pushed.startswith(os.path.join(run, 'serving'))
  raw = evaluation.read_serialized_examples(os.path.join(
      chain.output_uri(run, NAME, 'ImportExampleGen', 'Examples'), 'Split-eval', '*'), limit=40)
  serving = [measuring.strip_feature(example, 'species') for example in raw]
  labels = np.array([tf.train.Example.FromString(example).features.feature['species']
                     .int64_list.value[0] for example in raw])
  if os.path.exists(os.path.join(pushed, predict.MODEL_FILE_NAME)):
    classes = predict.load_tflite(pushed).predict_raw(serving)['classes']
  else:
    classes = tf.saved_model.load(pushed).signatures['serving_default'](
        examples=tf.constant(serving))['classes'].numpy()
  assert classes.shape == (40,)
  assert np.mean(classes == labels) > 0.6


def test_the_int8_model_really_holds_int8_tensors(run):
  folder = os.path.join(chain.output_uri(run, NAME, 'Quantizer', 'Model'), 'Format-Serving')
  with open(os.path.join(folder, predict.MODEL_FILE_NAME), 'rb') as handle:
    assert conversion.tensor_dtypes(handle.read()).get('int8', 0) > 0
  assert os.path.isdir(os.path.join(folder, predict.TRANSFORM_GRAPH_FOLDER))


def test_the_stock_transform_ships_inside_one_flatbuffer_over_raw_columns(run):
  """penguin_utils_keras.py's z-scores convert: model_raw.tflite answers raw rows alone."""
  folder = os.path.join(chain.output_uri(run, NAME, 'Quantizer', 'Model'), 'Format-Serving')
  with open(os.path.join(folder, predict.SERVING_FILE_NAME)) as handle:
    serving = json.load(handle)
  assert serving['raw_model_refused'] is None
  assert [entry['column'] for entry in serving['raw_model']['inputs']] == [
      'body_mass_g', 'culmen_depth_mm', 'culmen_length_mm', 'flipper_length_mm']
  raw = evaluation.read_serialized_examples(os.path.join(
      chain.output_uri(run, NAME, 'ImportExampleGen', 'Examples'), 'Split-eval', '*'), limit=60)
  expected = predict.load_tflite(folder).predict_raw(raw)['classes']
  rows = [{name: (feature.float_list.value or feature.int64_list.value)[0] for name, feature in
           tf.train.Example.FromString(example).features.feature.items() if name != 'species'}
          for example in raw]
  got = predict.load_raw_flatbuffer(folder).predict_rows(rows)['classes']
  assert np.mean(got == expected) >= 0.95
