"""Whole-chain benchmark: `make demo`'s run, then the same run again with the cache on.

Runs the local runner twice on the taxi data in a fresh pipeline root and reports
the wall time of each run, their ratio, and each component's wall time in the first.

Usage:
  python -m benchmarks.pipeline --json
"""

import os
import shutil

from benchmarks import common
from benchmarks import results
from tfx_distillery.pipelines import local_runner

# The demo's budget on a 2-core machine.
FIRST_RUN_TARGET_S = 300


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
    cached_over_first = cached.wall_seconds / first.wall_seconds
    models = {row.name: {'accuracy': row.figures['accuracy'],
                         'size_bytes': row.figures['size_bytes'],
                         'latency_ms': row.figures['latency_ms']}
              for row in first.summary.models}
    return {
        'title': f"The whole chain: `make demo`'s run ({args.dataset}), then again from cache",
        'summary': ('The local runner at its defaults in a fresh pipeline root, then the same '
                    'run again with the cache on. Accuracies are on `test`, sizes are the '
                    'folders the Pusher would push, latency is batch 1 from a raw tf.Example.'),
        'first_run_s': first.wall_seconds,
        'cached_run_s': cached.wall_seconds,
        'cached_over_first': cached_over_first,
        'component_s': first.component_seconds,
        'cached_component_s': cached.component_seconds,
        'chosen': decision.get('chosen'),
        'pushed': first.summary.pushed_destination is not None,
        'models': models,
        'majority_accuracy': decision.get('majority_accuracy'),
        'targets': [
            results.target('first run (s)', first.wall_seconds,
                           f'<= {FIRST_RUN_TARGET_S} on {os.cpu_count()} cores',
                           first.wall_seconds <= FIRST_RUN_TARGET_S),
            results.target('cached run / first run', cached_over_first, '<= 0.10',
                           cached_over_first <= 0.10),
        ],
        'tables': [
            results.table(
                f"Models the gate compared (chosen: {decision.get('chosen')}; majority class "
                f"{decision.get('majority_accuracy') or 0:.4f})",
                ['model', 'test accuracy', 'size (bytes)', 'latency (ms)'],
                [[name, figures['accuracy'], figures['size_bytes'], figures['latency_ms']]
                 for name, figures in models.items()]),
            results.table('Wall time per component in the first run (s)',
                          ['component', 'seconds'],
                          [[name, seconds] for name, seconds in first.component_seconds.items()]),
        ],
    }

  common.print_result(run, args, 'pipeline')


if __name__ == '__main__':
  main()
