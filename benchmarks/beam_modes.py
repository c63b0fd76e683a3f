"""Beam DirectRunner modes: in-memory against multi-processing, by input size.

CsvExampleGen -> StatisticsGen -> SchemaGen -> IngestionTransform runs on the
taxi CSV tiled `k` times, once per mode, and the wall time of each is recorded.
The crossover is the input size above which multi-processing wins; the
IngestionTransform executor's `MULTI_PROCESSING_MIN_BYTES` comes from it.

Usage:
  python -m benchmarks.beam_modes --json [--tiles 1,10]
"""

import os
import tempfile

from tfx import v1 as tfx

from tfx_distillery import components
from benchmarks import common
from tfx_distillery.pipelines import datasets


def tiled_csv(work_dir: str, tiles: int) -> str:
  """The taxi CSV repeated `tiles` times in one file."""
  folder = os.path.join(work_dir, f'taxi-x{tiles}')
  path = os.path.join(folder, 'data.csv')
  if not os.path.exists(path):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(datasets.taxi_data_dir(), 'data.csv')) as source:
      header, *rows = source.readlines()
    with open(path + '.tmp', 'w') as target:
      target.write(header)
      for _ in range(tiles):
        target.writelines(rows)
    os.replace(path + '.tmp', path)
  return folder


def wall_seconds(data_root: str, root: str, direct_num_processes: int) -> float:
  taxi = datasets.resolve('taxi', root)
  example_gen = tfx.components.CsvExampleGen(input_base=data_root)
  statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs['statistics'])
  transform = components.IngestionTransform(
      examples=example_gen.outputs['examples'], schema=schema_gen.outputs['schema'],
      module_file=taxi.transform_module_file)
  if direct_num_processes:
    mode_args = ['--direct_running_mode=multi_processing',
                 f'--direct_num_workers={direct_num_processes}']
  else:
    mode_args = ['--direct_running_mode=in_memory', '--direct_num_workers=1']
  with common.Stopwatch() as stopwatch:
    tfx.orchestration.LocalDagRunner().run(tfx.dsl.Pipeline(
        pipeline_name='beam-modes', pipeline_root=os.path.join(root, 'root'),
        components=[example_gen, statistics_gen, schema_gen, transform], enable_cache=False,
        beam_pipeline_args=mode_args,
        metadata_connection_config=tfx.orchestration.metadata
        .sqlite_metadata_connection_config(os.path.join(root, 'metadata.sqlite'))))
  return stopwatch.seconds


def run(tiles_list, work_dir: str) -> dict:
  rows = []
  for tiles in tiles_list:
    data_root = tiled_csv(work_dir, tiles)
    size = os.path.getsize(os.path.join(data_root, 'data.csv'))
    row = {'rows': 15_002 * tiles, 'csv_bytes': size}
    for name, processes in (('in_memory_s', 0), ('multi_processing_2_s', 2)):
      row[name] = round(wall_seconds(data_root, tempfile.mkdtemp(dir=work_dir), processes), 1)
    row['multi_over_in_memory'] = round(row['multi_processing_2_s'] / row['in_memory_s'], 2)
    rows.append(row)
  return {'runs': rows}


def main():
  parser = common.argument_parser(__doc__, 'distillery-beam-modes')
  parser.add_argument('--tiles', default='1,10')
  args = parser.parse_args()
  os.makedirs(args.work_dir, exist_ok=True)
  tiles = [int(count) for count in args.tiles.split(',')]
  common.print_result(lambda: run(tiles, args.work_dir), args.json)


if __name__ == '__main__':
  main()
