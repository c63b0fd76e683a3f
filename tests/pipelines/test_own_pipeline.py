"""The README's "Use it in your own pipeline" example, run end to end.

TFX's stock Transform and stock Trainer, fed the penguin module file that ships
inside the tfx wheel (unchanged), then our Distiller -> Pruner ->
Quantizer(full_integer) -> AccuracyGate -> AtomicPusher.
"""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import measuring
from tfx_distillery.components.quantizer import conversion
from tfx_distillery.components.quantizer import predict
from tfx_distillery.pipelines import summary
from tests import helpers

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECTION = '## Use it in your own pipeline'


def own_pipeline_block() -> str:
  with open(os.path.join(REPOSITORY, 'README.md')) as handle:
    text = handle.read()
  section = text[text.index(SECTION):]
  return re.search(r'```python\n(.*?)```', section, flags=re.DOTALL).group(1)


@pytest.fixture(scope='module')
def run(tmp_path_factory):
  work_dir = tmp_path_factory.mktemp('own')
  previous = os.getcwd()
  os.chdir(work_dir)  # The example writes runs/ and serving/ relative to where it runs.
  try:
    namespace = {}
    exec(compile(own_pipeline_block(), 'README own pipeline', 'exec'), namespace)  # pylint: disable=exec-used
    tfx.orchestration.LocalDagRunner().run(namespace['pipeline'])
  finally:
    os.chdir(previous)
  return work_dir, str(work_dir / 'runs' / 'penguin' / 'metadata.sqlite')


def latest_uri(metadata_path, node, type_name):
  store = summary.open_store(metadata_path)
  found = [artifact for artifact in summary.pipeline_artifacts(store, 'penguin-distilled',
                                                               type_name)
           if summary.producer_node(store, artifact) == node]
  return found[-1].uri


def test_every_stock_and_own_component_completes(run):
  _, metadata_path = run
  by_node = helpers.executions_by_node(metadata_path)
  assert {'Transform', 'Trainer', 'Distiller', 'Pruner', 'Quantizer', 'AccuracyGate',
          'AtomicPusher'} <= set(by_node)
  for node, executions in by_node.items():
    assert executions[-1].last_known_state == metadata_store_pb2.Execution.COMPLETE, node


def test_the_stock_teacher_is_read_and_the_class_count_comes_from_its_width(run):
  _, metadata_path = run
  with open(os.path.join(latest_uri(metadata_path, 'Distiller', 'distillery.ModelMetrics'),
                         'metrics.json')) as handle:
    metrics = json.load(handle)
  assert metrics['teacher_formats'] == ['saved_model']
  assert metrics['teacher_output_kinds'] == ['logits']
  assert metrics['num_classes'] == 3 and metrics['num_classes_source'] == 'teacher'
  assert metrics['teacher_accuracy'][0] > metrics['majority_accuracy'] + 0.2


def test_the_pushed_model_answers_raw_serialized_examples(run):
  work_dir, metadata_path = run
  run_summary = summary.summarize_run(metadata_path, 'penguin-distilled')
  decision = run_summary.gate_decision
  assert decision['blessed'] and decision['split'] == 'eval'  # No test split here.
  report_dir = latest_uri(metadata_path, 'AccuracyGate', 'distillery.ModelMetrics')
  with open(os.path.join(report_dir, 'report.html')) as handle:
    assert 'no held-out test split, so the gate decided on eval' in handle.read()
  pushed = run_summary.pushed_destination
  assert pushed.startswith(str(work_dir / 'serving' / 'penguin'))
  raw = evaluation.read_serialized_examples(os.path.join(
      latest_uri(metadata_path, 'ImportExampleGen', 'Examples'), 'Split-eval', '*'), limit=40)
  serving = [measuring.strip_feature(example, 'species') for example in raw]
  labels = np.array([tf.train.Example.FromString(example).features.feature['species']
                     .int64_list.value[0] for example in raw])
  if os.path.exists(os.path.join(pushed, predict.MODEL_FILE_NAME)):
    classes = predict.TFLitePredictor(pushed).predict_raw(serving)['classes']
  else:
    outputs = tf.saved_model.load(pushed).signatures['serving_default'](
        examples=tf.constant(serving))
    classes = outputs['classes'].numpy()
  assert classes.shape == (40,)
  assert np.mean(classes == labels) > 0.6


def test_the_int8_model_really_holds_int8_tensors(run):
  _, metadata_path = run
  folder = os.path.join(latest_uri(metadata_path, 'Quantizer', 'Model'), 'Format-Serving')
  with open(os.path.join(folder, predict.MODEL_FILE_NAME), 'rb') as handle:
    dtypes = conversion.tensor_dtypes(handle.read())
  assert dtypes.get('int8', 0) > 0
  assert os.path.isdir(os.path.join(folder, predict.TRANSFORM_GRAPH_FOLDER))
