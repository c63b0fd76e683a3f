"""A teacher that reads only the numeric transformed features: a stand-in for a user's own
teacher beside a transform that also passes a string through, which it does not read."""

import tensorflow as tf
import tf_keras

from tfx_distillery.trainer_modules import base


# Called by the DistributedTrainer.
def build_teacher(tf_transform_output, hyperparameters=None):
  settings = base.label_settings(hyperparameters)
  inputs = {name: tensor for name, tensor in base.feature_inputs(
      tf_transform_output, settings['label_key']).items() if tensor.dtype != tf.string}
  hidden = tf_keras.layers.Dense(32, activation='relu')(
      base.encode_features(inputs, tf_transform_output))
  outputs = settings['num_outputs'] or base.output_units(tf_transform_output,
                                                         settings['label_key'])
  return tf_keras.Model(inputs, tf_keras.layers.Dense(outputs, name='logits')(hidden))


# Called by the DistributedTrainer.
def run_fn(fn_args):
  base.train_and_export(fn_args, build_teacher, 'numbers_teacher')
