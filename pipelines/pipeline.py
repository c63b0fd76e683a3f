"""The one tfx-distillery pipeline definition, used by every runner.

ArrowCsvExampleGen (train, eval, test) -> StatisticsGen -> ImportSchemaGen (or SchemaGen) ->
StrictExampleValidator -> IngestionTransform -> teacher DistributedTrainer -> Distiller ->
Pruner -> Quantizers (on the student and on the pruned model) -> AccuracyGate -> AtomicPusher.
Every runner (local, Kubeflow) builds its pipeline here, and the notebook runs the
components of `create_components` one by one, so they all get the same chain. The Distiller, Pruner and Quantizer stages can each be switched off.
"""

from typing import Any, Dict, List, Optional, Sequence

# TFX's modules, not its public API `tfx.v1`: that loads its cloud extensions and kfp too,
# about 9 s of every pipeline process's start.
from tfx.components import SchemaGen
from tfx.components import StatisticsGen
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.dsl.components.base import base_node
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.proto import example_gen_pb2
from tfx.proto import pusher_pb2
from tfx.proto import trainer_pb2

from tfx_distillery import components
from tfx_distillery.components.common import beam_runner as beam_runner_lib
from tfx_distillery.components.common import parameters
from tfx_distillery.components.common import seeding
from tfx_distillery.components.gate import spec as gate_spec
from tfx_distillery.pipelines import beam_cluster

# ExampleGen's hash buckets: train, eval (what chooses), test (what reports and gates).
SPLIT_BUCKETS = (('train', 6), ('eval', 2), ('test', 2))
# The one split of the unlabelled rows' ExampleGen.
UNLABELLED_SPLIT = 'unlabelled'


def create_components(data_root: str,
                      transform_module_file: str,
                      teacher_module_file: str,
                      label_column: str,
                      serving_model_dir: str,
                      label_key: str = 'label',
                      train_steps: int = 1000,
                      eval_steps: int = 100,
                      teacher_config: Optional[Dict[str, Any]] = None,
                      num_shards: int = 8,
                      strategy: str = 'multi_worker_mirrored',
                      num_workers: int = 1,
                      student_module_file: Optional[str] = None,
                      student_parameter_shares: Sequence[float] = (),
                      student_train_steps: Optional[int] = None,
                      student_config: Optional[Dict[str, Any]] = None,
                      distillation: Optional[Dict[str, Any]] = None,
                      prune: bool = True,
                      pruning_steps: int = 300,
                      pruning: Optional[Dict[str, Any]] = None,
                      quantization_modes: Sequence[str] = ('full_integer',),
                      max_accuracy_drop: float = 0.01,
                      max_model_bytes: Optional[int] = None,
                      schema_path: Optional[str] = None,
                      unlabelled_data_root: Optional[str] = None,
                      input_splits: Sequence[str] = (),
                      random_seed: Optional[int] = None) -> List[base_node.BaseNode]:
  """Builds the chain's components: teacher, student, pruned, quantized, gate, push.

  Args:
    data_root: Folder of CSV files read by CsvExampleGen.
    transform_module_file: Module file with `preprocessing_fn`.
    teacher_module_file: Module file with `run_fn` for the teacher.
    label_column: Raw label column; serving requests do not carry it.
    serving_model_dir: Filesystem destination of the Pusher.
    label_key: The transformed label feature that `preprocessing_fn` emits
      (TFMA's name). Every component that reads labels gets it from here, and
      the teacher module gets it in custom_config with `label_column`.
    train_steps: Teacher training steps.
    eval_steps: Teacher evaluation steps.
    teacher_config: Extra settings for the teacher's run_fn (epochs, batch_size...).
    num_shards: Transformed-example shards per split.
    strategy: tf.distribute strategy of the teacher's DistributedTrainer.
    num_workers: Training workers of the teacher's DistributedTrainer (and Distiller).
    student_module_file: Module file with `build_student`; None (and no
      `student_parameter_shares`) leaves the Distiller out and pushes the teacher.
    student_parameter_shares: Instead of a module file, let the Distiller size its
      built-in student: it distils one at each share of the teacher's parameters
      (increasing, e.g. (0.01, 0.03, 0.1, 0.3)), smallest first, and hands on the
      first within `max_accuracy_drop` of the teacher on eval.
    student_train_steps: Steps of each student training (train_steps when None).
    student_config: Extra settings for the student's training (epochs, batch_size...).
    distillation: Distiller arguments such as `temperature`, `alpha`, `tune`.
    prune: Add the Pruner stage (on the student, or the teacher without one).
    pruning_steps: Fine-tuning steps of the Pruner.
    pruning: Pruner arguments. By default it searches for the highest sparsity
      whose eval accuracy stays within the gate's `max_accuracy_drop` of the
      teacher's; a `target_sparsity` (without `max_accuracy_drop`) fixes it.
    quantization_modes: Quantizer modes (`full_integer`, `float16`,
      `dynamic_range`, `qat`), each applied to the student and to the pruned
      model, so a pruning loss can not hide the quantized model; empty for none.
    max_accuracy_drop: The gate's largest accuracy drop against the teacher.
    max_model_bytes: The gate's size limit; None for none.
    schema_path: A curated schema (schema.pbtxt) that the data must match; the
      validator stops the run on any anomaly against it. None infers the schema
      from the data itself, which then catches only what inference can not absorb.
    unlabelled_data_root: Optional folder of CSV files of rows without labels, with the
      columns of `data_root` but the label. A second ExampleGen
      (`UnlabelledExampleGen`, one split `unlabelled`) reads them, and the Distiller
      learns the teacher's answers on them (`transfer_examples`). Needs a student.
    input_splits: Split names that `data_root` holds as folders of their own, e.g.
      ('train', 'eval', 'test') for a dataset with a published split. ExampleGen reads
      `data_root/<split>/*` as that split, as TFX's `input_config` does. Empty (the
      default) splits the rows by hash into train, eval and test.
    random_seed: The run's one seed, given to every component that draws random
      numbers (teacher, Distiller, Pruner, Quantizers), which then also turn on op
      determinism: the same seed and data on the same machine give the same
      models and the same gate table. None lets each component draw and record one.

  Returns:
    The components in the order they run; node ids are unique (the Quantizers are
    `Quantizer_<source>_<mode>`).
  """
  seeding.validate(random_seed)
  student_parameter_shares = tuple(student_parameter_shares or ())
  if student_module_file and student_parameter_shares:
    raise ValueError('student_module_file builds your own student and '
                     'student_parameter_shares sizes the built-in one; give one of them.')
  distil = bool(student_module_file or student_parameter_shares)
  if unlabelled_data_root is not None and not distil:
    raise ValueError('unlabelled_data_root feeds the Distiller, and this pipeline has none; '
                     'give student_module_file (or student_parameter_shares) too, or leave '
                     'unlabelled_data_root out.')
  float_candidates = (1 if distil else 0) + (1 if prune else 0)
  quantized = max(1, float_candidates) * len(quantization_modes)
  if float_candidates + quantized > gate_spec.MAX_CANDIDATES:
    raise ValueError(f'quantization_modes: {len(quantization_modes)} modes on '
                     f'{max(1, float_candidates)} model(s) make {float_candidates + quantized} '
                     f'gate candidates; the gate takes at most {gate_spec.MAX_CANDIDATES}.')
  input_splits = tuple(input_splits)
  if input_splits and sorted(input_splits) != sorted(name for name, _ in SPLIT_BUCKETS):
    raise ValueError(f'input_splits must name the splits {", ".join(n for n, _ in SPLIT_BUCKETS)}'
                     f' (each a folder of data_root), or be empty; got {list(input_splits)}.')
  # CsvExampleGen's node id, arguments and artifact; rows read and written in Arrow blocks.
  if input_splits:
    split_arguments = {'input_config': example_gen_pb2.Input(splits=[
        example_gen_pb2.Input.Split(name=name, pattern=f'{name}/*') for name in input_splits])}
  else:
    split_arguments = {'output_config': example_gen_pb2.Output(
        split_config=example_gen_pb2.SplitConfig(splits=[
            example_gen_pb2.SplitConfig.Split(name=name, hash_buckets=buckets)
            for name, buckets in SPLIT_BUCKETS]))}
  example_gen = components.ArrowCsvExampleGen(input_base=data_root,
                                              **split_arguments).with_id('CsvExampleGen')
  statistics_gen = StatisticsGen(examples=example_gen.outputs['examples'])
  if schema_path:
    schema_gen = ImportSchemaGen(schema_file=schema_path)
  else:
    schema_gen = SchemaGen(statistics=statistics_gen.outputs['statistics'],
                                          infer_feature_shape=True)
  example_validator = components.StrictExampleValidator(
      statistics=statistics_gen.outputs['statistics'], schema=schema_gen.outputs['schema'])
  transform = components.IngestionTransform(
      examples=example_gen.outputs['examples'],
      schema=schema_gen.outputs['schema'],
      module_file=transform_module_file,
      # Pre-transform statistics are StatisticsGen's of train: one pass fewer over the rows.
      statistics=statistics_gen.outputs['statistics'],
      custom_config={'label_column': label_column},
      num_shards=num_shards,
      label_key=label_key)
  # Transform reads no output of the validator, so without this edge it could run
  # (and, on Kubeflow, run in parallel) on data the validator is about to reject.
  transform.add_upstream_node(example_validator)
  trainer = components.DistributedTrainer(
      module_file=teacher_module_file,
      examples=transform.outputs['transformed_examples'],
      transform_graph=transform.outputs['transform_graph'],
      schema=schema_gen.outputs['schema'],
      train_args=trainer_pb2.TrainArgs(num_steps=train_steps),
      eval_args=trainer_pb2.EvalArgs(num_steps=eval_steps),
      custom_config={'label_column': label_column, 'label_key': label_key,
                     **(teacher_config or {})},
      strategy=strategy,
      num_workers=num_workers,
      random_seed=random_seed)
  stages = [trainer]
  transfer = {}
  if unlabelled_data_root is not None:
    unlabelled_gen = components.ArrowCsvExampleGen(
        input_base=unlabelled_data_root,
        output_config=example_gen_pb2.Output(split_config=example_gen_pb2.SplitConfig(splits=[
            example_gen_pb2.SplitConfig.Split(name=UNLABELLED_SPLIT, hash_buckets=1)]))
    ).with_id('UnlabelledExampleGen')
    stages.insert(0, unlabelled_gen)
    transfer = {'transfer_examples': unlabelled_gen.outputs['examples']}
  labelled = {'label_key': label_key, 'label_column': label_column}
  candidate = trainer.outputs['model']
  if distil:
    # The gate's budget, so that the student it keeps (a size search's share, or a fixed
    # student trained longer) can pass the gate.
    sizing = {'max_accuracy_drop': max_accuracy_drop,
              **({'student_parameter_shares': student_parameter_shares}
                 if student_parameter_shares else {})}
    distiller = components.Distiller(
        examples=transform.outputs['transformed_examples'],
        transform_graph=transform.outputs['transform_graph'],
        schema=schema_gen.outputs['schema'],
        statistics=transform.outputs['post_transform_stats'],
        teacher_model=trainer.outputs['model'],
        module_file=student_module_file,
        train_args=trainer_pb2.TrainArgs(num_steps=student_train_steps or train_steps),
        eval_args=trainer_pb2.EvalArgs(num_steps=eval_steps),
        custom_config=student_config,
        strategy=strategy,
        num_workers=num_workers,
        random_seed=random_seed,
        **labelled,
        **transfer,
        **sizing,
        **(distillation or {}))
    stages.append(distiller)
    candidate = distiller.outputs['model']
  candidates = {'student': candidate} if distil else {}
  if prune:
    pruning = dict(pruning or {})
    if 'target_sparsity' not in pruning or 'max_accuracy_drop' in pruning:
      # The gate's own budget against the gate's baseline, so the kept sparsity passes it.
      pruning.setdefault('max_accuracy_drop', max_accuracy_drop)
      pruning.setdefault('baseline_model', trainer.outputs['model'])
    pruner = components.Pruner(
        model=candidate,
        examples=transform.outputs['transformed_examples'],
        transform_graph=transform.outputs['transform_graph'],
        train_args=trainer_pb2.TrainArgs(num_steps=pruning_steps),
        random_seed=random_seed,
        **labelled,
        **pruning)
    stages.append(pruner)
    candidates['pruned'] = pruner.outputs['pruned_model']
  float_models = dict(candidates) or {'teacher': trainer.outputs['model']}
  for mode in quantization_modes:
    for source, model in float_models.items():
      quantizer = components.Quantizer(
          model=model,
          examples=transform.outputs['transformed_examples'],
          transform_graph=transform.outputs['transform_graph'],
          # Raw rows calibrate and check the flatbuffer that takes raw columns.
          raw_examples=example_gen.outputs['examples'],
          mode=mode,
          # The student is quantized beside it: when pruning did not pay, the Pruner hands
          # the student on unchanged and this Quantizer would only make a copy.
          skip_not_a_candidate=source == 'pruned' and 'student' in float_models,
          random_seed=random_seed,
          **labelled).with_id(f'Quantizer_{source}_{mode}')
      stages.append(quantizer)
      candidates[f'{source}_{mode}'] = quantizer.outputs['quantized_model']
  if not candidates:
    candidates['teacher'] = trainer.outputs['model']
  # What each candidate was made from, for the gate's parent rule: a pruned student from
  # the student, an int8 copy from the model it converts.
  parents = {'pruned': 'student',
             **{f'{source}_{mode}': source for source in float_models
                for mode in quantization_modes}}
  gate = components.AccuracyGate(
      examples=example_gen.outputs['examples'],
      transform_graph=transform.outputs['transform_graph'],
      **labelled,
      baseline_model=trainer.outputs['model'],
      candidate_models=list(candidates.values()),
      candidate_names=list(candidates),
      candidate_parents={child: parent for child, parent in parents.items()
                         if child in candidates and parent in candidates},
      max_accuracy_drop=max_accuracy_drop,
      max_model_bytes=max_model_bytes)
  pusher = components.AtomicPusher(
      model=gate.outputs['model'],
      model_blessing=gate.outputs['blessing'],
      push_destination=pusher_pb2.PushDestination(
          filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=serving_model_dir)))

  return [example_gen, statistics_gen, schema_gen, example_validator, transform, *stages, gate,
          pusher]


def create_pipeline(pipeline_name: str,
                    pipeline_root: str,
                    metadata_connection_config: Optional[Any] = None,
                    beam_pipeline_args: Optional[List[str]] = None,
                    enable_cache: bool = True,
                    beam_runner: str = 'direct',
                    beam_endpoint: Optional[str] = None,
                    beam_environment_type: Optional[str] = None,
                    beam_environment_config: Optional[str] = None,
                    beam_parallelism: Optional[int] = None,
                    **component_arguments) -> tfx_pipeline.Pipeline:
  """The whole chain as one `tfx.dsl.Pipeline`, for LocalDagRunner and the Kubeflow compile.

  Args:
    pipeline_name: Name recorded in ML Metadata; runs of one name share a cache.
    pipeline_root: Folder (or bucket path) for every component's outputs.
    metadata_connection_config: ML Metadata connection; None lets the runner choose.
    beam_pipeline_args: Arguments for the Beam-based components. With no `--runner`, they
      get Beam's DirectRunner without its first try of Prism (`beam_runner`).
    enable_cache: Reuse outputs of executions whose inputs did not change.
    beam_runner: Where the Beam stages run: 'direct' (Beam's DirectRunner, the default),
      or 'flink' or 'spark' through Beam's portable runner at `beam_endpoint`.
    beam_endpoint: HOST:PORT of the Flink or Spark cluster's Beam job server.
    beam_environment_type: Where that runner runs the Python SDK harness: LOOPBACK (the
      default: in the Beam stage's own process; the cluster must reach it), EXTERNAL (a
      worker pool beside each TaskManager or executor), DOCKER or PROCESS.
    beam_environment_config: The worker pool's HOST:PORT (EXTERNAL), the image (DOCKER)
      or Beam's boot JSON (PROCESS).
    beam_parallelism: Beam's `--parallelism` on Flink or Spark (default 2); on DirectRunner,
      1 runs in memory and N > 1 in N worker processes (default: Beam's choice).
    **component_arguments: `create_components`' arguments: the data, module files,
      label, steps, stages and the gate's limits.

  Returns:
    The `tfx.dsl.Pipeline`.
  """
  parameters.refuse_secrets('beam_pipeline_args', beam_pipeline_args)
  beam_pipeline_args = beam_cluster.engine_beam_args(
      beam_runner, beam_endpoint, beam_environment_type, beam_environment_config,
      beam_pipeline_args or [], beam_parallelism) + list(beam_pipeline_args or [])
  return tfx_pipeline.Pipeline(
      pipeline_name=pipeline_name,
      pipeline_root=pipeline_root,
      components=create_components(**component_arguments),
      enable_cache=enable_cache,
      metadata_connection_config=metadata_connection_config,
      beam_pipeline_args=beam_runner_lib.with_direct_runner(beam_pipeline_args))
