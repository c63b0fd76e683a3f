"""Runs a two-worker DistributedTrainer executor in this process: the parent a test kills.

Usage: python -m tests.components.distributed_trainer.train_in_child EXAMPLES GRAPH OUTPUT [stuck]

With `stuck`, the run_fn is stuck_module.py's: the workers then print nothing at all.
"""

import sys

from tfx_distillery.components.common import progress
from tests.components.distributed_trainer import test_distributed_trainer as trainer_tests

# Six epochs of 100 steps: the test kills the parent at epoch 2's line, in the middle, as
# the killed-worker test does at 600 steps; the rerun must use the same to find the backup.
# At 3,000 steps the rerun trained 2,500 steps for the same check.
TRAIN_STEPS = 600
EPOCHS = 6


def main(examples_uri: str, graph_uri: str, output_dir: str, stuck: bool = False) -> int:
  from tfx.types import standard_artifacts  # pylint: disable=import-outside-toplevel
  from tests import helpers  # pylint: disable=import-outside-toplevel
  progress.set_console(sys.stdout)
  examples = helpers.artifact(standard_artifacts.Examples, examples_uri)
  examples.split_names = '["train", "eval"]'
  graph = helpers.artifact(standard_artifacts.TransformGraph, graph_uri)
  if stuck:
    from tests.components.distributed_trainer import test_runs_end  # pylint: disable=import-outside-toplevel
    trainer_tests.run_executor((examples, graph, None), output_dir, num_workers=2,
                               module_file=test_runs_end.STUCK_MODULE, train_steps=5)
  else:
    trainer_tests.run_executor((examples, graph, None), output_dir, num_workers=2,
                               train_steps=TRAIN_STEPS, epochs=EPOCHS)
  return 0


if __name__ == '__main__':
  sys.exit(main(*sys.argv[1:4], stuck=sys.argv[4:] == ['stuck']))
