"""The teacher-only digits pipeline the reliability tests break and rerun.

`python -m tests.reliability.digits_pipeline WORKSPACE [--train-steps N --epochs N]`
runs it as its own process, so a test can SIGKILL the whole pipeline.
"""

import argparse
import csv
import os
import shutil

from tfx_distillery.pipelines import datasets

PIPELINE_NAME = 'reliability-digits'


def write_data(workspace: str, rows: int) -> str:
  """Writes the first `rows` digits to WORKSPACE/data/data.csv and a copy to good.csv.

  Returns:
    The path of good.csv.
  """
  source = datasets.write_digits_csv(os.path.join(workspace, 'full'))
  with open(os.path.join(source, 'data.csv'), newline='') as handle:
    kept = list(csv.reader(handle))[:rows + 1]
  good = os.path.join(workspace, 'good.csv')
  with open(good, 'w', newline='') as handle:
    csv.writer(handle).writerows(kept)
  os.makedirs(os.path.join(workspace, 'data'), exist_ok=True)
  # copy2 keeps the modification time, so a restored file is the same input to
  # ExampleGen's fingerprint and a rerun after a fix may take the cache.
  shutil.copy2(good, os.path.join(workspace, 'data', 'data.csv'))
  return good


def run(workspace: str, train_steps: int = 10, epochs: int = 1) -> None:
  """Runs ExampleGen .. teacher DistributedTrainer -> gate -> AtomicPusher on WORKSPACE/data."""
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from tfx_distillery.pipelines import pipeline  # pylint: disable=g-import-not-at-top
  digits = datasets.resolve('digits', os.path.join(workspace, 'unused'))
  tfx.orchestration.LocalDagRunner().run(pipeline.create_pipeline(
      pipeline_name=PIPELINE_NAME,
      pipeline_root=os.path.join(workspace, 'root'),
      data_root=os.path.join(workspace, 'data'),
      transform_module_file=digits.transform_module_file,
      teacher_module_file=digits.teacher_module_file,
      label_column=digits.label_column,
      schema_path=digits.schema_file,
      serving_model_dir=os.path.join(workspace, 'serving'),
      train_steps=train_steps,
      eval_steps=2,
      metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
          os.path.join(workspace, 'metadata.sqlite')),
      teacher_config={'epochs': epochs},
      num_shards=2,
      prune=False,
      quantization_modes=(),
      max_accuracy_drop=1.0))


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument('workspace')
  parser.add_argument('--train-steps', type=int, default=10)
  parser.add_argument('--epochs', type=int, default=1)
  args = parser.parse_args()
  run(args.workspace, args.train_steps, args.epochs)


if __name__ == '__main__':
  main()
