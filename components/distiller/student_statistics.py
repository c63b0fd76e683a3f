"""The transformed statistics the built-in student scales and sizes its inputs from.

A stock pipeline's Distiller may be given no `statistics` (the argument is optional, and a
stock Trainer needs none). Without them, an integer that a transform passes through with
no vocabulary and no domain (TFX's taxi passes census tracts of about 1.7e10) went into the
student unscaled, and every student diverged. So the Distiller computes what it needs from
the train split of the transformed examples, with TFDV's own statistics generation on Beam
(streamed, in bounded memory), when none are given or when the ones given describe other
data (features missing or extra: StatisticsGen's raw statistics given for the transformed
ones, say), and records which it did in metrics.json.
"""

import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf
import tensorflow_transform as tft

from tfx_distillery.components.common import beam_runner
from tfx_distillery.components.common import labels
from tfx_distillery.components.common import progress

# The folder, under the Distiller's ModelRun output, that computed statistics go to (in
# TFX's layout: Split-train/FeatureStats.pb, as StatisticsGen writes them).
COMPUTED_FOLDER = 'student_statistics'
SPLIT = 'train'


def dense_features(tf_transform_output: tft.TFTransformOutput, label_key: str) -> List[str]:
  """The transformed features the built-in student reads: dense ones, the label left out."""
  return sorted(name for name, spec in tf_transform_output.transformed_feature_spec().items()
                if name != label_key and isinstance(spec, tf.io.FixedLenFeature))


def described_features(statistics_uri: str) -> Optional[List[str]]:
  """The feature names the train split's statistics describe; None when there is no file."""
  from tensorflow_metadata.proto.v0 import statistics_pb2  # pylint: disable=g-import-not-at-top
  path = labels.statistics_file(statistics_uri, SPLIT)
  if path is None:
    return None
  statistics = statistics_pb2.DatasetFeatureStatisticsList()
  with tf.io.gfile.GFile(path, 'rb') as handle:
    statistics.ParseFromString(handle.read())
  return sorted({feature.path.step[-1] if feature.path.step else feature.name
                 for dataset in statistics.datasets for feature in dataset.features})


def mismatch(statistics_uri: str, wanted: Sequence[str]) -> Optional[str]:
  """Why `statistics_uri` does not describe the transformed features, or None when it does."""
  described = described_features(statistics_uri)
  if described is None:
    return f'{statistics_uri} holds no {SPLIT} split statistics (FeatureStats.pb)'
  missing = sorted(set(wanted) - set(described))
  if not missing:
    return None
  extra = sorted(set(described) - set(wanted))
  return (f'the statistics given ({statistics_uri}) lack transformed feature(s) '
          f'{", ".join(missing)}' + (f' and describe other ones ({", ".join(extra[:8])}'
                                     f'{" ..." if len(extra) > 8 else ""}): statistics of '
                                     'other data, such as the raw data\'s' if extra else ''))


def compute(train_files: Sequence[str], output_dir: str) -> Tuple[str, int]:
  """TFDV's statistics of the transformed examples in `train_files`, on this process's Beam.

  Args:
    train_files: File patterns of the train split's transformed tf.Examples.
    output_dir: Where the statistics go, as `Split-train/FeatureStats.pb`.

  Returns:
    (output_dir, the rows counted).
  """
  import apache_beam as beam  # pylint: disable=g-import-not-at-top
  import tensorflow_data_validation as tfdv  # pylint: disable=g-import-not-at-top
  from tfx_bsl.public import tfxio  # pylint: disable=g-import-not-at-top
  split_dir = os.path.join(output_dir, f'Split-{SPLIT}')
  tf.io.gfile.makedirs(split_dir)
  path = os.path.join(split_dir, 'FeatureStats.pb')
  temporary = path + '.tmp'
  source = tfxio.TFExampleRecord(file_pattern=list(train_files),
                                 telemetry_descriptors=['tfx_distillery', 'Distiller'])
  options = beam.options.pipeline_options.PipelineOptions(beam_runner.with_direct_runner(
      ['--direct_running_mode=in_memory', '--direct_num_workers=1']))
  with beam.Pipeline(options=options) as pipeline:
    _ = (pipeline
         | 'Read' >> source.BeamSource()
         | 'Statistics' >> tfdv.GenerateStatistics(tfdv.StatsOptions())
         | 'Write' >> tfdv.WriteStatisticsToBinaryFile(temporary))
  tf.io.gfile.rename(temporary, path, overwrite=True)
  loaded = tfdv.load_stats_binary(path)
  return output_dir, int(loaded.datasets[0].num_examples) if loaded.datasets else 0


def resolve(statistics_uri: Optional[str], train_files: Sequence[str],
            tf_transform_output: tft.TFTransformOutput, label_key: str,
            output_dir: str) -> Tuple[str, Dict[str, Any]]:
  """The statistics the built-in student reads: those given when they fit, else computed.

  Args:
    statistics_uri: The Distiller's `statistics` input, or None.
    train_files: The train split's transformed examples (file patterns).
    tf_transform_output: The transform, for the features the student reads.
    label_key: The transformed label, which the student does not read.
    output_dir: Where computed statistics go.

  Returns:
    (the statistics' URI, what metrics.json records: source 'given' or 'computed', why, and
    for computed ones the rows and seconds).
  """
  logger = progress.get_logger()
  wanted = dense_features(tf_transform_output, label_key)
  if statistics_uri:
    why = mismatch(statistics_uri, wanted)
    if why is None:
      return statistics_uri, {'source': 'given', 'uri': statistics_uri}
    logger.warning('WARNING: Distiller (built-in student): %s; computing the transformed '
                   'statistics from the train split instead.', why)
  else:
    why = ('no statistics given: the built-in student scales its inputs by the transformed '
           'train split\'s statistics')
    logger.info('Distiller (built-in student): no statistics given; computing them from the '
                'train split of the transformed examples (TFDV, streamed)')
  started = time.monotonic()
  computed_uri, rows = compute(train_files, output_dir)
  seconds = time.monotonic() - started
  logger.info('Distiller (built-in student): statistics of %d train rows computed in %.1f s',
              rows, seconds)
  missing = sorted(set(wanted) - set(described_features(computed_uri) or []))
  if missing:
    # A feature with no value in any train row: nothing to scale it by.
    logger.warning('WARNING: Distiller (built-in student): the train split has no value of '
                   '%s; those features go in unscaled.', ', '.join(missing))
  return computed_uri, {'source': 'computed', 'why': why, 'uri': computed_uri, 'rows': rows,
                        'seconds': round(seconds, 1)}
