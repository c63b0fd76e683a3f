"""A user's run_fn written as the DistributedTrainer README shows, with early stopping added.

It fits with a learning rate far too large, so the eval loss stops falling within
a few epochs, and writes what it saw to model_run_dir for the test to read.
"""

import json
import os

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras
from tfx_bsl.public import tfxio

from tfx_distillery.components.distributed_trainer import (
    backup_dir, early_stopping_callback, strategy_for)

EPOCHS = 8


def _input_fn(file_pattern, data_accessor, tf_transform_output, batch_size, shuffle=True):
  return data_accessor.tf_dataset_factory(
      file_pattern, tfxio.TensorFlowDatasetOptions(batch_size=batch_size, shuffle=shuffle,
                                                   label_key='label'),
      tf_transform_output.transformed_metadata.schema).repeat()


def run_fn(fn_args):
  tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
  train_dataset = _input_fn(fn_args.train_files, fn_args.data_accessor, tf_transform_output, 32)
  # The same eval batches every time, so the final evaluation repeats the kept epoch's.
  eval_dataset = _input_fn(fn_args.eval_files, fn_args.data_accessor, tf_transform_output, 32,
                           shuffle=False)
  strategy = strategy_for(fn_args)
  with strategy.scope():
    inputs = {name: tf_keras.Input(shape=(1,), name=name, dtype=spec.dtype)
              for name, spec in tf_transform_output.transformed_feature_spec().items()
              if name != 'label'}
    numbers = [tf_keras.layers.Lambda(lambda tensor: tf.cast(tensor, tf.float32))(tensor)
               for tensor in inputs.values()]
    hidden = tf_keras.layers.Dense(32, activation='relu')(tf_keras.layers.Concatenate()(numbers))
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(1, activation='sigmoid')(hidden))
    model.compile(tf_keras.optimizers.SGD(learning_rate=5.0), 'binary_crossentropy')
  stopping = early_stopping_callback(fn_args)
  history = model.fit(
      train_dataset, epochs=EPOCHS, steps_per_epoch=max(1, fn_args.train_steps // EPOCHS),
      validation_data=eval_dataset, validation_steps=fn_args.eval_steps, verbose=0,
      callbacks=[tf_keras.callbacks.BackupAndRestore(backup_dir(fn_args))]
      + ([stopping] if stopping else []))
  final_eval_loss = model.evaluate(eval_dataset, steps=fn_args.eval_steps, verbose=0)
  with open(os.path.join(fn_args.model_run_dir, 'seen.json'), 'w') as handle:
    json.dump({'val_loss': history.history['val_loss'], 'final_eval_loss': final_eval_loss,
               'stopping': stopping.describe() if stopping else None}, handle)
  model.save(fn_args.serving_model_dir, save_format='tf')
