"""The one tfx-distillery pipeline definition, used by every runner.

ExampleGen -> StatisticsGen -> SchemaGen -> ExampleValidator -> IngestionTransform ->
teacher DistributedTrainer -> Pusher. Later stages (Distiller, Pruner, Quantizer, gate) are
added here, so the local, Kubeflow and notebook runners all get them at once.
"""

from typing import Any, Dict, List, Optional

from tfx import v1 as tfx

import components


def create_pipeline(pipeline_name: str,
                    pipeline_root: str,
                    data_root: str,
                    transform_module_file: str,
                    teacher_module_file: str,
                    label_column: str,
                    serving_model_dir: str,
                    train_steps: int = 1000,
                    eval_steps: int = 100,
                    metadata_connection_config: Optional[Any] = None,
                    beam_pipeline_args: Optional[List[str]] = None,
                    enable_cache: bool = True,
                    teacher_config: Optional[Dict[str, Any]] = None,
                    num_shards: int = 8,
                    strategy: str = 'multi_worker_mirrored',
                    num_workers: int = 1) -> tfx.dsl.Pipeline:
  """Builds the pipeline that trains a teacher and pushes it.

  Args:
    pipeline_name: Name recorded in ML Metadata; runs of one name share a cache.
    pipeline_root: Folder (or bucket path) for every component's outputs.
    data_root: Folder of CSV files read by CsvExampleGen.
    transform_module_file: Module file with `preprocessing_fn`.
    teacher_module_file: Module file with `run_fn` for the teacher.
    label_column: Raw label column; serving requests do not carry it.
    serving_model_dir: Filesystem destination of the Pusher.
    train_steps: Teacher training steps.
    eval_steps: Teacher evaluation steps.
    metadata_connection_config: ML Metadata connection; None lets the runner choose.
    beam_pipeline_args: Arguments for the Beam-based components.
    enable_cache: Reuse outputs of executions whose inputs did not change.
    teacher_config: Extra settings for the teacher's run_fn (epochs, batch_size...).
    num_shards: Transformed-example shards per split.
    strategy: tf.distribute strategy of the teacher's DistributedTrainer.
    num_workers: Training workers of the teacher's DistributedTrainer.

  Returns:
    The `tfx.dsl.Pipeline`.
  """
  example_gen = tfx.components.CsvExampleGen(input_base=data_root)
  statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs['examples'])
  schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs['statistics'],
                                        infer_feature_shape=True)
  example_validator = tfx.components.ExampleValidator(
      statistics=statistics_gen.outputs['statistics'], schema=schema_gen.outputs['schema'])
  transform = components.IngestionTransform(
      examples=example_gen.outputs['examples'],
      schema=schema_gen.outputs['schema'],
      module_file=transform_module_file,
      custom_config={'label_column': label_column},
      num_shards=num_shards)
  trainer = components.DistributedTrainer(
      module_file=teacher_module_file,
      examples=transform.outputs['transformed_examples'],
      transform_graph=transform.outputs['transform_graph'],
      schema=schema_gen.outputs['schema'],
      train_args=tfx.proto.TrainArgs(num_steps=train_steps),
      eval_args=tfx.proto.EvalArgs(num_steps=eval_steps),
      custom_config={'label_column': label_column, **(teacher_config or {})},
      strategy=strategy,
      num_workers=num_workers)
  pusher = tfx.components.Pusher(
      model=trainer.outputs['model'],
      push_destination=tfx.proto.PushDestination(
          filesystem=tfx.proto.PushDestination.Filesystem(base_directory=serving_model_dir)))

  return tfx.dsl.Pipeline(
      pipeline_name=pipeline_name,
      pipeline_root=pipeline_root,
      components=[example_gen, statistics_gen, schema_gen, example_validator, transform,
                  trainer, pusher],
      enable_cache=enable_cache,
      metadata_connection_config=metadata_connection_config,
      beam_pipeline_args=beam_pipeline_args or [])
