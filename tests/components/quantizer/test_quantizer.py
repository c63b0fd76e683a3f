"""Quantizer: really int8, serving raw examples, every mode measured, sparsity kept, bad input."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
import tfx as tfx_package
from tfx import v1 as tfx
from tfx.utils import import_utils
from tfx.types import standard_artifacts

from tfx_distillery.components import Quantizer
from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import measuring
from tfx_distillery.components.pruner import executor as pruner_executor
from tfx_distillery.components.quantizer import conversion
from tfx_distillery.components.quantizer import executor as quantizer_executor
from tfx_distillery.components.quantizer import predict
from tests import helpers


def run_quantizer(data, model, output_dir, mode, quantized_artifacts=None, **properties):
  examples, graph, _ = data
  quantized = helpers.artifact(standard_artifacts.Model, os.path.join(output_dir, mode))
  if quantized_artifacts is not None:
    quantized_artifacts.append(quantized)
  metrics = helpers.artifact(artifacts.ModelMetrics, os.path.join(output_dir, mode + '-m'))
  exec_properties = {'mode': mode, 'io_type': 'float32', 'representative_samples': 50,
                     'qat_steps': 20, 'preserve_sparsity': 0, 'eval_examples': 200,
                     'latency_runs': 20, 'label_column': 'species'}
  exec_properties.update(properties)
  quantizer_executor.Executor().Do(
      {'model': [model], 'examples': [examples], 'transform_graph': [graph]},
      {'quantized_model': [quantized], 'metrics': [metrics]}, exec_properties)
  with open(os.path.join(metrics.uri, 'metrics.json')) as handle:
    return os.path.join(quantized.uri, 'Format-Serving'), json.load(handle)


def raw_examples(data, count):
  return [helpers.serialize({key: value for key, value in row.items() if key != 'species'})
          for row in data[2][:count]]


def test_full_integer_tensors_really_are_int8_and_it_serves_raw_examples(
    data, teacher, tmp_path):
  # A built-in student's plan on the input model is carried to the gate's report.
  student, quantized = helpers.artifact(standard_artifacts.Model, teacher.uri), []
  student.set_string_custom_property(artifacts.FEATURE_PLAN_PROPERTY, '{"x1_xf": "number"}')
  model_dir, metrics = run_quantizer(data, student, str(tmp_path), 'full_integer',
                                     quantized_artifacts=quantized, io_type='int8')
  assert quantized[0].get_string_custom_property(
      artifacts.FEATURE_PLAN_PROPERTY) == '{"x1_xf": "number"}'
  assert sorted(os.listdir(model_dir)) == ['predict.py', 'serving.json', 'shapes.py', 'tflite',
                                           'transform_graph']
  interpreter = tf.lite.Interpreter(model_path=os.path.join(model_dir, predict.MODEL_FILE_NAME))
  dtypes = {np.dtype(detail['dtype']).name for detail in interpreter.get_tensor_details()}
  assert 'float32' not in dtypes and 'int8' in dtypes
  for detail in interpreter.get_input_details():
    if detail['name'].endswith(('x1_xf:0', 'x2_xf:0')):  # The float features.
      assert detail['dtype'] == np.int8
  assert all(detail['dtype'] == np.int8 for detail in interpreter.get_output_details())
  # The Keras model's own predictions are the reference.
  loaded = tf.saved_model.load(os.path.join(teacher.uri, 'Format-Serving'))
  expected = loaded.signatures['serving_default'](
      examples=tf.constant(raw_examples(data, 100)))['classes'].numpy()
  got = predict.TFLitePredictor(model_dir).predict_raw(raw_examples(data, 100))['classes']
  assert np.mean(got == expected) >= 0.95
  assert metrics['accuracy'] > metrics['majority_accuracy']
  assert metrics['size_bytes'] < metrics['float32_tflite']['size_bytes']
  # The float32 conversion is the same function as the Keras model: equal accuracy on the
  # same examples, through the same measuring path.
  assert abs(metrics['float32_tflite']['accuracy'] - metrics['input_model']['accuracy']) <= 0.01
  assert metrics['float32_tflite']['examples'] == metrics['input_model']['examples'] > 0


@pytest.mark.parametrize('mode', ['dynamic_range', 'float16'])
def test_weight_only_modes_shrink_the_model_and_keep_its_accuracy(data, teacher, tmp_path,
                                                                  mode):
  _, metrics = run_quantizer(data, teacher, str(tmp_path), mode)
  assert metrics['size_ratio'] < 0.8
  assert abs(metrics['accuracy_drop']) <= 0.02
  # The weights really are stored in the mode's type, and activations stay float.
  stored = {'dynamic_range': 'int8', 'float16': 'float16'}[mode]
  assert metrics['tensor_dtypes'].get(stored, 0) > 0
  assert metrics['tensor_dtypes'].get('float32', 0) > 0


@pytest.mark.e2e  # long: make test-e2e
def test_qat_with_preserve_sparsity_keeps_a_pruned_model_sparse_in_int8(
    data, teacher, tmp_path):
  examples, graph, _ = data
  pruned = helpers.artifact(standard_artifacts.Model, str(tmp_path / 'pruned'))
  pruner_executor.Executor().Do(
      {'model': [teacher], 'examples': [examples], 'transform_graph': [graph]},
      {'pruned_model': [pruned],
       'metrics': [helpers.artifact(artifacts.ModelMetrics, str(tmp_path / 'pm'))]},
      {'target_sparsity': 0.8, 'schedule': 'constant', 'begin_step': 0, 'end_step': -1,
       'sparsities': '[0.8]', 'label_column': 'species',
       'train_args': json.dumps({'num_steps': 40}), 'eval_args': json.dumps({'num_steps': 1}),
       'custom_config': json.dumps({'batch_size': 32})})
  model_dir, metrics = run_quantizer(data, pruned, str(tmp_path), 'qat', preserve_sparsity=1,
                                     io_type='int8')
  assert 'float32' not in metrics['tensor_dtypes']
  interpreter = tf.lite.Interpreter(model_path=os.path.join(model_dir, predict.MODEL_FILE_NAME))
  interpreter.allocate_tensors()
  kernels = []
  for detail in interpreter.get_tensor_details():
    if detail['dtype'] == np.int8 and len(detail['shape']) == 2 and np.prod(
        detail['shape']) >= 1000:
      try:
        kernels.append(interpreter.get_tensor(detail['index']))
      except ValueError:
        continue  # Activations are not readable after allocation; kernels are.
  assert kernels
  assert max(np.mean(kernel == 0) for kernel in kernels) >= 0.75


@pytest.fixture(scope='module')
def stock_taxi_model():
  """The model of TFX's own taxi module file, unchanged: CategoryEncoding, sigmoid, Reshape."""
  build_keras_model = import_utils.import_func_from_source(os.path.join(
      os.path.dirname(tfx_package.__file__), 'examples', 'chicago_taxi_pipeline',
      'taxi_utils_native_keras.py'), '_build_keras_model')
  return build_keras_model()


def stock_features(model, count=20):
  generator = np.random.default_rng(0)
  for _ in range(count):
    yield {name: (generator.integers(0, 5, size=(1, 1)).astype('int32')
                  if tensor.dtype.is_integer else
                  generator.normal(size=(1, 1)).astype('float32'))
           for name, tensor in zip(model.input_names, model.inputs)}


def test_category_encoding_is_rewritten_to_the_same_values_with_tflite_builtins(
    stock_taxi_model):
  batch = {name: np.concatenate([example[name] for example in
                                 stock_features(stock_taxi_model, 32)])
           for name in stock_taxi_model.input_names}
  rewritten = conversion.tflite_friendly(stock_taxi_model)
  assert not any(isinstance(layer, tf_keras.layers.CategoryEncoding)
                 for layer in rewritten.layers)
  np.testing.assert_array_equal(rewritten(batch).numpy(), stock_taxi_model(batch).numpy())
  assert conversion.ops_without_tflite_kernel(stock_taxi_model) == ['tf.DenseBincount']
  assert conversion.ops_without_tflite_kernel(rewritten) == []


@pytest.mark.parametrize('mode', ['full_integer', 'dynamic_range'])
def test_the_stock_taxi_model_converts_in_int8_modes_without_float_ops(stock_taxi_model, mode):
  flatbuffer = conversion.convert(stock_taxi_model, mode,
                                  lambda: stock_features(stock_taxi_model), strict_int8=True)
  assert conversion.tensor_dtypes(flatbuffer).get('int8', 0) > 0
  assert conversion.int8_weight_share(flatbuffer) > 0.9
  if mode == 'full_integer':
    assert conversion.float_ops(flatbuffer) == []  # Fully int8, so strict_int8 passes.
  runner = tf.lite.Interpreter(model_content=flatbuffer).get_signature_runner()
  inputs = runner.get_input_details()
  outputs = runner(**{name: values.astype(inputs[name]['dtype'])
                      for name, values in next(stock_features(stock_taxi_model, 1)).items()})
  assert next(iter(outputs.values())).shape == (1, 1)


def bincount_model():
  """A model whose op (tf.math.bincount -> tf.DenseBincount) has no TFLite kernel at all."""
  ids = tf_keras.Input(shape=(3,), dtype='int32', name='ids')
  counts = tf_keras.layers.Lambda(lambda values: tf.cast(tf.math.bincount(
      values, minlength=5, maxlength=5, axis=-1), tf.float32))(ids)
  counts = tf_keras.layers.Reshape((5,))(counts)  # bincount leaves the width unknown.
  return tf_keras.Model({'ids': ids}, tf_keras.layers.Dense(2)(counts))


def test_an_op_with_no_tflite_kernel_runs_as_flex_in_weight_only_modes():
  model = bincount_model()
  assert conversion.ops_without_tflite_kernel(model) == ['tf.DenseBincount']
  flatbuffer = conversion.convert(model, 'dynamic_range')
  assert 'FlexDenseBincount' in conversion.float_ops(flatbuffer)


@pytest.mark.parametrize('strict_int8', [False, True])
def test_full_integer_refuses_an_op_with_no_tflite_kernel_by_name(strict_int8):
  # TF 2.16's calibrator would crash the process on the Flex op; it is refused first.
  model = bincount_model()
  ids = np.random.default_rng(0).integers(0, 5, size=(20, 1, 3)).astype('int32')
  with pytest.raises(conversion.Int8Unsupported, match=r"'full_integer'.*tf\.DenseBincount"):
    conversion.convert(model, 'full_integer', lambda: ({'ids': row} for row in ids),
                       strict_int8=strict_int8)


def small_model(seed):
  tf_keras.utils.set_random_seed(seed)
  inputs = tf_keras.Input((3,), name='x')
  return tf_keras.Model({'x': inputs}, tf_keras.layers.Dense(2)(inputs))


def test_a_float_conversion_is_made_once_per_model_and_weights(monkeypatch, tmp_path):
  # The full integer modes convert to float first (to find ops with no kernel), the
  # Quantizer's float reference is that same conversion, and the Pruner and Quantizers
  # convert the same saved model in one LocalDagRunner process: it is made once.
  model = small_model(0)
  made = []
  original = conversion._converter  # pylint: disable=protected-access

  def counting(*args):
    made.append(args)
    return original(*args)

  monkeypatch.setattr(conversion, '_converter', counting)
  assert conversion.ops_without_tflite_kernel(model) == []
  first = conversion.convert(model)
  assert len(made) == 1
  assert conversion.convert(model) == first and len(made) == 1
  model.save(str(tmp_path / 'saved'), save_format='tf')
  assert conversion.convert(tf_keras.models.load_model(str(tmp_path / 'saved'),
                                                       compile=False)) == first
  assert len(made) == 1
  # New weights are a new model to convert.
  model.set_weights([weight + 1.0 for weight in model.get_weights()])
  changed = conversion.convert(model)
  assert len(made) == 2 and changed != first
  assert conversion.convert(small_model(1)) != changed and len(made) == 3


def test_a_conversion_saves_the_model_once_without_layer_traces_to_the_same_flatbuffer(
    monkeypatch):
  # The converter's own route saves the model, with a trace of every layer's call, for each
  # conversion it makes; ours saves it once per `convert`, without those traces.
  model = small_model(2)

  def rows():
    for value in np.linspace(-1.0, 1.0, 8, dtype=np.float32):
      yield {'x': np.full([1, 3], value, np.float32)}

  saved, read_from = [], []
  save, converter = conversion._save_for_conversion, conversion._converter  # pylint: disable=protected-access

  def saving(model, directory):
    save(model, directory)
    with open(os.path.join(directory, 'saved_model.pb'), 'rb') as handle:
      saved.append((directory, handle.read()))

  def reading(model, directory, ops):
    read_from.append(directory)
    return converter(model, directory, ops)

  monkeypatch.setattr(conversion, '_save_for_conversion', saving)
  monkeypatch.setattr(conversion, '_converter', reading)
  ours = conversion.convert(model, 'full_integer', rows)
  # The float conversion (ops without a kernel) and the int8 one read one save.
  [(directory, graph)] = saved
  assert read_from == [directory, directory] and not os.path.exists(directory)
  assert b'serving_default' in graph and b'call_and_return_conditional_losses' not in graph

  def refused(model, directory):
    raise NotImplementedError('a layer with no config')

  # A model Keras can not save that way converts the converter's own way, to the same model.
  monkeypatch.setattr(conversion, '_save_for_conversion', refused)
  conversion._float_conversions.clear()  # pylint: disable=protected-access
  read_from.clear()
  theirs = conversion.convert(model, 'full_integer', rows)
  assert read_from == [None, None]

  def described(content):
    interpreter = tf.lite.Interpreter(model_content=content)
    runner = interpreter.get_signature_runner()
    return ([(detail['name'], detail['shape'].tolist(), str(detail['dtype']),
              detail['quantization']) for detail in interpreter.get_tensor_details()],
            [[value.tolist() for value in runner(**row).values()] for row in rows()])

  assert len(ours) == len(theirs) and described(ours) == described(theirs)


def make(**overrides):
  return Quantizer(model=helpers.channel(standard_artifacts.Model),
                   examples=helpers.channel(standard_artifacts.Examples),
                   transform_graph=helpers.channel(standard_artifacts.TransformGraph), **overrides)


def test_a_model_the_pruner_left_out_is_not_converted_again_when_the_chain_asks(
    data, teacher, tmp_path):
  examples, graph, _ = data
  marked = helpers.artifact(standard_artifacts.Model, teacher.uri)
  marked.set_string_custom_property(artifacts.NOT_A_CANDIDATE_PROPERTY,
                                    'pruning did not pay: the input handed on unchanged')
  outputs = {}
  for name, skip in (('skipped', 1), ('converted', 0)):
    quantized = helpers.artifact(standard_artifacts.Model, str(tmp_path / name))
    metrics = helpers.artifact(artifacts.ModelMetrics, str(tmp_path / f'{name}-metrics'))
    quantizer_executor.Executor().Do(
        {'model': [marked], 'examples': [examples], 'transform_graph': [graph]},
        {'quantized_model': [quantized], 'metrics': [metrics]},
        {'mode': 'full_integer', 'io_type': 'float32', 'representative_samples': 20,
         'qat_steps': 20, 'preserve_sparsity': 0, 'eval_examples': 100, 'latency_runs': 5,
         'label_column': 'species', 'skip_not_a_candidate': skip})
    with open(os.path.join(metrics.uri, 'metrics.json')) as handle:
      outputs[name] = (quantized, json.load(handle))
  quantized, metrics = outputs['skipped']
  assert metrics['converted'] is False
  assert not os.path.exists(os.path.join(quantized.uri, 'Format-Serving'))
  assert artifacts.not_a_candidate(quantized) == (
      'pruning did not pay: the input handed on unchanged')
  # Without the chain's flag, a user's only Quantizer still converts the model it is given.
  quantized, metrics = outputs['converted']
  assert os.path.exists(os.path.join(quantized.uri, 'Format-Serving', predict.MODEL_FILE_NAME))
  assert artifacts.not_a_candidate(quantized) is None and metrics['accuracy'] > 0.5


def test_outputs_are_a_quantized_model_and_metrics():
  assert set(make().outputs) == {'quantized_model', 'metrics'}


@pytest.mark.parametrize('overrides,message', [
    ({'mode': 'int4'}, 'mode must be one of'),
    ({'io_type': 'uint8'}, 'io_type must be one of'),
    ({'mode': 'float16', 'io_type': 'int8'}, "io_type 'int8' needs mode"),
    ({'representative_samples': 0}, 'representative_samples must be an integer >= 1'),
    ({'qat_steps': -5}, 'qat_steps must be an integer >= 1'),
    ({'preserve_sparsity': True, 'mode': 'full_integer'}, 'preserve_sparsity=True needs mode'),
    ({'latency_runs': 0}, 'latency_runs must be an integer >= 1'),
    ({'strict_int8': 'yes'}, 'strict_int8 must be True or False'),
    ({'skip_not_a_candidate': 1}, 'skip_not_a_candidate must be True or False'),
    ({'max_accuracy_drop': 2.0}, r'max_accuracy_drop must be a fraction in \[0, 1\]'),
    ({'max_accuracy_drop': True}, r'max_accuracy_drop must be a fraction in \[0, 1\]'),
    ({'label_key': ''}, 'label_key must name the transformed label feature'),
])
def test_bad_arguments_fail_at_construction_naming_the_parameter(overrides, message):
  with pytest.raises(ValueError, match=message):
    make(**overrides)


def test_a_copied_folder_serves_with_its_own_predict_and_shapes_outside_the_package(
    data, teacher, tmp_path):
  model_dir, _ = run_quantizer(data, teacher, str(tmp_path), 'full_integer')
  examples = raw_examples(data, 20)
  expected = predict.load_tflite(model_dir).predict_raw(examples)['classes']
  copy = tmp_path / 'copied'
  quantizer_executor.copy_folder(model_dir, str(copy))
  (tmp_path / 'examples.json').write_text(json.dumps([example.hex() for example in examples]))
  # tfx_distillery is blocked: predict.py must find shapes.py beside it.
  script = ('import json, sys; sys.modules["tfx_distillery"] = None; import predict; '
            'examples = [bytes.fromhex(x) for x in json.load(open(sys.argv[1]))]; '
            'print(json.dumps(predict.load_tflite(".").predict_raw(examples)["classes"].tolist()))')
  result = subprocess.run([sys.executable, '-c', script, str(tmp_path / 'examples.json')],
                          cwd=copy, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 0, result.stderr[-2000:]
  assert json.loads(result.stdout.strip().splitlines()[-1]) == expected.tolist()


def raw_examples_artifact(output_dir):
  """ExampleGen's output for the synthetic rows `data` was transformed from: raw, label kept."""
  rows = helpers.synthetic_rows(1000)
  artifact = helpers.artifact(standard_artifacts.Examples, output_dir)
  helpers.write_raw_examples(artifact.uri, {'train': rows[:800], 'eval': rows[800:]})
  artifact.split_names = '["train", "eval"]'
  return artifact


@pytest.mark.parametrize('minimum, shipped', [(quantizer_executor.RAW_MIN_AGREEMENT, True),
                                              (1.01, False)])
def test_a_raw_flatbuffer_ships_only_when_it_agrees_with_the_folder_route(
    data, teacher, tmp_path, monkeypatch, minimum, shipped):
  monkeypatch.setattr(quantizer_executor, 'RAW_MIN_AGREEMENT', minimum)
  examples, graph, _ = data
  quantized = helpers.artifact(standard_artifacts.Model, str(tmp_path / 'model'))
  metrics = helpers.artifact(artifacts.ModelMetrics, str(tmp_path / 'metrics'))
  quantizer_executor.Executor().Do(
      {'model': [teacher], 'examples': [examples], 'transform_graph': [graph],
       'raw_examples': [raw_examples_artifact(str(tmp_path / 'raw'))]},
      {'quantized_model': [quantized], 'metrics': [metrics]},
      {'mode': 'full_integer', 'io_type': 'float32', 'representative_samples': 50,
       'qat_steps': 20, 'preserve_sparsity': 0, 'eval_examples': 200, 'latency_runs': 5,
       'label_column': 'species'})
  folder = os.path.join(quantized.uri, 'Format-Serving')
  with open(os.path.join(folder, predict.SERVING_FILE_NAME)) as handle:
    serving = json.load(handle)
  with open(os.path.join(metrics.uri, 'metrics.json')) as handle:
    figures = json.load(handle)
  assert figures['raw_model']['agreement_with_folder'] >= 0.98
  assert os.path.exists(os.path.join(folder, predict.RAW_MODEL_FILE_NAME)) == shipped
  assert bool(serving['raw_model']) == shipped
  if not shipped:
    assert re.search(r"agreed with the folder route.s on (0\.9\d+|1\.0+) of eval, below 1\.01",
                     serving['raw_model_refused'])
    # The folder route is whole and serves.
    assert len(predict.load_tflite(folder).predict_raw(raw_examples(data, 5))['classes']) == 5


def int8_fragile(teacher, output_dir: str):
  """The teacher with a logits layer that full-integer conversion breaks, saved as a Model.

  Its logits read the teacher's last hidden layer and one extra input that is always 0,
  with a weight of 1e4 on that input: the function is the teacher's, but each output
  channel's int8 weight scale (1e4 / 127) rounds every real weight to 0, so the plain int8
  model answers the bias alone. Kept in float, that one layer is the teacher again.
  """
  source = tf_keras.models.load_model(os.path.join(teacher.uri, 'Format-Serving'),
                                      compile=False)
  last = [layer for layer in source.layers if isinstance(layer, tf_keras.layers.Dense)][-1]
  hidden = last.input
  always_zero = tf_keras.layers.Dense(1, kernel_initializer='zeros', name='always_zero')(hidden)
  joined = tf_keras.layers.Concatenate(name='joined')([hidden, always_zero])
  kernel, bias = last.get_weights()
  logits = tf_keras.layers.Dense(kernel.shape[1], name='fragile_logits')
  model = tf_keras.Model(source.inputs, logits(joined), name='fragile')
  logits.set_weights([np.vstack([kernel, np.full((1, kernel.shape[1]), 1e4, np.float32)]),
                      bias])
  artifact = helpers.artifact(standard_artifacts.Model, output_dir)
  model.save(os.path.join(output_dir, 'Format-Serving'), save_format='tf')
  return artifact


# The budget the fragile model's tests give the Quantizer. Kept in float, the broken layer
# gives back the teacher's function, but the other layers are int8 still: on the 200 eval
# rows the float-layers variant landed within int8 noise of the float32 model, from 0.010
# below it to 0.005 above, over 12 unseeded teachers. A budget of one row (0.005) failed
# make test once in 12; 0.03 is three times the worst drop seen, and a tenth of the plain
# int8 model's (over 0.2, which each test asserts).
FRAGILE_BUDGET = 0.03


def test_an_int8_model_past_the_budget_keeps_its_worst_layer_in_float_and_ships_it(
    data, teacher, tmp_path):
  fragile = int8_fragile(teacher, str(tmp_path / 'fragile'))
  examples, graph, _ = data
  quantized = helpers.artifact(standard_artifacts.Model, str(tmp_path / 'model'))
  metrics_artifact = helpers.artifact(artifacts.ModelMetrics, str(tmp_path / 'metrics'))
  quantizer_executor.Executor().Do(
      {'model': [fragile], 'examples': [examples], 'transform_graph': [graph],
       'raw_examples': [raw_examples_artifact(str(tmp_path / 'raw'))]},
      {'quantized_model': [quantized], 'metrics': [metrics_artifact]},
      {'mode': 'full_integer', 'io_type': 'float32', 'representative_samples': 50,
       'qat_steps': 20, 'preserve_sparsity': 0, 'eval_examples': 200, 'latency_runs': 5,
       'label_column': 'species', 'max_accuracy_drop': FRAGILE_BUDGET})
  with open(os.path.join(metrics_artifact.uri, 'metrics.json')) as handle:
    metrics = json.load(handle)
  recovery = metrics['recovery']
  plain = recovery['tried'][0]
  assert plain['variant'] == 'int8' and recovery['float32_accuracy'] - plain['accuracy'] > 0.2
  # The debugger finds the broken layer first; kept in float, it is within the budget.
  assert recovery['layer_errors'][0]['layer'] == 'fragile_logits'
  assert recovery['shipped'] == 'float layers' and recovery['within_budget']
  assert metrics['float_layers'] == ['fragile_logits']
  assert metrics['float_ops'] == []  # Every op has an int8 kernel: kept in float on purpose.
  assert measuring.within_drop(metrics['float32_tflite']['accuracy'], metrics['accuracy'],
                               FRAGILE_BUDGET)
  # The other layers are int8 still, and the raw-input flatbuffer keeps the same layer in
  # float: LiteRT alone runs it and it agrees with the folder route.
  assert metrics['int8_weight_share'] > 0.5
  folder = os.path.join(quantized.uri, 'Format-Serving')
  assert os.path.exists(os.path.join(folder, predict.RAW_MODEL_FILE_NAME))
  assert metrics['raw_model']['agreement_with_folder'] >= 0.98
  assert measuring.within_drop(metrics['float32_tflite']['accuracy'],
                               metrics['raw_model']['accuracy'], FRAGILE_BUDGET)


def test_without_a_budget_the_plain_int8_model_ships_as_before(data, tmp_path, teacher):
  fragile = int8_fragile(teacher, str(tmp_path / 'fragile'))
  _, metrics = run_quantizer(data, fragile, str(tmp_path), 'full_integer',
                             max_accuracy_drop=-1.0)
  assert metrics['recovery'] is None and metrics['float_layers'] == []
  assert metrics['float32_tflite']['accuracy'] - metrics['accuracy'] > 0.2


def test_the_fallback_keeps_the_gates_margin_and_a_budget_test_rows_can_not_resolve_passes_none(
    data, teacher, tmp_path, monkeypatch):
  # As if the gate judged on 10 test rows. Keeping the broken layer in float gives the
  # float32 model's answers within int8 noise, inside FRAGILE_BUDGET on eval, yet the margin
  # for the gate's noise on 10 rows is larger than the budget (0.045 at the least, when the
  # two models agree on every eval row): no variant is within it, and the most accurate
  # ships, marked so.
  monkeypatch.setattr(quantizer_executor.measuring, 'test_split_size', lambda *_, **__: 10)
  fragile = int8_fragile(teacher, str(tmp_path / 'fragile'))
  _, metrics = run_quantizer(data, fragile, str(tmp_path), 'full_integer',
                             max_accuracy_drop=FRAGILE_BUDGET)
  recovery = metrics['recovery']
  assert recovery['test_examples'] == 10
  measured = [trial for trial in recovery['tried'] if 'gate_margin' in trial]
  assert measured and all(trial['gate_margin']['margin'] > FRAGILE_BUDGET for trial in measured)
  best = max(recovery['tried'], key=lambda trial: trial['accuracy'] or 0)
  # The point rule alone would pass it.
  assert measuring.within_drop(recovery['float32_accuracy'], best['accuracy'], FRAGILE_BUDGET)
  assert not recovery['within_budget']
  assert metrics['accuracy'] == pytest.approx(best['accuracy'])
