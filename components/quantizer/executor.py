"""Quantizer's executor: convert, calibrate or fine-tune, then measure through TFLite."""

import json
import os
from typing import Any, Dict, List, Optional

import numpy as np

import tensorflow as tf
import tf_keras
import tensorflow_transform as tft
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.types import standard_component_specs

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import callbacks
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.common import labels
from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import modeling
from tfx_distillery.components.common import progress
from tfx_distillery.components.common import reading
from tfx_distillery.components.common import seeding
from tfx_distillery.components.common import shapes
from tfx_distillery.components.quantizer import conversion
from tfx_distillery.components.quantizer import predict
from tfx_distillery.components.quantizer import raw_model
from tfx_distillery.components.quantizer import spec as quantizer_spec

QAT_BATCH_SIZE = 64
QAT_LEARNING_RATE = 1e-4
# A model with at least this share of zero kernel weights (a Pruner's) is also tried with
# TFLite's sparse encoding.
SPARSE_MIN_ZERO_SHARE = 0.3
# The sparse file is kept only if its classes agree with the dense file's this often on eval.
SPARSE_MIN_AGREEMENT = 0.995
# model_raw.tflite ships only if its classes agree with the folder route's this often on eval.
RAW_MIN_AGREEMENT = 0.98


def split_pattern(examples: types.Artifact, split: str) -> str:
  return os.path.join(artifact_utils.get_split_uri([examples], split), '*')


def copy_folder(source: str, destination: str) -> None:
  for folder, _, files in tf.io.gfile.walk(source):
    target = os.path.join(destination, os.path.relpath(folder, source))
    tf.io.gfile.makedirs(target)
    for name in files:
      tf.io.gfile.copy(os.path.join(folder, name), os.path.join(target, name), overwrite=True)


def write_tflite_folder(output_dir: str, flatbuffer: bytes, serving: dict,
                        transform_graph_uri: str, raw_flatbuffer: Optional[bytes] = None
                        ) -> None:
  """One self-contained serving folder, written whole or not at all.

  the flatbuffer `tflite`, a copy of the transform graph, `serving.json`, `predict.py`
  and the `shapes.py` it reads: copied anywhere, it still answers raw
  serialized examples. `raw_flatbuffer`, when given, is `model_raw.tflite`.
  """
  staging_dir = output_dir + '.tmp'
  if tf.io.gfile.exists(staging_dir):
    tf.io.gfile.rmtree(staging_dir)
  tf.io.gfile.makedirs(staging_dir)
  measuring.write_atomically(os.path.join(staging_dir, predict.MODEL_FILE_NAME), flatbuffer)
  if raw_flatbuffer is not None:
    measuring.write_atomically(os.path.join(staging_dir, predict.RAW_MODEL_FILE_NAME),
                               raw_flatbuffer)
  copy_folder(transform_graph_uri, os.path.join(staging_dir, predict.TRANSFORM_GRAPH_FOLDER))
  measuring.write_atomically(os.path.join(staging_dir, predict.SERVING_FILE_NAME),
                             json.dumps(serving, indent=2, sort_keys=True))
  tf.io.gfile.copy(predict.__file__, os.path.join(staging_dir, 'predict.py'), overwrite=True)
  # predict.py's one shape rule, so the copied folder needs nothing of ours.
  tf.io.gfile.copy(shapes.__file__, os.path.join(staging_dir, 'shapes.py'), overwrite=True)
  if tf.io.gfile.exists(output_dir):
    tf.io.gfile.rmtree(output_dir)
  tf.io.gfile.rename(staging_dir, output_dir)


class Executor(base_executor.BaseExecutor):
  """Writes the flatbuffer `tflite`, `serving.json` and `predict.py`; measures before and after."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    self.random_seed, deterministic = seeding.from_properties(exec_properties)
    with progress.component_timer('Quantizer executor'), \
        seeding.seeded(self.random_seed, deterministic, 'Quantizer'):
      self._quantize(input_dict, output_dict, exec_properties)
    seeding.record([artifact for artifacts in output_dict.values() for artifact in artifacts],
                   self.random_seed)

  def _quantize(self, input_dict, output_dict, exec_properties) -> None:
    logger = progress.get_logger()
    mode = exec_properties[quantizer_spec.MODE_KEY]
    io_type = exec_properties[quantizer_spec.IO_TYPE_KEY]
    latency_runs = int(exec_properties[quantizer_spec.LATENCY_RUNS_KEY])
    label_key = exec_properties.get(quantizer_spec.LABEL_KEY_KEY) or labels.DEFAULT_LABEL_KEY
    strict_int8 = bool(exec_properties.get(quantizer_spec.STRICT_INT8_KEY, 0))
    examples = artifact_utils.get_single_instance(
        input_dict[standard_component_specs.EXAMPLES_KEY])
    graph_uri = artifact_utils.get_single_uri(
        input_dict[standard_component_specs.TRANSFORM_GRAPH_KEY])
    input_artifact = artifact_utils.get_single_instance(
        input_dict[standard_component_specs.MODEL_KEY])
    input_model_dir = evaluation.serving_model_path(input_artifact.uri)
    quantized_artifact = artifact_utils.get_single_instance(
        output_dict[quantizer_spec.QUANTIZED_MODEL_KEY])
    # Format-Serving, as Trainer lays out a Model: Pusher pushes that folder as it is.
    output_dir = os.path.join(quantized_artifact.uri, 'Format-Serving')
    metrics_dir = artifact_utils.get_single_uri(output_dict[quantizer_spec.METRICS_KEY])
    artifacts.carry_properties(input_artifact, quantized_artifact,
                               artifacts.LAYER_SPARSITY_PROPERTY, artifacts.FEATURE_PLAN_PROPERTY)
    left_out = artifacts.not_a_candidate(input_artifact)
    if left_out and exec_properties.get(quantizer_spec.SKIP_NOT_A_CANDIDATE_KEY):
      # The Pruner handed on its input unchanged (or a model that ships no smaller): another
      # Quantizer of the chain already converts that input, so this one would give the gate
      # a copy.
      logger.info('Quantizer (%s): not converted, its input is no gate candidate: %s', mode,
                  left_out)
      quantized_artifact.set_string_custom_property(artifacts.NOT_A_CANDIDATE_PROPERTY,
                                                    left_out)
      modeling.write_metrics(metrics_dir, {'mode': mode, 'converted': False,
                                           'not_a_candidate': left_out})
      return
    tf_transform_output = tft.TFTransformOutput(graph_uri)

    input_scorer = measuring.load_scorer(input_model_dir)
    if input_scorer.keras_model is None:
      raise ValueError(
          f'The Quantizer converts Keras models; the model at {input_model_dir} was saved '
          f'without Keras metadata ({input_scorer.format}). Export it with model.save() (our '
          'DistributedTrainer, Distiller and Pruner do), or distil it first.')
    eval_set = measuring.from_examples_artifact(
        examples.uri, measuring.CHOOSE_SPLIT, tf_transform_output, label_key,
        int(exec_properties[quantizer_spec.EVAL_EXAMPLES_KEY]))
    raw_examples = input_dict.get(quantizer_spec.RAW_EXAMPLES_KEY)
    label_column = exec_properties[quantizer_spec.LABEL_COLUMN_KEY]
    samples = int(exec_properties[quantizer_spec.REPRESENTATIVE_SAMPLES_KEY])
    if raw_examples:
      # The raw rows model_raw.tflite calibrates on, transformed: both flatbuffers get the
      # same ranges, so their classes agree.
      calibration = measuring.from_raw_examples(
          artifact_utils.get_single_uri(raw_examples), 'train', tf_transform_output, label_key,
          label_column, samples)
    else:
      calibration = measuring.from_examples_artifact(examples.uri, 'train', tf_transform_output,
                                                     label_key, samples)
    output_kind = input_scorer.output_kind or input_scorer.resolve_output_kind(
        next(eval_set.batches(64)))

    def representative_features():
      for index in range(calibration.size):
        yield {name: values[index:index + 1] for name, values in calibration.features.items()}

    model = input_scorer.keras_model
    qat_steps = int(exec_properties[quantizer_spec.QAT_STEPS_KEY])
    preserve_sparsity = bool(exec_properties[quantizer_spec.PRESERVE_SPARSITY_KEY])
    if mode == 'qat':
      model = self._fine_tune_qat(model, examples, tf_transform_output, label_key, output_kind,
                                  qat_steps, preserve_sparsity)
    logger.info('Quantizer: converting to TFLite (%s, %s inputs/outputs)', mode, io_type)
    flatbuffer = conversion.convert(model, mode, representative_features, io_type, strict_int8)
    # Ops with no int8 kernel, before any layer is kept in float on purpose.
    full_integer = mode in ('full_integer', 'qat')
    no_int8_kernel = conversion.float_ops(flatbuffer) if full_integer else []
    # The input model as it was loaded (QAT fine-tunes a copy); its float conversion was
    # already made for the full integer one's check, and is reused.
    float_flatbuffer = conversion.convert(input_scorer.keras_model)
    recovery, float_layers = None, []
    max_int8_drop = exec_properties.get(quantizer_spec.MAX_ACCURACY_DROP_KEY)
    if full_integer and max_int8_drop is not None and float(max_int8_drop) >= 0:
      model, flatbuffer, float_layers, recovery = self._recover(
          model, mode, representative_features, io_type, strict_int8, flatbuffer,
          float_flatbuffer, eval_set, graph_uri, metrics_dir, float(max_int8_drop),
          lambda: self._fine_tune_qat(input_scorer.keras_model, examples, tf_transform_output,
                                      label_key, output_kind, qat_steps, preserve_sparsity),
          # The rows the gate will judge the int8 model on.
          measuring.test_split_size(
              measuring.split_pattern(examples.uri, measuring.CHOOSE_SPLIT),
              compression=reading.read_options(examples.uri).compression))
    sparse_figures = None
    sparse_choice = exec_properties.get(quantizer_spec.SPARSE_ENCODING_KEY) or 'auto'
    zero_share = conversion.zero_weight_share(model)
    if sparse_choice == 'auto' and zero_share >= SPARSE_MIN_ZERO_SHARE:
      flatbuffer, sparse_figures = self._sparse_or_dense(
          model, mode, representative_features, io_type, strict_int8, flatbuffer, eval_set,
          graph_uri, metrics_dir, latency_runs, zero_share, float_layers)
    num_classes = max(2, input_scorer.num_outputs)
    # The manifest a server reads: what the folder is, its inputs and its classes.
    serving = {'format': predict.MODEL_FORMAT, 'mode': mode, 'io_type': io_type,
               'model_file': predict.MODEL_FILE_NAME,
               'input_names': predict.signature_input_names(flatbuffer),
               'label_column': label_column, 'label_key': label_key,
               'num_classes': num_classes,
               'label_vocabulary': labels.class_names(tf_transform_output, label_key,
                                                      label_column, num_classes),
               'output_kind': output_kind,
               'transform_graph': predict.TRANSFORM_GRAPH_FOLDER,
               'sparse_encoding': bool(sparse_figures and sparse_figures['kept'])}
    float_serving = {**serving, 'mode': 'float32', 'sparse_encoding': False,
                     'raw_model': None, 'raw_model_refused': 'the float32 reference folder'}
    raw_flatbuffer = None
    if raw_examples:
      raw_flatbuffer, serving['raw_model'], serving['raw_model_refused'] = self._raw_flatbuffer(
          model, tf_transform_output, label_column, mode, serving['sparse_encoding'],
          artifact_utils.get_single_uri(raw_examples),
          int(exec_properties[quantizer_spec.REPRESENTATIVE_SAMPLES_KEY]), float_layers)
    else:
      serving['raw_model'] = None
      serving['raw_model_refused'] = ('the Quantizer was given no raw_examples (ExampleGen\'s '
                                      'output), which calibrate and check it')
    write_tflite_folder(output_dir, flatbuffer, serving, graph_uri, raw_flatbuffer)
    float_dir = os.path.join(metrics_dir, 'float32')
    write_tflite_folder(float_dir, float_flatbuffer, float_serving, graph_uri)

    figures = measuring.measure(output_dir, eval_set, latency_runs)
    metrics = {
        'mode': mode,
        'io_type': io_type,
        **figures,
        'flatbuffer_bytes': len(flatbuffer),
        'gzip_bytes': measuring.gzip_bytes(flatbuffer),
        'tensor_dtypes': conversion.tensor_dtypes(flatbuffer),
        'float_ops': no_int8_kernel,
        # Layers kept in float to hold the accuracy (selective quantization), and how.
        'float_layers': float_layers,
        'recovery': recovery,
        'int8_weight_share': conversion.int8_weight_share(flatbuffer),
        'input_model': measuring.measure(input_model_dir, eval_set, latency_runs),
        'float32_tflite': {**measuring.measure(float_dir, eval_set, latency_runs),
                           'flatbuffer_bytes': len(float_flatbuffer),
                           'gzip_bytes': measuring.gzip_bytes(float_flatbuffer)},
        'eval_split': eval_set.split,
        'eval_examples': eval_set.size,
        'label_key': label_key,
        'zero_weight_share': zero_share,
        'sparse_encoding': sparse_figures,
        'raw_model_refused': serving['raw_model_refused'],
    }
    if raw_flatbuffer is not None:
      metrics['raw_model'] = self._check_raw_flatbuffer(
          output_dir, artifact_utils.get_single_uri(raw_examples), tf_transform_output,
          label_key, label_column, int(exec_properties[quantizer_spec.EVAL_EXAMPLES_KEY]),
          latency_runs)
      metrics['raw_model']['ops'] = serving['raw_model']['ops']
      agreement = metrics['raw_model']['agreement_with_folder']
      if agreement < RAW_MIN_AGREEMENT:
        # Two routes to one model that answer differently: ship the one TFX's transform runs.
        serving['raw_model'] = None
        serving['raw_model_refused'] = metrics['raw_model_refused'] = (
            f'model_raw.tflite\'s classes agreed with the folder route\'s on {agreement:.4f} of '
            f'eval, below {RAW_MIN_AGREEMENT}, so it is not shipped. The folder route still '
            'serves raw examples with TensorFlow.')
        logger.warning('WARNING: Quantizer: no raw-input flatbuffer: %s',
                       serving['raw_model_refused'])
        write_tflite_folder(output_dir, flatbuffer, serving, graph_uri)
    metrics['size_ratio'] = len(flatbuffer) / len(float_flatbuffer)
    metrics['accuracy_drop'] = metrics['float32_tflite']['accuracy'] - metrics['accuracy']
    metrics['latency_ratio'] = metrics['latency_ms'] / metrics['float32_tflite']['latency_ms']
    if metrics['float_ops']:
      logger.warning('WARNING: Quantizer (%s): ops without an int8 kernel stay in float: %s '
                     '(int8 share of weights %.3f)', mode, ', '.join(metrics['float_ops']),
                     metrics['int8_weight_share'])
    logger.info('Quantizer (%s): flatbuffer %d bytes (%.3f of float32 TFLite), accuracy %.4f '
                '(float32 %.4f, majority %.4f) on eval, batch-1 model latency %.3f ms '
                '(float32 %.3f ms)', mode, len(flatbuffer), metrics['size_ratio'],
                metrics['accuracy'], metrics['float32_tflite']['accuracy'],
                metrics['majority_accuracy'], metrics['latency_ms'],
                metrics['float32_tflite']['latency_ms'])
    quantized_artifact.set_string_custom_property(artifacts.MODEL_FORMAT_PROPERTY,
                                                  predict.MODEL_FORMAT)
    quantized_artifact.set_string_custom_property(artifacts.QUANTIZATION_PROPERTY, mode)
    metrics['random_seed'] = self.random_seed
    modeling.write_metrics(metrics_dir, metrics)

  def _sparse_or_dense(self, model, mode, representative_features, io_type, strict_int8,
                       dense: bytes, eval_set, graph_uri: str, metrics_dir: str,
                       latency_runs: int, zero_share: float, float_layers=()):
    """The sparse-encoded flatbuffer where it is smaller and agrees with the dense one.

    Returns:
      (the flatbuffer to ship, the figures of both: bytes, eval agreement, latency).
    """
    logger = progress.get_logger()
    sparse = conversion.convert(model, mode, representative_features, io_type, strict_int8,
                                sparse=True, float_layers=float_layers)
    folders = {}
    for name, content in (('dense', dense), ('sparse', sparse)):
      folders[name] = os.path.join(metrics_dir, f'{name}_encoding')
      write_tflite_folder(folders[name], content, {
          'format': predict.MODEL_FORMAT, 'mode': mode, 'model_file': predict.MODEL_FILE_NAME,
          'transform_graph': predict.TRANSFORM_GRAPH_FOLDER, 'raw_model': None}, graph_uri)
    scorers = {name: measuring.load_scorer(folder) for name, folder in folders.items()}
    classes = {name: np.concatenate([scorer.classes(batch) for batch in eval_set.batches()])
               for name, scorer in scorers.items()}
    agreement = float(np.mean(classes['dense'] == classes['sparse']))
    figures = {'zero_weight_share': zero_share, 'dense_bytes': len(dense),
               'sparse_bytes': len(sparse), 'agreement': agreement,
               'dense_latency_ms': measuring.latency_ms(scorers['dense'], eval_set, latency_runs),
               'sparse_latency_ms': measuring.latency_ms(scorers['sparse'], eval_set,
                                                         latency_runs)}
    problems = []
    if len(sparse) >= len(dense):
      problems.append(f'the sparse encoding is not smaller ({len(sparse)} >= {len(dense)} bytes)')
    if agreement < SPARSE_MIN_AGREEMENT:
      problems.append(f'its classes agree with the dense file\'s on {agreement:.4f} of eval, '
                      f'below {SPARSE_MIN_AGREEMENT}: the converter\'s sparse {mode} output is '
                      'not the same model')
    figures['kept'] = not problems
    figures['reason'] = '; '.join(problems) or (
        f'{len(sparse)} < {len(dense)} bytes, classes agree on {agreement:.4f} of eval')
    logger.info('Quantizer (%s): sparse encoding %s: %s', mode,
                'kept' if figures['kept'] else 'not kept, dense shipped', figures['reason'])
    for folder in folders.values():
      tf.io.gfile.rmtree(folder)
    return (sparse if figures['kept'] else dense), figures

  def _raw_flatbuffer(self, model, tf_transform_output, label_column: str, mode: str,
                      sparse: bool, raw_examples_uri: str, samples: int, float_layers=()):
    """(`model_raw.tflite` or None, its manifest entry or None, why not or None)."""
    logger = progress.get_logger()
    try:
      inputs = raw_model.raw_inputs(tf_transform_output, label_column)
      rows = raw_model.raw_rows(evaluation.read_serialized_examples(
          measuring.split_pattern(raw_examples_uri, 'train'), limit=samples), inputs)
      logger.info('Quantizer: converting the transform and the model into one flatbuffer over '
                  '%d raw columns (%s)', len(inputs), mode)
      content = raw_model.convert(model, tf_transform_output, label_column, mode,
                                  lambda: iter(rows), sparse=sparse, float_layers=float_layers)
      raw_model.check_runs(content, rows[:8])
    except raw_model.RawInputUnsupported as error:
      logger.warning('WARNING: Quantizer: no raw-input flatbuffer: %s', error)
      return None, None, str(error)
    except Exception as error:  # pylint: disable=broad-except
      # The converter's own failures (ConverterError and others): the folder route still
      # serves, so this output is left out with the converter's first line, not a traceback.
      reason = (f'the TFLite converter failed on the transform and model together ({mode}): '
                f'{conversion.first_line_naming_an_op(str(error))}. The folder route still '
                'serves raw examples with TensorFlow.')
      logger.warning('WARNING: Quantizer: no raw-input flatbuffer: %s', reason)
      return None, None, reason
    # LiteRT's XNNPACK delegate fails to prepare sparse int8 FULLY_CONNECTED weights
    # ("failed to delegate"), so a sparse flatbuffer asks for the builtin kernels.
    entry = {'file': predict.RAW_MODEL_FILE_NAME, 'inputs': inputs,
             'ops': raw_model.transform_ops(content), 'output': predict.RAW_OUTPUT_NAME,
             'xnnpack': not sparse}
    return content, entry, None

  def _recover(self, model, mode, representative_features, io_type, strict_int8,
               flatbuffer: bytes, float_flatbuffer: bytes, eval_set, graph_uri: str,
               metrics_dir: str, max_drop: float, fine_tune_qat,
               test_examples: Optional[int] = None):
    """An int8 model within `max_drop` of its float32 twin on eval, if one can be made.

    The plain conversion first; past the budget, the layers whose int8 error costs the most
    at the output (`conversion.layer_errors`) are kept in float, one more at a time up to half the layers,
    then (`full_integer`) QAT fine-tuning is tried. The first within the budget ships;
    when none is, the most accurate does (the gate has the last word).

    Returns:
      (the model converted, its flatbuffer, the layers kept in float, the record).
    """
    logger = progress.get_logger()
    folder = os.path.join(metrics_dir, 'recovery')

    # Per trial, its per-example correctness: each variant is judged paired with float32.
    correct_of = {}

    def correctness(content: bytes) -> np.ndarray:
      write_tflite_folder(folder, content, {
          'format': predict.MODEL_FORMAT, 'mode': mode, 'model_file': predict.MODEL_FILE_NAME,
          'transform_graph': predict.TRANSFORM_GRAPH_FOLDER, 'raw_model': None}, graph_uri)
      return measuring.correct_predictions(measuring.load_scorer(folder), eval_set)

    def measured(trial: dict, content: bytes) -> dict:
      correct_of[id(trial)] = correctness(content)
      trial['accuracy'] = float(np.mean(correct_of[id(trial)]))
      return trial

    float_correct = correctness(float_flatbuffer)
    float_accuracy = float(np.mean(float_correct))
    tried = [measured({'variant': 'int8', 'float_layers': [], 'bytes': len(flatbuffer)},
                      flatbuffer)]
    record = {'max_accuracy_drop': max_drop, 'float32_accuracy': float_accuracy,
              'tried': tried, 'layer_errors': None, 'test_examples': test_examples}
    shipped = (model, flatbuffer, [])

    def within(trial) -> bool:
      # Within the budget of the float32 model, with the margin the gate's noise on test
      # asks for.
      if trial['accuracy'] is None:
        return False
      trial['gate_margin'] = measuring.gate_margin(correct_of[id(trial)], float_correct,
                                                   test_examples)
      return measuring.within_budget_with_margin(trial['gate_margin'], max_drop)

    if not within(tried[0]):
      logger.info('Quantizer (%s): int8 accuracy %.4f is %.4f below float32 %.4f on eval, past '
                  'max_accuracy_drop %g: keeping the layers with the largest int8 error in '
                  'float', mode, tried[0]['accuracy'], float_accuracy - tried[0]['accuracy'],
                  float_accuracy, max_drop)
      errors = conversion.layer_errors(model, representative_features)
      record['layer_errors'] = errors
      # Only layers whose float copy brings the outputs closer are worth their bytes.
      ranked = [entry['layer'] for entry in errors if (entry['gain'] or 0.0) > 0]
      variants = {0: shipped}
      for count in range(1, (len(ranked) + 1) // 2 + 1):
        layers = ranked[:count]
        content = conversion.convert(model, mode, representative_features, io_type,
                                     strict_int8, float_layers=layers)
        try:
          tried.append(measured({'variant': 'float layers', 'float_layers': layers,
                                 'bytes': len(content)}, content))
        except (RuntimeError, ValueError) as error:
          tried.append({'variant': 'float layers', 'float_layers': layers, 'accuracy': None,
                        'refused': conversion.first_line_naming_an_op(str(error))})
          continue
        variants[len(tried) - 1] = (model, content, layers)
        logger.info('Quantizer (%s): float layers %s: accuracy %.4f, %d bytes', mode, layers,
                    tried[-1]['accuracy'], len(content))
        if within(tried[-1]):
          break
      if not within(tried[-1]) and mode == 'full_integer':
        logger.info('Quantizer (%s): still past the budget; trying QAT fine-tuning', mode)
        qat_model = fine_tune_qat()
        content = conversion.convert(qat_model, 'qat', representative_features, io_type,
                                     strict_int8)
        tried.append(measured({'variant': 'qat', 'float_layers': [], 'bytes': len(content)},
                              content))
        variants[len(tried) - 1] = (qat_model, content, [])
        logger.info('Quantizer (%s): QAT: accuracy %.4f, %d bytes', mode,
                    tried[-1]['accuracy'], len(content))
      ran = [index for index in variants]
      passing = [index for index in ran if within(tried[index])]
      # The smallest within the budget; else the most accurate.
      chosen = (min(passing, key=lambda index: tried[index]['bytes']) if passing else
                max(ran, key=lambda index: tried[index]['accuracy']))
      shipped = variants[chosen]
      record['shipped'] = tried[chosen]['variant']
      record['within_budget'] = bool(passing)
      logger.info('Quantizer (%s): shipping %s (%s): accuracy %.4f against float32 %.4f',
                  mode, tried[chosen]['variant'], ', '.join(shipped[2]) or 'no float layer',
                  tried[chosen]['accuracy'], float_accuracy)
    else:
      record['shipped'], record['within_budget'] = 'int8', True
    tf.io.gfile.rmtree(folder)
    return shipped[0], shipped[1], shipped[2], record

  def _check_raw_flatbuffer(self, folder: str, raw_examples_uri: str, tf_transform_output,
                            label_key: str, label_column: str, eval_examples: int,
                            latency_runs: int) -> dict:
    """The raw flatbuffer against the folder route, on the same raw eval examples."""
    raw_set = measuring.from_raw_examples(raw_examples_uri, measuring.CHOOSE_SPLIT,
                                          tf_transform_output, label_key, label_column,
                                          eval_examples)
    folder_scorer = measuring.load_scorer(folder)
    folder_classes = np.concatenate([folder_scorer.classes(batch)
                                     for batch in raw_set.batches()])
    raw_classes = measuring.raw_flatbuffer_classes(folder, raw_set)
    figures = measuring.measure_raw_flatbuffer(folder, raw_set, latency_runs, raw_classes)
    figures['agreement_with_folder'] = float(np.mean(raw_classes == folder_classes))
    progress.get_logger().info(
        'Quantizer: model_raw.tflite %d bytes, accuracy %.4f on eval, classes agree with the '
        'folder route on %.4f, batch-1 latency %.3f ms on raw columns', figures['size_bytes'],
        figures['accuracy'], figures['agreement_with_folder'], figures['latency_ms'])
    return figures

  def _fine_tune_qat(self, model, examples, tf_transform_output, label_key: str,
                     output_kind: str, steps: int, preserve_sparsity: bool) -> tf_keras.Model:
    """Quantization-aware fine-tuning on the training split."""
    compression = reading.read_options(examples.uri).compression
    qat_model = conversion.quantization_aware_model(model, preserve_sparsity)
    units = int(model.outputs[0].shape[-1])
    loss, metrics = modeling.loss_and_metrics(units, from_logits=output_kind == 'logits')
    qat_model.compile(optimizer=tf_keras.optimizers.Adam(QAT_LEARNING_RATE), loss=loss,
                      metrics=metrics)
    modeling.create_optimizer_slots(qat_model)
    dataset = reading.make_dataset(split_pattern(examples, 'train'), tf_transform_output,
                                   QAT_BATCH_SIZE,
                                   reading.IngestionOptions(compression=compression),
                                   label_key=label_key,
                                   batch_map_fn=modeling.prepare_labels(units))
    epochs = max(1, min(5, steps // 10))
    qat_model.fit(dataset, epochs=epochs, steps_per_epoch=max(1, steps // epochs), verbose=0,
                  callbacks=[callbacks.EpochProgress('qat fine-tuning'),
                             # A QAT fine-tune that runs away fails by name, never shipped.
                             callbacks.DivergenceGuard('Quantizer: QAT fine-tuning',
                                                      relative=False)])
    return qat_model
