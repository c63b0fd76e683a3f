"""Runs a two-worker DistributedTrainer executor in this process: the parent a test kills.

Usage: python -m tests.components.distributed_trainer.train_in_child EXAMPLES GRAPH OUTPUT
"""

import sys

from tfx_distillery.components.common import progress
from tests.components.distributed_trainer import test_distributed_trainer as trainer_tests


def main(examples_uri: str, graph_uri: str, output_dir: str) -> int:
  from tfx.types import standard_artifacts  # pylint: disable=import-outside-toplevel
  from tests import helpers  # pylint: disable=import-outside-toplevel
  progress.set_console(sys.stdout)
  examples = helpers.artifact(standard_artifacts.Examples, examples_uri)
  examples.split_names = '["train", "eval"]'
  graph = helpers.artifact(standard_artifacts.TransformGraph, graph_uri)
  trainer_tests.run_executor((examples, graph, None), output_dir, num_workers=2,
                             train_steps=600, epochs=6)
  return 0


if __name__ == '__main__':
  sys.exit(main(*sys.argv[1:4]))
