"""model_raw.tflite: raw columns in, transform inside, run where TensorFlow is not installed.

One digits pipeline (teacher, student, pruned, int8 of both, gate, push) gives the
pushed folder (the 610-parameter student ships no smaller pruned, so the Pruner hands it
on unchanged and the gate leaves the pruned pair out); a fresh virtual environment with only LiteRT and numpy (from
requirements/litert.txt) runs its flatbuffer on raw test rows.
"""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tfx import v1 as tfx

from tfx_distillery.components.common import evaluation
from tfx_distillery.components.gate import report
from tfx_distillery.components.quantizer import predict
from tfx_distillery.components.quantizer import raw_model
from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import pipeline
from tfx_distillery.pipelines import summary
from tests import helpers
from tests.reliability import digits_pipeline

PIPELINE_NAME = 'raw-flatbuffer-digits'
REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
QUANTIZER_README = os.path.join(REPOSITORY, 'components', 'quantizer', 'README.md')
TEST_ROWS = 150


@pytest.fixture(scope='module')
def digits_run(tmp_path_factory):
  workspace = str(tmp_path_factory.mktemp('digits'))
  digits_pipeline.write_data(workspace, rows=900)
  digits = datasets.resolve('digits', os.path.join(workspace, 'unused'))
  metadata_path = os.path.join(workspace, 'metadata.sqlite')
  tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
      pipeline_name=PIPELINE_NAME, pipeline_root=os.path.join(workspace, 'root'),
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          metadata_path),
      components=pipeline.create_components(
          data_root=os.path.join(workspace, 'data'),
          transform_module_file=digits.transform_module_file,
          teacher_module_file=digits.teacher_module_file,
          # The 610-parameter student, not the run's CNN: it ships no smaller pruned.
          student_module_file=datasets.module_file('digits_student'),
          label_column=digits.label_column, schema_path=digits.schema_file,
          serving_model_dir=os.path.join(workspace, 'serving'), train_steps=150,
          eval_steps=2, student_train_steps=300, num_shards=2, pruning_steps=100,
          pruning={'sparsities': (0.8,)}, max_accuracy_drop=1.0)))
  return workspace, summary.summarize_run(metadata_path, PIPELINE_NAME)


def raw_rows(workspace: str, count: int):
  """Raw test rows as a device has them: {column: value}, the label apart."""
  serialized = evaluation.read_serialized_examples(os.path.join(
      workspace, 'root', 'CsvExampleGen', 'examples', '*', 'Split-test', '*'), limit=count)
  rows, labels = [], []
  for example in serialized:
    features = tf.train.Example.FromString(example).features.feature
    row = {name: int(feature.int64_list.value[0]) for name, feature in features.items()}
    labels.append(row.pop('label'))
    rows.append(row)
  return serialized, rows, np.array(labels)


@pytest.fixture(scope='module')
def litert_python(tmp_path_factory):
  """A fresh environment with requirements/litert.txt only: LiteRT and numpy, no TensorFlow."""
  environment = str(tmp_path_factory.mktemp('litert') / 'venv')
  subprocess.run([sys.executable, '-m', 'venv', environment], check=True, timeout=300)
  python = os.path.join(environment, 'bin', 'python')
  install = subprocess.run(
      [python, '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r',
       os.path.join(REPOSITORY, 'requirements', 'litert.txt')],
      capture_output=True, text=True, timeout=600, check=False)
  assert install.returncode == 0, install.stderr[-3000:]
  return python


def readme_example() -> str:
  """The Quantizer README's LiteRT example (the ```python block after 'Without TensorFlow')."""
  with open(QUANTIZER_README) as handle:
    text = handle.read()
  return re.search(r'Without TensorFlow.*?```python\n(.*?)```', text, re.S).group(1)


@pytest.mark.e2e  # long: make test-e2e
def test_the_gate_measures_the_raw_flatbuffer_and_keeps_the_folder_figures(digits_run):
  workspace, run_summary = digits_run
  decision = run_summary.gate_decision
  int8 = [candidate for candidate in decision['candidates']
          if candidate['name'].endswith('_full_integer')]
  assert [candidate['name'] for candidate in int8] == ['student_full_integer']
  assert {entry['name'] for entry in decision['left_out']} == {'pruned', 'pruned_full_integer'}
  for candidate in int8:
    path = os.path.join(candidate['model_dir'], predict.RAW_MODEL_FILE_NAME)
    assert candidate['format'] == 'tflite_raw'
    # The size is what a device downloads: the flatbuffer alone, not the folder.
    assert candidate['size_bytes'] == os.path.getsize(path)
    assert candidate['folder']['size_bytes'] > 5 * candidate['size_bytes']
    assert candidate['folder']['format'] == 'tflite'
    assert abs(candidate['accuracy'] - candidate['folder']['accuracy']) <= 0.02
  assert decision['chosen'] in {candidate['name'] for candidate in int8}
  [page_path] = tf.io.gfile.glob(os.path.join(workspace, 'root', 'AccuracyGate', '*', '*',
                                              report.HTML_FILE_NAME))
  with open(page_path) as page:
    assert 'What a device downloads: <code>model_raw.tflite</code>' in page.read()


@pytest.mark.e2e  # long: make test-e2e
def test_the_quantizer_checks_the_raw_flatbuffer_against_the_folder(digits_run):
  workspace, _ = digits_run
  metrics_paths = tf.io.gfile.glob(os.path.join(
      workspace, 'root', 'Quantizer_*', 'metrics', '*', 'metrics.json'))
  checked = 0
  for metrics_path in metrics_paths:
    with open(metrics_path) as handle:
      metrics = json.load(handle)
    if metrics.get('converted') is False:
      continue  # The pruned model's Quantizer: the Pruner handed on the student unchanged.
    checked += 1
    assert metrics['raw_model_refused'] is None
    assert metrics['raw_model']['agreement_with_folder'] >= 0.98
    assert 'FULLY_CONNECTED' in metrics['raw_model']['ops']
    # As accurate as the folder route on the same examples (a pruned model at 80% after 100
    # steps can be worse than the majority class itself; the gate refuses it then).
    assert abs(metrics['raw_model']['accuracy'] - metrics['accuracy']) <= 0.02
    if metrics['input_model']['accuracy'] > metrics['majority_accuracy']:
      assert metrics['raw_model']['accuracy'] > metrics['raw_model']['majority_accuracy']
  # The student's Quantizer converts, whatever the Pruner did: one at least was checked.
  assert checked >= 1, metrics_paths


def latest_output(workspace: str, node: str, key: str) -> str:
  return sorted(tf.io.gfile.glob(os.path.join(workspace, 'root', node, key, '*')),
                key=lambda uri: int(os.path.basename(uri)))[-1]


@pytest.mark.e2e  # long: make test-e2e
def test_a_pruned_model_is_tried_with_the_sparse_encoding_and_kept_only_when_it_wins(
    digits_run, tmp_path):
  # The run's CNN teacher (159 KB in int8) is large enough for pruning to pay: the Pruner and
  # the Quantizer run on it as executors, on the run's own artifacts.
  workspace, _ = digits_run
  from tfx.types import standard_artifacts  # pylint: disable=import-outside-toplevel
  from tfx_distillery.components.common import artifacts  # pylint: disable=import-outside-toplevel
  from tfx_distillery.components.pruner import executor as pruner_executor  # pylint: disable=import-outside-toplevel
  from tfx_distillery.components.quantizer import executor as quantizer_executor  # pylint: disable=import-outside-toplevel
  examples = helpers.artifact(standard_artifacts.Examples, latest_output(
      workspace, 'IngestionTransform', 'transformed_examples'))
  examples.split_names = '["train", "eval", "test"]'
  inputs = {'examples': [examples],
            'transform_graph': [helpers.artifact(standard_artifacts.TransformGraph, latest_output(
                workspace, 'IngestionTransform', 'transform_graph'))]}
  teacher = helpers.artifact(standard_artifacts.Model,
                             latest_output(workspace, 'DistributedTrainer', 'model'))
  pruned = helpers.artifact(standard_artifacts.Model, str(tmp_path / 'pruned'))
  pruner_executor.Executor().Do(
      {**inputs, 'model': [teacher]},
      {'pruned_model': [pruned],
       'metrics': [helpers.artifact(artifacts.ModelMetrics, str(tmp_path / 'pruning'))]},
      {'target_sparsity': 0.8, 'schedule': 'polynomial', 'begin_step': 0, 'end_step': -1,
       'sparsities': '[0.8]', 'label_column': 'label', 'max_layer_accuracy_drop': 1.0,
       'train_args': json.dumps({'num_steps': 50}), 'eval_args': json.dumps({'num_steps': 1}),
       'custom_config': None})
  assert artifacts.not_a_candidate(pruned) is None
  quantized = helpers.artifact(standard_artifacts.Model, str(tmp_path / 'int8'))
  metrics_artifact = helpers.artifact(artifacts.ModelMetrics, str(tmp_path / 'int8-metrics'))
  quantizer_executor.Executor().Do(
      {**inputs, 'model': [pruned]}, {'quantized_model': [quantized],
                                      'metrics': [metrics_artifact]},
      {'mode': 'full_integer', 'io_type': 'float32', 'representative_samples': 50,
       'qat_steps': 1, 'preserve_sparsity': 0, 'eval_examples': 300, 'latency_runs': 5,
       'label_column': 'label'})
  with open(os.path.join(metrics_artifact.uri, 'metrics.json')) as handle:
    metrics = json.load(handle)
  sparse = metrics['sparse_encoding']
  assert metrics['zero_weight_share'] >= 0.7 and sparse is not None
  wins = (sparse['sparse_bytes'] < sparse['dense_bytes'] and sparse['agreement'] >= 0.995)
  assert sparse['kept'] == wins, sparse
  shipped = sparse['sparse_bytes'] if sparse['kept'] else sparse['dense_bytes']
  assert metrics['flatbuffer_bytes'] == shipped
  assert sparse['dense_latency_ms'] > 0 and sparse['sparse_latency_ms'] > 0
  [student_metrics] = tf.io.gfile.glob(os.path.join(
      workspace, 'root', 'Quantizer_student_full_integer', 'metrics', '*', 'metrics.json'))
  with open(student_metrics) as handle:
    assert json.load(handle)['sparse_encoding'] is None  # A dense model is not tried.


@pytest.mark.e2e  # long: make test-e2e
def test_the_pushed_flatbuffer_runs_with_litert_alone_and_agrees_with_tensorflow(
    digits_run, litert_python, tmp_path):
  workspace, run_summary = digits_run
  pushed = run_summary.pushed_destination
  assert os.path.exists(os.path.join(pushed, predict.RAW_MODEL_FILE_NAME))
  serialized, rows, labels = raw_rows(workspace, TEST_ROWS)
  expected = predict.load_tflite(pushed).predict_raw(serialized)['classes']
  (tmp_path / 'rows.json').write_text(json.dumps(rows))
  script = (
      'import json, sys\n'
      'try:\n'
      '  import tensorflow\n'
      '  sys.exit("tensorflow is importable here")\n'
      'except ImportError:\n'
      '  pass\n'
      'import predict\n'
      'assert predict.interpreter_class().__module__.startswith("ai_edge_litert")\n'
      'rows = json.load(open(sys.argv[1]))\n'
      'classes = predict.load_raw_flatbuffer(".").predict_rows(rows)["classes"]\n'
      'print(json.dumps(classes.tolist()))\n')
  result = subprocess.run([litert_python, '-c', script, str(tmp_path / 'rows.json')],
                          cwd=pushed, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  got = np.array(json.loads(result.stdout.strip().splitlines()[-1]))
  assert got.shape == expected.shape
  assert np.mean(got == expected) >= 0.98
  assert np.mean(got == labels) > 0.3  # Ten classes: far above chance.


@pytest.mark.e2e  # long: make test-e2e
def test_the_readme_example_runs_with_litert_alone(digits_run, litert_python, tmp_path):
  workspace, run_summary = digits_run
  pushed = run_summary.pushed_destination
  serialized, rows, _ = raw_rows(workspace, 1)
  expected = predict.load_tflite(pushed).predict_raw(serialized)['classes'][0]
  script = (f'folder = {pushed!r}\nrow = {rows[0]!r}\n' + readme_example())
  result = subprocess.run([litert_python, '-c', script], capture_output=True, text=True,
                          timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().splitlines()[-1] == str(expected)


@pytest.mark.e2e  # long: make test-e2e
def test_a_missing_column_is_refused_by_name(digits_run):
  _, run_summary = digits_run
  predictor = predict.load_raw_flatbuffer(run_summary.pushed_destination)
  with pytest.raises(ValueError, match="raw column 'pixel_00' is missing"):
    predictor.row_inputs({'pixel_01': 3})


def test_a_transform_op_without_a_tflite_builtin_is_refused_by_name(tmp_path):
  """tft.bucketize applies its boundaries with tf.UpperBound, which TFLite lacks."""
  import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top

  def preprocessing_fn(inputs):
    return {'x1_xf': tft.bucketize(inputs['x1'], 4), 'species': inputs['species']}

  spec = {'x1': helpers.SYNTHETIC_RAW_SPEC['x1'], 'species': helpers.SYNTHETIC_RAW_SPEC['species']}
  rows = [{'x1': row['x1'], 'species': row['species']} for row in helpers.synthetic_rows(100)]
  output, _ = helpers.run_transform(preprocessing_fn, rows, spec, str(tmp_path))
  ids = tf_keras.Input(shape=(), dtype='int64', name='x1_xf')
  model = tf_keras.Model({'x1_xf': ids}, tf_keras.layers.Dense(1)(
      tf_keras.layers.Flatten()(tf_keras.layers.Embedding(4, 2)(ids))))
  with pytest.raises(raw_model.RawInputUnsupported,
                     match=r'no TFLite builtin.*UpperBound.*folder route'):
    raw_model.convert(model, output, 'species')


def test_raw_inputs_name_each_column_and_say_which_may_be_missing(data):
  import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
  inputs = raw_model.raw_inputs(tft.TFTransformOutput(data[1].uri), 'species')
  assert 'species' not in {entry['column'] for entry in inputs}
  assert {entry['column'] for entry in inputs} == set(helpers.SYNTHETIC_RAW_SPEC) - {'species'}
  for entry in inputs:
    assert entry['name'] == raw_model.input_name(entry['column'])
    # The synthetic spec is FixedLenFeature([]): parse_example gives [batch], so [1].
    assert entry['shape'] == [1] and not entry['optional']


def test_strings_are_looked_up_in_a_vocabulary_inside_the_flatbuffer(data, teacher):
  """Our tabular transform: z-scores, and a vocabulary in the graph for the column `colour`."""
  import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  output = tft.TFTransformOutput(data[1].uri)
  model_dir = os.path.join(teacher.uri, 'Format-Serving')
  flatbuffer = raw_model.convert(tf_keras.models.load_model(model_dir, compile=False), output,
                                 'species')
  assert 'EQUAL' in raw_model.transform_ops(flatbuffer)  # Strings compared with the vocabulary.
  inputs = raw_model.raw_inputs(output, 'species')
  assert {entry['column']: entry['dtype'] for entry in inputs}['colour'] == 'string'
  serialized = [helpers.serialize({key: value for key, value in row.items() if key != 'species'})
                for row in data[2][:100]]
  runner = tf.lite.Interpreter(model_content=flatbuffer).get_signature_runner()
  scores = np.concatenate([runner(**row)['logits'] for row in raw_model.raw_rows(serialized,
                                                                                 inputs)])
  got = (scores[:, 0] > 0).astype(np.int64)
  expected = tf.saved_model.load(model_dir).signatures['serving_default'](
      examples=tf.constant(serialized))['classes'].numpy().reshape(-1)
  assert np.mean(got == expected) >= 0.99


@pytest.mark.e2e  # long: make test-e2e
def test_the_int8_flatbuffer_keeps_the_transform_in_float(tmp_path):
  """tft.scale_to_z_score ends in where(std > 0, (x - mean) / std, x - mean), and TFLite's
  int8 SELECT gives `x - mean` the z-score's range: quantized, it was clipped before the
  division. Only the model's ops are int8, so the classes match the float flatbuffer's."""
  import tensorflow_transform as tft  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top

  def preprocessing_fn(inputs):
    # x - mean spans about +-3000, the z-score about +-3.
    return {'x1_xf': tft.scale_to_z_score(inputs['x1'] * 1000.0), 'species': inputs['species']}

  spec = {'x1': helpers.SYNTHETIC_RAW_SPEC['x1'], 'species': helpers.SYNTHETIC_RAW_SPEC['species']}
  rows = [{'x1': row['x1'], 'species': row['species']} for row in helpers.synthetic_rows(200)]
  output, _ = helpers.run_transform(preprocessing_fn, rows, spec, str(tmp_path))
  feature = tf_keras.Input(shape=(1,), name='x1_xf')
  # Class 0 where the z-score is above 0.5.
  logits = tf_keras.layers.Dense(2, kernel_initializer=tf_keras.initializers.Constant([[1, -1]]),
                                 bias_initializer=tf_keras.initializers.Constant([-0.5, 0.5]))
  model = tf_keras.Model({'x1_xf': feature}, logits(feature), name='threshold_model')
  inputs = raw_model.raw_inputs(output, 'species')
  serialized = [helpers.serialize({'x1': row['x1']}) for row in rows]
  raw = raw_model.raw_rows(serialized, inputs)

  def classes(flatbuffer):
    runner = tf.lite.Interpreter(model_content=flatbuffer).get_signature_runner()
    return np.array([int(np.argmax(runner(**row)['logits'])) for row in raw])

  float_classes = classes(raw_model.convert(model, output, 'species'))
  assert 0.15 < np.mean(float_classes == 0) < 0.5  # Both classes occur.
  int8 = raw_model.convert(model, output, 'species', 'full_integer', lambda: iter(raw))
  assert np.mean(classes(int8) == float_classes) >= 0.98
  # The model's dense layer is int8 all the same; the z-score's SELECT stays in float.
  interpreter = tf.lite.Interpreter(model_content=int8)
  # pylint: disable=protected-access
  operations = {op['op_name']: op['inputs'] for op in interpreter._get_ops_details()}

  def dtype(op_name, position):
    return interpreter._get_tensor_details(operations[op_name][position], 0)['dtype']

  assert dtype('FULLY_CONNECTED', 0) == dtype('FULLY_CONNECTED', 1) == np.int8  # input, kernel
  assert dtype('SELECT', 2) == np.float32  # select(std > 0, z, x - mean): x - mean.
