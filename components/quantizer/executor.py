"""Quantizer's executor: convert, calibrate or fine-tune, then measure through TFLite."""

import json
import os
from typing import Any, Dict, List

import numpy as np
import tensorflow as tf
import tf_keras
import tensorflow_transform as tft
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.types import standard_component_specs

from components.common import callbacks
from components.common import evaluation
from components.common import measuring
from components.common import modeling
from components.common import progress
from components.common import reading
from components.quantizer import conversion
from components.quantizer import predict
from components.quantizer import spec as quantizer_spec

QAT_BATCH_SIZE = 64
QAT_LEARNING_RATE = 1e-4


def split_pattern(examples: types.Artifact, split: str) -> str:
  return os.path.join(artifact_utils.get_split_uri([examples], split), '*')


class Executor(base_executor.BaseExecutor):
  """Writes `model.tflite`, `serving.json` and `predict.py`; measures before and after."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    with progress.component_timer('Quantizer executor'):
      self._quantize(input_dict, output_dict, exec_properties)

  def _quantize(self, input_dict, output_dict, exec_properties) -> None:
    logger = progress.get_logger()
    mode = exec_properties[quantizer_spec.MODE_KEY]
    io_type = exec_properties[quantizer_spec.IO_TYPE_KEY]
    latency_runs = int(exec_properties[quantizer_spec.LATENCY_RUNS_KEY])
    examples = artifact_utils.get_single_instance(
        input_dict[standard_component_specs.EXAMPLES_KEY])
    graph_uri = artifact_utils.get_single_uri(
        input_dict[standard_component_specs.TRANSFORM_GRAPH_KEY])
    input_model_dir = evaluation.serving_model_path(artifact_utils.get_single_uri(
        input_dict[standard_component_specs.MODEL_KEY]))
    # Format-Serving, as Trainer lays out a Model: Pusher pushes that folder as it is.
    output_dir = os.path.join(artifact_utils.get_single_uri(
        output_dict[quantizer_spec.QUANTIZED_MODEL_KEY]), 'Format-Serving')
    metrics_dir = artifact_utils.get_single_uri(output_dict[quantizer_spec.METRICS_KEY])
    tf_transform_output = tft.TFTransformOutput(graph_uri)
    compression = reading.read_options(examples.uri).compression

    model = tf_keras.models.load_model(input_model_dir, compile=False)
    batches = measuring.eval_batches(
        split_pattern(examples, 'eval'), tf_transform_output,
        int(exec_properties[quantizer_spec.EVAL_EXAMPLES_KEY]), compression=compression)
    calibration = measuring.eval_batches(
        split_pattern(examples, 'train'), tf_transform_output,
        int(exec_properties[quantizer_spec.REPRESENTATIVE_SAMPLES_KEY]), compression=compression)

    def representative_features():
      for features, _ in calibration:
        for index in range(len(next(iter(features.values())))):
          yield {name: values[index:index + 1] for name, values in features.items()}

    if mode == 'qat':
      model = self._fine_tune_qat(model, examples, tf_transform_output, compression,
                                  int(exec_properties[quantizer_spec.QAT_STEPS_KEY]),
                                  bool(exec_properties[quantizer_spec.PRESERVE_SPARSITY_KEY]))
    logger.info('Quantizer: converting to TFLite (%s, %s inputs/outputs)', mode, io_type)
    flatbuffer = conversion.convert(model, mode, representative_features, io_type)
    float_flatbuffer = conversion.convert(tf_keras.models.load_model(input_model_dir,
                                                                     compile=False))

    # Written into a temporary folder that is renamed at the end: a reader (or a
    # killed run) never sees half a model.
    staging_dir = output_dir + '.tmp'
    if tf.io.gfile.exists(staging_dir):
      tf.io.gfile.rmtree(staging_dir)
    tf.io.gfile.makedirs(staging_dir)
    measuring.write_atomically(os.path.join(staging_dir, predict.MODEL_FILE_NAME), flatbuffer)
    measuring.write_atomically(os.path.join(staging_dir, predict.SERVING_FILE_NAME), json.dumps({
        'transform_graph_uri': graph_uri,
        'label_column': exec_properties[quantizer_spec.LABEL_COLUMN_KEY],
        'mode': mode, 'io_type': io_type}, indent=2))
    tf.io.gfile.copy(predict.__file__, os.path.join(staging_dir, 'predict.py'), overwrite=True)
    if tf.io.gfile.exists(output_dir):
      tf.io.gfile.rmtree(output_dir)
    tf.io.gfile.rename(staging_dir, output_dir)

    predictor = predict.TFLitePredictor(output_dir)
    float_dir = os.path.join(metrics_dir, 'float32')
    tf.io.gfile.makedirs(float_dir)
    measuring.write_atomically(os.path.join(float_dir, predict.MODEL_FILE_NAME),
                               float_flatbuffer)
    measuring.write_atomically(os.path.join(float_dir, predict.SERVING_FILE_NAME),
                               json.dumps({'transform_graph_uri': graph_uri}))
    float_predictor = predict.TFLitePredictor(float_dir)
    example = measuring.one_example(batches)

    def tflite_figures(candidate, content):
      return {'size_bytes': len(content),
              'accuracy': measuring.accuracy_of(candidate.logits, batches),
              'latency_ms': measuring.median_latency_ms(lambda: candidate.logits_one(example),
                                                        latency_runs)}

    figures = tflite_figures(predictor, flatbuffer)
    metrics = {
        'mode': mode,
        'io_type': io_type,
        **figures,
        'gzip_bytes': measuring.gzip_bytes(flatbuffer),
        'tensor_dtypes': conversion.tensor_dtypes(flatbuffer),
        'input_model': measuring.keras_figures(
            tf_keras.models.load_model(input_model_dir, compile=False), input_model_dir,
            batches, latency_runs),
        'float32_tflite': {**tflite_figures(float_predictor, float_flatbuffer),
                           'gzip_bytes': measuring.gzip_bytes(float_flatbuffer)},
        'majority_accuracy': measuring.majority_accuracy(batches),
        'eval_examples': int(sum(len(labels) for _, labels in batches)),
    }
    metrics['size_ratio'] = metrics['size_bytes'] / metrics['float32_tflite']['size_bytes']
    metrics['accuracy_drop'] = metrics['float32_tflite']['accuracy'] - metrics['accuracy']
    metrics['latency_ratio'] = metrics['latency_ms'] / metrics['float32_tflite']['latency_ms']
    logger.info('Quantizer (%s): %d bytes (%.3f of float32 TFLite), accuracy %.4f (float32 '
                '%.4f, majority %.4f), batch-1 latency %.3f ms (float32 %.3f ms)', mode,
                metrics['size_bytes'], metrics['size_ratio'], metrics['accuracy'],
                metrics['float32_tflite']['accuracy'], metrics['majority_accuracy'],
                metrics['latency_ms'], metrics['float32_tflite']['latency_ms'])
    modeling.write_metrics(metrics_dir, metrics)

  def _fine_tune_qat(self, model, examples, tf_transform_output, compression, steps: int,
                     preserve_sparsity: bool) -> tf_keras.Model:
    """Quantization-aware fine-tuning on the training split."""
    qat_model = conversion.quantization_aware_model(model, preserve_sparsity)
    units = int(model.outputs[0].shape[-1])
    loss, metrics = modeling.loss_and_metrics(units)
    qat_model.compile(optimizer=tf_keras.optimizers.Adam(QAT_LEARNING_RATE), loss=loss,
                      metrics=metrics)
    dataset = reading.make_dataset(split_pattern(examples, 'train'), tf_transform_output,
                                   QAT_BATCH_SIZE,
                                   reading.IngestionOptions(compression=compression),
                                   batch_map_fn=modeling.prepare_labels(units))
    epochs = max(1, min(5, steps // 10))
    qat_model.fit(dataset, epochs=epochs, steps_per_epoch=max(1, steps // epochs), verbose=0,
                  callbacks=[callbacks.EpochProgress('qat fine-tuning')])
    return qat_model
