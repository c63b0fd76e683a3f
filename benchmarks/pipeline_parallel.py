"""Pipeline parallelism (#63): GPipe's stages against one device, the plan, bubble, memory, time.

On one CPU split into 4 logical devices (made first, before TensorFlow starts), with a
24-layer MLP (no BatchNormalization) and our teachers:

1. One step's gradients and the weights after 50 SGD steps, for S = 1, 2, 4 stages and
   M = 1, 4, 8 micro-batches, against one device's run on the same batches (uneven ones:
   batches of 22 rows).
2. The partitioner's slowest stage against the best contiguous split found by trying every
   split, on the same measured costs, for the MLP and our taxi, digits and MNIST-1D teachers
   (each planned from its module file on its own Transform outputs, `gpipe.plan_module`).
3. The bubble share measured from each stage's forward intervals in one pipelined step,
   against (S - 1) / (M + S - 1).
4. Activation bytes each stage keeps for the backward pass, with and without recomputation,
   from the tensors' sizes (a CPU has no allocator peak to read; on GPUs TensorFlow's
   `get_memory_info` would give it).
5. The step time against MirroredStrategy on the same logical devices at the same batch.

Logical devices share the machine's cores: a CPU run shows correctness and the schedule, not
speed. A speed-up needs S real devices.

Usage:
  python -m benchmarks.pipeline_parallel --json [--steps 50]
"""

import os
import statistics
import time

import numpy as np

from benchmarks import common
from benchmarks import results

DEVICES = 4
GRID = [(stages, micro) for stages in (1, 2, 4) for micro in (1, 4, 8)]
BUBBLE_PAIRS = [(2, 4), (4, 4), (4, 8)]
LAYERS = 24
WIDTH = 32
FEATURES = 16
CLASSES = 4
BATCH = 22
LEARNING_RATE = 0.05
TIMED_BATCH = 256
TIMED_STEPS = 20
TEACHERS = ('taxi', 'digits', 'mnist1d')
# The teachers' plans docs/scaling-out.md shows: 2 and 4 devices, 8 micro-batches.
PLANNED_STAGES = (2, 4)
PLANNED_MICRO_BATCHES = 8


def mlp(learning_rate=LEARNING_RATE):
  import tf_keras  # pylint: disable=g-import-not-at-top
  layers = [tf_keras.layers.Dense(WIDTH, activation='tanh', input_shape=(FEATURES,))]
  layers += [tf_keras.layers.Dense(WIDTH, activation='tanh') for _ in range(LAYERS - 2)]
  layers.append(tf_keras.layers.Dense(CLASSES))
  model = tf_keras.Sequential(layers, name='mlp24')
  model.compile(tf_keras.optimizers.SGD(learning_rate),
                tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model


def rows(count=220, seed=0):
  generator = np.random.default_rng(seed)
  return (generator.normal(size=(count, FEATURES)).astype('float32'),
          generator.integers(0, CLASSES, count))


def trained(start, steps, stages=None, micro_batches=1, recompute=False):
  """Weights after `steps` SGD steps: one device (stages None) or GPipe's stages."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
  features, labels = rows()
  dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(BATCH).repeat()
  # One step at a learning rate of 1 moves each weight by exactly its gradient.
  learning_rate = 1.0 if steps == 1 else LEARNING_RATE
  if stages is None:
    model = mlp(learning_rate)
    model.set_weights(start)
    model.fit(dataset, steps_per_epoch=steps, verbose=0)
    return model.get_weights()
  with gpipe.Pipelining(stages, micro_batches, recompute):
    model = mlp(learning_rate)
    model.set_weights(start)
    model.fit(dataset, steps_per_epoch=steps, verbose=0)
  return model.get_weights()


def equality(steps: int):
  import tf_keras  # pylint: disable=g-import-not-at-top
  tf_keras.utils.set_random_seed(7)
  start = mlp().get_weights()
  reference_step = [first - after for first, after in zip(start, trained(start, 1))]
  largest = max(float(np.abs(gradient).max()) for gradient in reference_step)
  reference_run = trained(start, steps)
  measured = []
  for stages, micro in GRID:
    step = [first - after for first, after in zip(start, trained(start, 1, stages, micro))]
    run = trained(start, steps, stages, micro)
    measured.append({
        'stages': stages, 'micro_batches': micro,
        'gradient_relative': max(float(np.abs(one - other).max())
                                 for one, other in zip(step, reference_step)) / largest,
        'weights_max_abs': max(float(np.abs(one - other).max())
                               for one, other in zip(run, reference_run))})
  return measured


def partition_rows(work_dir: str):
  """The partitioner against exhaustive search, on each model's measured unit costs."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
  from tfx_distillery.pipelines import datasets  # pylint: disable=g-import-not-at-top
  costs_by_model, teacher_plans = {}, []
  features, _ = rows()
  batches = [tf.constant(features[start:start + 64]) for start in (0, 64, 128)]
  costs_by_model['24-layer MLP'] = [
      unit['seconds'] for unit in gpipe.make_plan(mlp(), 1, 8, ['cpu'], batches)['units']]
  for name in TEACHERS:
    folder = os.path.join(work_dir, name)
    data_root = None
    if name == 'mnist1d':  # Drawn by make_dataset and split into folders, as its run does.
      from tfx_distillery.pipelines import mnist1d_data  # pylint: disable=g-import-not-at-top
      data_root = mnist1d_data.write_csv(os.path.join(folder, 'data')).labelled_root
    transformed, graph, _ = common.transform_dataset(name, os.path.join(folder, 'run'),
                                                     data_root=data_root)
    dataset = datasets.resolve(name, folder, pool_rows=0)
    # Each S planned as `distillery plan-stages` plans it: a fresh Keras session (so the
    # layers are named as in that process), the module's run_fn, its own batches measured.
    custom_config = {'label_column': dataset.label_column}
    for stages in PLANNED_STAGES:
      tf_keras.backend.clear_session()
      plan = gpipe.plan_module(datasets.module_file(f'{name}_teacher'), transformed, graph,
                               stages, PLANNED_MICRO_BATCHES, custom_config)
      teacher_plans.append(dict(plan, teacher=name))
    # The partitioner's check below splits every S from one plan's measured unit costs.
    costs_by_model[f'{name} teacher'] = [unit['seconds'] for unit in plan['units']]
  table = []
  for name, costs in costs_by_model.items():
    for stages in (2, 4):
      if stages > len(costs):
        table.append({'model': name, 'stages': stages, 'units': len(costs),
                      'refused': f'{len(costs) - 1} places to cut'})
        continue
      _, slowest = gpipe.best_split(costs, stages)
      best = gpipe.exhaustive_slowest(costs, stages)
      table.append({'model': name, 'stages': stages, 'units': len(costs),
                    'slowest_ms': slowest * 1000, 'exhaustive_ms': best * 1000,
                    'ratio': slowest / best, 'even_ms': sum(costs) / stages * 1000})
  return table, teacher_plans


def plan_rows(teacher_plans):
  """The teachers' plans as table rows: `gpipe.format_plan`'s stage rows, with teacher and S."""
  from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
  table_rows = []
  for plan in teacher_plans:
    # format_plan's stage lines are `| stage | layers | parameters | ms | activation bytes |`.
    stage_lines = [line for line in gpipe.format_plan(plan).splitlines()
                   if line.startswith('| ') and line[2].isdigit()]
    for line in stage_lines:
      table_rows.append([plan['teacher'], plan['stages'], *line.strip('| ').split(' | '),
                         f'{plan["predicted_bubble_share"]:.2f}'])
  return table_rows


def bubble(stages: int, micro_batches: int):
  """The idle share of the stages in one pipelined forward pass, from their intervals."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import micro_batches as micro  # pylint: disable=g-import-not-at-top
  model = mlp()
  features, _ = rows(TIMED_BATCH)
  batch = tf.constant(features)
  plan = gpipe.make_plan(model, stages, micro_batches, gpipe.devices_for(stages),
                         [batch[:64]] * 3)
  stage_list = gpipe.stage_functions(model, gpipe.units_of(model), plan['unit_boundaries'])
  devices = gpipe.devices_for(stages)

  @tf.function
  def timed(inputs):
    marks = []
    for start, size in micro.micro_batch_bounds(TIMED_BATCH, micro_batches):
      tensor = inputs[start:start + size]
      for index, (stage, device) in enumerate(zip(stage_list, devices)):
        with tf.control_dependencies([tensor]):
          began = tf.timestamp()
        with tf.control_dependencies([began]):
          tensor = tf.identity(tensor)
        with tf.device(device):
          tensor = stage(tensor)
        with tf.control_dependencies([tensor]):
          ended = tf.timestamp()
        marks.append((index, began, ended))
    return [(index, began, ended) for index, began, ended in marks]

  timed(batch)  # Traces.
  shares = []
  for _ in range(5):
    marks = [(index, float(began), float(ended)) for index, began, ended in timed(batch)]
    span = max(ended for _, _, ended in marks) - min(began for _, began, _ in marks)
    busy = 0.0
    for index in range(stages):
      busy += _union_length([(began, ended) for which, began, ended in marks
                             if which == index])
    shares.append(1 - busy / (stages * span))
  cores = os.cpu_count() or 1
  return {'stages': stages, 'micro_batches': micro_batches,
          'measured': statistics.median(shares),
          'formula': gpipe.bubble_share(stages, micro_batches),
          # With fewer cores than stages, stages wait for a core even with no bubble.
          'cores': cores, 'core_floor': max(0.0, 1 - cores / stages)}


def _union_length(intervals):
  total, end_so_far = 0.0, None
  for began, ended in sorted(intervals):
    if end_so_far is None or began > end_so_far:
      total += ended - began
      end_so_far = ended
    elif ended > end_so_far:
      total += ended - end_so_far
      end_so_far = ended
  return total


def memory(stages: int, micro_batches: int):
  """Activation bytes per stage kept for the backward pass, from the plan's tensor sizes."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
  model = mlp()
  features, _ = rows(TIMED_BATCH)
  plan = gpipe.make_plan(model, stages, micro_batches, ['cpu'] * stages,
                         [tf.constant(features)])
  single_device = sum(stage['activation_bytes'] for stage in plan['per_stage'])
  largest_stage = max(stage['activation_bytes'] for stage in plan['per_stage'])
  rows_out, boundary = [], FEATURES * TIMED_BATCH * 4  # Stage 0 keeps the batch.
  for stage in plan['per_stage']:
    # Without recomputation a stage keeps every micro-batch's activations (the batch's);
    # with it, only its input for every micro-batch, and one micro-batch's activations
    # while it recomputes.
    with_recompute = boundary + stage['activation_bytes'] / micro_batches
    rows_out.append({'stage': stage['stage'], 'without': stage['activation_bytes'],
                     'with': with_recompute,
                     'bound': single_device / stages + largest_stage})
    boundary = WIDTH * TIMED_BATCH * 4
  return rows_out, single_device


def step_times(stages: int, micro_batches: int):
  """Median seconds per training step: GPipe's stages and MirroredStrategy, same devices."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import tf_keras  # pylint: disable=g-import-not-at-top
  from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
  features, labels = rows(TIMED_BATCH * 4)
  dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(TIMED_BATCH).repeat()

  class Timer(tf_keras.callbacks.Callback):

    def __init__(self):
      super().__init__()
      self.seconds, self.started = [], None

    def on_train_batch_begin(self, batch, logs=None):
      self.started = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
      self.seconds.append(time.perf_counter() - self.started)

  timers = {}
  with gpipe.Pipelining(stages, micro_batches):
    model = mlp()
    timers['pipeline'] = Timer()
    model.fit(dataset, steps_per_epoch=TIMED_STEPS, verbose=0, callbacks=[timers['pipeline']])
  strategy = tf.distribute.MirroredStrategy(
      [device.name for device in tf.config.list_logical_devices('CPU')[:stages]],
      cross_device_ops=tf.distribute.ReductionToOneDevice())
  with strategy.scope():
    model = mlp()
  timers['mirrored'] = Timer()
  model.fit(dataset, steps_per_epoch=TIMED_STEPS, verbose=0, callbacks=[timers['mirrored']])
  # The first steps trace: the median of the rest.
  return {name: statistics.median(timer.seconds[3:]) for name, timer in timers.items()}


def run(steps: int, work_dir: str) -> dict:
  grid = equality(steps)
  partitions, teacher_plans = partition_rows(work_dir)
  bubbles = [bubble(stages, micro) for stages, micro in BUBBLE_PAIRS]
  memory_rows, single_device = memory(4, 8)
  times = step_times(4, 8)
  measured = [row for row in partitions if 'ratio' in row]
  targets = [
      results.target(f'S={row["stages"]}, M={row["micro_batches"]}: one step\'s gradients '
                     'against one device, largest difference relative to the largest gradient',
                     row['gradient_relative'], '<= 1e-5', row['gradient_relative'] <= 1e-5)
      for row in grid] + [
      results.target(f'S={row["stages"]}, M={row["micro_batches"]}: weights after {steps} SGD '
                     'steps against one device, largest absolute difference',
                     row['weights_max_abs'], '<= 1e-4', row['weights_max_abs'] <= 1e-4)
      for row in grid] + [
      results.target('the partitioner\'s slowest stage over the exhaustive search\'s, worst '
                     'of the MLP and our teachers', max(row['ratio'] for row in measured),
                     '<= 1.10', max(row['ratio'] for row in measured) <= 1.10),
      results.target('S=4, M=8: activation bytes kept by the fullest stage with '
                     'recomputation over its bound (1/S of one device\'s plus one stage\'s)',
                     max(row['with'] / row['bound'] for row in memory_rows), '<= 1',
                     all(row['with'] <= row['bound'] for row in memory_rows))]
  return {
      'title': 'Pipeline parallelism: GPipe\'s stages against one device',
      'summary': ('A 24-layer MLP and our teachers on one CPU split into 4 logical devices. '
                  'Logical devices share the cores: correctness and the schedule, not speed.'),
      'targets': targets,
      'equality': grid, 'partitions': partitions, 'teacher_plans': teacher_plans,
      'bubbles': bubbles,
      'memory': memory_rows, 'single_device_activation_bytes': single_device,
      'step_seconds': times,
      'tables': [
          results.table('Against one device (24-layer MLP, batches of 22)',
                        ['S', 'M', 'gradient, relative', f'weights after {steps} steps'],
                        [[row['stages'], row['micro_batches'], f'{row["gradient_relative"]:.1e}',
                          f'{row["weights_max_abs"]:.1e}'] for row in grid]),
          results.table('Partitioner against exhaustive search (measured ms per unit)',
                        ['model', 'S', 'units', 'slowest stage', 'exhaustive', 'ratio',
                         'even split'],
                        [[row['model'], row['stages'], row['units'],
                          f'{row["slowest_ms"]:.2f}' if 'ratio' in row else 'refused',
                          f'{row["exhaustive_ms"]:.2f}' if 'ratio' in row else '',
                          f'{row["ratio"]:.2f}' if 'ratio' in row else '',
                          f'{row["even_ms"]:.2f}' if 'ratio' in row else row['refused']]
                         for row in partitions]),
          results.table(f'Our teachers\' plans, M={PLANNED_MICRO_BATCHES} (as `distillery '
                        'plan-stages` prints them; ms: forward and backward on one of the '
                        'teacher\'s own training batches)',
                        ['teacher', 'S', 'stage', 'layers', 'parameters', 'ms',
                         'activation bytes', 'predicted bubble'], plan_rows(teacher_plans)),
          results.table('Bubble share of one forward pass (median of 5)',
                        ['S', 'M', 'measured', '(S - 1) / (M + S - 1)',
                         'idle share from cores alone, 1 - cores / S'],
                        [[row['stages'], row['micro_batches'], f'{row["measured"]:.2f}',
                          f'{row["formula"]:.2f}', f'{row["core_floor"]:.2f}']
                         for row in bubbles]),
          results.table('Activation bytes kept per stage, S=4, M=8, batch 256',
                        ['stage', 'without recomputation', 'with', 'bound'],
                        [[row['stage'], row['without'], int(row['with']), int(row['bound'])]
                         for row in memory_rows]),
          results.table('Median step time (s), S=4, M=8, batch 256',
                        ['GPipe stages', 'MirroredStrategy'],
                        [[f'{times["pipeline"]:.4f}', f'{times["mirrored"]:.4f}']])],
      'notes': [
          'The partitioner is exact (dynamic programming over contiguous splits), so its '
          'ratio to the exhaustive search checks the implementation, not a heuristic.',
          'Memory is accounted from the tensors each stage keeps, not read from an allocator.',
          'On logical CPUs every stage shares the same 2 cores: the measured bubble and the '
          'step times show the schedule TensorFlow ran, not what S devices would gain.'],
  }


def main():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  # Before anything starts TensorFlow's context.
  cpu = tf.config.list_physical_devices('CPU')[0]
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(DEVICES)])
  parser = common.argument_parser(__doc__, 'distillery-pipeline-parallel')
  parser.add_argument('--steps', type=int, default=50)
  args = parser.parse_args()
  os.makedirs(args.work_dir, exist_ok=True)
  common.print_result(lambda: run(args.steps, args.work_dir), args, 'pipeline_parallel')


if __name__ == '__main__':
  main()
