"""strategy='pipeline' against one device, on 4 logical CPUs (run by test_pipeline_strategy).

Usage: python pipeline_equality.py [S,M ...]

For each (stages, micro-batches) pair, with and without recomputation where asked
(`S,M,r`), prints one JSON line: the one-step gradients' largest difference relative to the
single-device run's largest gradient, the weights' largest difference after `STEPS` SGD
steps, the devices the stages ran on, and where each stage's state and work were placed
after a step with Adam (which keeps two slots per weight): each variable's device, each
slot's, and the requested device of every op of the traced step under a stage's layer,
forward and backward. The model is a chain with no BatchNormalization.
"""

import json
import os
import re
import sys

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

DEVICES = 4
STEPS = 50
BATCH = 22  # uneven: 4 micro-batches of 6, 6, 5, 5; a last batch of 8
LEARNING_RATE = 0.05  # for the 50-step runs


def model(depth=8, width=16, learning_rate=LEARNING_RATE):
  import tf_keras  # pylint: disable=g-import-not-at-top
  layers = [tf_keras.layers.Dense(width, activation='tanh', input_shape=(6,))]
  layers += [tf_keras.layers.Dense(width, activation='tanh') for _ in range(depth - 2)]
  layers.append(tf_keras.layers.Dense(3))
  built = tf_keras.Sequential(layers)
  built.compile(tf_keras.optimizers.SGD(learning_rate),
                tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return built


def main(pairs) -> int:
  cpu = tf.config.list_physical_devices('CPU')[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(DEVICES)])
  import tf_keras  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
  generator = np.random.default_rng(0)
  features = generator.normal(size=(96, 6)).astype('float32')
  labels = generator.integers(0, 3, 96)

  def dataset():
    return tf.data.Dataset.from_tensor_slices((features, labels)).batch(BATCH).repeat()

  def trained(start, steps, stages=None, micro_batches=1, recompute=False):
    # One step at a learning rate of 1 moves each weight by its gradient exactly, so that
    # reading the gradient back loses no more than the weights' own rounding.
    learning_rate = 1.0 if steps == 1 else LEARNING_RATE
    plans = []
    if stages is None:
      run = model(learning_rate=learning_rate)
      run.set_weights(start)
      run.fit(dataset(), steps_per_epoch=steps, verbose=0)
    else:
      with gpipe.Pipelining(stages, micro_batches, recompute) as pipelining:
        run = model(learning_rate=learning_rate)
        run.set_weights(start)
        run.fit(dataset(), steps_per_epoch=steps, verbose=0)
      plans = pipelining.plans
    return run.get_weights(), plans

  def placement(stages, micro_batches, recompute):
    """Where a stage's variables, slots and ops are after one Adam step: what is elsewhere."""
    def same(first, second):
      # A requested device may name the job and task; the device's type and index decide.
      first, second = tf.DeviceSpec.from_string(first), tf.DeviceSpec.from_string(second)
      return (first.device_type, first.device_index) == (second.device_type,
                                                          second.device_index)

    with gpipe.Pipelining(stages, micro_batches, recompute):
      run = model()
      run.compile(tf_keras.optimizers.Adam(0.01),
                  tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
      run.fit(dataset(), steps_per_epoch=1, verbose=0)
    stage_list, devices = run._distillery_stages  # pylint: disable=protected-access
    optimizer = run.optimizer
    variables_elsewhere, slots_elsewhere, slots = [], [], 0
    # A stage's layers' name scopes, and the scope of its gradients' sum, to its device.
    stage_of_layer = {f'{gpipe.SUM_SCOPE}{index}': device
                      for index, device in enumerate(devices)}
    for stage, device in zip(stage_list, devices):
      for layer in stage.layers:
        stage_of_layer[layer.name] = device
        for variable in layer.weights:
          if not same(variable.device, device):
            variables_elsewhere.append(f'{variable.name} on {variable.device}, not {device}')
          index = optimizer._index_dict[optimizer._var_key(variable)]  # pylint: disable=protected-access
          for slot in (optimizer._momentums[index], optimizer._velocities[index]):  # pylint: disable=protected-access
            slots += 1
            if not same(slot.device, device):
              slots_elsewhere.append(f'{slot.name} on {slot.device}, not {device}')
    graph = run.train_function._list_all_concrete_functions()[0].graph  # pylint: disable=protected-access
    # A variable's handle comes into the step as a captured placeholder, and an op that
    # reads or writes it (ReadVariableOp) is run where the variable is, whatever it asked.
    held_on = {internal.op.name: external.device for external, internal in graph.captures}

    def device_of(operation):
      if operation.name in held_on:
        return held_on[operation.name]
      handles = [tensor.op.name for tensor in operation.inputs
                 if tensor.dtype == tf.resource and tensor.op.name in held_on]
      return held_on[handles[0]] if handles and not operation.device else operation.device

    ops, backward, sums, ops_elsewhere = 0, 0, 0, []
    for operation in graph.get_operations():
      # A scope entered again in the same graph (the next micro-batch) gets '_1', '_2' ...
      names = [part if part in stage_of_layer else re.sub(r'_\d+$', '', part)
               for part in operation.name.split('/')]
      names = [name for name in names if name in stage_of_layer]
      if not names:
        continue
      ops += 1
      backward += 'gradient' in operation.name
      sums += gpipe.SUM_SCOPE in operation.name
      wanted = stage_of_layer[names[0]]
      if not same(device_of(operation), wanted):
        ops_elsewhere.append(f'{operation.name} ({operation.type}) on '
                             f'{device_of(operation)!r}, not {wanted}')
    return {'variables': sum(len(layer.weights) for stage in stage_list
                             for layer in stage.layers),
            'variables_elsewhere': variables_elsewhere, 'slots': slots,
            'slots_elsewhere': slots_elsewhere, 'ops': ops, 'backward_ops': backward,
            'gradient_sum_ops': sums,
            'ops_elsewhere': ops_elsewhere[:10], 'ops_elsewhere_count': len(ops_elsewhere)}

  tf_keras.utils.set_random_seed(4)
  start = model().get_weights()
  one_step, _ = trained(start, 1)
  whole_run, _ = trained(start, STEPS)
  reference_gradients = [first - after for first, after in zip(start, one_step)]
  largest = max(np.abs(gradient).max() for gradient in reference_gradients)
  for pair in pairs:
    parts = pair.split(',')
    stages, micro_batches, recompute = int(parts[0]), int(parts[1]), parts[2:] == ['r']
    step, plans = trained(start, 1, stages, micro_batches, recompute)
    gradients = [first - after for first, after in zip(start, step)]
    run, _ = trained(start, STEPS, stages, micro_batches, recompute)
    print(json.dumps({
        'stages': stages, 'micro_batches': micro_batches, 'recompute': recompute,
        'gradient_relative_difference': float(max(
            np.abs(one - other).max() for one, other in zip(gradients, reference_gradients))
                                              / largest),
        'weight_max_abs_difference': float(max(
            np.abs(one - other).max() for one, other in zip(run, whole_run))),
        'devices': [stage['device'] for stage in plans[0]['per_stage']],
        'layers_per_stage': [len(stage['layers']) for stage in plans[0]['per_stage']],
        'placed_variables': plans[0].get('placed_variables'),
        'placement': placement(stages, micro_batches, recompute)}),
          flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:] or ['1,1', '1,4', '1,8', '2,1', '2,4', '2,8', '4,1', '4,4', '4,8']))
