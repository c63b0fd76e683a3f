"""The one measuring path: repeatable, kind-independent, and sizes that include the transform."""

import os

import numpy as np

import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras

from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.components.quantizer import conversion
from tfx_distillery.components.quantizer import executor as quantizer_executor
from tfx_distillery.components.quantizer import predict
from tests import helpers


@pytest.fixture(scope='module')
def raw_examples_uri(data, tmp_path_factory):
  """The synthetic eval rows as ExampleGen lays raw examples out (label column included)."""
  _, _, rows = data
  return helpers.write_raw_examples(str(tmp_path_factory.mktemp('raw')), {'eval': rows})


@pytest.fixture(scope='module')
def evaluation_set(data, raw_examples_uri):
  _, graph, _ = data
  return measuring.from_raw_examples(raw_examples_uri, 'eval', tft.TFTransformOutput(graph.uri),
                                     'label', 'species')


@pytest.fixture(scope='module')
def float_tflite_dir(data, teacher, tmp_path_factory):
  _, graph, _ = data
  model = tf_keras.models.load_model(evaluation.serving_model_path(teacher.uri), compile=False)
  folder = str(tmp_path_factory.mktemp('tflite') / 'float32')
  quantizer_executor.write_tflite_folder(folder, conversion.convert(model), {
      'format': 'tflite', 'output_kind': 'logits', 'label_column': 'species',
      'transform_graph': predict.TRANSFORM_GRAPH_FOLDER}, graph.uri)
  return folder


def test_measuring_the_same_model_twice_gives_the_same_figures(teacher, evaluation_set):
  model_dir = evaluation.serving_model_path(teacher.uri)
  first = measuring.measure(model_dir, evaluation_set, latency_runs=5)
  second = measuring.measure(model_dir, evaluation_set, latency_runs=5)
  assert first['accuracy'] == second['accuracy'] > first['majority_accuracy']
  assert first['examples'] == evaluation_set.size == 200
  assert first['split'] == 'eval' and first['format'] == 'keras'


def test_a_saved_model_and_its_float_tflite_agree_on_the_same_examples(
    teacher, evaluation_set, float_tflite_dir):
  keras_figures = measuring.measure(evaluation.serving_model_path(teacher.uri), evaluation_set, 5)
  tflite_figures = measuring.measure(float_tflite_dir, evaluation_set, 5)
  assert tflite_figures['format'] == 'tflite'
  assert abs(keras_figures['accuracy'] - tflite_figures['accuracy']) <= 0.002
  assert keras_figures['majority_accuracy'] == tflite_figures['majority_accuracy']


def test_a_tflite_size_counts_its_transform_graph(data, float_tflite_dir):
  _, graph, _ = data
  flatbuffer = os.path.getsize(os.path.join(float_tflite_dir, predict.MODEL_FILE_NAME))
  transform_graph = evaluation.directory_bytes(graph.uri)
  assert measuring.size_bytes(float_tflite_dir) >= flatbuffer + transform_graph


def test_latency_pays_for_the_transform_of_a_raw_example(teacher, evaluation_set):
  scorer = measuring.load_scorer(evaluation.serving_model_path(teacher.uri))
  calls = []
  transform = evaluation_set.transform

  def counting_transform(examples):
    calls.append(examples)
    return transform(examples)

  timed = measuring.EvaluationSet(evaluation_set.features, evaluation_set.labels, 'eval',
                                  evaluation_set.raw_examples, counting_transform)
  measuring.latency_ms(scorer, timed, runs=3)
  assert len(calls) == 4  # A warm-up call and three timed ones, each through the transform.
  assert b'species' not in calls[0].numpy()[0]  # Serving requests lack the label column.


def test_a_copied_tflite_folder_serves_with_its_own_transform_graph(
    float_tflite_dir, data, tmp_path):
  _, _, rows = data
  first, copied = str(tmp_path / 'first'), str(tmp_path / 'elsewhere')
  quantizer_executor.copy_folder(float_tflite_dir, first)
  quantizer_executor.copy_folder(first, copied)
  tf.io.gfile.rmtree(first)
  assert not os.path.isabs(predict.TFLitePredictor(copied).serving['transform_graph'])
  serialized = [helpers.serialize({key: value for key, value in row.items() if key != 'species'})
                for row in rows[:10]]
  expected = predict.TFLitePredictor(float_tflite_dir).predict_raw(serialized)['classes']
  assert (predict.TFLitePredictor(copied).predict_raw(serialized)['classes'] == expected).all()


def test_one_example_above_the_majority_class_is_noise_and_a_clear_lead_is_not():
  # TFX's taxi pipeline with a weak teacher: 0.7750 against a majority class of 0.7745 on
  # 2,000 examples is one example, a constant predictor in all but name.
  labels = np.array([0] * 1549 + [1] * 451)
  majority = measuring.majority_correct(labels)
  assert measuring.majority_accuracy(labels) == pytest.approx(0.7745)
  one_ahead = majority.copy()
  one_ahead[1549] = True
  assert measuring.paired_comparison(one_ahead, majority)['within_noise']
  clearly_ahead = majority.copy()
  clearly_ahead[1549:1600] = True
  clearly_ahead[:10] = False
  comparison = measuring.paired_comparison(clearly_ahead, majority)
  assert not comparison['within_noise'] and (comparison['wins'], comparison['losses']) == (51, 10)


def test_a_drop_of_exactly_the_budget_passes_and_one_example_more_does_not():
  # One example of 200 at a budget of 0.005: 0.985 - 0.98 is 0.0050000000000000044 in floating
  # point, which refused the Quantizer's float-layer recovery at exactly its budget.
  assert 0.985 - 0.98 > 0.005
  assert measuring.within_drop(0.985, 0.98, 0.005)
  assert not measuring.within_drop(0.985, 0.975, 0.005)
  assert measuring.within_drop(0.5, 0.9, 0.0)  # Better than the baseline always passes.
  assert not measuring.within_drop(0.9, 0.9 - 1e-6, 0.0)


def test_a_choice_at_the_edge_of_the_budget_with_the_gates_margin_passes_the_gate_in_975_of_1000():
  # Eval and test draws of one model against one teacher that agree in expectation: the
  # two disagree on 2% of 3,000 rows, and the model loses more of those than it wins by a
  # true drop drawn anywhere from -0.01 to 0.02. The runs whose eval drop plus margin
  # lands just inside the budget (the hardest a choice keeps) pass on test in at least
  # 97.5% of cases; with one standard error as the margin, in about 90%.
  generator = np.random.default_rng(0)
  budget, rows, disagree = 0.01, 3000, 0.02

  def draw(true_drop):
    discordant = generator.binomial(rows, disagree)
    losses = generator.binomial(discordant, (1 + true_drop / disagree) / 2)
    model, teacher = np.ones(rows, bool), np.ones(rows, bool)
    model[:losses] = False
    teacher[losses:discordant] = False
    return model, teacher

  at_the_edge = {'gate margin': [], 'one standard error': []}
  for _ in range(8000):
    true_drop = generator.uniform(-0.01, 0.02)
    figures = measuring.gate_margin(*draw(true_drop), rows)
    test_model, test_teacher = draw(true_drop)
    passes = measuring.within_drop(np.mean(test_teacher), np.mean(test_model), budget)
    for name, margin in (('gate margin', figures['margin']),
                         ('one standard error', figures['standard_error'])):
      if budget - 0.002 <= figures['drop'] + margin <= budget:
        at_the_edge[name].append(passes)
  assert len(at_the_edge['gate margin']) > 300
  assert np.mean(at_the_edge['gate margin']) >= 0.975, np.mean(at_the_edge['gate margin'])
  assert np.mean(at_the_edge['one standard error']) < 0.95


def test_the_margin_is_none_where_the_gate_judges_on_eval_and_the_chance_follows_the_normal():
  teacher = np.array([True] * 90 + [False] * 10)
  model = teacher.copy()
  model[:2] = False
  figures = measuring.gate_margin(model, teacher, None)
  assert figures['drop'] == pytest.approx(0.02) and figures['margin'] == 0
  assert measuring.chance_of_passing(figures, 0.02) == 1.0
  assert measuring.chance_of_passing(figures, 0.01) == 0.0
  figures = measuring.gate_margin(model, teacher, 100)
  assert figures['margin'] == pytest.approx(1.959964 * figures['standard_error'], rel=1e-5)
  assert measuring.chance_of_passing(figures, 0.02) == pytest.approx(0.5)


def test_the_test_split_is_counted_beside_eval_up_to_what_the_gate_measures(tmp_path):
  for split, rows in (('eval', 5), ('test', 7)):
    folder = tmp_path / f'Split-{split}'
    folder.mkdir()
    with tf.io.TFRecordWriter(str(folder / 'data.gz'), 'GZIP') as writer:
      for _ in range(rows):
        writer.write(b'x')
  pattern = str(tmp_path / 'Split-eval' / '*')
  assert measuring.test_split_size(pattern, 100) == 7
  assert measuring.test_split_size([pattern], 3) == 3
  assert measuring.test_split_size(str(tmp_path / 'Split-train' / '*'), 100) is None
