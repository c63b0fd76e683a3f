"""Compiles the pipeline for Kubeflow Pipelines / Vertex AI Pipelines; needs no cluster.

Usage:
  python -m tfx_distillery.pipelines.kubeflow_runner --output FILE [--image IMAGE]
      [--dataset taxi|digits|csv] [--data-root DIR] [--label COLUMN]
      [--pipeline-root DIR] [--serving-dir DIR]

KubeflowV2DagRunner packages the module files into a wheel under the pipeline
root while compiling, so the root must be writable from here (a local folder, or
a bucket this machine can write to). The curated schema is copied there too, so
the cluster reads the same file.
"""

import argparse
import os
import sys
from typing import List, Optional

from tfx_distillery.pipelines import datasets

DEFAULT_IMAGE = 'tfx-distillery:latest'


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(
      prog='python -m tfx_distillery.pipelines.kubeflow_runner',
      description='Compile the tfx-distillery pipeline to a Kubeflow Pipelines JSON file.')
  parser.add_argument('--output', required=True, help='pipeline JSON file to write')
  parser.add_argument('--image', default=DEFAULT_IMAGE,
                      help='container image with TFX and this package (see Dockerfile)')
  parser.add_argument('--dataset', default='taxi', choices=datasets.DATASET_NAMES)
  parser.add_argument('--data-root', help='CSV folder as the cluster sees it (default: the '
                      "dataset's folder on this machine)")
  parser.add_argument('--label', help='csv only: the label column')
  parser.add_argument('--pipeline-root', default=os.path.join('runs', 'kubeflow-root'),
                      help='outputs root as the cluster sees it (e.g. gs://bucket/root)')
  parser.add_argument('--serving-dir', default=os.path.join('serving', 'kubeflow'),
                      help='push destination as the cluster sees it')
  parser.add_argument('--train-steps', type=int, default=1500)
  parser.add_argument('--num-workers', type=int, default=1)
  args = parser.parse_args(argv)
  if args.dataset == 'csv' and not (args.data_root and args.label):
    parser.error('--dataset csv needs --data-root and --label')
  if args.train_steps < 1:
    parser.error(f'--train-steps must be >= 1; got {args.train_steps}')
  if args.num_workers < 1:
    parser.error(f'--num-workers must be >= 1; got {args.num_workers}')
  return args


def stage_schema(schema_file: Optional[str], pipeline_root: str) -> Optional[str]:
  """Copies the curated schema under the pipeline root, where the cluster can read it."""
  if not schema_file:
    return None
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  staged_dir = os.path.join(pipeline_root, 'schema')
  tf.io.gfile.makedirs(staged_dir)
  staged_path = os.path.join(staged_dir, 'schema.pbtxt')
  tf.io.gfile.copy(schema_file, staged_path, overwrite=True)
  return staged_path


def compile_pipeline(args: argparse.Namespace) -> str:
  """Writes the pipeline JSON and returns its path."""
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from tfx_distillery.pipelines import pipeline  # pylint: disable=g-import-not-at-top
  if args.dataset == 'csv':
    dataset = datasets.Dataset('csv', args.data_root, args.label,
                               datasets.module_file('tabular_transform'),
                               datasets.module_file('tabular_teacher'),
                               datasets.module_file('tabular_student'))
  else:
    dataset = datasets.resolve(args.dataset, os.path.dirname(os.path.abspath(args.output)))
  output_dir = os.path.dirname(os.path.abspath(args.output))
  os.makedirs(output_dir, exist_ok=True)
  runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
      config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
          default_image=args.image),
      output_dir=output_dir, output_filename=os.path.basename(args.output))
  runner.run(pipeline.create_pipeline(
      pipeline_name=f'distillery-{args.dataset}',
      pipeline_root=args.pipeline_root,
      data_root=args.data_root or dataset.data_root,
      transform_module_file=dataset.transform_module_file,
      teacher_module_file=dataset.teacher_module_file,
      student_module_file=dataset.student_module_file,
      label_column=dataset.label_column,
      serving_model_dir=args.serving_dir,
      train_steps=args.train_steps,
      num_workers=args.num_workers,
      schema_path=stage_schema(dataset.schema_file, args.pipeline_root)))
  return os.path.abspath(args.output)


def main(argv: Optional[List[str]] = None) -> int:
  path = compile_pipeline(parse_args(argv))
  print(f'pipeline JSON: {path}', flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())
