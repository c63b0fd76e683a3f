"""A module file written the stock TFX way: data_accessor, no strategy, no TF_CONFIG."""

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from tfx_bsl.public import tfxio


def _input_fn(file_pattern, data_accessor, tf_transform_output, batch_size):
  return data_accessor.tf_dataset_factory(
      file_pattern, tfxio.TensorFlowDatasetOptions(batch_size=batch_size, label_key='label'),
      tf_transform_output.transformed_metadata.schema).repeat()


def run_fn(fn_args):
  tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
  train_dataset = _input_fn(fn_args.train_files, fn_args.data_accessor, tf_transform_output, 32)
  inputs = {name: tf_keras.Input(shape=(1,), name=name, dtype=spec.dtype)
            for name, spec in tf_transform_output.transformed_feature_spec().items()
            if name != 'label'}
  numbers = [tf_keras.layers.Lambda(lambda tensor: tf.cast(tensor, tf.float32))(tensor)
             for tensor in inputs.values()]
  output = tf_keras.layers.Dense(1, activation='sigmoid')(tf_keras.layers.Concatenate()(numbers))
  model = tf_keras.Model(inputs, output)
  model.compile('adam', 'binary_crossentropy')
  model.fit(train_dataset, steps_per_epoch=fn_args.train_steps, verbose=0)
  model.save(fn_args.serving_model_dir, save_format='tf')
