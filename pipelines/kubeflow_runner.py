"""Compiles the pipeline for Kubeflow Pipelines or Vertex AI Pipelines; needs no cluster.

`distillery compile` is this runner (`python -m tfx_distillery.pipelines.kubeflow_runner`
takes the same flags):

  distillery compile --output FILE.yaml|FILE.json [--image IMAGE]
      [--dataset taxi|digits|mnist1d|csv] [--data-root DIR] [--label COLUMN]
      [--unlabelled-root DIR]
      [--pipeline-root DIR] [--serving-dir DIR]
      [--beam-runner flink|spark --beam-endpoint HOST:PORT
       [--beam-environment-type EXTERNAL|DOCKER|PROCESS|LOOPBACK]
       [--beam-environment-config CONFIG]]

`FILE.yaml` is a KFP v2 package (the PipelineSpec, with the pipeline root as its
`defaultPipelineRoot`), which `kfp.Client().create_run_from_pipeline_package` accepts;
`FILE.json` is the Vertex AI `PipelineJob` (the spec inside a job with its
`runtimeConfig`), which `aiplatform.PipelineJob(template_path=...)` accepts.

KubeflowV2DagRunner packages the module files into a wheel under the pipeline
root while compiling, so the root must be writable from here (a local folder, or
a bucket this machine can write to). The curated schema is copied there too, so
the cluster reads the same file.
"""

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional

from tfx_distillery.pipelines import datasets
from tfx_distillery.pipelines import local_runner

DEFAULT_IMAGE = 'tfx-distillery:latest'
# A cluster runs the Python SDK harness for a compiled pipeline: Beam's Kubernetes setup for
# Flink runs a worker pool (this image, `/opt/apache/beam/boot --worker_pool`) beside each
# TaskManager, on port 50000 (docs/scaling-out.md).
DEFAULT_BEAM_ENVIRONMENT = ('EXTERNAL', 'localhost:50000')
KFP_SUFFIXES = ('.yaml', '.yml')
VERTEX_SUFFIXES = ('.json',)


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """Adds the compile flags to `parser` (this module's and `distillery compile`'s)."""
  parser.add_argument('--output', required=True,
                      help='FILE.yaml: a KFP v2 package for kfp.Client; FILE.json: a Vertex '
                      'AI PipelineJob')
  parser.add_argument('--image', default=DEFAULT_IMAGE,
                      help='container image with TFX and this package (see Dockerfile)')
  parser.add_argument('--dataset', default='taxi', choices=datasets.DATASET_NAMES)
  parser.add_argument('--data-root', help='CSV folder as the cluster sees it (default: the '
                      "dataset's folder on this machine)")
  parser.add_argument('--label', help='csv only: the label column')
  parser.add_argument('--unlabelled-root', help='csv only: folder of CSV rows without labels, '
                      'as the cluster sees it; the Distiller learns the teacher\'s answers on '
                      'them')
  parser.add_argument('--pipeline-root',
                      help='outputs root as the cluster sees it (e.g. gs://bucket/root); '
                      'default $DISTILLERY_HOME/runs/kubeflow-DATASET')
  parser.add_argument('--serving-dir',
                      help='push destination as the cluster sees it; default '
                      '$DISTILLERY_HOME/serving/kubeflow-DATASET')
  parser.add_argument('--train-steps', type=int, default=1500)
  parser.add_argument('--num-workers', type=int, default=1)
  parser.add_argument('--beam-runner', default='direct',
                      choices=('direct',) + local_runner.BEAM_ENGINES,
                      help='where the Beam stages run: Beam\'s DirectRunner inside each '
                      'component\'s pod (default), or your Flink or Spark cluster through '
                      'Beam\'s portable runner at --beam-endpoint')
  local_runner.add_beam_engine_arguments(parser, f'{DEFAULT_BEAM_ENVIRONMENT[0]} at '
                                         f'{DEFAULT_BEAM_ENVIRONMENT[1]}, a worker pool '
                                         'beside each TaskManager')
  local_runner.add_seed_argument(parser)


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
  """Refuses bad flag values and combinations through `parser.error` (exit status 2).

  Fills the default roots under the distillery home, whatever the current directory.
  """
  home = local_runner.distillery_home()
  args.pipeline_root = args.pipeline_root or os.path.join(home, 'runs',
                                                          f'kubeflow-{args.dataset}')
  args.serving_dir = args.serving_dir or os.path.join(home, 'serving', f'kubeflow-{args.dataset}')
  if not args.output.endswith(KFP_SUFFIXES + VERTEX_SUFFIXES):
    parser.error(f'--output must end in .yaml (a KFP package) or .json (a Vertex AI '
                 f'PipelineJob); got {args.output!r}')
  if args.dataset == 'csv' and not (args.data_root and args.label):
    parser.error('--dataset csv needs --data-root and --label')
  if args.unlabelled_root and args.dataset != 'csv':
    parser.error('--unlabelled-root is for --dataset csv only')
  if args.train_steps < 1:
    parser.error(f'--train-steps must be >= 1; got {args.train_steps}')
  if args.num_workers < 1:
    parser.error(f'--num-workers must be >= 1; got {args.num_workers}')
  local_runner.check_seed(parser, args)
  if args.beam_runner != 'direct' and not args.beam_environment_type:
    args.beam_environment_type = DEFAULT_BEAM_ENVIRONMENT[0]
    args.beam_environment_config = (args.beam_environment_config
                                    or DEFAULT_BEAM_ENVIRONMENT[1])
  local_runner.check_beam_engine_arguments(parser, args, endpoint_required=True)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(
      prog='python -m tfx_distillery.pipelines.kubeflow_runner',
      description='Compile the tfx-distillery pipeline for Kubeflow Pipelines or Vertex AI.')
  add_arguments(parser)
  args = parser.parse_args(argv)
  check_arguments(parser, args)
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


def write_package(pipeline_job: Dict[str, Any], path: str) -> None:
  """Writes the KFP package (.yaml) or the Vertex AI PipelineJob (.json), whole or not at all.

  TFX's own YAML output keeps only the PipelineSpec and so drops the job's
  `runtimeConfig`, where the pipeline root lives; the root goes into the spec's
  `defaultPipelineRoot` instead, which a KFP v2 backend uses when a run names none.
  """
  import yaml  # pylint: disable=g-import-not-at-top
  temporary_path = path + '.tmp'
  with open(temporary_path, 'w') as handle:
    if path.endswith(KFP_SUFFIXES):
      spec = dict(pipeline_job['pipelineSpec'])
      spec['defaultPipelineRoot'] = pipeline_job['runtimeConfig']['gcsOutputDirectory']
      yaml.safe_dump(spec, handle, sort_keys=True)
    else:
      json.dump(pipeline_job, handle, sort_keys=True, indent=2)
  os.replace(temporary_path, path)


def compile_pipeline(args: argparse.Namespace) -> str:
  """Writes the KFP package or the Vertex JSON and returns its path."""
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from tfx_distillery.pipelines import pipeline  # pylint: disable=g-import-not-at-top
  if args.dataset == 'csv':
    dataset = datasets.csv_dataset(args.data_root, args.label)
  else:
    # Generated data (digits, mnist1d and its pool) is written beside the output.
    dataset = datasets.resolve(args.dataset, os.path.dirname(os.path.abspath(args.output)))
  output_path = os.path.abspath(args.output)
  os.makedirs(os.path.dirname(output_path), exist_ok=True)
  runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
      config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
          default_image=args.image),
      output_dir=os.path.dirname(output_path), output_filename=os.path.basename(output_path))
  pipeline_job = runner.run(pipeline.create_pipeline(
      pipeline_name=f'distillery-{args.dataset}',
      pipeline_root=args.pipeline_root,
      data_root=args.data_root or dataset.data_root,
      transform_module_file=dataset.transform_module_file,
      teacher_module_file=dataset.teacher_module_file,
      student_module_file=dataset.student_module_file,
      student_parameter_shares=dataset.student_parameter_shares,
      label_column=dataset.label_column,
      label_key=dataset.label_key,
      serving_model_dir=args.serving_dir,
      train_steps=args.train_steps,
      num_workers=args.num_workers,
      schema_path=stage_schema(dataset.schema_file, args.pipeline_root),
      unlabelled_data_root=args.unlabelled_root or dataset.unlabelled_data_root,
      input_splits=dataset.input_splits,
      random_seed=args.seed,
      beam_runner=args.beam_runner,
      beam_endpoint=args.beam_endpoint,
      beam_environment_type=args.beam_environment_type,
      beam_environment_config=args.beam_environment_config,
      beam_parallelism=args.beam_parallelism), write_out=False)
  write_package(pipeline_job, output_path)
  return output_path


def main(argv: Optional[List[str]] = None) -> int:
  args = parse_args(argv)
  path = compile_pipeline(args)
  kind = 'KFP package' if path.endswith(KFP_SUFFIXES) else 'Vertex AI PipelineJob'
  print(f'{kind}: {path}', flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())
