"""Distiller: knowledge distillation from frozen teachers into a small student."""

from typing import Any, Dict, Optional, Sequence

from tfx import types
from tfx.components.util import udf_utils
from tfx.dsl.components.base import base_component
from tfx.dsl.components.base import executor_spec
from tfx.proto import trainer_pb2
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs
from tfx.utils import json_utils

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import modules
from tfx_distillery.components.common import parameters
from tfx_distillery.components.common import seeding
from tfx_distillery.components.distiller import executor
from tfx_distillery.components.distiller import spec as distiller_spec
from tfx_distillery.components.distiller import training
from tfx_distillery.components.distributed_trainer import spec as trainer_spec
from tfx_distillery.components.common import strategy as strategy_lib

DISTILLER_STRATEGIES = ('one_device', 'mirrored', 'multi_worker_mirrored')


class Distiller(base_component.BaseComponent):
  """Trains a small student on the soft targets of frozen teacher models.

  The student module exposes `build_student(tf_transform_output, hyperparameters)`
  returning a tf_keras model that outputs logits; the Distiller owns the loop:
  `alpha * CE(labels, student) + (1 - alpha) * T^2 * KL(teacher_T || student_T)`.
  Teachers are any models over the transformed features: a DistributedTrainer's
  `model`, or the stock Trainer's from an unchanged module file (saved with
  tf.saved_model.save); softmax or sigmoid outputs are detected, through
  shape-only layers, and their logits recovered. The label is `label_key`; its
  class count comes from the schema, the teacher's width or `statistics`, and a
  label with one class, a continuous label or unmapped values is refused
  before any training. The student is exported with the teacher's serving
  signatures, so Evaluator, Pusher and the optimizers take it like any model.

  Example:

    distiller = Distiller(
        examples=transform.outputs['transformed_examples'],
        transform_graph=transform.outputs['transform_graph'],
        teacher_model=trainer.outputs['model'],
        module_file='trainer_modules/tabular_student.py',
        label_key='species_xf', label_column='species',
        temperature=2.0, alpha=0.5,
        train_args=trainer_pb2.TrainArgs(num_steps=1000),
        eval_args=trainer_pb2.EvalArgs(num_steps=50))
  """

  SPEC_CLASS = distiller_spec.DistillerSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(self,
               examples: types.BaseChannel,
               transform_graph: types.BaseChannel,
               module_file: Optional[str] = None,
               teacher_model: Optional[types.BaseChannel] = None,
               teacher_models: Optional[Sequence[types.BaseChannel]] = None,
               schema: Optional[types.BaseChannel] = None,
               statistics: Optional[types.BaseChannel] = None,
               hyperparameters: Optional[types.BaseChannel] = None,
               transfer_examples: Optional[types.BaseChannel] = None,
               transfer_splits: Sequence[str] = (),
               label_key: str = 'label',
               label_column: str = 'label',
               num_classes: Optional[int] = None,
               eval_examples: int = 5000,
               temperature: float = 2.0,
               alpha: float = 0.5,
               teacher_output: str = 'auto',
               teacher_weights: Optional[Sequence[float]] = None,
               multi_teacher_mode: str = 'average',
               train_baseline: bool = True,
               hand_on: str = 'better',
               tune: bool = False,
               temperatures: Sequence[float] = (1.0, 2.0, 4.0, 8.0),
               alphas: Sequence[float] = (0.1, 0.5, 0.9),
               validation_percent: int = 10,
               mixup: float = 1.0,
               noise: float = 0.0,
               learning_rate_schedule: str = 'constant',
               student_hidden_units: Optional[Sequence[int]] = None,
               student_parameter_share: Optional[float] = None,
               student_parameter_shares: Optional[Sequence[float]] = None,
               max_accuracy_drop: float = 0.01,
               teacher_targets: str = 'soft',
               train_args: Optional[trainer_pb2.TrainArgs] = None,
               eval_args: Optional[trainer_pb2.EvalArgs] = None,
               custom_config: Optional[Dict[str, Any]] = None,
               strategy: str = 'multi_worker_mirrored',
               num_workers: int = 1,
               communication: str = 'auto',
               progress_timeout_seconds: float = (
                   strategy_lib.DEFAULT_PROGRESS_TIMEOUT_SECONDS),
               random_seed: Optional[int] = None):
    """Constructs a Distiller.

    Args:
      examples: Transformed examples (IngestionTransform's or Transform's).
      transform_graph: The transform graph, applied inside the exported student.
      module_file: Python file defining `build_student`; None uses the built-in
        student (`trainer_modules/builtin_student.py`), built from the transformed
        schema: floats dense, integer categories embedded by their vocabulary or
        domain, fixed-length id sequences embedded and averaged.
      teacher_model: The teacher's Model channel. Give this or `teacher_models`.
      teacher_models: 1 to 4 teacher Model channels, in the order of `teacher_weights`.
      schema: Optional Schema channel, as for Trainer.
      statistics: Optional ExampleStatistics of the transformed data (Transform's
        `post_transform_stats`): the last source of the class count.
      hyperparameters: Optional HyperParameters channel; passed to build_student,
        with `label_key` and `num_classes` added.
      transfer_examples: Optional raw Examples (ExampleGen's output) that the
        student learns the teacher on: rows with or without the label, such as
        serving logs or rows not yet labelled, read through a second ExampleGen.
        The Distiller applies the transform graph to them and ignores any label.
        Every step then takes a batch of labelled rows (blended loss) and a batch
        of transfer rows of the same size (the soft term only); the set streams.
        Rows whose features the transform or the student can not take are
        refused before training, by feature name.
      transfer_splits: The splits of `transfer_examples` to read; empty for all.
        A split named `eval` or `test` gets a warning: if those are the rows the
        pipeline measures on, the student has seen the teacher's answers on them.
      label_key: The transformed label feature (TFMA's name), e.g. 'species_xf'.
      label_column: The raw label column, which serving requests lack.
      num_classes: The label's class count; None reads it from the transformed
        schema's domain, else the teacher's output width, else `statistics`.
      eval_examples: Every accuracy is measured on this many eval examples, the
        same fixed ones each time.
      temperature: Softening temperature T > 0.
      alpha: Weight of the hard-label loss in [0, 1]; 1 trains from scratch.
      teacher_output: `auto` (detect a softmax/sigmoid output layer), `logits`
        or `probabilities`. A declaration the teacher contradicts is an error.
      teacher_weights: Non-negative weight per teacher for the averaged soft target.
      multi_teacher_mode: `average` (one student, averaged tempered targets) or
        `many_on_many` (one student per teacher, exported as their ensemble).
      train_baseline: Also train the student from scratch on the same budget and
        record its accuracy; a warning says when it beats the distilled one.
      hand_on: `better` (the default) exports whichever of the distilled student
        and its from-scratch twin scores higher on eval, so a weak teacher never
        hands on a student worse than training alone; ties go to the distilled
        one. `distilled` exports the distilled student (after tuning, the
        from-scratch one if it wins beyond noise), as before. `metrics.json`
        records which (`exported_student`) and why (`hand_on_reason`).
      tune: Search `temperatures` x `alphas` on a held-out slice of the training
        split, train the final student with the best pair, record every trial,
        and export the from-scratch student if it beats every distilled one.
      temperatures: Temperatures tried when tuning.
      alphas: Alphas tried when tuning.
      validation_percent: Percent of training examples held out for tuning (1-50).
      mixup: Beta concentration for mixup on the soft term's inputs: teacher and
        student both see mixes of pairs of training examples, so the student
        learns the teacher's answers between them. 1 (the default) draws the
        mixing weight uniformly; 0 turns mixup off.
      noise: Gaussian noise on the soft term's float inputs (after mixup), as a
        multiple of each feature's spread in the batch: the teacher labels
        examples the training set lacks. 0 turns it off.
      learning_rate_schedule: `constant`, or `cosine` (decays to 0 over the
        steps; the from-scratch baseline gets the same schedule).
      student_hidden_units: The built-in student's hidden layer widths, fixed.
      student_parameter_share: Or size the built-in student as the widest one hidden
        layer with at most this share of the (first) teacher's parameters, in (0, 1].
      student_parameter_shares: Or let the Distiller size the built-in student, the
        default when none of these three is given (`DEFAULT_STUDENT_PARAMETER_SHARES`,
        (0.01, 0.03, 0.1, 0.3)): it distils one at each share (increasing), smallest
        first, judges each by what would ship (its int8 file when that passes, else the
        float model) and keeps the fewest shipped bytes within `max_accuracy_drop` of
        the teacher on eval. When none passes, each trains on from its weights for as
        many steps again, smallest first, until one's int8 model passes; then the one
        the gate is likeliest to pass goes on. `metrics.json` records
        every size tried (`size_search`). Each size costs a training. With `tune` and
        no size given, the built-in student has one hidden layer of 16 units.
      max_accuracy_drop: The size search's budget below the teacher's eval accuracy,
        a fraction (0.01 is one point); give the gate's.
      teacher_targets: `soft` (the default): the teacher's tempered distribution.
        `hard`: its most likely class as a one-hot target, i.e. pseudo-labelling,
        the usual semi-supervised baseline; use it at temperature 1 to compare.
      train_args: Steps of every training (student, baseline and each trial).
      eval_args: Steps of every evaluation.
      custom_config: `batch_size` (per replica), `epochs`, `learning_rate`, ...
      strategy: `one_device`, `mirrored` or `multi_worker_mirrored`.
      num_workers: Training processes, as for DistributedTrainer.
      communication: `auto`, `ring` or `nccl`, as for DistributedTrainer.
      progress_timeout_seconds: As for DistributedTrainer: the bound on a training
        process without progress when `num_workers` > 1.
      random_seed: Seeds every training of the run (the student, its scratch twin,
        tuning trials, mixup and noise) in every process, with op determinism on:
        the same seed on the same machine gives the same student. None draws a
        seed, used without op determinism; either way `metrics.json` and ML
        Metadata record it.

    Raises:
      ValueError: naming the argument that is not allowed.
    """
    if (teacher_model is None) == (teacher_models is None):
      raise ValueError('Give exactly one of teacher_model (one teacher) or teacher_models '
                       '(a list of 1 to 4).')
    teachers = [teacher_model] if teacher_model is not None else list(teacher_models)
    if not 1 <= len(teachers) <= distiller_spec.MAX_TEACHERS:
      raise ValueError(f'teacher_models takes 1 to {distiller_spec.MAX_TEACHERS} channels; '
                       f'got {len(teachers)}.')
    if module_file is not None:
      if not module_file or not isinstance(module_file, str):
        raise ValueError('module_file must name the student module (a .py file defining '
                         f'build_student), or be None for the built-in student; got '
                         f'{module_file!r}.')
      modules.check_module_defines(
          module_file, executor.STUDENT_FN,
          '(tf_transform_output, hyperparameters) returning a tf_keras.Model that outputs '
          'logits')
      if (student_hidden_units is not None or student_parameter_share is not None or
          student_parameter_shares is not None):
        raise ValueError('student_hidden_units, student_parameter_share and '
                         'student_parameter_shares size the built-in student (module_file='
                         'None); your module_file builds its own. Pass sizes to it through '
                         'hyperparameters instead.')
    if sum(value is not None for value in (student_hidden_units, student_parameter_share,
                                           student_parameter_shares)) > 1:
      raise ValueError('Give one of student_hidden_units, student_parameter_share or '
                       'student_parameter_shares, not several.')
    if (module_file is None and not tune and student_hidden_units is None and
        student_parameter_share is None and student_parameter_shares is None):
      # The built-in student with no size given: search it, so that it is large enough
      # to learn the teacher and no larger than what passes.
      student_parameter_shares = training.DEFAULT_STUDENT_PARAMETER_SHARES
    if student_hidden_units is not None and (
        isinstance(student_hidden_units, (str, bytes)) or not student_hidden_units or
        any(not isinstance(units, int) or isinstance(units, bool) or units < 1
            for units in student_hidden_units)):
      raise ValueError(f'student_hidden_units must be a non-empty list of integers >= 1; got '
                       f'{student_hidden_units!r}.')
    if student_parameter_share is not None and (
        not isinstance(student_parameter_share, (int, float)) or
        isinstance(student_parameter_share, bool) or not 0 < student_parameter_share <= 1):
      raise ValueError(f'student_parameter_share must be a number in (0, 1]; got '
                       f'{student_parameter_share!r}.')
    parameters.refuse_secrets('custom_config', custom_config)
    if strategy not in DISTILLER_STRATEGIES:
      raise ValueError(f'strategy for the Distiller must be one of '
                       f'{", ".join(DISTILLER_STRATEGIES)}; got {strategy!r}.')
    strategy_lib.validate(strategy, num_workers, 0, communication)
    strategy_lib.validate_progress_timeout(progress_timeout_seconds)
    seeding.validate(random_seed)
    settings = training.DistillationSettings(
        temperature=temperature, alpha=alpha, teacher_output=teacher_output,
        teacher_weights=tuple(teacher_weights) if teacher_weights is not None else None,
        multi_teacher_mode=multi_teacher_mode, train_baseline=bool(train_baseline),
        hand_on=hand_on, tune=bool(tune), temperatures=tuple(temperatures),
        alphas=tuple(alphas),
        validation_percent=validation_percent, mixup=mixup, noise=noise,
        learning_rate_schedule=learning_rate_schedule, label_key=label_key,
        label_column=label_column, num_classes=num_classes, eval_examples=eval_examples,
        student_hidden_units=(tuple(student_hidden_units) if student_hidden_units is not None
                              else None),
        student_parameter_share=student_parameter_share,
        student_parameter_shares=(tuple(student_parameter_shares)
                                  if isinstance(student_parameter_shares, (list, tuple))
                                  else student_parameter_shares),
        max_accuracy_drop=max_accuracy_drop,
        teacher_targets=teacher_targets,
        transfer_splits=(tuple(transfer_splits) if not isinstance(transfer_splits, (str, bytes))
                         and transfer_splits is not None else transfer_splits))
    training.validate(settings, len(teachers))
    if transfer_splits and transfer_examples is None:
      raise ValueError('transfer_splits chooses splits of transfer_examples; give '
                       'transfer_examples too, or leave transfer_splits out.')
    spec = distiller_spec.DistillerSpec(
        examples=examples,
        transform_graph=transform_graph,
        schema=schema,
        statistics=statistics,
        hyperparameters=hyperparameters,
        transfer_examples=transfer_examples,
        module_file=module_file,
        train_args=train_args or trainer_pb2.TrainArgs(num_steps=1000),
        eval_args=eval_args or trainer_pb2.EvalArgs(num_steps=100),
        custom_config=json_utils.dumps(custom_config),
        **{distiller_spec.DISTILLATION_KEY: settings.to_json(),
           trainer_spec.STRATEGY_KEY: strategy,
           trainer_spec.NUM_WORKERS_KEY: num_workers,
           trainer_spec.NUM_PARAMETER_SERVERS_KEY: 0,
           trainer_spec.COMMUNICATION_KEY: communication,
           trainer_spec.PROGRESS_TIMEOUT_KEY: float(progress_timeout_seconds),
           seeding.RANDOM_SEED_KEY: random_seed},
        **dict(zip(distiller_spec.TEACHER_MODEL_KEYS, teachers)),
        model=types.Channel(type=standard_artifacts.Model),
        model_run=types.Channel(type=standard_artifacts.ModelRun),
        metrics=types.Channel(type=artifacts.ModelMetrics))
    super().__init__(spec=spec)
    if module_file and udf_utils.should_package_user_modules():
      # The module is packaged into a wheel at compile time, as for Trainer.
      udf_utils.add_user_module_dependency(self, standard_component_specs.MODULE_FILE_KEY,
                                           standard_component_specs.MODULE_PATH_KEY)
