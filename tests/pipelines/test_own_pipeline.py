"""The README's "Use it in your own pipeline" example, run end to end: TFX's Chicago taxi
pipeline as TFX ships it (taxi_utils_native_keras.py unchanged, mixed feature ranks,
vocabularies, buckets, a binary label without a domain), our chain after its Trainer with the
built-in student, TFX's stock Evaluator and Pusher on our student, and TFX's TFLite evaluation
(the "TFX for Mobile" route) on our int8 folder.

The CSV is the first 3,000 rows of TFX's own, so the suite stays short; nothing else changes.
The same run trains taxi_utils_native_keras.py's run_fn, unchanged, in a DistributedTrainer with
4 micro-batches per step (#63).
"""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.components.gate import report
from tfx_distillery.components.quantizer import conversion
from tfx_distillery.components.quantizer import predict
from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import summary
from tests import helpers
from tests.conformance import chain

# Long: TFX's taxi pipeline, stock, then our chain (make test-e2e).
pytestmark = pytest.mark.e2e

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECTION = '## Use it in your own pipeline'
NAME = 'taxi-distilled'
MICRO_BATCH_TRAINER = 'MicroBatchTrainer'


def own_pipeline_block() -> str:
  with open(os.path.join(REPOSITORY, 'README.md')) as handle:
    text = handle.read()
  section = text[text.index(SECTION):]
  return re.search(r'```python\n(.*?)```', section, flags=re.DOTALL).group(1)


def tflite_evaluator(namespace):
  """TFX for Mobile's evaluation: a tf_lite ModelSpec over the transformed examples."""
  return tfx.components.Evaluator(
      examples=namespace['transform'].outputs['transformed_examples'],
      model=namespace['quantizer'].outputs['quantized_model'],
      eval_config=tfma.EvalConfig(
          model_specs=[tfma.ModelSpec(label_key='tips_xf', model_type=tfma.TF_LITE)],
          slicing_specs=[tfma.SlicingSpec()],
          metrics_specs=[tfma.MetricsSpec(metrics=[
              tfma.MetricConfig(class_name='BinaryAccuracy'),
              tfma.MetricConfig(class_name='ExampleCount')])])).with_id('TFLiteEvaluator')


@pytest.fixture(scope='module')
def own_run(tmp_path_factory):
  """The run's folder, its metadata's path, and the progress lines it showed."""
  work_dir = tmp_path_factory.mktemp('own')
  sample = datasets.sample_csv(datasets.taxi_data_dir(), str(work_dir / 'data'), rows=3000)
  block = re.sub(r'^DATA_ROOT = .*$', f'DATA_ROOT = {sample!r}', own_pipeline_block(),
                 flags=re.MULTILINE)
  previous = os.getcwd()
  os.chdir(work_dir)  # The example writes runs/ and serving/ relative to where it runs.
  try:
    namespace = {}
    exec(compile(block, 'README own pipeline', 'exec'), namespace)  # pylint: disable=exec-used
    readme_pipeline = namespace['pipeline']
    readme_pipeline.components.append(tflite_evaluator(namespace))
    readme_pipeline.components.append(chain.distributed_trainer(
        namespace['transform'], namespace['schema_gen'], namespace['MODULE_FILE'],
        MICRO_BATCH_TRAINER, micro_batches=chain.MICRO_BATCHES))
    with helpers.ProgressLines() as lines:
      tfx.orchestration.LocalDagRunner().run(readme_pipeline)
  finally:
    os.chdir(previous)
  return work_dir, str(work_dir / 'runs' / 'taxi-stock' / 'metadata.sqlite'), lines


@pytest.fixture(scope='module')
def run(own_run):
  return own_run[:2]


def latest_uri(metadata_path, node, type_name):
  store = summary.open_store(metadata_path)
  return [artifact for artifact in summary.pipeline_artifacts(store, NAME, type_name)
          if summary.producer_node(store, artifact) == node][-1].uri


def test_every_stock_and_own_component_completes(run):
  _, metadata_path = run
  by_node = helpers.executions_by_node(metadata_path)
  assert {'CsvExampleGen', 'Transform', 'Trainer', 'Distiller', 'Pruner', 'Quantizer',
          'AccuracyGate', 'AtomicPusher', 'Evaluator', 'Pusher', 'TFLiteEvaluator',
          MICRO_BATCH_TRAINER} <= set(by_node)
  for node, executions in by_node.items():
    assert executions[-1].last_known_state == metadata_store_pb2.Execution.COMPLETE, node


def test_the_stock_teacher_and_the_builtin_student_are_read_at_their_own_shapes(run):
  _, metadata_path = run
  with open(os.path.join(latest_uri(metadata_path, 'Distiller', 'distillery.ModelMetrics'),
                         'metrics.json')) as handle:
    metrics = json.load(handle)
  assert metrics['teacher_formats'] == ['saved_model']
  assert metrics['teacher_output_kinds'] == ['probabilities']  # Dense(sigmoid), then Reshape.
  assert metrics['num_classes'] == 2 and metrics['num_classes_source'] == 'teacher'
  features = metrics['student']['features']
  assert re.fullmatch(r'\d+ ids, embedded \d', features['company_xf'])  # A vocabulary.
  assert features['fare_xf'] == 'number'
  assert features['pickup_census_tract_xf'].startswith('left out')  # Empty: a string column.
  assert metrics['student_param_ratio'] < 0.5
  # 300 steps on 3,000 rows may leave TFX's teacher at the majority class; it is still read.
  assert 0.5 <= metrics['teacher_accuracy'][0] <= 1.0


def test_after_the_stock_teacher_at_300_steps_the_distiller_hands_on_no_worse_than_scratch(run):
  # TFX's taxi Trainer at the README's 300 steps is often still at the majority class.
  _, metadata_path = run
  with open(os.path.join(latest_uri(metadata_path, 'Distiller', 'distillery.ModelMetrics'),
                         'metrics.json')) as handle:
    metrics = json.load(handle)
  assert metrics['hand_on'] == 'better'
  # The from-scratch twin goes on when it wins beyond noise, and only then.
  assert metrics['exported_student'] == (
      'scratch' if metrics['scratch_beats_distilled'] else 'distilled')
  assert metrics['exported_accuracy'] == (metrics['scratch_accuracy']
                                          if metrics['scratch_beats_distilled']
                                          else metrics['student_accuracy'])
  # A teacher no better than the majority class is named; one clearly better is not.
  named = [entry['teacher'] for entry in metrics['weak_teachers']]
  if metrics['teacher_accuracy'][0] <= metrics['majority_accuracy']:
    assert named == [0]
  if metrics['teacher_accuracy'][0] >= metrics['majority_accuracy'] + 0.05:
    assert named == []


def test_the_stock_evaluator_blesses_our_student_against_the_stock_teacher(run):
  _, metadata_path = run
  evaluation_uri = latest_uri(metadata_path, 'Evaluator', 'ModelEvaluation')
  result = tfma.load_eval_result(evaluation_uri)
  by_model = {key: value for key, value in result.slicing_metrics[0][1][''][''].items()}
  assert 'binary_accuracy' in by_model
  validation = tfma.load_validation_result(evaluation_uri)
  blessing = latest_uri(metadata_path, 'Evaluator', 'ModelBlessing')
  assert validation.validation_ok == os.path.exists(os.path.join(blessing, 'BLESSED'))
  assert validation.validation_ok != os.path.exists(os.path.join(blessing, 'NOT_BLESSED'))
  # The Evaluator blesses our student when it is within the stock config's threshold of the
  # stock teacher; where it did not, the stock teacher was at the majority class (the same
  # case the gate's test below allows), and the validation says which metric failed.
  decision = summary.summarize_run(metadata_path, NAME).gate_decision
  # Blessed or not, the student as the stock Evaluator served it is no worse than a constant
  # guess of the majority class on the same eval rows, beyond 3 standard errors of an
  # accuracy: a broken student beside a teacher at the majority class would otherwise pass
  # the branch below.
  evaluator_accuracy = by_model['binary_accuracy']['doubleValue']
  majority, rows = decision['majority_accuracy'], decision['eval_examples']
  noise = 3 * (majority * (1 - majority) / rows) ** 0.5
  assert evaluator_accuracy >= majority - noise, (evaluator_accuracy, majority, rows)
  if not validation.validation_ok:
    assert validation.metric_validations_per_slice, validation
    teacher = decision['teacher']
    assert (teacher['accuracy'] <= decision['majority_accuracy']
            or teacher['versus_majority']['within_noise']), decision
  else:
    pushed = latest_uri(metadata_path, 'Pusher', 'PushedModel')
    assert os.listdir(pushed), pushed  # The Pusher pushed what was blessed.


def test_tfma_evaluates_our_int8_folder_as_a_tflite_model(run):
  _, metadata_path = run
  result = tfma.load_eval_result(latest_uri(metadata_path, 'TFLiteEvaluator',
                                            'ModelEvaluation'))
  metrics = result.slicing_metrics[0][1]['']['']
  assert metrics['example_count']['doubleValue'] > 100
  assert metrics['binary_accuracy']['doubleValue'] > 0.5


def test_the_gate_decides_and_the_pushed_model_answers_raw_examples(run):
  work_dir, metadata_path = run
  run_summary = summary.summarize_run(metadata_path, NAME)
  decision = run_summary.gate_decision
  assert decision['split'] == 'eval'  # TFX's taxi split is train/eval only.
  # #84: the report says what the built-in student made of each of TFX's features, from the
  # plan the Distiller put on its model and the Pruner and the Quantizer carried.
  with open(os.path.join(latest_uri(metadata_path, 'AccuracyGate', 'distillery.ModelMetrics'),
                         report.HTML_FILE_NAME)) as handle:
    page = handle.read()
  assert '<tr><td>fare_xf</td><td>number</td></tr>' in page, page[-3000:]
  assert '<tr><td>pickup_census_tract_xf</td><td>left out' in page
  assert all(candidate.get('feature_plan') for candidate in decision['candidates'])
  teacher = decision['teacher']
  if not decision['blessed']:
    # TFX's taxi Trainer at the README's 300 steps on 3,000 rows, unseeded, is sometimes
    # still at the majority class (once in make test-e2e at d72cf8c: 0.7701 against 0.7701),
    # or a few examples above it (at f673362: 0.7711, one example of 1,031): then the gate
    # must refuse every candidate for that reason and push nothing. Any other refusal fails.
    assert (teacher['accuracy'] <= decision['majority_accuracy']
            or teacher['versus_majority']['within_noise']), decision
    no_lead = ('at or below the majority class', 'its lead over the majority class is within')
    assert decision['candidates'] and all(
        any(words in reason for reason in candidate['reasons'] for words in no_lead)
        for candidate in decision['candidates']), decision['candidates']
    assert run_summary.pushed_destination is None
    return
  pushed = run_summary.pushed_destination
  raw = evaluation.read_serialized_examples(os.path.join(
      latest_uri(metadata_path, 'CsvExampleGen', 'Examples'), 'Split-eval', '*'), limit=50)
  serving = [measuring.strip_feature(example, 'tips') for example in raw]
  if os.path.exists(os.path.join(pushed, predict.MODEL_FILE_NAME)):
    classes = predict.load_tflite(pushed).predict_raw(serving)['classes']
  else:
    classes = tf.saved_model.load(pushed).signatures['serving_default'](
        examples=tf.constant(serving))['classes'].numpy()
  assert classes.shape == (50,) and set(np.unique(classes)) <= {0, 1}


def test_the_int8_model_really_holds_int8_tensors(run):
  _, metadata_path = run
  folder = os.path.join(latest_uri(metadata_path, 'Quantizer', 'Model'), 'Format-Serving')
  with open(os.path.join(folder, predict.MODEL_FILE_NAME), 'rb') as handle:
    assert conversion.tensor_dtypes(handle.read()).get('int8', 0) > 0


def test_the_stock_taxi_transform_gets_no_raw_flatbuffer_and_the_ops_are_named(run):
  """TFX's taxi preprocessing_fn hashes out-of-vocabulary strings and bucketizes with
  tft.bucketize: ops with no TFLite builtin, named in serving.json; the folder route serves."""
  _, metadata_path = run
  folder = os.path.join(latest_uri(metadata_path, 'Quantizer', 'Model'), 'Format-Serving')
  with open(os.path.join(folder, predict.SERVING_FILE_NAME)) as handle:
    serving = json.load(handle)
  assert serving['raw_model'] is None
  assert not os.path.exists(os.path.join(folder, predict.RAW_MODEL_FILE_NAME))
  assert re.search(r'no TFLite builtin.*(UpperBound|StringToHashBucketFast)',
                   serving['raw_model_refused']), serving['raw_model_refused']
  assert 'raw_examples' not in serving['raw_model_refused']  # Given, and tried.


def test_the_pruner_after_the_stock_teacher_never_hands_on_a_model_over_budget(run):
  # TFX's taxi Trainer then our built-in student: the pruned model is within the README's
  # 0.05 of the stock teacher on eval and clearly above the majority class, or the student
  # goes on unchanged and the gate leaves the pruned model out.
  _, metadata_path = run
  with open(os.path.join(latest_uri(metadata_path, 'Pruner', 'distillery.ModelMetrics'),
                         'metrics.json')) as handle:
    pruning = json.load(handle)
  decision_path = os.path.join(latest_uri(metadata_path, 'AccuracyGate',
                                          'distillery.ModelMetrics'), 'metrics.json')
  with open(decision_path) as handle:
    decision = json.load(handle)
  if pruning['pruning_paid']:
    assert measuring.within_drop(pruning['baseline_accuracy'], pruning['pruned_accuracy'], 0.05)
    assert pruning['pruned_accuracy'] > pruning['majority_accuracy']
    assert 'pruned' in {candidate['name'] for candidate in decision['candidates']}
  else:
    assert pruning['handed_on'] == 'input model, unchanged' or pruning['not_a_candidate']
    assert pruning['reason'] or pruning['not_a_candidate']
    assert 'pruned' in {entry['name'] for entry in decision['left_out']}


def test_tfx_taxi_module_file_trains_with_micro_batches(own_run):
  _, metadata_path, lines = own_run
  assert any(f'{chain.MICRO_BATCHES} micro-batches per step' in line for line in lines)
  outputs = chain.answers_to_raw_examples(latest_uri(metadata_path, MICRO_BATCH_TRAINER, 'Model'),
                                          latest_uri(metadata_path, 'CsvExampleGen', 'Examples'),
                                          'tips')
  assert list(outputs.values())[0].shape[0] == 3
