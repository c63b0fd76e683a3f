"""A run_fn whose worker 1 never reaches the model: worker 0 waits in the first broadcast."""

import json
import os
import time

import tf_keras

from tfx_distillery.components.common import progress
from tfx_distillery.components.common import strategy as strategy_lib


def run_fn(fn_args):
  tf_config = json.loads(os.environ.get('TF_CONFIG') or '{}')
  if tf_config.get('task', {}).get('index') == 1:
    progress.get_logger().info('stuck: sleeping before the first broadcast')
    time.sleep(3600)  # Stuck before the collective its peer waits in.
  with strategy_lib.strategy_for(fn_args).scope():
    model = tf_keras.Sequential([tf_keras.Input(shape=(2,)), tf_keras.layers.Dense(1)])
  model.save(fn_args.serving_model_dir, save_format='tf')
