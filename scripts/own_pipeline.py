"""Runs the README's own-pipeline example (TFX's taxi pipeline, our chain after its Trainer)
and prints the gate's table and the stock Evaluator's verdict on our student.

Usage: python scripts/own_pipeline.py WORK_DIR [--rows N]
(the full TFX taxi CSV by default; --rows takes its first N rows).
"""

import argparse
import os
import re
import sys

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPELINE_NAME = 'taxi-distilled'


def readme_block() -> str:
  with open(os.path.join(REPOSITORY, 'README.md')) as handle:
    text = handle.read()
  section = text[text.index('## Use it in your own pipeline'):]
  return re.search(r'```python\n(.*?)```', section, flags=re.DOTALL).group(1)


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('work_dir')
  parser.add_argument('--rows', type=int, default=0)
  args = parser.parse_args()
  import tensorflow_model_analysis as tfma  # pylint: disable=g-import-not-at-top
  from tfx import v1 as tfx  # pylint: disable=g-import-not-at-top
  from tfx_distillery.pipelines import datasets  # pylint: disable=g-import-not-at-top
  from tfx_distillery.pipelines import summary  # pylint: disable=g-import-not-at-top
  work_dir = os.path.abspath(args.work_dir)
  os.makedirs(work_dir, exist_ok=True)
  block = readme_block()
  if args.rows:
    sample = datasets.sample_csv(datasets.taxi_data_dir(), os.path.join(work_dir, 'data'),
                                 rows=args.rows)
    block = re.sub(r'^DATA_ROOT = .*$', f'DATA_ROOT = {sample!r}', block, flags=re.MULTILINE)
  os.chdir(work_dir)
  namespace = {}
  exec(compile(block, 'README own pipeline', 'exec'), namespace)  # pylint: disable=exec-used
  tfx.orchestration.LocalDagRunner().run(namespace['pipeline'])
  metadata_path = os.path.join(work_dir, 'runs', 'taxi-stock', 'metadata.sqlite')
  print(summary.format_table(summary.summarize_run(metadata_path, PIPELINE_NAME)))
  store = summary.open_store(metadata_path)
  evaluation = [artifact for artifact in summary.pipeline_artifacts(
      store, PIPELINE_NAME, 'ModelEvaluation')][-1].uri
  result = tfma.load_eval_result(evaluation)
  validation = tfma.load_validation_result(evaluation)
  for slice_key, metrics in result.slicing_metrics:
    print('Evaluator (TFMA), slice', slice_key or 'overall', {
        name: round(value.get('doubleValue', 0.0), 4)
        for name, value in metrics[''][''].items()})
  print('Evaluator blessing (our student against the stock teacher):',
        'BLESSED' if validation.validation_ok else 'NOT BLESSED')
  if not validation.validation_ok:
    print(validation)
  return 0


if __name__ == '__main__':
  exit_code = main()
  sys.stdout.flush()
  # Skips interpreter teardown, where TensorFlow's function finalizers print
  # "Exception ignored" tracebacks about restored SavedModels.
  os._exit(exit_code)  # pylint: disable=protected-access
