"""A stock-style module file whose model is a chain after its inputs: strategy='pipeline'."""

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from tfx_bsl.public import tfxio

LAYERS = 6


def run_fn(fn_args):
  tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
  dataset = fn_args.data_accessor.tf_dataset_factory(
      fn_args.train_files, tfxio.TensorFlowDatasetOptions(batch_size=32, label_key='label'),
      tf_transform_output.transformed_metadata.schema).repeat()
  inputs = {name: tf_keras.Input(shape=(1,), name=name, dtype=spec.dtype)
            for name, spec in tf_transform_output.transformed_feature_spec().items()
            if name != 'label'}
  numbers = [tf_keras.layers.Lambda(lambda tensor: tf.cast(tensor, tf.float32))(tensor)
             for tensor in inputs.values()]
  hidden = tf_keras.layers.Concatenate()(numbers)
  for _ in range(LAYERS):
    hidden = tf_keras.layers.Dense(16, activation='relu')(hidden)
  output = tf_keras.layers.Dense(1, activation='sigmoid')(hidden)
  model = tf_keras.Model(inputs, output)
  model.compile('adam', 'binary_crossentropy')
  model.fit(dataset, steps_per_epoch=fn_args.train_steps, verbose=0)
  model.save(fn_args.serving_model_dir, save_format='tf')
