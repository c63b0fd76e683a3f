"""GPipe's pipeline parallelism for a Keras chain of layers: stages, micro-batches, one step.

GPipe (Huang et al., 2019) cuts a network into S stages of consecutive layers, puts stage s
on device s and splits every batch into M micro-batches, so that stage s works on
micro-batch m while stage s + 1 works on micro-batch m - 1. Gradients are accumulated over
the micro-batches and applied once, so S and M do not change the model.

Here one `tf.function` (Keras' train function) holds every (stage, micro-batch) pair.
Each stage owns its device: its variables are made there before the first step (so the
optimizer's slots, made beside them, are there too), and its forward ops, its backward
ops and the sum of its gradients over the micro-batches are placed there. The backward
pass runs stage by stage, each stage's own `GradientTape` from the gradient of what it
handed on, so that no backward op waits on a device that holds none of its inputs.
TensorFlow's executor runs an op as soon as its inputs are ready, so the (stage,
micro-batch) pairs overlap, forward and backward, with no scheduler of ours; the
gradient of a variable used by M micro-batches is their sum.

Where the model may be cut: after a layer where one tensor alone carries everything the
rest of the model reads (a chain's every layer; in a functional model, not inside a
branch, since a branch's two paths would both cross the cut). Stages are made of the
pieces between such cuts ("units"), balanced by each unit's measured forward-and-backward
time on real batches: the split that minimises the slowest stage, GPipe's rule, found
exactly by dynamic programming over the contiguous splits.
"""

import dataclasses
import functools
import json
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tfx_distillery.components.common import progress

STAGES_KEY = 'stages'
# Where the executor asks the plan to be written (model_run/pipeline_plan.json).
PLAN_PATH_VARIABLE = 'DISTILLERY_PIPELINE_PLAN'
PLAN_FILE_NAME = 'pipeline_plan.json'
# Batches the partitioner times each unit on, after one untimed call (tracing, warm-up).
MEASURED_BATCHES = 3
# The name scope of stage s's sum of gradients over the micro-batches: SUM_SCOPE + s.
SUM_SCOPE = 'pipeline_stage_gradient_sum_'


def validate_stages(stages) -> None:
  """Raises ValueError naming `stages` unless it is a whole number >= 1."""
  if isinstance(stages, bool) or not isinstance(stages, int) or stages < 1:
    raise ValueError(f'{STAGES_KEY} must be a whole number >= 1 (pipeline stages, one per '
                     f'device); got {stages!r}.')


def bubble_share(stages: int, micro_batches: int) -> float:
  """GPipe's idle share of a step: (S - 1) / (M + S - 1)."""
  return (stages - 1) / (micro_batches + stages - 1)


# ----------------------------------------------------------------------------- the graph


def _ordered_nodes(model) -> list:
  """The model's nodes in an order that computes each after its inputs (deepest first)."""
  if not getattr(model, '_is_graph_network', False):
    raise ValueError(
        f"strategy='pipeline' needs a Keras Sequential or functional model whose input shape "
        f'is known (an Input layer or `input_shape`); {type(model).__name__} '
        f'{model.name!r} is a subclassed or unbuilt model.')
  nodes = []
  for depth in sorted(model._nodes_by_depth, reverse=True):  # pylint: disable=protected-access
    nodes.extend(model._nodes_by_depth[depth])  # pylint: disable=protected-access
  return nodes


@dataclasses.dataclass
class Unit:
  """Consecutive layers between two places where the model may be cut."""
  nodes: list
  layer_names: List[str]
  parameters: int
  # The one tensor read after this unit (None for the last unit).
  crossing_id: Optional[str] = None
  seconds: float = 0.0
  activation_bytes: int = 0
  weight_bytes: int = 0


def units_of(model) -> List[Unit]:
  """Splits the model at every place one tensor alone crosses; the pieces, in order.

  Raises:
    ValueError: naming a layer called more than once (shared layers cannot be staged).
  """
  nodes = _ordered_nodes(model)
  seen_layers = set()
  for node in nodes:
    if not node.is_input and id(node.layer) in seen_layers:
      raise ValueError(f"strategy='pipeline': layer {node.layer.name!r} is called more than "
                       'once in the model; a shared layer cannot sit in one stage.')
    seen_layers.add(id(node.layer))
  outputs = {str(id(tensor)) for tensor in model.outputs}
  # Position of the last node that reads each tensor (a model output is read at the end).
  last_reader = {}
  for position, node in enumerate(nodes):
    for tensor_id in node.flat_input_ids:
      last_reader[tensor_id] = position
  for tensor_id in outputs:
    last_reader[tensor_id] = len(nodes)
  # The batch's features are there from the start: a stage after a cut that still reads
  # one of them would need two inputs, so no cut comes before its last reader.
  pieces, current = [], []
  live = {str(id(tensor)) for tensor in model.inputs}
  for position, node in enumerate(nodes):
    current.append(node)
    live.update(node.flat_output_ids)
    live = {tensor_id for tensor_id in live if last_reader.get(tensor_id, -1) > position}
    # A cut after this node is possible when one tensor alone is still to be read, and
    # this node is a layer (not an Input: a stage must hold some work).
    if len(live) == 1 and not node.is_input and position < len(nodes) - 1:
      pieces.append((current, next(iter(live))))
      current = []
  if current:
    pieces.append((current, None))
  return [Unit(nodes=piece, layer_names=[node.layer.name for node in piece if not node.is_input],
               parameters=sum(_parameters(node.layer) for node in piece if not node.is_input),
               weight_bytes=sum(_weight_bytes(node.layer) for node in piece
                                if not node.is_input),
               crossing_id=crossing)
          for piece, crossing in pieces]


def _parameters(layer) -> int:
  return int(sum(int(variable.shape.num_elements() or 0) for variable in layer.weights))


def _weight_bytes(layer) -> int:
  return int(sum(int(variable.shape.num_elements() or 0) * variable.dtype.size
                 for variable in layer.weights))


def first_crossing_layer(model, after_units: List[Unit]) -> str:
  """The layer that reads a tensor from before the end of `after_units` besides the next one.

  What a user must change for the model to be cut there: the layer whose inputs cross.
  """
  nodes = _ordered_nodes(model)
  boundary = sum(len(unit.nodes) for unit in after_units)
  before = set()
  for node in nodes[:boundary]:
    before.update(node.flat_output_ids)
  readers = [node for node in nodes[boundary:] if set(node.flat_input_ids) & before]
  return readers[-1].layer.name if readers else nodes[-1].layer.name


# ----------------------------------------------------------------------------- running


def run_nodes(model, nodes, values: Dict[str, Any], training: bool) -> None:
  """Calls each node's layer on `values` (tensor id -> tensor), adding what it outputs."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  usage = model._tensor_usage_count  # pylint: disable=protected-access
  for node in nodes:
    if node.is_input:
      continue
    # Node.map_arguments pops one use per read, as Keras' own graph walk does.
    pools = {tensor_id: [values[tensor_id]] * max(1, usage.get(tensor_id, 1))
             for tensor_id in node.flat_input_ids}
    args, kwargs = node.map_arguments(pools)
    if getattr(node.layer, '_expects_training_arg', False):
      kwargs = {**kwargs, 'training': training}
    outputs = node.layer(*args, **kwargs)
    for tensor_id, value in zip(node.flat_output_ids, tf.nest.flatten(outputs)):
      values[tensor_id] = value


def model_input_values(model, inputs) -> Dict[str, Any]:
  """The model's Input tensors' ids -> the batch's tensors, as Keras' own call maps them."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  flat = model._flatten_to_reference_inputs(inputs)  # pylint: disable=protected-access
  return {str(id(reference)): model._conform_to_reference_input(  # pylint: disable=protected-access
      value if isinstance(value, (tf.Tensor, tf.SparseTensor, tf.RaggedTensor))
      else tf.convert_to_tensor(value), ref_input=reference)
          for reference, value in zip(model.inputs, flat)}


class Stage:
  """Consecutive units run as one function: input tensors in, the crossing tensor out."""

  def __init__(self, model, units: Sequence[Unit], input_ids: List[str], last: bool):
    self.model = model
    self.nodes = [node for unit in units for node in unit.nodes]
    self.input_ids = input_ids
    self.last = last
    self.output_ids = ([str(id(tensor)) for tensor in model.outputs] if last
                       else [units[-1].crossing_id])

  def __call__(self, *tensors):
    values = dict(zip(self.input_ids, tensors))
    run_nodes(self.model, self.nodes, values, training=True)
    outputs = [values[tensor_id] for tensor_id in self.output_ids]
    return outputs[0] if len(outputs) == 1 else outputs

  @property
  def layers(self):
    return [node.layer for node in self.nodes if not node.is_input]

  @property
  def variables(self):
    return [variable for layer in self.layers for variable in layer.trainable_weights]


def stage_functions(model, units: List[Unit], boundaries: List[int]) -> List[Stage]:
  """Stages over `units`; `boundaries[s]` is the first unit of stage s + 1."""
  stages, start = [], 0
  input_ids = [str(id(tensor)) for tensor in model.inputs]
  ends = list(boundaries) + [len(units)]
  for index, end in enumerate(ends):
    stage = Stage(model, units[start:end], input_ids, last=index == len(ends) - 1)
    stages.append(stage)
    input_ids = stage.output_ids
    start = end
  return stages


# ----------------------------------------------------------------------------- the plan


def best_split(costs: Sequence[float], stages: int) -> Tuple[List[int], float]:
  """The contiguous split of `costs` into `stages` non-empty parts with the smallest maximum.

  Dynamic programming over (units used, stages made): exact, O(S * N^2).

  Returns:
    (boundaries, slowest): boundaries[s] is the first index of part s + 1.
  """
  count = len(costs)
  if not 1 <= stages <= count:
    raise ValueError(f'{STAGES_KEY}={stages} needs between 1 and {count} units.')
  prefix = [0.0]
  for cost in costs:
    prefix.append(prefix[-1] + cost)
  infinity = float('inf')
  # best[s][n]: the smallest slowest-part over splits of the first n units into s parts.
  best = [[infinity] * (count + 1) for _ in range(stages + 1)]
  choice = [[0] * (count + 1) for _ in range(stages + 1)]
  best[0][0] = 0.0
  for parts in range(1, stages + 1):
    for used in range(parts, count + 1):
      for previous in range(parts - 1, used):
        slowest = max(best[parts - 1][previous], prefix[used] - prefix[previous])
        if slowest < best[parts][used]:
          best[parts][used], choice[parts][used] = slowest, previous
  boundaries, used = [], count
  for parts in range(stages, 1, -1):
    used = choice[parts][used]
    boundaries.append(used)
  return sorted(boundaries), best[stages][count]


def exhaustive_slowest(costs: Sequence[float], stages: int) -> float:
  """The smallest slowest part over every contiguous split, by trying them all.

  What `best_split` must equal; C(N - 1, S - 1) splits, so for checks, not for planning.
  """
  import itertools  # pylint: disable=g-import-not-at-top
  best = float('inf')
  for cuts in itertools.combinations(range(1, len(costs)), stages - 1):
    edges = (0,) + cuts + (len(costs),)
    best = min(best, max(sum(costs[start:end]) for start, end in zip(edges, edges[1:])))
  return best


def _plain_python_in_the_trace(function):
  """`function` as AutoGraph leaves it: plain Python inside a traced function.

  Our stage loops hold no control flow that depends on a tensor, and AutoGraph converted
  them, and tf_keras' layer, tape and optimizer code that they call (tf_keras, unlike
  keras, is not on AutoGraph's do-not-convert list), for every stage and micro-batch:
  two-thirds of a four-stage fit's CPU time. What the model brings is converted as Keras'
  own train step would convert it: under AutoGraph's enabled status, a subclassed layer's
  `call` and a loss or metric function go through AutoGraph as they do there.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tensorflow.python.autograph.core import ag_ctx  # pylint: disable=g-import-not-at-top,g-direct-tensorflow-import

  @functools.wraps(function)
  def wrapper(*args, **kwargs):
    with ag_ctx.ControlStatusCtx(status=ag_ctx.Status.ENABLED):
      return function(*args, **kwargs)

  return tf.autograph.experimental.do_not_convert(wrapper)


def measure_units(model, units: List[Unit], batches: List[Any]) -> None:
  """Times each unit's forward and backward pass and sizes its activations, on real batches.

  Sets `seconds` (the median over `batches` after one untimed call) and
  `activation_bytes` (what the unit's layers output for the largest batch, which the
  backward pass keeps) on every unit.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  input_ids = [str(id(tensor)) for tensor in model.inputs]
  per_batch_inputs = []
  for batch in batches:
    values = model_input_values(model, batch)
    per_batch_inputs.append([values[tensor_id] for tensor_id in input_ids])
  for index, unit in enumerate(units):
    stage = Stage(model, [unit], input_ids, last=index == len(units) - 1)
    function = tf.function(_plain_python_in_the_trace(
        lambda *tensors, stage=stage: _forward_backward(stage, tensors)))
    timings, outputs_for_next, activation = [], [], 0
    for position, tensors in enumerate(per_batch_inputs):
      function(*tensors)  # The first call traces; every call warms.
      started = time.perf_counter()
      result = function(*tensors)
      timings.append(time.perf_counter() - started)
      outputs = stage(*tensors)
      outputs_for_next.append(list(outputs) if isinstance(outputs, list) else [outputs])
      if position == 0:
        activation = _activation_bytes(model, unit, dict(zip(input_ids, tensors)))
      del result
    unit.seconds = float(np.median(timings))
    unit.activation_bytes = activation
    input_ids = stage.output_ids
    per_batch_inputs = outputs_for_next


def _forward_backward(stage, tensors):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with tf.GradientTape() as tape:
    tape.watch([tensor for tensor in tensors if tensor.dtype.is_floating])
    outputs = stage(*tensors)
    total = tf.add_n([tf.reduce_sum(tf.cast(output, tf.float32))
                      for output in tf.nest.flatten(outputs)])
  sources = stage.variables + [tensor for tensor in tensors if tensor.dtype.is_floating]
  return tape.gradient(total, sources, unconnected_gradients=tf.UnconnectedGradients.ZERO)


def _activation_bytes(model, unit: Unit, values: Dict[str, Any]) -> int:
  run_nodes(model, unit.nodes, values, training=True)
  total = 0
  for node in unit.nodes:
    if node.is_input:
      continue  # The batch itself: the data, not an activation.
    for tensor_id in node.flat_output_ids:
      value = values.get(tensor_id)
      if value is not None and hasattr(value, 'shape'):
        total += int(value.shape.num_elements() or 0) * value.dtype.size
  return total


def make_plan(model, stages: int, micro_batches: int, devices: List[str],
              batches: List[Any]) -> Dict[str, Any]:
  """Measures the model's units on `batches` and splits them into `stages` stages.

  Returns:
    The plan: per stage its layers, parameters, measured seconds and activation bytes,
    and the boundaries (`unit_boundaries`) that `pipelined_train_step` uses.

  Raises:
    ValueError: naming `stages` when the model has fewer layers, or naming the layer
      whose inputs cross a stage boundary when it has too few places to cut.
  """
  units = units_of(model)
  layers = sum(len(unit.layer_names) for unit in units)
  if stages > layers:
    raise ValueError(f'{STAGES_KEY}={stages} is more than the {layers} layers of model '
                     f'{model.name!r}: every stage needs at least one layer.')
  if stages > len(units):
    # Name what stops a cut: the layer whose inputs come from across the first place
    # that is not a cut.
    crossing = first_crossing_layer(model, units[:1]) if units else model.name
    raise ValueError(
        f"strategy='pipeline' with {STAGES_KEY}={stages} needs the model cut in "
        f'{stages - 1} places where one tensor alone crosses; model {model.name!r} has '
        f'{len(units) - 1}: layer {crossing!r} takes inputs that cross a stage boundary. '
        'Pipeline stages need a chain of layers.')
  measure_units(model, units, batches)
  boundaries, slowest = best_split([unit.seconds for unit in units], stages)
  ends = boundaries + [len(units)]
  per_stage, start = [], 0
  for index, end in enumerate(ends):
    members = units[start:end]
    per_stage.append({
        'stage': index, 'device': devices[index],
        'layers': [name for unit in members for name in unit.layer_names],
        'parameters': sum(unit.parameters for unit in members),
        'weight_bytes': sum(unit.weight_bytes for unit in members),
        'seconds': sum(unit.seconds for unit in members),
        'activation_bytes': sum(unit.activation_bytes for unit in members)})
    start = end
  return {'stages': stages, 'micro_batches': micro_batches,
          'predicted_bubble_share': bubble_share(stages, micro_batches),
          'slowest_stage_seconds': slowest, 'unit_boundaries': boundaries,
          'units': [{'layers': unit.layer_names, 'seconds': unit.seconds,
                     'parameters': unit.parameters, 'activation_bytes': unit.activation_bytes}
                    for unit in units],
          'per_stage': per_stage}


# ----------------------------------------------------------------------------- devices


def devices_for(stages: int) -> List[str]:
  """One device per stage: GPUs where there are enough, else CPUs (logical ones included).

  Raises:
    ValueError: naming both numbers when the machine has fewer devices than stages.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  gpus = tf.config.list_logical_devices('GPU')
  if len(gpus) >= stages:
    return [device.name for device in gpus[:stages]]
  cpus = tf.config.list_logical_devices('CPU')
  if len(cpus) >= stages:
    return [device.name for device in cpus[:stages]]
  raise ValueError(
      f'{STAGES_KEY}={stages} is more than the devices this machine has ({len(gpus)} GPUs, '
      f'{len(cpus)} CPUs); give stages <= {max(len(gpus), len(cpus))}, or '
      'logical_devices=True to split a device into logical ones.')


def split_into_logical_devices(stages: int) -> None:
  """Splits the first CPU into `stages` logical devices (before TensorFlow starts its context).

  Stages then run as on separate devices, on one machine's cores: a test of the schedule
  and the numbers, not of speed.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  cpu = tf.config.list_physical_devices('CPU')[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(stages)])


# ----------------------------------------------------------------------------- placement


def _copy_on(variable, device: str):
  """A new variable on `device` with `variable`'s value, name, dtype and aggregation.

  A mixed-precision model's AutoCastVariable is copied as one.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_keras.src.mixed_precision import autocast_variable  # pylint: disable=g-import-not-at-top
  if isinstance(variable, autocast_variable.AutoCastVariable):
    return autocast_variable.create_autocast_variable(
        _copy_on(variable._variable, device))  # pylint: disable=protected-access
  with tf.init_scope(), tf.device(device):
    return tf.Variable(variable.read_value(), name=variable.name.split(':')[0],
                       trainable=variable.trainable, dtype=variable.dtype,
                       shape=variable.shape, synchronization=variable.synchronization,
                       aggregation=variable.aggregation)


def place_weights(stage_list: List[Stage], devices: List[str]) -> int:
  """Makes each stage's weights anew on its device, values and order kept.

  Keras made them on the default device when the model was built; left there, every
  stage would read its weights from that device at every micro-batch, and the optimizer
  would keep their slots there too. Each layer (and each layer inside it) gets its
  variables replaced where they are held: the attribute, and the same place in its
  weight lists, so that `get_weights`, saving and checkpoints see the model as it was.

  Returns:
    How many variables moved.
  """
  moved = 0
  for stage, device in zip(stage_list, devices):
    for layer in stage.layers:
      for owner in layer._flatten_layers(include_self=True, recursive=True):  # pylint: disable=protected-access
        for list_name in ('_trainable_weights', '_non_trainable_weights'):
          weights = owner.__dict__.get(list_name)
          if not weights:
            continue
          for index, old in enumerate(list(weights)):
            if _on_device(old, device):
              continue
            new = _copy_on(old, device)
            for attribute, value in list(vars(owner).items()):
              if value is old:
                setattr(owner, attribute, new)  # Keras tracks it under that name.
            # Keras' attribute tracking may have appended it: keep the list's order.
            for position in range(len(weights) - 1, -1, -1):
              if weights[position] is new or weights[position] is old:
                del weights[position]
            weights.insert(index, new)
            moved += 1
  return moved


def _on_device(variable, device: str) -> bool:
  """Whether `variable` is on `device` (by type and index: job and task may be named)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  held, wanted = tf.DeviceSpec.from_string(variable.device), tf.DeviceSpec.from_string(device)
  return (bool(variable.device) and (held.device_type or '').upper() == (
      wanted.device_type or '').upper() and held.device_index == wanted.device_index)


def weights_held_elsewhere(model, optimizer) -> Optional[str]:
  """Why the weights cannot move (slots already made, or a strategy that placed them), or None."""
  # Keras' optimizer marks itself built when it makes its slots; the legacy one keeps them
  # in `_slots`.
  if getattr(optimizer, '_built', False) or getattr(optimizer, '_slots', None):
    return (f'the optimizer of model {model.name!r} already holds slots for its weights '
            '(it trained before this fit)')
  # A module that builds its model under a tf.distribute strategy of its own (TFX's
  # penguin module uses MirroredStrategy): that strategy places its variables, and its
  # optimizer takes no others.
  strategies = {type(strategy).__name__ for strategy in (
      getattr(variable, '_distribute_strategy', None) for variable in model.weights)
                if strategy is not None}
  if strategies:
    return (f'model {model.name!r} was built under {", ".join(sorted(strategies))}, which '
            'places its variables itself')
  return None


# ----------------------------------------------------------------------------- the step


def pipelined_train_step(model, data, stage_list: List[Stage], devices: List[str],
                         micro_batches: int, recompute: bool):
  """One GPipe step: every (stage, micro-batch) pair in this function, one update.

  Forward, micro-batch by micro-batch: each stage on its device, under a tape of its own.
  The loss (on the last stage's device) gives the gradient of what the last stage handed
  on; then, stage by stage backwards, each stage's tape turns the gradient of its outputs
  into those of its inputs (handed to the stage before) and of its variables, summed over
  the micro-batches on its device. With `recompute`, a stage keeps only its inputs and
  runs its forward pass again in its backward one (`tf.recompute_grad`), on its device.
  A loss term read from the weights themselves (a kernel regularizer) adds its gradient,
  computed with the loss, on the weight's device.
  """
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_keras.src.engine import data_adapter  # pylint: disable=g-import-not-at-top
  from tf_keras.src.engine import training  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import micro_batches as micro  # pylint: disable=g-import-not-at-top
  x, y, sample_weight = data_adapter.unpack_x_y_sample_weight(data)
  batch_size, static_batch_size = micro._batch_size(x)  # pylint: disable=protected-access
  if static_batch_size is not None and static_batch_size < micro_batches:
    raise ValueError(f'{micro.MICRO_BATCHES_KEY}={micro_batches} is above the batch size '
                     f'{static_batch_size}: every micro-batch needs at least one example.')
  tf.debugging.assert_greater_equal(
      batch_size, micro_batches,
      message=f"strategy='pipeline': a batch has fewer rows than {micro.MICRO_BATCHES_KEY}="
              f'{micro_batches}')
  whole = tf.cast(batch_size, tf.float32)
  keras_metrics = type(model).compute_metrics is training.Model.compute_metrics
  functions = [tf.recompute_grad(stage) if recompute else stage for stage in stage_list]
  optimizer = model.optimizer
  scales_loss = hasattr(optimizer, 'get_scaled_loss') and hasattr(
      optimizer, 'get_unscaled_gradients')
  variables = model.trainable_variables
  # Each variable's stage, by identity: its gradient is summed on that stage's device.
  stage_of = {id(variable): index for index, stage in enumerate(stage_list)
              for variable in stage.variables}
  sums: List[Any] = [None] * len(variables)

  def add(position, gradient, stage):
    # On the stage's device, named for it: the sum over micro-batches is the stage's own.
    if gradient is None:
      return
    with tf.device(devices[stage]), tf.name_scope(f'{SUM_SCOPE}{stage}'):
      sums[position] = gradient if sums[position] is None else sums[position] + gradient

  position_of = {id(variable): position for position, variable in enumerate(variables)}
  for start, size in micro.micro_batch_bounds(batch_size, micro_batches):
    micro_x = micro._slice(x, start, size)  # pylint: disable=protected-access
    micro_y = micro._slice(y, start, size)  # pylint: disable=protected-access
    micro_weight = micro._slice(sample_weight, start, size)  # pylint: disable=protected-access
    values = model_input_values(model, micro_x)
    tensors = [values[tensor_id] for tensor_id in stage_list[0].input_ids]
    passes = []
    for index, (function, device) in enumerate(zip(functions, devices)):
      with tf.device(device), tf.GradientTape() as tape:
        # The first stage's inputs are the batch: no gradient is wanted for them.
        watched = [] if index == 0 else [tensor for tensor in tensors
                                         if _differentiable(tensor)]
        tape.watch(watched)
        outputs = function(*tensors)
      outputs = outputs if isinstance(outputs, list) else [outputs]
      passes.append((tape, tensors, watched, outputs))
      tensors = outputs
    prediction = tf.nest.pack_sequence_as(model._nested_outputs, tensors)  # pylint: disable=protected-access
    with tf.device(devices[-1]), tf.GradientTape() as loss_tape:
      loss_tape.watch([tensor for tensor in tensors if _differentiable(tensor)])
      loss = model.compute_loss(micro_x, micro_y, prediction, micro_weight)
      weighted = loss * tf.cast(tf.cast(size, tf.float32) / whole, loss.dtype)
      scaled = optimizer.get_scaled_loss(weighted) if scales_loss else weighted
    with tf.device(devices[-1]):
      found = loss_tape.gradient(scaled, list(tensors) + list(variables))
    upstream = found[:len(tensors)]
    for variable, gradient in zip(variables, found[len(tensors):]):
      # A loss term on the weights themselves: its gradient joins on the weight's device.
      add(position_of[id(variable)], gradient, stage_of.get(id(variable), len(devices) - 1))
    for index in range(len(stage_list) - 1, -1, -1):
      tape, inputs, watched, outputs = passes[index]
      device = devices[index]
      pairs = [(output, gradient) for output, gradient in zip(outputs, upstream)
               if gradient is not None]
      own = stage_list[index].variables
      with tf.device(device):
        found = (tape.gradient([output for output, _ in pairs], watched + own,
                               output_gradients=[gradient for _, gradient in pairs])
                 if pairs else [None] * (len(watched) + len(own)))
      for variable, gradient in zip(own, found[len(watched):]):
        add(position_of[id(variable)], gradient, index)
      by_input = {id(tensor): gradient for tensor, gradient in zip(watched, found)}
      upstream = [by_input.get(id(tensor)) for tensor in inputs]
    if keras_metrics:
      model.compiled_metrics.update_state(micro_y, prediction, micro_weight)
    else:
      model.compute_metrics(micro_x, micro_y, prediction, micro_weight)
  gradients = sums
  if scales_loss:
    gradients = optimizer.get_unscaled_gradients(gradients)
  optimizer.apply_gradients((gradient, variable) for gradient, variable
                            in zip(gradients, variables) if gradient is not None)
  return model.get_metrics_result()


def _differentiable(tensor) -> bool:
  """Whether a gradient can flow into `tensor` (a dense floating tensor)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return isinstance(tensor, tf.Tensor) and tensor.dtype.is_floating


def _first_batches(dataset, count: int) -> list:
  """The x of the first `count` batches of what `fit` was given (a dataset or arrays)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_keras.src.engine import data_adapter  # pylint: disable=g-import-not-at-top
  if isinstance(dataset, tf.data.Dataset):
    return [data_adapter.unpack_x_y_sample_weight(batch)[0] for batch in dataset.take(count)]
  return [dataset[:32] if not isinstance(dataset, dict)
          else {key: value[:32] for key, value in dataset.items()}]


class PlanReady(Exception):
  """Stops a run_fn at its first fit once the plan is made (`plan_module`)."""

  def __init__(self, plan: Dict[str, Any]):
    super().__init__('planned')
    self.plan = plan


class Pipelining:
  """Within `with Pipelining(...)`, every tf_keras `fit` trains with GPipe's stages.

  At the start of each fit it takes a few batches of the training data, measures the
  model's units, splits them into `stages` stages (`make_plan`), logs and writes the
  plan, and swaps Keras' train_step for `pipelined_train_step`. Keras is restored on
  exit. The model itself is unchanged: it saves and serves as it was built.
  """

  def __init__(self, stages: int, micro_batches: int, recompute: bool = False,
               plan_path: Optional[str] = None, plan_only: bool = False):
    self.stages, self.micro_batches, self.recompute = stages, micro_batches, recompute
    self.plan_path = plan_path
    # Plan at the first fit and stop there (`PlanReady`), for devices not booked yet.
    self.plan_only = plan_only
    self.plans = []

  def __enter__(self):
    from tf_keras.src.engine import training  # pylint: disable=g-import-not-at-top
    self._keras_fit = training.Model.fit
    self._keras_train_step = training.Model.train_step
    pipelining = self

    @_plain_python_in_the_trace
    def train_step(model, data):
      staged = getattr(model, '_distillery_stages', None)
      if staged is None:
        return pipelining._keras_train_step(model, data)
      stage_list, devices = staged
      return pipelined_train_step(model, data, stage_list, devices,
                                  pipelining.micro_batches, pipelining.recompute)

    def fit(model, x=None, *args, **kwargs):
      if type(model).train_step is not train_step:
        raise ValueError(f"strategy='pipeline': {type(model).__name__} defines its own "
                         'train_step, which cannot be split into pipeline stages.')
      plan = pipelining.stage(model, _first_batches(x, MEASURED_BATCHES))
      if pipelining.plan_only:
        raise PlanReady(plan)
      return pipelining._keras_fit(model, x, *args, **kwargs)

    training.Model.train_step = train_step
    training.Model.fit = fit
    return self

  def stage(self, model, batches) -> Dict[str, Any]:
    """Plans `model`'s stages on `batches` and makes its train step use them."""
    # A plan made before booking devices names them by position; they need not exist here.
    devices = ([f'device {index}' for index in range(self.stages)] if self.plan_only
               else devices_for(self.stages))
    plan = make_plan(model, self.stages, self.micro_batches, devices, batches)
    if self.plan_only:
      return plan
    plan['recompute'] = self.recompute
    units = units_of(model)
    stage_list = stage_functions(model, units, plan['unit_boundaries'])
    logger = progress.get_logger()
    # Each stage's weights on its device, before the optimizer makes its slots beside them.
    held = weights_held_elsewhere(model, model.optimizer)
    if held:
      logger.warning("WARNING: %s: strategy='pipeline' leaves the weights where they are: %s; "
                     'each stage reads them from there.', model.name, held)
    plan['placed_variables'] = 0 if held else place_weights(stage_list, devices)
    model._distillery_stages = (stage_list, devices)  # pylint: disable=protected-access
    model.train_function = None  # Traced again with the stages.
    self.plans.append(plan)
    logger.info("%s: strategy='pipeline', %d stages x %d micro-batches (predicted bubble "
                'share %.2f)%s.', model.name, self.stages, self.micro_batches,
                plan['predicted_bubble_share'], ', recomputing activations' if self.recompute
                else '')
    for stage in plan['per_stage']:
      logger.info('  stage %d on %s: %d layers (%s), %d parameters, %.2f ms forward and '
                  'backward, %d activation bytes', stage['stage'], stage['device'],
                  len(stage['layers']), _layer_span(stage['layers']), stage['parameters'],
                  stage['seconds'] * 1000, stage['activation_bytes'])
    if self.plan_path:
      temporary = self.plan_path + '.tmp'
      with open(temporary, 'w') as handle:
        json.dump(self.plans if len(self.plans) > 1 else plan, handle, indent=1)
      os.replace(temporary, self.plan_path)
    return plan

  def __exit__(self, *exc_info):
    from tf_keras.src.engine import training  # pylint: disable=g-import-not-at-top
    training.Model.train_step = self._keras_train_step
    training.Model.fit = self._keras_fit


def _layer_span(layers: List[str]) -> str:
  return ', '.join(layers) if len(layers) <= 3 else f'{layers[0]} .. {layers[-1]}'


def plan_module(module_file: str, examples_uri: str, transform_graph_uri: str, stages: int,
                micro_batches: int, custom_config: Optional[Dict[str, Any]] = None,
                schema_uri: Optional[str] = None) -> Dict[str, Any]:
  """The plan a module file's model would train under, made without training it.

  Runs the module's `run_fn` as TFX's Trainer would (its GenericExecutor, on the given
  Transform outputs) up to its first `fit`, measures the model's units there on a few real
  batches, on this machine, and stops.

  Args:
    module_file: A Trainer module file (`run_fn`).
    examples_uri: Transformed examples (a folder of `Split-*` folders).
    transform_graph_uri: Transform's graph.
    stages: S, the devices the plan is for.
    micro_batches: M.
    custom_config: Given to run_fn as `fn_args.custom_config`.
    schema_uri: A Schema artifact's folder, for module files that read it.

  Returns:
    The plan (`make_plan`).

  Raises:
    ValueError: as `make_plan`, or when run_fn never fits a model.
  """
  import tempfile  # pylint: disable=g-import-not-at-top
  from tfx.components.trainer import executor as trainer_executor  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_artifacts  # pylint: disable=g-import-not-at-top
  from tfx.types import standard_component_specs as keys  # pylint: disable=g-import-not-at-top
  validate_stages(stages)

  def artifact(kind, uri):
    made = kind()
    made.uri = uri
    return made

  examples = artifact(standard_artifacts.Examples, examples_uri)
  examples.split_names = json.dumps(sorted(
      name[len('Split-'):] for name in os.listdir(examples_uri) if name.startswith('Split-')))
  inputs = {keys.EXAMPLES_KEY: [examples],
            keys.TRANSFORM_GRAPH_KEY: [artifact(standard_artifacts.TransformGraph,
                                                transform_graph_uri)]}
  if schema_uri:
    inputs[keys.SCHEMA_KEY] = [artifact(standard_artifacts.Schema, schema_uri)]
  with tempfile.TemporaryDirectory(prefix='plan-stages-') as scratch:
    outputs = {keys.MODEL_KEY: [artifact(standard_artifacts.Model,
                                         os.path.join(scratch, 'model'))],
               keys.MODEL_RUN_KEY: [artifact(standard_artifacts.ModelRun,
                                             os.path.join(scratch, 'model_run'))]}
    properties = {'module_file': module_file,
                  'train_args': json.dumps({'num_steps': MEASURED_BATCHES + 1}),
                  'eval_args': json.dumps({'num_steps': 1}),
                  'custom_config': json.dumps(custom_config or {})}
    try:
      with Pipelining(stages, micro_batches, plan_only=True):
        trainer_executor.GenericExecutor().Do(inputs, outputs, properties)
    except PlanReady as ready:
      return ready.plan
  raise ValueError(f'{module_file}: run_fn returned without fitting a Keras model, so there '
                   'is no model to plan.')


def format_plan(plan: Dict[str, Any]) -> str:
  """The plan as a table a person reads, with the slowest stage and the bubble share."""
  lines = [f"{plan['stages']} stages x {plan['micro_batches']} micro-batches: predicted bubble "
           f"share (S - 1) / (M + S - 1) = {plan['predicted_bubble_share']:.2f}",
           '| stage | layers | parameters | forward + backward (ms) | activation bytes |',
           '|---|---|---|---|---|']
  for stage in plan['per_stage']:
    layers = stage['layers']
    named = layers[0] if len(layers) == 1 else f'{layers[0]} .. {layers[-1]}'
    lines.append(f"| {stage['stage']} | {len(layers)} ({named}) | {stage['parameters']:,} | "
                 f"{stage['seconds'] * 1000:.2f} | {stage['activation_bytes']:,} |")
  total = sum(stage['seconds'] for stage in plan['per_stage'])
  lines.append(f"slowest stage {plan['slowest_stage_seconds'] * 1000:.2f} ms of "
               f'{total * 1000:.2f} ms in all (an even split would be '
               f"{total * 1000 / plan['stages']:.2f} ms)")
  return '\n'.join(lines)
