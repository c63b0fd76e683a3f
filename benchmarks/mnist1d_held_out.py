"""MNIST-1D with the larger teacher, on seeds no benchmark has used: do the figures hold?

The same run as `benchmarks/mnist1d_large.py` (teacher, student, budget, ours' alpha chosen
on eval) on seeds 201-205, fixed here before any run with them. To keep it short it trains
the students the headline targets need: scratch, the recipe, ours without a pool and with
the 50,000-row pool, pseudo-labelling with that pool, and the pool's true labels.

Usage:
  python -m benchmarks.mnist1d_held_out --json [--seeds 201,...] [--pools 0,50000]
"""

from benchmarks import common
from benchmarks import mnist1d
from benchmarks import mnist1d_large

HELD_OUT_SEEDS = (201, 202, 203, 204, 205)
POOLS = (0, mnist1d.HEADLINE_POOL)
NAME = 'mnist1d_held_out'


def describe(measured: dict) -> dict:
  """mnist1d_large's targets and tables, named as this benchmark's."""
  described = mnist1d_large.describe(measured)
  for target in described['targets']:
    target['figure'] = target['figure'].replace('mnist1d_large:', f'{NAME}:', 1)
  described['title'] = ('MNIST-1D with the larger teacher, on held-out seeds: the '
                        'headline figures again')
  return described


def main() -> None:
  parser = common.argument_parser(__doc__, 'distillery-mnist1d-held-out-benchmark')
  parser.add_argument('--seeds', default=','.join(str(seed) for seed in HELD_OUT_SEEDS))
  parser.add_argument('--pools', default=','.join(str(rows) for rows in POOLS))
  parser.add_argument('--processes', type=int, default=mnist1d.PROCESSES)
  args = parser.parse_args()

  def measure():
    measured = mnist1d_large.run(args.work_dir, [int(seed) for seed in args.seeds.split(',')],
                                 [int(rows) for rows in args.pools.split(',')],
                                 args.processes, extra_labelled=())
    return {**describe(measured), **measured}

  common.print_result(measure, args, NAME)


if __name__ == '__main__':
  main()
