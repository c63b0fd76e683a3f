"""The `distillery` command: run the pipeline locally, compile it, show the last report.

  distillery run --dataset taxi|digits|csv [...]    LocalDagRunner, Beam, SQLite MLMD
  distillery compile --output FILE.yaml|FILE.json   Kubeflow Pipelines / Vertex AI
  distillery report [--pipeline-root DIR]           the last run's gate table and report

Every subcommand sends TFX's, Beam's and TensorFlow's own lines (start-up warnings
included) to a log file and keeps the console for our progress, our warnings and
errors; `run --verbose` shows everything.
"""

import argparse
import contextlib
import json
import os
import sys
from typing import Iterator, List, Optional, TextIO

# Before anything imports TensorFlow: tensorflow-model-optimization needs Keras 2.
os.environ['TF_USE_LEGACY_KERAS'] = '1'

from tfx_distillery.components.common import progress  # pylint: disable=g-import-not-at-top,wrong-import-position
from tfx_distillery.pipelines import kubeflow_runner  # pylint: disable=g-import-not-at-top,wrong-import-position
from tfx_distillery.pipelines import local_runner  # pylint: disable=g-import-not-at-top,wrong-import-position


@contextlib.contextmanager
def library_output_to(log_path: str) -> Iterator[TextIO]:
  """Sends this process's stdout and stderr to `log_path`; yields a stream on the console."""
  os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
  log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  try:
    with progress.process_output_to(log_fd, include_stderr=True) as console:
      yield console
  finally:
    os.close(log_fd)


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog='distillery',
      description='Train a big model and ship a small one, in a TFX pipeline.',
      epilog='`distillery COMMAND --help` describes each command.')
  commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')
  run = commands.add_parser(
      'run', help='run the whole pipeline locally (LocalDagRunner, Beam DirectRunner)',
      description='Run the pipeline locally: teacher, student, pruned and int8 models, the '
      'accuracy gate, and a push of the smallest model that passes. Exit status: 0 pushed, '
      '1 a component failed, 2 bad input, 3 no candidate passed the gate.')
  local_runner.add_arguments(run)
  compile_command = commands.add_parser(
      'compile', help='compile for Kubeflow Pipelines (.yaml) or Vertex AI (.json)',
      description='Compile the pipeline offline: FILE.yaml is a KFP v2 package that '
      'kfp.Client().create_run_from_pipeline_package accepts; FILE.json is a Vertex AI '
      'PipelineJob.')
  kubeflow_runner.add_arguments(compile_command)
  report = commands.add_parser(
      'report', help="print the last run's gate table and the report's path",
      description="Print the gate's table of a finished run and the path of its HTML/PNG "
      'report.')
  report.add_argument('--pipeline-root',
                      help='the run to show (default: the last `distillery run` under '
                      f'${local_runner.HOME_VARIABLE})')
  plan = commands.add_parser(
      'plan-stages', help="plan a teacher's pipeline stages (strategy='pipeline') before "
      'booking devices',
      description="Split a Trainer module file's model into pipeline stages, as "
      "DistributedTrainer(strategy='pipeline') would: its run_fn runs up to its first fit on "
      'the given Transform outputs, each piece of the model is timed there on a few real '
      'batches, and the split that minimises the slowest stage is printed with the '
      'predicted bubble share (S - 1) / (M + S - 1). Nothing is trained.')
  plan.add_argument('module_file', help='the Trainer module file (run_fn)')
  plan.add_argument('--devices', type=int, required=True, help='stages: one per device')
  plan.add_argument('--micro-batches', type=int, default=8, help='micro-batches per step (M)')
  plan.add_argument('--examples', help='transformed examples (a folder of Split-* folders); '
                    "default: the last `distillery run`'s")
  plan.add_argument('--transform-graph', help="Transform's graph; default: the last run's")
  plan.add_argument('--pipeline-root', help='take both from this `distillery run` instead')
  plan.add_argument('--custom-config', default='{}', help="run_fn's custom_config, as JSON")
  plan.add_argument('--json', action='store_true', help='print the plan as JSON')
  return parser


def transform_outputs_of(pipeline_root: Optional[str]):
  """(transformed examples, transform graph) folders of a recorded `distillery run`."""
  from tfx_distillery.pipelines import summary  # pylint: disable=g-import-not-at-top
  record = local_runner.read_run_record(pipeline_root)
  store = summary.open_store(record['metadata'])
  graphs = summary.pipeline_artifacts(store, record['pipeline_name'], 'TransformGraph')
  if not graphs:
    raise FileNotFoundError(f"the run in {record['pipeline_root']} has no Transform output yet.")
  node = summary.producer_node(store, graphs[-1])
  examples = [artifact for artifact in summary.pipeline_artifacts(
      store, record['pipeline_name'], 'Examples') if summary.producer_node(store, artifact) == node]
  return examples[-1].uri, graphs[-1].uri


def plan_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
  """Prints the stage plan of a module file's model; 2 for bad input."""
  if args.devices < 1:
    parser.error(f'--devices must be a whole number >= 1; got {args.devices}.')
  if args.micro_batches < 1:
    parser.error(f'--micro-batches must be a whole number >= 1; got {args.micro_batches}.')
  if not os.path.isfile(args.module_file):
    parser.error(f'module_file {args.module_file!r}: no such file.')
  try:
    custom_config = json.loads(args.custom_config)
  except json.JSONDecodeError as error:
    parser.error(f'--custom-config is not JSON: {error}.')
  if bool(args.examples) != bool(args.transform_graph):
    parser.error('--examples and --transform-graph go together (or give neither, for the '
                 'last run\'s).')
  try:
    examples, graph = ((args.examples, args.transform_graph) if args.examples
                       else transform_outputs_of(args.pipeline_root))
  except FileNotFoundError as error:
    print(f'error: {error}', file=sys.stderr)
    return local_runner.EXIT_BAD_INPUT
  log_path = os.path.join(local_runner.distillery_home(), 'plan-stages.log')
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  try:
    with library_output_to(log_path):
      from tfx_distillery.components.distributed_trainer import gpipe  # pylint: disable=g-import-not-at-top
      plan = gpipe.plan_module(os.path.abspath(args.module_file), examples, graph,
                               args.devices, args.micro_batches, custom_config)
  except ValueError as error:
    print(f'error: {error}', file=sys.stderr)
    return local_runner.EXIT_BAD_INPUT
  print(json.dumps(plan, indent=1) if args.json else gpipe.format_plan(plan), flush=True)
  return 0


def compile_command(args: argparse.Namespace) -> int:
  log_path = os.path.splitext(os.path.abspath(args.output))[0] + '.log'
  with library_output_to(log_path):
    path = kubeflow_runner.compile_pipeline(args)
  kind = ('KFP package' if path.endswith(kubeflow_runner.KFP_SUFFIXES) else
          'Vertex AI PipelineJob')
  print(f'{kind}: {path}', flush=True)
  return 0


def report_command(args: argparse.Namespace) -> int:
  """Prints the gate table of the recorded run and its report's path."""
  try:
    record = local_runner.read_run_record(args.pipeline_root)
  except FileNotFoundError as error:
    print(f'error: {error}', file=sys.stderr)
    return local_runner.EXIT_BAD_INPUT
  if not os.path.isfile(record['metadata']):
    print(f'error: {record["metadata"]} is missing: the run in {record["pipeline_root"]} has '
          'no ML Metadata (was the folder deleted?).', file=sys.stderr)
    return local_runner.EXIT_BAD_INPUT
  with library_output_to(os.path.join(record['pipeline_root'], 'pipeline.log')):
    from tfx_distillery.components.gate import report  # pylint: disable=g-import-not-at-top
    from tfx_distillery.pipelines import summary  # pylint: disable=g-import-not-at-top
    run_summary = summary.summarize_run(record['metadata'], record['pipeline_name'])
  print(summary.format_table(run_summary), flush=True)
  report_path = os.path.join(record['pipeline_root'], report.HTML_FILE_NAME)
  if os.path.isfile(report_path):
    print(f'report: {report_path}', flush=True)
  else:
    print(f'report: none; the run in {record["pipeline_root"]} has no gate decision yet',
          flush=True)
  return 0


def main(argv: Optional[List[str]] = None) -> int:
  """Entry point of the `distillery` console script; returns the exit status."""
  parser = build_parser()
  args = parser.parse_args(argv)
  if args.command == 'run':
    local_runner.check_arguments(parser, args)
    status = local_runner.run_with_exit_status(args)
    if status == local_runner.EXIT_INTERRUPTED or local_runner.must_exit_at_once():
      local_runner.exit_at_once(status)
    return status
  if args.command == 'compile':
    kubeflow_runner.check_arguments(parser, args)
    return compile_command(args)
  if args.command == 'plan-stages':
    return plan_command(parser, args)
  return report_command(args)


if __name__ == '__main__':
  sys.exit(main())
