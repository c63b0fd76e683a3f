"""Small-data builders shared by the tests (transform outputs, sampled CSVs)."""

import os
import tempfile

import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata
from tensorflow_transform.tf_metadata import schema_utils


def run_transform(preprocessing_fn, rows, raw_feature_spec, output_dir,
                  num_shards: int = 4):
  """Runs a preprocessing_fn with tf.Transform on in-memory rows.

  Writes the transform graph to `output_dir/transform_graph` and the
  transformed examples as GZIP shards under `output_dir/examples`.

  Returns:
    (tft.TFTransformOutput, file pattern of the transformed shards).
  """
  metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(
      raw_feature_spec))
  graph_dir = os.path.join(output_dir, 'transform_graph')
  examples_prefix = os.path.join(output_dir, 'examples', 'part')
  with tft_beam.Context(temp_dir=tempfile.mkdtemp(dir=output_dir)):
    import apache_beam as beam
    with beam.Pipeline() as pipeline:
      raw = pipeline | beam.Create(rows)
      (transformed, transformed_metadata), transform_fn = (
          (raw, metadata) | tft_beam.AnalyzeAndTransformDataset(preprocessing_fn))
      coder = tft.coders.ExampleProtoCoder(transformed_metadata.schema)
      _ = (transformed | beam.Map(coder.encode)
           | beam.io.WriteToTFRecord(examples_prefix, num_shards=num_shards,
                                     file_name_suffix='.gz',
                                     compression_type=beam.io.filesystem.CompressionTypes.GZIP))
      _ = transform_fn | tft_beam.WriteTransformFn(graph_dir)
  return tft.TFTransformOutput(graph_dir), examples_prefix + '*'


def serialize(feature_values: dict) -> bytes:
  """A tf.Example from {name: python value or list}."""
  features = {}
  for name, value in feature_values.items():
    values = value if isinstance(value, (list, tuple)) else [value]
    if isinstance(values[0], str):
      features[name] = tf.train.Feature(bytes_list=tf.train.BytesList(
          value=[item.encode() for item in values]))
    elif isinstance(values[0], float):
      features[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    else:
      features[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
  return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()
