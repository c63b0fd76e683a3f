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
  return parser


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
    if status == local_runner.EXIT_INTERRUPTED:
      # After Ctrl-C, Beam's and gRPC's threads may never end; exit without waiting on them.
      sys.stdout.flush()
      sys.stderr.flush()
      os._exit(status)  # pylint: disable=protected-access
    return status
  if args.command == 'compile':
    kubeflow_runner.check_arguments(parser, args)
    return compile_command(args)
  return report_command(args)


if __name__ == '__main__':
  sys.exit(main())
