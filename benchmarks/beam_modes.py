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
from benchmarks import results
from tfx_distillery.components.ingest_transform import executor as ingest_executor
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
  crossover = crossover_csv_bytes(rows)
  return {
      'title': 'Beam DirectRunner mode: in-memory against multi-processing',
      'summary': ('CsvExampleGen -> StatisticsGen -> SchemaGen -> IngestionTransform on the '
                  'taxi CSV tiled k times, each DirectRunner mode on the whole sub-pipeline.'),
      'runs': rows,
      'crossover_csv_bytes': crossover,
      'multi_processing_min_bytes': ingest_executor.MULTI_PROCESSING_MIN_BYTES,
      'tables': [results.table(
          'Wall time (s) by input size',
          ['rows', 'CSV (bytes)', 'in-memory', 'multi-processing, 2 workers',
           'multi / in-memory'],
          [[row['rows'], row['csv_bytes'], row['in_memory_s'], row['multi_processing_2_s'],
            row['multi_over_in_memory']] for row in rows])],
      'notes': [
          'Straight lines through the two sizes cross at '
          + (f'{crossover / 2**20:.1f} MiB of CSV' if crossover else 'no positive size')
          + '; IngestionTransform switches to multi-processing from '
          f'{ingest_executor.MULTI_PROCESSING_MIN_BYTES / 2**20:.0f} MiB of input examples '
          '(`MULTI_PROCESSING_MIN_BYTES`, set from an earlier run of this benchmark). The '
          'crossover is an extrapolation, not a measurement; `direct_num_processes` '
          'overrides the choice.'],
  }


def crossover_csv_bytes(rows):
  """Where straight lines through the first and last sizes cross, in CSV bytes (or None)."""
  if len(rows) < 2:
    return None
  first, last = rows[0], rows[-1]
  span = last['csv_bytes'] - first['csv_bytes']
  slope_memory = (last['in_memory_s'] - first['in_memory_s']) / span
  slope_multi = (last['multi_processing_2_s'] - first['multi_processing_2_s']) / span
  if slope_memory <= slope_multi:
    return None
  gap = first['multi_processing_2_s'] - first['in_memory_s']
  return first['csv_bytes'] + gap / (slope_memory - slope_multi)


def main():
  parser = common.argument_parser(__doc__, 'distillery-beam-modes')
  parser.add_argument('--tiles', default='1,10')
  args = parser.parse_args()
  os.makedirs(args.work_dir, exist_ok=True)
  tiles = [int(count) for count in args.tiles.split(',')]
  common.print_result(lambda: run(tiles, args.work_dir), args, 'beam_modes')


if __name__ == '__main__':
  main()
