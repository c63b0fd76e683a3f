"""A probe, not part of the package: which MNIST-1D settings could close the CNN's gap?

The MNIST-1D benchmark (benchmarks/mnist1d.py) missed #36's gap_closed >= 0.75 with a
480-parameter CNN. Before changing the measured code (which forces every benchmark to be
re-run), this sweeps the choices that could change that, on many seeds at once:

- the teacher's width (64, 128 or 256 filters; the benchmark's is 64);
- the student's width, up to the largest CNN at <= 2% of that teacher's parameters;
- 6,000 steps at a constant rate (the benchmark's budget) or 20,000 with a cosine decay
  (the issue's probe);
- scratch, ours (the Distiller's loss: alpha 0.5, T 2, a labelled and a pool row in turn),
  soft only (alpha 0), pseudo-labels (the teacher's argmax) and the pool's true labels.

It mirrors the Distiller's loss and mixing rule (components/distiller/loss.py and
transfer.py) in PyTorch, so it can run on many CPU cores of a lent machine that has PyTorch
but not TensorFlow; torch is not a dependency of tfx-distillery. Figures from it are
guidance for the next benchmark change, not benchmark results.

Input: an .npz with train/eval/test/pool arrays: the benchmark's own rows, written here by

  python -c "import numpy as np; from tfx_distillery.pipelines import mnist1d_data as m;
    s = m.labelled_splits(); px, py = m.pool(50000);
    np.savez_compressed('DATA.npz', pool_x=px.astype('float32'), pool_y=py,
        **{f'{k}_{a}': v[i].astype('float32') if a == 'x' else v[i]
           for k, v in s.items() for i, a in enumerate('xy')})"

Output: one JSON line per teacher and per student run.

  python docs/probes/mnist1d_sweep.py DATA.npz OUT.jsonl [--processes 16]

With --temperatures it sweeps the soft term's temperature and alpha instead, for the
larger-teacher benchmark's 16-filter student, against pseudo-labels at two pool sizes;
`--summarize --temperatures OUT.jsonl` prints its table.
"""

import argparse
import json
import math
import multiprocessing
import os
import sys
import time

import numpy as np

TEACHER_FILTERS = (64, 128, 256)
TEACHER_SEEDS = (1, 2, 3)
TEACHER_STEPS = 4000
TEACHER_BATCH = 100
STUDENT_BATCH = 128
LEARNING_RATE = 3e-3
TEMPERATURE = 2.0
SCHEDULES = (('constant', 6000), ('cosine', 20000))
METHODS = ('scratch', 'ours', 'soft', 'pseudo', 'true')
# --temperatures: the soft term's temperature for the larger-teacher benchmark's student.
SWEEP_SEEDS = (1, 2, 3, 4)
SWEEP_POOLS = (10000, 50000)
SWEEP_TEMPERATURES = (0.5, 1.0, 2.0)


def teacher_parameters(filters: int) -> int:
  return (6 * filters + 2 * (3 * filters * filters + filters) + 5 * filters * 10 + 10)


def student_parameters(filters: int) -> int:
  return 6 * filters + 3 * filters * filters + filters + 10 * filters + 10


def largest_student_within(share: float, teacher_filters: int) -> int:
  budget = share * teacher_parameters(teacher_filters)
  filters = 1
  while student_parameters(filters + 1) <= budget:
    filters += 1
  return filters


def build(kind: str, filters: int):
  import torch  # pylint: disable=g-import-not-at-top
  from torch import nn  # pylint: disable=g-import-not-at-top

  class Teacher(nn.Module):

    def __init__(self):
      super().__init__()
      self.c1 = nn.Conv1d(1, filters, 5, stride=2, padding=2)
      self.c2 = nn.Conv1d(filters, filters, 3, stride=2, padding=1)
      self.c3 = nn.Conv1d(filters, filters, 3, stride=2, padding=1)
      self.drop = nn.Dropout(0.5)
      self.out = nn.Linear(5 * filters, 10)

    def forward(self, x):
      h = torch.relu(self.c1(x[:, None, :]))
      h = torch.relu(self.c2(h))
      h = torch.relu(self.c3(h))
      # Channels last before flattening, as Keras' Flatten sees them.
      return self.out(self.drop(h.transpose(1, 2).flatten(1)))

  class Student(nn.Module):

    def __init__(self):
      super().__init__()
      self.c1 = nn.Conv1d(1, filters, 5, stride=2, padding=2)
      self.c2 = nn.Conv1d(filters, filters, 3, stride=2, padding=1)
      self.out = nn.Linear(filters, 10)

    def forward(self, x):
      h = torch.relu(self.c1(x[:, None, :]))
      h = torch.relu(self.c2(h))
      return self.out(h.amax(dim=2))

  class Mlp(nn.Module):

    def __init__(self):
      super().__init__()
      self.hidden = nn.Linear(40, filters)
      self.out = nn.Linear(filters, 10)

    def forward(self, x):
      return self.out(torch.relu(self.hidden(x)))

  return {'teacher': Teacher, 'cnn': Student, 'mlp': Mlp}[kind]()


def accuracy(model, x, y) -> float:
  import torch  # pylint: disable=g-import-not-at-top
  model.eval()
  with torch.no_grad():
    predictions = model(torch.from_numpy(x)).argmax(1).numpy()
  model.train()
  return float((predictions == y).mean())


def train_teacher(job):
  import torch  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(1)
  data = np.load(job['data'])
  filters, seed = job['filters'], job['seed']
  torch.manual_seed(seed)
  generator = np.random.default_rng(seed)
  model = build('teacher', filters)
  optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
  x, y = data['train_x'], data['train_y']
  steps_per_epoch = len(x) // TEACHER_BATCH
  best, best_state, since_best = -1.0, None, 0
  for step in range(TEACHER_STEPS):
    if step % steps_per_epoch == 0:
      order = generator.permutation(len(x))
    rows = order[(step % steps_per_epoch) * TEACHER_BATCH:][:TEACHER_BATCH]
    loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x[rows])),
                                             torch.from_numpy(y[rows]).long())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if (step + 1) % steps_per_epoch == 0:
      # Early stopping on eval with the best weights kept, as the teacher module does.
      score = accuracy(model, data['eval_x'], data['eval_y'])
      if score > best:
        best, since_best = score, 0
        best_state = {k: v.clone() for k, v in model.state_dict().items()}
      else:
        since_best += 1
        if since_best >= 5:
          break
  model.load_state_dict(best_state)
  path = os.path.join(job['work'], f'teacher{filters}-{seed}.pt')
  torch.save(model.state_dict(), path)
  return {'kind': 'teacher', 'filters': filters, 'seed': seed,
          'parameters': sum(p.numel() for p in model.parameters()),
          'eval': accuracy(model, data['eval_x'], data['eval_y']),
          'test': accuracy(model, data['test_x'], data['test_y']), 'steps': step + 1}


def train_student(job):
  import torch  # pylint: disable=g-import-not-at-top
  torch.set_num_threads(1)
  started = time.time()
  data = np.load(job['data'])
  seed, method = job['seed'], job['method']
  torch.manual_seed(seed * 1000 + 7)
  generator = np.random.default_rng(seed * 1000 + 7)
  teacher = build('teacher', job['teacher_filters'])
  teacher.load_state_dict(torch.load(os.path.join(
      job['work'], f"teacher{job['teacher_filters']}-{seed}.pt")))
  teacher.eval()
  model = build(job['architecture'], job['width'])
  optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
  steps = job['steps']
  scheduler = (torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
               if job['schedule'] == 'cosine' else None)
  x, y = data['train_x'], data['train_y']
  pool_x, pool_y = data['pool_x'], data['pool_y']
  if job.get('pool_rows'):
    pool_x, pool_y = pool_x[:job['pool_rows']], pool_y[:job['pool_rows']]
  if method != 'scratch':
    with torch.no_grad():
      pool_logits = teacher(torch.from_numpy(pool_x))
      train_logits = teacher(torch.from_numpy(x))
  for step in range(steps):
    rows = generator.integers(0, len(x), STUDENT_BATCH)
    labels = torch.from_numpy(y[rows]).long()
    if method == 'scratch':
      loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x[rows])), labels)
    elif method == 'true':
      # The reference: the pool's rows with their true labels, beside the labelled ones.
      pool_rows = generator.integers(0, len(pool_x), STUDENT_BATCH)
      inputs = torch.from_numpy(np.concatenate([x[rows], pool_x[pool_rows]]))
      targets = torch.cat([labels, torch.from_numpy(pool_y[pool_rows]).long()])
      loss = torch.nn.functional.cross_entropy(model(inputs), targets)
    else:
      pool_rows = generator.integers(0, len(pool_x), STUDENT_BATCH)
      inputs = torch.from_numpy(np.concatenate([x[rows], pool_x[pool_rows]]))
      teacher_logits = torch.cat([train_logits[rows], pool_logits[pool_rows]])
      logits = model(inputs)
      hard = torch.nn.functional.cross_entropy(logits[:STUDENT_BATCH], labels)
      if method == 'pseudo':
        # Hard targets: the teacher's argmax, one-hot, at T = 1 (teacher_targets='hard').
        targets = torch.nn.functional.one_hot(teacher_logits.argmax(1), 10).float()
        temperature = 1.0
      else:
        temperature = job.get('temperature', TEMPERATURE)
        targets = torch.softmax(teacher_logits / temperature, 1)
      log_probabilities = torch.log_softmax(logits / temperature, 1)
      soft = (targets * (torch.log(targets.clamp_min(1e-7)) - log_probabilities)).sum(1).mean()
      alpha = job.get('alpha', 0.0 if method == 'soft' else 0.5)
      loss = alpha * hard + (1 - alpha) * temperature ** 2 * soft
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if scheduler is not None:
      scheduler.step()
  return {**{k: v for k, v in job.items() if k not in ('data', 'work')},
          'parameters': sum(p.numel() for p in model.parameters()),
          'eval': accuracy(model, data['eval_x'], data['eval_y']),
          'test': accuracy(model, data['test_x'], data['test_y']),
          'seconds': round(time.time() - started, 1)}


def student_jobs(data: str, work: str):
  """The 20,000-step runs first (the issue's probe), then the benchmark's 6,000."""
  jobs = []
  for schedule, steps in reversed(SCHEDULES):
    for teacher_filters in TEACHER_FILTERS:
      widths = sorted({10, 16, largest_student_within(0.02, teacher_filters)})
      students = [('cnn', width) for width in widths]
      if schedule == 'cosine':
        students.append(('mlp', 128))
      for seed in TEACHER_SEEDS:
        for architecture, width in students:
          for method in METHODS:
            jobs.append({'architecture': architecture, 'width': width, 'method': method,
                         'teacher_filters': teacher_filters, 'seed': seed,
                         'schedule': schedule, 'steps': steps, 'data': data, 'work': work})
  return jobs


def temperature_jobs(data: str, work: str):
  """Ours at each temperature and alpha, and pseudo-labels, per pool size: the 16-filter
  CNN and the 128-filter teacher (benchmarks/mnist1d.py's `large-cnn` configuration), 20,000 steps."""
  jobs = []
  common = {'architecture': 'cnn', 'width': 16, 'teacher_filters': 128,
            'schedule': 'cosine', 'steps': dict(SCHEDULES)['cosine'], 'data': data,
            'work': work}
  for seed in SWEEP_SEEDS:
    jobs.append({**common, 'method': 'scratch', 'seed': seed})
    for pool_rows in SWEEP_POOLS:
      jobs.append({**common, 'method': 'pseudo', 'seed': seed, 'pool_rows': pool_rows})
      for temperature in SWEEP_TEMPERATURES:
        for alpha in (0.5, 0.0):
          jobs.append({**common, 'method': f'T{temperature:g}-alpha{alpha:g}', 'seed': seed,
                       'pool_rows': pool_rows, 'temperature': temperature, 'alpha': alpha})
  return jobs


def summarize_temperatures(path: str) -> None:
  """Eval and test accuracy (mean over seeds) of each method and pool size."""
  import collections  # pylint: disable=g-import-not-at-top
  import statistics  # pylint: disable=g-import-not-at-top
  with open(path) as handle:
    records = [json.loads(line) for line in handle]
  runs = collections.defaultdict(list)
  for r in records:
    if r.get('kind') != 'teacher':
      runs[(r.get('pool_rows', 0), r['method'])].append(r)
  for key in sorted(runs):
    eval_mean = statistics.mean(r['eval'] for r in runs[key])
    test_mean = statistics.mean(r['test'] for r in runs[key])
    print(f'pool {key[0]:>6} {key[1]:<14} eval {eval_mean:.4f} test {test_mean:.4f} '
          f'({len(runs[key])} seeds)')


def summarize(path: str) -> None:
  """Prints test accuracy (mean over seeds) and gap_closed of the means, per configuration."""
  import collections  # pylint: disable=g-import-not-at-top
  import statistics  # pylint: disable=g-import-not-at-top
  with open(path) as handle:
    records = [json.loads(line) for line in handle]
  teachers = {(r['filters'], r['seed']): r for r in records if r.get('kind') == 'teacher'}
  runs = collections.defaultdict(lambda: collections.defaultdict(dict))
  for r in records:
    if r.get('kind') != 'teacher':
      key = (r['schedule'], r['teacher_filters'], r['architecture'], r['width'])
      runs[key][r['seed']][r['method']] = r
  for key in sorted(runs):
    seeds = runs[key]
    teacher = statistics.mean(teachers[(key[1], seed)]['test'] for seed in seeds)
    line = [f'{key[0]} teacher {key[1]} ({teacher:.3f}) {key[2]} {key[3]}:']
    scratch_seeds = [seed for seed in seeds if 'scratch' in seeds[seed]]
    for method in METHODS:
      both = [seed for seed in scratch_seeds if method in seeds[seed]]
      if not both:
        continue
      mean = statistics.mean(seeds[seed][method]['test'] for seed in both)
      line.append(f'{method} {mean:.3f} ({len(both)} seeds)')
      if method != 'scratch':
        scratch = statistics.mean(seeds[seed]['scratch']['test'] for seed in both)
        top = statistics.mean(teachers[(key[1], seed)]['test'] for seed in both)
        line.append(f'gc {(mean - scratch) / (top - scratch):.2f}' if top != scratch
                    else 'gc n/a')
    print(' '.join(line))


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('data', help='DATA.npz, or with --summarize the OUT.jsonl to read')
  parser.add_argument('output', nargs='?')
  parser.add_argument('--summarize', action='store_true')
  parser.add_argument('--processes', type=int, default=os.cpu_count())
  parser.add_argument('--temperatures', action='store_true',
                      help='sweep the temperature instead (temperature_jobs)')
  parser.add_argument('--steps-scale', type=float, default=1.0,
                      help='multiplies every step count (a smoke test uses 0.01)')
  args = parser.parse_args(argv)
  if args.summarize:
    (summarize_temperatures if args.temperatures else summarize)(args.data)
    return 0
  global TEACHER_STEPS, SCHEDULES  # pylint: disable=global-statement
  TEACHER_STEPS = max(40, int(TEACHER_STEPS * args.steps_scale))
  SCHEDULES = tuple((name, max(1, int(steps * args.steps_scale))) for name, steps in SCHEDULES)
  work = os.path.dirname(os.path.abspath(args.output))
  context = multiprocessing.get_context('fork')
  with open(args.output, 'a') as output, context.Pool(args.processes) as pool:
    teachers = ([{'filters': 128, 'seed': s, 'data': args.data, 'work': work}
                 for s in SWEEP_SEEDS] if args.temperatures else
                [{'filters': f, 'seed': s, 'data': args.data, 'work': work}
                 for f in reversed(TEACHER_FILTERS) for s in TEACHER_SEEDS])
    for record in pool.imap_unordered(train_teacher, teachers):
      output.write(json.dumps(record) + '\n')
      output.flush()
      print(json.dumps(record), flush=True)
    jobs = (temperature_jobs if args.temperatures else student_jobs)(args.data, work)
    for record in pool.imap_unordered(train_student, jobs):
      output.write(json.dumps(record) + '\n')
      output.flush()
  return 0


if __name__ == '__main__':
  sys.exit(main())
