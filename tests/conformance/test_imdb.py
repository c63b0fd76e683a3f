"""TFX's imdb example (text: 400 padded token ids, a bidirectional-LSTM teacher saved by
tf.saved_model.save), unchanged, with our chain after its Trainer.

Its 100 reviews make accuracy meaningless: this checks that every stage runs to the gate's
decision, that the built-in student embeds and averages the token sequence, and that the int8
model holds int8 tensors.
"""

import json
import os

import pytest
from ml_metadata.proto import metadata_store_pb2
from tfx import v1 as tfx

from benchmarks import corpus
from tfx_distillery.components.quantizer import conversion
from tfx_distillery.components.quantizer import predict
from tfx_distillery.pipelines import summary
from tests import helpers
from tests.conformance import chain

# Long: TFX's imdb pipeline through our chain (make test-e2e).
pytestmark = pytest.mark.e2e

IMDB = os.path.join(chain.TFX_ROOT, 'examples', 'imdb')
NAME = 'imdb-distilled'


@pytest.fixture(scope='module')
def run(tmp_path_factory):
  root = str(tmp_path_factory.mktemp('imdb'))
  module_file = os.path.join(IMDB, 'imdb_utils_native_keras.py')
  # As imdb_pipeline_native_keras.py builds it: a 9:1 hash split.
  example_gen = corpus.imdb_example_gen()
  front = chain.stock_front(example_gen, module_file, train_steps=10, eval_steps=2)
  _, _, _, transform, trainer = front
  ours = chain.our_chain(example_gen, transform, trainer, 'label_xf', 'label',
                         os.path.join(root, 'serving'), student_steps=40)
  tfx.orchestration.LocalDagRunner().run(chain.pipeline(NAME, root, front + ours))
  return root


def test_every_stage_runs_to_the_gates_decision(run):
  by_node = helpers.executions_by_node(os.path.join(run, 'metadata.sqlite'))
  assert set(chain.CHAIN) <= set(by_node)
  for node, executions in by_node.items():
    assert executions[-1].last_known_state == metadata_store_pb2.Execution.COMPLETE, node
  decision = summary.summarize_run(os.path.join(run, 'metadata.sqlite'), NAME).gate_decision
  assert decision['split'] == 'eval'  # The 9:1 split has no test split.
  # Every candidate was measured and judged; the decision blesses the smallest that passed
  # (the more accurate of equal sizes), or none, each refusal with its reasons.
  candidates = decision['candidates']
  assert {candidate['name'] for candidate in candidates} >= {'student', 'int8'}  # chain's names
  for candidate in candidates:
    assert 0 <= candidate['accuracy'] <= 1 and candidate['size_bytes'] > 0, candidate
    assert candidate['passed'] or candidate['reasons'], candidate
  passing = [candidate for candidate in candidates if candidate['passed']]
  assert decision['blessed'] == bool(passing)
  if passing:
    def rank(candidate):
      return candidate['size_bytes'], -candidate['accuracy']

    chosen = next(candidate for candidate in candidates
                  if candidate['name'] == decision['chosen'])
    assert rank(chosen) == min(rank(candidate) for candidate in passing)


def test_the_builtin_student_embeds_and_averages_the_token_sequence(run):
  with open(os.path.join(chain.output_uri(run, NAME, 'Distiller', 'distillery.ModelMetrics'),
                         'metrics.json')) as handle:
    metrics = json.load(handle)
  assert metrics['teacher_formats'] == ['saved_model']
  assert 'sequence of 400 ids' in metrics['student']['features']['text_xf_input']
  assert 0 < metrics['student_param_ratio'] < 1


def test_the_int8_model_holds_int8_tensors(run):
  folder = os.path.join(chain.output_uri(run, NAME, 'Quantizer', 'Model'), 'Format-Serving')
  with open(os.path.join(folder, predict.MODEL_FILE_NAME), 'rb') as handle:
    assert conversion.tensor_dtypes(handle.read()).get('int8', 0) > 0
