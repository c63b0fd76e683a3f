"""AccuracyGate's executor: measure every candidate like the teacher, bless the smallest that passes."""

import json
import os
from typing import Any, Dict, List

import tensorflow as tf
import tf_keras
import tensorflow_transform as tft
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.types import standard_component_specs

from components.common import evaluation
from components.common import measuring
from components.common import modeling
from components.common import progress
from components.common import reading
from components.gate import report
from components.gate import spec as gate_spec
from components.quantizer import predict


def copy_tree(source: str, destination: str) -> None:
  """Copies a folder through a temporary name, then renames it into place."""
  temporary = destination + '.tmp'
  if tf.io.gfile.exists(temporary):
    tf.io.gfile.rmtree(temporary)
  for folder, _, files in tf.io.gfile.walk(source):
    target = os.path.join(temporary, os.path.relpath(folder, source))
    tf.io.gfile.makedirs(target)
    for name in files:
      tf.io.gfile.copy(os.path.join(folder, name), os.path.join(target, name), overwrite=True)
  if tf.io.gfile.exists(destination):
    tf.io.gfile.rmtree(destination)
  tf.io.gfile.rename(temporary, destination)


def measure(model_dir: str, batches, latency_runs: int) -> Dict[str, Any]:
  """Size, accuracy and batch-1 latency of a TFLite or Keras SavedModel folder."""
  if tf.io.gfile.exists(os.path.join(model_dir, predict.MODEL_FILE_NAME)):
    predictor = predict.TFLitePredictor(model_dir)
    example = measuring.one_example(batches)
    return {'format': 'tflite',
            'size_bytes': evaluation.directory_bytes(
                os.path.join(model_dir, predict.MODEL_FILE_NAME)),
            'accuracy': measuring.accuracy_of(predictor.logits, batches),
            'latency_ms': measuring.median_latency_ms(lambda: predictor.logits_one(example),
                                                      latency_runs)}
  model = tf_keras.models.load_model(model_dir, compile=False)
  return {'format': 'saved_model', **measuring.keras_figures(model, model_dir, batches,
                                                             latency_runs)}


class Executor(base_executor.BaseExecutor):
  """Writes a ModelBlessing, the chosen model, and the decision with its reasons."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    with progress.component_timer('AccuracyGate executor'):
      self._decide(input_dict, output_dict, exec_properties)

  def _decide(self, input_dict, output_dict, exec_properties) -> None:
    logger = progress.get_logger()
    examples = artifact_utils.get_single_instance(
        input_dict[standard_component_specs.EXAMPLES_KEY])
    tf_transform_output = tft.TFTransformOutput(artifact_utils.get_single_uri(
        input_dict[standard_component_specs.TRANSFORM_GRAPH_KEY]))
    max_drop = float(exec_properties[gate_spec.MAX_ACCURACY_DROP_KEY])
    max_bytes = int(exec_properties[gate_spec.MAX_MODEL_BYTES_KEY])
    latency_runs = int(exec_properties[gate_spec.LATENCY_RUNS_KEY])
    names = json.loads(exec_properties[gate_spec.CANDIDATE_NAMES_KEY])
    batches = measuring.eval_batches(
        os.path.join(artifact_utils.get_split_uri([examples], 'eval'), '*'),
        tf_transform_output, int(exec_properties[gate_spec.EVAL_EXAMPLES_KEY]),
        compression=reading.read_options(examples.uri).compression)

    baseline = measure(evaluation.serving_model_path(artifact_utils.get_single_uri(
        input_dict[gate_spec.BASELINE_MODEL_KEY])), batches, latency_runs)
    candidates = []
    for key, name in zip(gate_spec.CANDIDATE_MODEL_KEYS, names):
      if not input_dict.get(key):
        continue
      model_dir = evaluation.serving_model_path(artifact_utils.get_single_uri(input_dict[key]))
      figures = measure(model_dir, batches, latency_runs)
      drop = baseline['accuracy'] - figures['accuracy']
      reasons = []
      if drop > max_drop:
        reasons.append(f'accuracy {figures["accuracy"]:.4f} is {drop:.4f} below the teacher\'s '
                       f'{baseline["accuracy"]:.4f}; at most {max_drop:.4f} is allowed')
      if max_bytes >= 0 and figures['size_bytes'] > max_bytes:
        reasons.append(f'size {figures["size_bytes"]} bytes exceeds max_model_bytes '
                       f'{max_bytes}')
      candidates.append({'name': name, 'model_dir': model_dir, **figures,
                         'accuracy_drop': drop, 'passed': not reasons, 'reasons': reasons})

    passing = sorted((candidate for candidate in candidates if candidate['passed']),
                     key=lambda candidate: candidate['size_bytes'])
    chosen = passing[0] if passing else None
    for candidate in candidates:
      if candidate['passed'] and candidate is not chosen:
        candidate['reasons'].append(f'passed, but {chosen["name"]} is smaller '
                                    f'({chosen["size_bytes"]} < {candidate["size_bytes"]} '
                                    'bytes)')
    decision = {
        'blessed': chosen is not None,
        'chosen': chosen['name'] if chosen else None,
        'max_accuracy_drop': max_drop,
        'max_model_bytes': max_bytes if max_bytes >= 0 else None,
        'teacher': baseline,
        'candidates': candidates,
        'majority_accuracy': measuring.majority_accuracy(batches),
        'eval_examples': int(sum(len(labels) for _, labels in batches)),
    }
    model_uri = artifact_utils.get_single_uri(output_dict[standard_component_specs.MODEL_KEY])
    if chosen:
      copy_tree(chosen['model_dir'], os.path.join(model_uri, 'Format-Serving'))
      logger.info('AccuracyGate: blessed %s (%d bytes, accuracy %.4f vs teacher %.4f)',
                  chosen['name'], chosen['size_bytes'], chosen['accuracy'],
                  baseline['accuracy'])
    else:
      logger.warning('WARNING: AccuracyGate blessed no model, so nothing will be pushed: %s',
                     '; '.join(f'{candidate["name"]}: {", ".join(candidate["reasons"])}'
                               for candidate in candidates))
    for candidate in candidates:
      if candidate is not chosen:
        logger.info('AccuracyGate: %s not chosen: %s', candidate['name'],
                    '; '.join(candidate['reasons']))
    blessing = artifact_utils.get_single_instance(
        output_dict[standard_component_specs.BLESSING_KEY])
    # The custom properties Pusher (and Evaluator's users) read.
    blessing.set_int_custom_property('blessed', 1 if chosen else 0)
    if chosen:
      blessing.set_string_custom_property('current_model', chosen['model_dir'])
    report_dir = artifact_utils.get_single_uri(output_dict[gate_spec.REPORT_KEY])
    modeling.write_metrics(report_dir, decision)
    report.write(decision, report_dir, pushed_destination=None)
