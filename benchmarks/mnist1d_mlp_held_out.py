"""The MLP with the larger teacher on seeds no benchmark has used: do its figures hold?

The same run as `benchmarks/mnist1d_large_mlp.py` (teacher, student, budget, pools, ours' T
and alpha chosen on eval) on `mnist1d_held_out`'s seeds 201-205, fixed there before any
run with them.

Usage:
  python -m benchmarks.mnist1d_mlp_held_out --json [--seeds 201,...]
"""

from benchmarks import common
from benchmarks import mnist1d
from benchmarks import mnist1d_held_out
from benchmarks import mnist1d_large_mlp

NAME = 'mnist1d_mlp_held_out'


def describe(measured: dict) -> dict:
  """mnist1d_large_mlp's targets and tables, named as this benchmark's."""
  described = mnist1d_large_mlp.describe(measured)
  for target in described['targets']:
    target['figure'] = target['figure'].replace(f'{mnist1d_large_mlp.NAME}:', f'{NAME}:', 1)
  described['title'] = ('MNIST-1D, the 128-filter teacher and the MLP student, on held-out '
                        'seeds: the headline figures again')
  return described


def main() -> None:
  parser = common.argument_parser(__doc__, 'distillery-mnist1d-mlp-held-out-benchmark')
  parser.add_argument('--seeds', default=','.join(
      str(seed) for seed in mnist1d_held_out.HELD_OUT_SEEDS))
  parser.add_argument('--processes', type=int, default=mnist1d.PROCESSES)
  args = parser.parse_args()

  def measure():
    measured = mnist1d_large_mlp.run(args.work_dir,
                                     [int(seed) for seed in args.seeds.split(',')],
                                     mnist1d_large_mlp.POOLS, args.processes)
    return {**describe(measured), **measured}

  common.print_result(measure, args, NAME)


if __name__ == '__main__':
  main()
