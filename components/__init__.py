"""tfx-distillery components: train a big model and ship a small one."""

import os

# tensorflow-model-optimization needs Keras 2; this must happen before TF loads.
os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

from components.distiller import Distiller  # pylint: disable=g-import-not-at-top
from components.distributed_trainer import DistributedTrainer  # pylint: disable=g-import-not-at-top
from components.example_validator import StrictExampleValidator  # pylint: disable=g-import-not-at-top
from components.gate import AccuracyGate  # pylint: disable=g-import-not-at-top
from components.ingest_transform import IngestionTransform  # pylint: disable=g-import-not-at-top
from components.pruner import Pruner  # pylint: disable=g-import-not-at-top
from components.pusher import AtomicPusher  # pylint: disable=g-import-not-at-top
from components.quantizer import Quantizer  # pylint: disable=g-import-not-at-top

__all__ = ['AccuracyGate', 'AtomicPusher', 'Distiller', 'DistributedTrainer', 'IngestionTransform', 'Pruner', 'Quantizer',
           'StrictExampleValidator']
