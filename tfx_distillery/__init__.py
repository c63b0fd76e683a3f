"""tfx-distillery: custom TFX components that train a big model and ship a small one.

The public names load on first use, so `import tfx_distillery` (and the
`distillery` command's `--help`) does not pull in TensorFlow.

Example:

  from tfx_distillery import Distiller, Pruner, Quantizer, AccuracyGate, AtomicPusher
  predictor = tfx_distillery.load_tflite('serving/taxi/1795418403')
  classes = predictor.predict_raw([serialized_example])['classes']
"""

import os

# tensorflow-model-optimization needs Keras 2; this must happen before TensorFlow loads.
os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

__version__ = '0.1.0'

# Public name -> the module that defines it.
_EXPORTS = {
    'AccuracyGate': 'tfx_distillery.components.gate',
    'ArrowCsvExampleGen': 'tfx_distillery.components.csv_example_gen',
    'AtomicPusher': 'tfx_distillery.components.pusher',
    'Distiller': 'tfx_distillery.components.distiller',
    'DistributedTrainer': 'tfx_distillery.components.distributed_trainer',
    'IngestionTransform': 'tfx_distillery.components.ingest_transform',
    'Pruner': 'tfx_distillery.components.pruner',
    'Quantizer': 'tfx_distillery.components.quantizer',
    'StrictExampleValidator': 'tfx_distillery.components.example_validator',
    'TFLitePredictor': 'tfx_distillery.components.quantizer.predict',
    'load_tflite': 'tfx_distillery.components.quantizer.predict',
    'RawFlatbufferPredictor': 'tfx_distillery.components.quantizer.predict',
    'load_raw_flatbuffer': 'tfx_distillery.components.quantizer.predict',
    'create_pipeline': 'tfx_distillery.pipelines.pipeline',
    'preflight_csv': 'tfx_distillery.pipelines.csv_preflight',
    'strategy_for': 'tfx_distillery.components.common.strategy',
    'backup_dir': 'tfx_distillery.components.common.strategy',
}

__all__ = sorted(_EXPORTS)

from tfx_distillery import lazy  # pylint: disable=g-import-not-at-top,wrong-import-position

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS, globals())
