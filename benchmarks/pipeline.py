"""Whole-chain benchmark: `make demo`'s run, then the same run again with the cache on.

Runs the local runner twice on the taxi data in a fresh pipeline root and reports
the wall time of each run, their ratio, and each component's wall time in the first.

Usage:
  python -m benchmarks.pipeline --json
"""

import os
import shutil

from benchmarks import common
from tfx_distillery.pipelines import local_runner


def main() -> None:
  parser = common.argument_parser(__doc__, 'distillery-pipeline-benchmark')
  parser.add_argument('--dataset', default='taxi')
  args = parser.parse_args()
  shutil.rmtree(args.work_dir, ignore_errors=True)
  runner_args = local_runner.parse_args([
      '--dataset', args.dataset, '--pipeline-root', os.path.join(args.work_dir, 'root'),
      '--serving-dir', os.path.join(args.work_dir, 'serving')])

  def run():
    first = local_runner.execute(runner_args)
    cached = local_runner.execute(runner_args)
    decision = first.summary.gate_decision or {}
    return {
        'first_run_s': first.wall_seconds,
        'cached_run_s': cached.wall_seconds,
        'cached_over_first': cached.wall_seconds / first.wall_seconds,
        'component_s': first.component_seconds,
        'cached_component_s': cached.component_seconds,
        'chosen': decision.get('chosen'),
        'pushed': first.summary.pushed_destination is not None,
        'models': {row.name: {'accuracy': row.figures['accuracy'],
                              'size_bytes': row.figures['size_bytes'],
                              'latency_ms': row.figures['latency_ms']}
                   for row in first.summary.models},
        'majority_accuracy': decision.get('majority_accuracy'),
    }

  common.print_result(run, args.json)


if __name__ == '__main__':
  main()
