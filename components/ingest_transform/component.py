"""IngestionTransform: TFX's Transform, writing output that keeps training fed."""

from typing import Any, Dict, Optional

from tfx.components import Transform
from tfx.dsl.components.base import executor_spec
from tfx.proto import transform_pb2
from tfx.types import Channel

from tfx_distillery.components.common import labels
from tfx_distillery.components.common import modules
from tfx_distillery.components.common import parameters
from tfx_distillery.components.common import reading
from tfx_distillery.components.ingest_transform import executor
from tfx_distillery.components.ingest_transform import spec as ingest_spec

DEFAULT_NUM_SHARDS = 8


class IngestionTransform(Transform):
  """A drop-in for `tfx.components.Transform` whose output is tuned for reading.

  It takes Transform's inputs (examples, schema, module_file or preprocessing_fn,
  splits_config, custom_config, ...) and produces Transform's outputs, so a stock
  `preprocessing_fn` works unchanged. In addition it:

  * writes transformed examples as `num_shards` GZIP TFRecord shards per split,
    so the reader's parallel interleave has files to overlap;
  * records the reading options in `ingestion_options.json` beside the data, which
    `components.common.reading.read_options` hands to every trainer;
  * writes a packed copy of each split (blocks of examples per record) that the
    reader parses many times faster, leaving the stock shards for stock trainers;
  * picks Beam's DirectRunner mode by data size unless told (`direct_num_processes`);
  * given StatisticsGen's `statistics` of the same examples, copies the analyzed
    split's statistics as `pre_transform_stats` instead of computing them again.

  Example:

    transform = IngestionTransform(
        examples=example_gen.outputs['examples'],
        schema=schema_gen.outputs['schema'],
        module_file='trainer_modules/taxi_transform.py',
        statistics=statistics_gen.outputs['statistics'],
        num_shards=8, cache='memory')
  """

  def __init__(self,
               examples: Channel,
               schema: Channel,
               module_file: Optional[str] = None,
               preprocessing_fn: Optional[str] = None,
               splits_config: Optional[transform_pb2.SplitsConfig] = None,
               custom_config: Optional[Dict[str, Any]] = None,
               num_shards: int = DEFAULT_NUM_SHARDS,
               cache: str = 'auto',
               cache_path: Optional[str] = None,
               cycle_length: int = 8,
               deterministic: bool = False,
               shuffle_buffer: int = 10_000,
               direct_num_processes: Optional[int] = None,
               packed_block_size: int = reading.DEFAULT_PACKED_BLOCK_SIZE,
               label_key: Optional[str] = None,
               statistics: Optional[Channel] = None,
               **transform_kwargs):
    """Constructs an IngestionTransform.

    Args:
      examples: Examples channel, as for Transform.
      schema: Schema channel, as for Transform.
      module_file: File with `preprocessing_fn`, as for Transform.
      preprocessing_fn: Dotted path of `preprocessing_fn`, as for Transform.
      splits_config: Which splits to analyze and transform, as for Transform.
      custom_config: Passed to `preprocessing_fn` if it takes `custom_config`.
      num_shards: GZIP TFRecord files per split (>= 1; fewer when a split has fewer
        rows). A row's shard and its place there follow a key computed from its
        values, so the same rows make the same files whatever Beam's bundles.
      cache: How trainers cache parsed batches: `auto` (in memory when the
        transformed data is small enough, see `executor.MEMORY_CACHE_MAX_BYTES`),
        `none`, `memory` or `file`.
      cache_path: Cache file prefix; required when `cache` is `file`.
      cycle_length: Shards the reader interleaves at once (>= 1).
      deterministic: Whether readers keep a reproducible order (slower).
      shuffle_buffer: Records in the readers' shuffle buffer (>= 0).
      direct_num_processes: Beam DirectRunner processes: 0 runs in memory,
        N >= 2 runs N processes, None chooses by input size (multi-processing
        from `executor.MULTI_PROCESSING_MIN_BYTES` of input examples). Ignored when
        `beam_pipeline_args` name another runner or a running mode.
      packed_block_size: Examples per record of the packed copy written beside
        each split (`<uri>/packed/Split-<name>/`), which readers parse many times
        faster than one `tf.Example` per example; 0 writes none. Only written
        when every transformed feature has a fixed shape.
      label_key: The transformed label feature. When given, the label is checked
        in every split before anything trains on it: fewer than two classes, a
        continuous-looking label, or a value the transform could not map to a
        class (named, with the raw `custom_config['label_column']` value) stops
        the run. None checks nothing, as stock Transform.
      statistics: StatisticsGen's `statistics` of the same `examples`. When Transform
        analyzes one split (TFX's default, `train`) and the module defines no
        `stats_options_updater_fn`, that split's `FeatureStats.pb` is copied as
        `pre_transform_stats` instead of computed again (StatisticsGen computed it
        over the same rows; it did so without the schema). Otherwise, or when None,
        Transform computes them, as stock Transform does.
      **transform_kwargs: Other Transform arguments (analyzer_cache,
        disable_statistics, materialize, ...).

    Raises:
      ValueError: naming the argument that is out of range.
    """
    if not isinstance(num_shards, int) or isinstance(num_shards, bool) or num_shards < 1:
      raise ValueError(f'num_shards must be an integer >= 1; got {num_shards!r}.')
    if direct_num_processes is not None and (
        not isinstance(direct_num_processes, int) or direct_num_processes < 0 or
        direct_num_processes == 1):
      raise ValueError('direct_num_processes must be None (choose by data size), 0 (in '
                       f'memory) or an integer >= 2; got {direct_num_processes!r}.')
    if not reading.is_count(packed_block_size) or packed_block_size < 0:
      raise ValueError('packed_block_size must be an integer >= 0 (0 writes no packed copy); '
                       f'got {packed_block_size!r}.')
    if label_key is not None:
      labels.validate_label_key(label_key)
    if module_file and not preprocessing_fn:
      modules.check_module_defines(module_file, 'preprocessing_fn', '(inputs)')
    parameters.refuse_secrets('custom_config', custom_config)
    cache_modes = (executor.AUTO_CACHE,) + reading.CACHE_MODES
    if cache not in cache_modes:
      raise ValueError(f'cache must be one of {", ".join(cache_modes)}; got {cache!r}.')
    # Raises ValueError naming cache_path, cycle_length or shuffle_buffer.
    reading.IngestionOptions(cycle_length=cycle_length, deterministic=deterministic,
                             cache='none' if cache == executor.AUTO_CACHE else cache,
                             cache_path=cache_path or '', shuffle_buffer=shuffle_buffer)
    super().__init__(examples=examples, schema=schema, module_file=module_file,
                     preprocessing_fn=preprocessing_fn, splits_config=splits_config,
                     custom_config=custom_config, **transform_kwargs)
    # Transform builds a stock TransformSpec; ours extends it with the settings
    # above and keeps the same channels, so TFX handles it like Transform's.
    stock_spec = self.spec
    inputs = dict(stock_spec.inputs)
    if statistics is not None:
      inputs[ingest_spec.STATISTICS_KEY] = statistics
    self.spec = ingest_spec.IngestionTransformSpec(
        **stock_spec.exec_properties, **inputs, **stock_spec.outputs,
        **{ingest_spec.NUM_SHARDS_KEY: num_shards,
           ingest_spec.CACHE_KEY: cache,
           ingest_spec.CACHE_PATH_KEY: cache_path,
           ingest_spec.CYCLE_LENGTH_KEY: cycle_length,
           ingest_spec.DETERMINISTIC_KEY: int(deterministic),
           ingest_spec.SHUFFLE_BUFFER_KEY: shuffle_buffer,
           ingest_spec.DIRECT_NUM_PROCESSES_KEY:
               -1 if direct_num_processes is None else direct_num_processes,
           ingest_spec.PACKED_BLOCK_SIZE_KEY: packed_block_size,
           ingest_spec.LABEL_KEY_KEY: label_key})

  EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
