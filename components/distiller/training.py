"""The Distiller's training loop: teachers frozen, student trained on the blended loss.

Runs inside each training process (one, or one per worker under
MultiWorkerMirroredStrategy), reading through the shared reading library.
"""

import dataclasses
import itertools
import json
import math
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
import tf_keras
import tensorflow_transform as tft

from tfx_distillery.components.common import callbacks as keras_callbacks
from tfx_distillery.components.common import labels
from tfx_distillery.components.common import measuring
from tfx_distillery.components.common import modeling
from tfx_distillery.components.common import progress
from tfx_distillery.components.common import reading
from tfx_distillery.components.common import shapes
from tfx_distillery.components.common import strategy as strategy_lib
from tfx_distillery.components.distiller import loss as loss_lib
from tfx_distillery.components.distiller import student_statistics
from tfx_distillery.components.distiller import teacher_cache as teacher_cache_lib
from tfx_distillery.components.distiller import teachers as teachers_lib
from tfx_distillery.components.distiller import transfer as transfer_lib
from tfx_distillery.trainer_modules import builtin_student

MULTI_TEACHER_MODES = ('average', 'many_on_many')
LEARNING_RATE_SCHEDULES = ('constant', 'cosine')
# `better`: whichever of the distilled student and its from-scratch twin scores higher on
# eval; `distilled`: the distilled one (the from-scratch one only when tuning, and only
# when it wins beyond noise), as before `hand_on` existed.
HAND_ON = ('better', 'distilled')
# `soft`: the teacher's tempered distribution; `hard`: its most likely class, one-hot
# (pseudo-labelling, the usual semi-supervised baseline).
TEACHER_TARGETS = ('soft', 'hard')
METRICS_FILE_NAME = 'metrics.json'
# Training examples that calibrate the size search's int8 conversions, as many as the
# Quantizer's default representative_samples.
CALIBRATION_EXAMPLES = 200
# The built-in student's sizes when none is given: shares of the (first) teacher's
# parameters, tried smallest first, keeping the one that ships the fewest bytes within
# max_accuracy_drop. One fixed width was too small to learn TFX's taxi teacher (1,092
# parameters, 0.779 on eval against a majority class of 0.771) and too large for iris.
DEFAULT_STUDENT_PARAMETER_SHARES = (0.01, 0.03, 0.1, 0.3)


StudentBuilder = Callable[[tft.TFTransformOutput, Optional[dict]], tf_keras.Model]


@dataclasses.dataclass(frozen=True)
class DistillationSettings:
  """How to distill; validated by `validate` when the component is constructed.

  Attributes:
    temperature: Softening temperature T > 0 (when not tuned).
    alpha: Weight of the hard-label cross-entropy, in [0, 1] (when not tuned).
    teacher_output: `auto`, `logits` or `probabilities`.
    teacher_weights: One weight per teacher for the averaged soft target.
    multi_teacher_mode: `average` (one student, averaged soft targets) or
      `many_on_many` (one student per teacher, ensembled into one model).
    train_baseline: Also train the same student from scratch on the same budget.
    hand_on: `better` exports whichever of the distilled student and its
      from-scratch twin scores higher on eval (ties go to the distilled one);
      `distilled` exports the distilled one, as before this option (after tuning,
      the from-scratch one when it wins beyond noise). Without train_baseline
      there is no twin, and the distilled student is exported.
    tune: Search `temperatures` x `alphas` on a validation slice of the training
      split, then train the final student with the best pair.
    temperatures: Tuning grid of temperatures.
    alphas: Tuning grid of alphas.
    validation_percent: Share of training examples (by record hash) held out
      for tuning.
    mixup: Beta concentration of the mixup applied to the soft term's inputs
      (teacher and student see the same mixed batch); 0 turns it off.
    noise: Gaussian noise added to the soft term's float inputs, as a multiple
      of each feature's spread in the batch; 0 turns it off.
    learning_rate_schedule: `constant`, or `cosine` (decays to 0 over the steps).
    label_key: The transformed label feature.
    label_column: The raw label column, which serving requests lack.
    num_classes: The label's class count; None resolves it (schema, teacher,
      statistics).
    eval_examples: Eval examples every accuracy is measured on (a fixed prefix).
    student_hidden_units: The built-in student's hidden widths (None: its default).
    student_parameter_share: Or its size as a share of the teacher's parameters.
    transfer_splits: Splits of `transfer_examples` to learn from; empty for all.
    student_parameter_shares: Or a size search: the built-in student at each of
      these shares of the teacher's parameters, smallest first; the first within
      `max_accuracy_drop` of the teacher on eval is kept.
    max_accuracy_drop: The size search's budget below the teacher, a fraction.
    teacher_targets: `soft` (the teacher's tempered distribution, Hinton's) or `hard`
      (its most likely class as a one-hot target: pseudo-labelling, which throws the
      rest of the distribution away; a baseline to compare against).
  """
  temperature: float = 2.0
  alpha: float = 0.5
  teacher_output: str = 'auto'
  teacher_weights: Optional[Tuple[float, ...]] = None
  multi_teacher_mode: str = 'average'
  train_baseline: bool = True
  hand_on: str = 'better'
  tune: bool = False
  temperatures: Tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
  alphas: Tuple[float, ...] = (0.1, 0.5, 0.9)
  validation_percent: int = 10
  mixup: float = 1.0
  noise: float = 0.0
  learning_rate_schedule: str = 'constant'
  label_key: str = labels.DEFAULT_LABEL_KEY
  label_column: str = labels.DEFAULT_LABEL_KEY
  num_classes: Optional[int] = None
  eval_examples: int = measuring.DEFAULT_MAX_EXAMPLES
  student_hidden_units: Optional[Tuple[int, ...]] = None
  student_parameter_share: Optional[float] = None
  transfer_splits: Tuple[str, ...] = ()
  student_parameter_shares: Optional[Tuple[float, ...]] = None
  max_accuracy_drop: float = 0.01
  teacher_targets: str = 'soft'

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> 'DistillationSettings':
    values = json.loads(text)
    for key in ('teacher_weights', 'temperatures', 'alphas', 'student_hidden_units',
                'transfer_splits', 'student_parameter_shares'):
      if values.get(key) is not None:
        values[key] = tuple(values[key])
    return cls(**values)


def _is_number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def validate(settings: DistillationSettings, num_teachers: int) -> None:
  """Raises ValueError naming the first setting that is not allowed.

  Args:
    settings: The settings to check.
    num_teachers: Teacher models given to the Distiller.
  """
  if not _is_number(settings.temperature) or not settings.temperature > 0:
    raise ValueError(f'temperature must be a number > 0; got {settings.temperature!r}.')
  if not _is_number(settings.alpha) or not 0.0 <= settings.alpha <= 1.0:
    raise ValueError(f'alpha must be a number in [0, 1]; got {settings.alpha!r}.')
  if settings.teacher_output not in teachers_lib.TEACHER_OUTPUTS:
    raise ValueError(f'teacher_output must be one of {", ".join(teachers_lib.TEACHER_OUTPUTS)};'
                     f' got {settings.teacher_output!r}.')
  if settings.multi_teacher_mode not in MULTI_TEACHER_MODES:
    raise ValueError(f'multi_teacher_mode must be one of {", ".join(MULTI_TEACHER_MODES)}; '
                     f'got {settings.multi_teacher_mode!r}.')
  if settings.teacher_weights is not None:
    weights = settings.teacher_weights
    if len(weights) != num_teachers:
      raise ValueError(f'teacher_weights needs one weight per teacher ({num_teachers}); got '
                       f'{len(weights)}.')
    if any(not _is_number(weight) or weight < 0 for weight in weights) or not sum(weights) > 0:
      raise ValueError(f'teacher_weights must be numbers >= 0 with a positive sum; got '
                       f'{list(weights)}.')
    if settings.multi_teacher_mode == 'many_on_many':
      raise ValueError("teacher_weights apply to multi_teacher_mode 'average' only; "
                       "'many_on_many' gives every student one teacher.")
  if settings.teacher_targets not in TEACHER_TARGETS:
    raise ValueError(f'teacher_targets must be one of {", ".join(TEACHER_TARGETS)}; got '
                     f'{settings.teacher_targets!r}.')
  if settings.hand_on not in HAND_ON:
    raise ValueError(f'hand_on must be one of {", ".join(HAND_ON)}; got {settings.hand_on!r}.')
  if settings.tune:
    if not settings.temperatures or any(
        not _is_number(value) or not value > 0 for value in settings.temperatures):
      raise ValueError(f'temperatures (the tuning grid) must be numbers > 0; got '
                       f'{settings.temperatures!r}.')
    if not settings.alphas or any(
        not _is_number(value) or not 0.0 <= value <= 1.0 for value in settings.alphas):
      raise ValueError(f'alphas (the tuning grid) must be numbers in [0, 1]; got '
                       f'{settings.alphas!r}.')
  if not _is_number(settings.mixup) or not 0 <= settings.mixup < math.inf:
    raise ValueError(f'mixup must be a finite number >= 0 (0 turns it off); got '
                     f'{settings.mixup!r}.')
  if not _is_number(settings.noise) or not 0 <= settings.noise < math.inf:
    raise ValueError(f'noise must be a finite number >= 0 (0 turns it off); got '
                     f'{settings.noise!r}.')
  if settings.learning_rate_schedule not in LEARNING_RATE_SCHEDULES:
    raise ValueError(f'learning_rate_schedule must be one of '
                     f'{", ".join(LEARNING_RATE_SCHEDULES)}; got '
                     f'{settings.learning_rate_schedule!r}.')
  labels.validate_label_key(settings.label_key)
  if not isinstance(settings.label_column, str) or not settings.label_column:
    raise ValueError(f'label_column must name the raw label column; got '
                     f'{settings.label_column!r}.')
  labels.validate_num_classes(settings.num_classes)
  if not reading.is_count(settings.eval_examples) or settings.eval_examples < 1:
    raise ValueError(f'eval_examples must be an integer >= 1; got {settings.eval_examples!r}.')
  shares = settings.student_parameter_shares
  if shares is not None and (
      not isinstance(shares, tuple) or not shares or
      any(not _is_number(share) or not 0 < share <= 1 for share in shares) or
      list(shares) != sorted(set(shares))):
    raise ValueError(f'student_parameter_shares must be increasing numbers in (0, 1], e.g. '
                     f'(0.01, 0.03, 0.1, 0.3); got {shares!r}.')
  if shares is not None and settings.tune:
    raise ValueError('student_parameter_shares searches the student\'s size at the default '
                     'temperature and alpha; tune=True searches those at one size. Choose one.')
  if not _is_number(settings.max_accuracy_drop) or not 0 <= settings.max_accuracy_drop <= 1:
    raise ValueError(f'max_accuracy_drop must be a fraction in [0, 1] (0.01 is one point); got '
                     f'{settings.max_accuracy_drop!r}.')
  if not isinstance(settings.transfer_splits, tuple) or any(
      not isinstance(split, str) or not split for split in settings.transfer_splits):
    raise ValueError(f'transfer_splits must be a list of split names (empty for all); got '
                     f'{settings.transfer_splits!r}.')
  if (not isinstance(settings.validation_percent, int) or isinstance(
      settings.validation_percent, bool) or not 1 <= settings.validation_percent <= 50):
    raise ValueError(f'validation_percent must be an integer in [1, 50]; got '
                     f'{settings.validation_percent!r}.')


class DistillationModel(tf_keras.Model):
  """Trains `student` on the distillation loss against frozen `teachers`.

  Only the student's variables are trainable: the teachers are frozen, called
  with training=False, and their logits pass through stop_gradient.
  """

  def __init__(self, student: tf_keras.Model, teachers: Sequence[teachers_lib.Teacher],
               temperature: float, alpha: float,
               teacher_weights: Optional[Sequence[float]] = None, mixup: float = 0.0,
               noise: float = 0.0, teacher_targets: str = 'soft',
               teacher_cache: Optional[teacher_cache_lib.TeacherCache] = None):
    super().__init__(name='distillation')
    self.student = student
    # Frozen, and kept out of Keras' tracking: only the student's weights train.
    self._teachers = tuple(teachers)
    self.temperature = float(temperature)
    self.alpha = float(alpha)
    self.teacher_weights = teacher_weights
    self.mixup = float(mixup)
    self.noise = float(noise)
    self.hard_targets = teacher_targets == 'hard'
    self.teacher_cache = teacher_cache  # The teachers' logits per train row, when computed.
    self.loss_tracker = tf_keras.metrics.Mean(name='loss')

  def call(self, features, training=False):
    return self.student(shapes.conform(features, self._student_specs,
                                       f'Distiller, student {self.student.name}'),
                        training=training)

  @property
  def _student_specs(self):
    return shapes.keras_specs(self.student)

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None):
    # With a transfer set, sample_weight marks the labelled rows (1) among the transfer ones (0).
    targets = soft_logits = None
    if self.alpha < 1.0:  # alpha = 1 is training from scratch: the teacher is not needed.
      teacher_inputs = x
      if self.mixup > 0:
        teacher_inputs = loss_lib.mix_features(teacher_inputs, self.mixup)
      if self.noise > 0:
        teacher_inputs = loss_lib.perturb_features(teacher_inputs, self.noise)
      if teacher_inputs is not x:
        soft_logits = self(teacher_inputs, training=True)

      def run_teachers():
        return [teachers_lib.frozen_logits(teacher, teacher_inputs)
                for teacher in self._teachers]

      # Mixed rows of features with no float are train rows too: they are looked up.
      teacher_logits = (self.teacher_cache.lookup(teacher_inputs, run_teachers)
                        if self.teacher_cache is not None else run_teachers())
      targets = loss_lib.soft_targets(
          teacher_logits,
          self.temperature,
          self.teacher_weights)
      if self.hard_targets:
        targets = tf.one_hot(tf.argmax(targets, axis=-1), tf.shape(targets)[-1],
                             dtype=targets.dtype)
    loss = tf.reduce_mean(loss_lib.distillation_loss(y, y_pred, targets, self.temperature,
                                                     self.alpha, soft_logits, sample_weight))
    if self.student.losses:
      loss += tf.add_n(self.student.losses)
    self.loss_tracker.update_state(loss)
    # Gradients are summed over replicas, so each replica's mean is scaled down.
    return loss / tf.distribute.get_strategy().num_replicas_in_sync

  @property
  def metrics(self):
    return [self.loss_tracker] + super().metrics


def choose_trial(trials: List[dict], correct: List[np.ndarray], default_temperature: float,
                 default_alpha: float) -> Dict[str, Any]:
  """The tuning grid's choice, moved from the defaults only by a lead beyond noise.

  The incumbent is the trial at the default temperature and alpha (the grid's first trial
  when the defaults are not in it). The trial with the best validation accuracy replaces
  it only when it is better on the same validation examples beyond noise (McNemar at 5%):
  on a small slice most of the grid is within a few examples of the rest.

  Args:
    trials: One dict per grid point, with `temperature` and `alpha`; gains, per trial,
      `versus_incumbent` (the paired comparison) and `chosen`.
    correct: Per trial, whether each validation example was predicted right.
    default_temperature: The settings' temperature.
    default_alpha: The settings' alpha.

  Returns:
    `temperature`, `alpha` and `why` (one line for the log and metrics).
  """
  incumbent = next((index for index, trial in enumerate(trials)
                    if (trial['temperature'], trial['alpha'])
                    == (float(default_temperature), float(default_alpha))), 0)
  for trial, trial_correct in zip(trials, correct):
    trial['versus_incumbent'] = measuring.paired_comparison(trial_correct, correct[incumbent])
  best = max(range(len(trials)), key=lambda index: trials[index]['validation_accuracy'])
  comparison = trials[best]['versus_incumbent']
  chosen = incumbent if comparison['within_noise'] else best
  for index, trial in enumerate(trials):
    trial['chosen'] = index == chosen

  def setting(index: int) -> str:
    return f"temperature={trials[index]['temperature']:g} alpha={trials[index]['alpha']:g}"

  if chosen == incumbent and best != incumbent:
    why = (f'kept {setting(incumbent)}: the best trial ({setting(best)}) leads it by '
           f"{comparison['difference']:+.4f} on validation, within noise "
           f"({comparison['wins']} wins, {comparison['losses']} losses, McNemar "
           f"p = {comparison['p_value']:.3f})")
  elif chosen == incumbent:
    why = f'kept {setting(incumbent)}: no trial did better on validation'
  else:
    why = (f'chose {setting(best)}: it beats {setting(incumbent)} by '
           f"{comparison['difference']:+.4f} on validation beyond noise (McNemar "
           f"p = {comparison['p_value']:.3f})")
  return {'temperature': trials[chosen]['temperature'], 'alpha': trials[chosen]['alpha'],
          'why': why}


def check_student(student, units: int, num_classes: int, features: Dict[str, tf.Tensor],
                  label_key: str = labels.DEFAULT_LABEL_KEY) -> None:
  """Raises ValueError unless `student` is a tf_keras model with `units` outputs."""
  if not isinstance(student, tf_keras.Model):
    raise ValueError(f'build_student must return a tf_keras.Model; got {type(student).__name__}.')
  if label_key in student.input_names:
    raise ValueError(f'The student from build_student reads the label {label_key!r} as an input; '
                     "leave it out (hyperparameters['label_key'] names it).")
  outputs = student(shapes.conform(features, shapes.keras_specs(student),
                                   f'Distiller, the student from build_student ({student.name})'),
                    training=False)
  if outputs.shape[-1] != units:
    raise ValueError(
        f'The student from build_student emits {outputs.shape[-1]} outputs but the labels have '
        f'{num_classes} classes: it must emit {units} logit(s) (1 for a binary label, one per '
        'class otherwise).')


def ensemble(students: List[tf_keras.Model], name: str) -> tf_keras.Model:
  """One model whose logits are the mean of the students' logits (one exported model)."""
  if len(students) == 1:
    return students[0]
  inputs = {}
  for student in students:
    for tensor, input_name in zip(student.inputs, student.input_names):
      inputs.setdefault(input_name, tf_keras.Input(
          shape=tuple(tensor.shape[1:]), dtype=tensor.dtype, name=input_name))
  logits = tf_keras.layers.Average(name='logits')([
      student({key: inputs[key] for key in student.input_names}) for student in students])
  return tf_keras.Model(inputs=inputs, outputs=logits, name=name)


class Distillation:
  """One Distiller execution: checks, optional tuning, final and baseline students."""

  def __init__(self, fn_args, build_student: StudentBuilder, teacher_paths: Sequence[str],
               settings: DistillationSettings, statistics_uri: Optional[str] = None,
               transfer_examples: Optional[Tuple[str, Sequence[str]]] = None):
    """Loads the teachers and checks labels, teachers, student and transfer rows.

    Args:
      fn_args: TFX's FnArgs of this process.
      build_student: Builds one untrained student.
      teacher_paths: The teachers' SavedModel folders.
      settings: How to distill.
      statistics_uri: Transformed statistics (the class count's last source).
      transfer_examples: The transfer set's Examples folder and its split names; None
        for none.
    """
    self.fn_args = fn_args
    self.build_student = build_student
    self.settings = settings
    self.logger = progress.get_logger()
    self.teachers = []
    self.teacher_caches = {}  # Per group of teachers: its cache (or None) and its record.
    self.tuning_choice = None  # Why tuning chose its setting, when it runs.
    # The built-in student scales its inputs by the transformed train split's statistics:
    # computed here when none are given or those given describe other data.
    self.statistics_record = None
    if build_student is builtin_student.build_student:
      statistics_uri, self.statistics_record = student_statistics.resolve(
          statistics_uri, fn_args.train_files, tft.TFTransformOutput(fn_args.transform_output),
          settings.label_key,
          os.path.join(fn_args.model_run_dir, student_statistics.COMPUTED_FOLDER))

    def load_teachers_and_resolve_classes(strategy):
      with strategy.scope():
        self.teachers = [teachers_lib.load_teacher(path, settings.teacher_output)
                         for path in teacher_paths]
      return labels.resolve(tft.TFTransformOutput(fn_args.transform_output), settings.label_key,
                            settings.num_classes, self.teachers[0].num_outputs, statistics_uri)

    self.run = modeling.TrainingRun.from_fn_args(
        fn_args, label_key=settings.label_key, label_column=settings.label_column,
        resolve_classes=load_teachers_and_resolve_classes)
    self.num_classes = self.run.classes.num_classes
    self.check_labels()
    # Build_student learns the label from the hyperparameters it is given.
    hyperparameters = getattr(fn_args, 'hyperparameters', None)
    self.hyperparameters = {**(hyperparameters if isinstance(hyperparameters, dict) else {}),
                            'label_key': settings.label_key, 'num_classes': self.num_classes}
    # What the built-in student is sized and read from (a module file may ignore them).
    self.hyperparameters.update({
        'statistics_uri': statistics_uri,
        'teacher_parameters': self.teachers[0].count_params(),
        **({'student_hidden_units': list(settings.student_hidden_units)}
           if settings.student_hidden_units else {}),
        **({'student_parameter_share': settings.student_parameter_share}
           if settings.student_parameter_share else {}),
        # A size search checks, and starts from, its smallest share.
        **({'student_parameter_share': settings.student_parameter_shares[0]}
           if settings.student_parameter_shares else {})})
    self.eval_set = measuring.from_transformed_examples(
        fn_args.eval_files, measuring.CHOOSE_SPLIT, self.run.tf_transform_output,
        settings.label_key, settings.eval_examples, self.run.options.compression)
    # The rows the gate will judge the chosen model on: each choice here keeps a margin
    # for their noise (None: the pipeline has no test split, and the gate judges on eval).
    self.test_examples = measuring.test_split_size(
        fn_args.eval_files, compression=self.run.options.compression)
    self.warn_if_the_budget_is_below_one_example()
    features = {name: tf.constant(values[:64])
                for name, values in self.eval_set.features.items()}
    for teacher in self.teachers:
      teachers_lib.check_teacher(teacher, features, self.run.units, self.num_classes,
                                 settings.teacher_output)
    student = self.build_student(self.run.tf_transform_output, self.hyperparameters)
    check_student(student, self.run.units, self.num_classes, features, settings.label_key)
    self.transfer = None
    if transfer_examples is not None:
      self.transfer = transfer_lib.TransferSet(
          transfer_examples[0], transfer_examples[1], settings.transfer_splits,
          self.run.tf_transform_output, self.run.label_column)
      rows = self.transfer.check(self.run.train_dataset().element_spec[0])
      self.logger.info('transfer set: splits %s of %s (%d shards); its first %d rows fit the '
                       'transform and the student%s', ', '.join(self.transfer.splits),
                       self.transfer.examples_uri, len(self.transfer.files), rows,
                       f' ({self.transfer.incomplete_in_sample} of them lack a value the '
                       'transform requires, and such rows are left out)'
                       if self.transfer.incomplete_in_sample else '')
      measured = self.transfer.measured_splits()
      if measured:
        self.logger.warning(
            'WARNING: the transfer set includes split(s) %s. If these are the rows the '
            'pipeline chooses or reports on, the student has seen the teacher\'s answers on '
            'them: no label leaks (labels are never read from the transfer set), but the '
            'reported accuracy is then on rows it trained on. Set transfer_splits to rows '
            'held apart to avoid it.', ', '.join(measured))
    self.student_description = self.describe_student(student)

  def describe_student(self, student: tf_keras.Model) -> Dict[str, Any]:
    """What metrics.json records of the student: its builder, and the built-in one's plan
    and the statistics it was built from."""
    return {'builder': getattr(self.build_student, '__module__', ''),
            **(builtin_student.describe(student)
               if self.build_student is builtin_student.build_student else {}),
            **({'statistics': self.statistics_record} if self.statistics_record else {})}

  def shipped_figures(self, student: tf_keras.Model, correct: np.ndarray) -> Dict[str, Any]:
    """What the chain would make of `student`, measured on eval: its float SavedModel
    folder (the Distiller's export, transform inside) and its full-integer TFLite folder
    (the Quantizer's default conversion, beside the transform graph), with each one's bytes.

    Args:
      student: The distilled student.
      correct: Its float predictions' correctness on `eval_set`.

    Returns:
      float_bytes, int8_accuracy, int8_bytes and int8_correct (None where the int8
      conversion is refused, with `int8_refused`).
    """
    # Imported here: the Quantizer's modules load TFLite, which only the size search needs.
    from tfx_distillery.components.quantizer import conversion  # pylint: disable=import-outside-toplevel
    from tfx_distillery.components.quantizer import executor as quantizer_executor  # pylint: disable=import-outside-toplevel
    from tfx_distillery.components.quantizer import predict  # pylint: disable=import-outside-toplevel
    figures = {'float_accuracy': float(np.mean(correct))}
    with tempfile.TemporaryDirectory(prefix='distillery-size-search-') as folder:
      float_dir = os.path.join(folder, 'float')
      modeling.export_serving_model(student, self.run.tf_transform_output,
                                    self.run.label_column, float_dir)
      figures['float_bytes'] = measuring.size_bytes(float_dir)
      calibration = self.calibration_set()

      def representative_features():
        for index in range(calibration.size):
          yield {name: values[index:index + 1] for name, values in calibration.features.items()}

      try:
        flatbuffer = conversion.convert(student, 'full_integer', representative_features)
      except ValueError as error:  # Int8Unsupported among others: the float model ships.
        figures.update({'int8_accuracy': None, 'int8_bytes': None, 'int8_correct': None,
                        'int8_refused': conversion.first_line_naming_an_op(str(error))})
        return figures
      int8_dir = os.path.join(folder, 'int8')
      quantizer_executor.write_tflite_folder(int8_dir, flatbuffer, {
          'format': predict.MODEL_FORMAT, 'mode': 'full_integer',
          'model_file': predict.MODEL_FILE_NAME,
          'transform_graph': predict.TRANSFORM_GRAPH_FOLDER, 'raw_model': None},
          self.fn_args.transform_output)
      int8_correct = measuring.correct_predictions(measuring.load_scorer(int8_dir),
                                                   self.eval_set)
      figures.update({'int8_accuracy': float(np.mean(int8_correct)),
                      'int8_bytes': measuring.size_bytes(int8_dir),
                      'int8_correct': int8_correct})
    return figures

  def warn_if_the_budget_is_below_one_example(self) -> None:
    """Says, before any training, when the gate's split cannot resolve max_accuracy_drop.

    One example of the gate's split is the smallest accuracy difference it can show: a
    budget below it passes only a model that misses no more examples than the teacher.
    """
    rows = self.test_examples or self.eval_set.size
    smallest = 1.0 / max(1, rows)
    if self.settings.max_accuracy_drop < smallest - measuring.DROP_TOLERANCE:
      self.logger.warning(
          'WARNING: max_accuracy_drop %g is below what the gate can resolve on its %s split: '
          'one example of %d is %.4f. Only a student that misses no more examples than the '
          'teacher can pass; more rows, a larger %s share, or a budget of at least %.4f '
          'would let a close one through.', self.settings.max_accuracy_drop,
          measuring.REPORT_SPLIT if self.test_examples else measuring.CHOOSE_SPLIT, rows,
          smallest, measuring.REPORT_SPLIT if self.test_examples else measuring.CHOOSE_SPLIT,
          smallest)

  def gate_figures(self, correct: np.ndarray) -> Dict[str, Any]:
    """`measuring.gate_margin` of a model against the (first) teacher on eval, with the
    chance that the gate then passes it within max_accuracy_drop on test."""
    figures = measuring.gate_margin(correct, self.teacher_correct[0], self.test_examples)
    figures['chance_of_passing'] = measuring.chance_of_passing(
        figures, self.settings.max_accuracy_drop)
    return figures

  def calibration_set(self) -> measuring.EvaluationSet:
    """Training examples that calibrate the size search's int8 conversions (once)."""
    if getattr(self, '_calibration', None) is None:
      self._calibration = measuring.from_transformed_examples(
          self.fn_args.train_files, 'train', self.run.tf_transform_output,
          self.settings.label_key, CALIBRATION_EXAMPLES, self.run.options.compression)
    return self._calibration

  def search_size(self, temperature: float, alpha: float
                  ) -> Tuple[tf_keras.Model, Dict[str, Any]]:
    """The built-in student whose shipped model is smallest within max_accuracy_drop.

    Each share's student is distilled on the run's whole budget and judged on eval by
    the smallest candidate the chain would make of it: its int8 TFLite folder when that
    passes, else its float SavedModel folder when that passes. A model passes when its
    drop below the (first) teacher, plus the margin the gate's noise on test asks for
    (`measuring.gate_margin`: the gate then passes it in at least 97.5% of runs), is
    within `max_accuracy_drop`. It must also lead the majority class beyond noise, as at
    the gate: a weak teacher's budget can reach down to always guessing the commonest
    class. The share with the fewest shipped bytes is kept. Shares are tried smallest
    first and the search climbs until one's int8 model passes: a larger share ships more
    bytes. A share whose student has the same widths as the one before is not trained
    again. When none passes, each trained share, smallest first, trains on from its
    weights for as many steps again (a warm restart, as a fixed student does: a tiny
    student on a small table can still be learning when the steps run out), judged the
    same way, until one's int8 model passes. When none passes even then, the one the gate
    is likeliest to pass goes on, with a warning that names that chance.

    Returns:
      The chosen distilled student, and the search's record for metrics.json.
    """
    settings = self.settings
    teacher_accuracy = self.teacher_accuracy[0]
    trials, candidates, trained, seen = [], [], [], set()
    for share in settings.student_parameter_shares:
      self.hyperparameters['student_parameter_share'] = share
      widths = tuple(builtin_student.describe(self.build_student(
          self.run.tf_transform_output, self.hyperparameters))['hidden_units'])
      if widths in seen:
        trials.append({'share': share, 'hidden_units': list(widths), 'trained': False})
        continue
      seen.add(widths)
      candidate = self._try_share(share, widths, temperature, alpha, trials)
      if candidate is not None:
        candidates.append(candidate)
        trained.append(candidate)
        if candidate['int8_passes']:
          break
    if not any(candidate['shipped'] for candidate in candidates):
      for first in trained:
        self.hyperparameters['student_parameter_share'] = first['share']
        self.logger.info(
            'size search: no share passed; share %g trains on from its weights for as many '
            'steps again', first['share'])
        candidate = self._try_share(first['share'], first['widths'], temperature, alpha,
                                    trials, start_from=first['student'])
        if candidate is not None:
          candidates.append(candidate)
          if candidate['int8_passes']:
            break
    if not candidates:
      diverged = [trial['diverged'] for trial in trials if trial.get('diverged')]
      raise keras_callbacks.TrainingDiverged(
          f'Distiller: every share the size search trained diverged, so no student is handed '
          f'on: {diverged[-1]}')
    passing = [candidate for candidate in candidates if candidate['shipped']]
    if passing:
      # The fewest bytes; between equal bytes, the first trained (the shorter run).
      chosen = min(passing, key=lambda candidate: candidate['shipped_bytes'])
      longer_text = ' after training on' if chosen['longer'] else ''
      reason = (f'share {chosen["share"]:g}{longer_text} ships the fewest bytes within '
                f'max_accuracy_drop {settings.max_accuracy_drop:g} of the teacher\'s '
                f'{teacher_accuracy:.4f} on eval with the gate\'s margin: its '
                f'{chosen["shipped"]} model, {chosen["shipped_bytes"]} bytes (float accuracy '
                f'{chosen["accuracy"]:.4f})')
    else:
      # The likeliest to pass; a tie goes to the more accurate, then to the first trained.
      chosen = max(candidates, key=lambda candidate: (candidate['chance'],
                                                      candidate['accuracy']))
      longer_text = ' after training on' if chosen['longer'] else ''
      reason = (f'no share within max_accuracy_drop {settings.max_accuracy_drop:g} of the '
                f'teacher\'s {teacher_accuracy:.4f} on eval with the gate\'s margin, even '
                f'trained on; the one the gate is likeliest to pass, share '
                f'{chosen["share"]:g}{longer_text} ({chosen["accuracy"]:.4f}, '
                f'{chosen["chance"]:.1%}), goes on')
    self.logger.info('size search: %s', reason)
    self.hyperparameters['student_parameter_share'] = chosen['share']
    self.student_description = self.describe_student(
        self.build_student(self.run.tf_transform_output, self.hyperparameters))
    return chosen['student'], {
        'shares': list(settings.student_parameter_shares),
        'max_accuracy_drop': settings.max_accuracy_drop,
        'teacher_accuracy': teacher_accuracy, 'trials': trials,
        'judged_by': 'shipped bytes: int8 when it passes, else float; a model passes when its '
                     'drop below the teacher plus the gate\'s margin is within '
                     'max_accuracy_drop',
        'chosen_share': chosen['share'], 'chosen_trained_on': chosen['longer'],
        'reason': reason}

  def _try_share(self, share: float, widths: Tuple[int, ...], temperature: float,
                 alpha: float, trials: List[dict],
                 start_from: Optional[tf_keras.Model] = None) -> Optional[Dict[str, Any]]:
    """Trains one share's student (on from `start_from`'s weights, when given) and judges
    it as the size search does; appends its trial to `trials`. None when it diverged."""
    settings = self.settings
    teacher_accuracy = self.teacher_accuracy[0]
    longer = start_from is not None
    name = f'student-share{share:g}' + ('-longer' if longer else '')
    try:
      student = self.train_student(temperature, alpha, name, start_from=start_from)
    except keras_callbacks.TrainingDiverged as diverged:
      # Refused like a share that misses the budget; the next share may train.
      trials.append({'share': share, 'hidden_units': list(widths), 'trained': True,
                     'trained_on': longer, 'diverged': str(diverged), 'shipped': None})
      self.logger.warning('WARNING: size search: share %g refused: %s', share, diverged)
      return None
    majority_correct = measuring.majority_correct(self.eval_set.labels)
    correct = measuring.correct_predictions(self.scorer(student), self.eval_set)
    accuracy = float(np.mean(correct))
    figures = self.shipped_figures(student, correct)
    # The gate's rules on eval, with a margin against the selection's optimism: the drop's
    # upper bound within the budget, and ahead of the majority class beyond noise (a weak
    # teacher's budget can reach down to it). The int8 model is judged on its own, not by
    # the gate's parent rule: a child within noise of a parent that only just passes can
    # still fall outside the budget on test.
    float_against_majority = measuring.versus_majority_reason(correct, majority_correct)
    float_gate = self.gate_figures(correct)
    float_passes = not float_against_majority and measuring.within_budget_with_margin(
        float_gate, settings.max_accuracy_drop)
    int8_passes, int8_against_majority, int8_gate = False, None, None
    if figures['int8_correct'] is not None:
      int8_against_majority = measuring.versus_majority_reason(figures['int8_correct'],
                                                               majority_correct)
      int8_gate = self.gate_figures(figures['int8_correct'])
      int8_passes = int8_against_majority is None and measuring.within_budget_with_margin(
          int8_gate, settings.max_accuracy_drop)
    shipped = 'int8' if int8_passes else 'float' if float_passes else None
    shipped_bytes = (figures['int8_bytes'] if int8_passes else
                     figures['float_bytes'] if float_passes else None)
    parameters = int(student.count_params())
    trials.append({'share': share, 'hidden_units': list(widths), 'trained': True,
                   'trained_on': longer, 'parameters': parameters,
                   'parameter_share': parameters / max(1, self.teachers[0].count_params()),
                   'eval_accuracy': accuracy, 'int8_eval_accuracy': figures['int8_accuracy'],
                   'float_bytes': figures['float_bytes'], 'int8_bytes': figures['int8_bytes'],
                   **({'int8_refused': figures['int8_refused']}
                      if 'int8_refused' in figures else {}),
                   'float_gate': float_gate, 'int8_gate': int8_gate, 'shipped': shipped,
                   **({'float_versus_majority': float_against_majority}
                      if float_against_majority else {}),
                   **({'int8_versus_majority': int8_against_majority}
                      if int8_against_majority else {}),
                   'shipped_bytes': shipped_bytes})
    int8_text = ('refused' if figures['int8_accuracy'] is None else
                 f'{figures["int8_accuracy"]:.4f} (drop {int8_gate["drop"]:+.4f}, margin '
                 f'{int8_gate["margin"]:.4f}, gate passes {int8_gate["chance_of_passing"]:.1%})')
    outcome = (f'{shipped} ({shipped_bytes} bytes)' if shipped else
               f'nothing ({float_against_majority})' if float_against_majority else
               'nothing')
    self.logger.info(
        'size search: share %g%s, hidden units %s, %d parameters: eval accuracy %.4f (drop '
        '%+.4f, margin %.4f), int8 %s; the teacher %.4f, the budget %g: ships %s', share,
        ' trained on' if longer else '', list(widths), parameters, accuracy,
        float_gate['drop'], float_gate['margin'], int8_text, teacher_accuracy,
        settings.max_accuracy_drop, outcome)
    chance = max(float_gate['chance_of_passing'],
                 int8_gate['chance_of_passing'] if int8_gate else 0.0)
    return {'share': share, 'widths': widths, 'student': student, 'accuracy': accuracy,
            'chance': chance, 'shipped': shipped, 'shipped_bytes': shipped_bytes,
            'int8_passes': int8_passes, 'longer': longer}

  def check_labels(self) -> None:
    """Refuses, before any training, a label that can not train a classifier."""
    counts = {split: labels.count_values(files, self.run.tf_transform_output,
                                         self.settings.label_key, self.run.options.compression)
              for split, files in (('train', self.fn_args.train_files),
                                   ('eval', self.fn_args.eval_files))}
    labels.check_counts(counts, self.settings.label_key, self.settings.label_column,
                        self.num_classes)

  def train_student(self, temperature: float, alpha: float, name: str,
                    record_dataset_fn=None, epochs: Optional[int] = None,
                    start_from: Optional[tf_keras.Model] = None) -> tf_keras.Model:
    """Trains one student (or one per teacher, ensembled) and returns the exportable model.

    `epochs` of the run's steps each (default: the run's epochs). With `start_from` (a
    model this method returned), training starts from its weights, with a fresh optimizer
    (a warm restart), and `start_from` itself is left as it was.
    """
    groups = [self.teachers]
    if self.settings.multi_teacher_mode == 'many_on_many' and len(self.teachers) > 1:
      groups = [[teacher] for teacher in self.teachers]
    students = []
    for position, group in enumerate(groups):
      run_name = name if len(groups) == 1 else f'{name}-{position}'
      # Computed outside the strategy's scope: the pass calls the teachers as check_teacher
      # does, never inside a replica.
      cache = self.teacher_cache(group) if alpha < 1.0 else None
      with self.run.strategy.scope():
        student = self.build_student(self.run.tf_transform_output, self.hyperparameters)
        if len(groups) > 1:  # Layer names must be unique inside the ensemble.
          student._name = f'{student.name}_{position}'  # pylint: disable=protected-access
        if start_from is not None:
          # The same builder made both: the same layers in the same order.
          trained = start_from if len(groups) == 1 else [
              layer for layer in start_from.layers if isinstance(layer, tf_keras.Model)][position]
          student.set_weights(trained.get_weights())
        distillation = DistillationModel(student, group, temperature, alpha,
                                         self.settings.teacher_weights if len(groups) == 1
                                         else None, self.settings.mixup, self.settings.noise,
                                         self.settings.teacher_targets, cache)
        _, metrics = modeling.loss_and_metrics(self.run.units)
        distillation.compile(optimizer=self.run.optimizer(self.settings.learning_rate_schedule),
                             metrics=metrics,
                             steps_per_execution=self.run.steps_per_execution)
        modeling.create_optimizer_slots(distillation)
      self.run.log_plan(run_name, student, epochs)
      _, training_callbacks = self.run.callbacks(run_name, run_name=run_name, profile=False)
      # A student whose loss runs away is refused by name, never handed on.
      training_callbacks.append(keras_callbacks.DivergenceGuard(
          f'Distiller: the student {run_name!r}', self.largest_inputs,
          relative=start_from is None))
      dataset = self.run.train_dataset(record_dataset_fn)
      if self.transfer is not None and alpha < 1.0:  # The from-scratch twin has no use for it.
        dataset = transfer_lib.alternate(dataset, self.transfer.dataset(
            self.run.global_batch_size, self.run.options.seed))
      distillation.fit(dataset, epochs=epochs or self.run.epochs,
                       steps_per_epoch=self.run.steps_per_epoch, verbose=0,
                       callbacks=training_callbacks)
      students.append(student)
    with self.run.strategy.scope():
      return ensemble(students, name.replace(' ', '_').replace('=', ''))

  def teacher_cache(self, group: Sequence[teachers_lib.Teacher]
                    ) -> Optional[teacher_cache_lib.TeacherCache]:
    """The group's logits per train row, computed on first use when that costs less than
    running the teachers at every step; None when they must run at every step."""
    key = tuple(id(teacher) for teacher in group)
    if key not in self.teacher_caches:
      run = self.run
      reason = teacher_cache_lib.reason_not_to_cache(run.train_dataset().element_spec,
                                                     self.settings.mixup, self.settings.noise)
      cache, record = None, {'cached': False, 'reason': reason}
      if reason is None:
        cache, record = teacher_cache_lib.build(
            self.fn_args.train_files, run.tf_transform_output, self.settings.label_key,
            modeling.prepare_labels(run.units), run.options, run.global_batch_size, group,
            rows_seen=run.epochs * run.steps_per_epoch * run.global_batch_size)
      if cache is not None:
        self.logger.info('Distiller: the teachers\' logits for the %d train rows took %.1f s '
                         'to compute, once; each step looks them up', record['rows'],
                         record['seconds'])
      else:
        self.logger.info('Distiller: the teachers run at every step: %s', record['reason'])
      self.teacher_caches[key] = (cache, record)
    return self.teacher_caches[key][0]

  def largest_inputs(self, count: int = 3) -> str:
    """The transformed features with the largest magnitudes on eval: what to scale first."""
    magnitudes = []
    for name, values in self.eval_set.features.items():
      values = np.asarray(values)
      if values.size and np.issubdtype(values.dtype, np.number):
        magnitudes.append((float(np.max(np.abs(values))), name))
    largest = sorted(magnitudes, reverse=True)[:count]
    return ('the transformed features with the largest magnitudes on eval: '
            + ', '.join(f'{name} (up to {value:.3g})' for value, name in largest)
            + '; scale such features in the transform (tft.scale_to_z_score) or give the '
            'Distiller the transformed statistics') if largest else ''

  @staticmethod
  def scorer(student: tf_keras.Model) -> measuring.Scorer:
    scorer = measuring.keras_scorer(student)
    scorer.output_kind = 'logits'  # Students emit logits by contract.
    return scorer

  def tune(self) -> Tuple[float, float, List[dict], float]:
    """Grid search on the held-out slice; returns best T, alpha, all trials, scratch's accuracy."""
    compression = self.run.options.compression
    percent = self.settings.validation_percent
    training_slice = reading.hash_slice(compression, percent, held_out=False)
    validation = measuring.from_transformed_examples(
        self.fn_args.train_files, 'train (held-out slice)', self.run.tf_transform_output,
        self.settings.label_key, self.settings.eval_examples, compression,
        reading.hash_slice(compression, percent, held_out=True))
    trials, correct = [], []
    grid = list(itertools.product(self.settings.temperatures, self.settings.alphas))
    for number, (temperature, alpha) in enumerate(grid, start=1):
      student = self.train_student(temperature, alpha,
                                   f'trial{number}-T{temperature:g}-alpha{alpha:g}',
                                   training_slice)
      correct.append(measuring.correct_predictions(self.scorer(student), validation))
      trial_accuracy = float(np.mean(correct[-1]))
      trials.append({'temperature': float(temperature), 'alpha': float(alpha),
                     'validation_accuracy': trial_accuracy})
      self.logger.info('tuning trial %d/%d: temperature=%g alpha=%g validation accuracy %.4f',
                       number, len(grid), temperature, alpha, trial_accuracy)
    scratch = self.train_student(1.0, 1.0, 'trial-scratch', training_slice)
    scratch_accuracy = measuring.accuracy(self.scorer(scratch), validation)
    self.logger.info('tuning: from-scratch student validation accuracy %.4f', scratch_accuracy)
    chosen = choose_trial(trials, correct, self.settings.temperature, self.settings.alpha)
    self.logger.info('tuning: %s', chosen['why'])
    self.tuning_choice = chosen['why']
    return chosen['temperature'], chosen['alpha'], trials, scratch_accuracy

  def weak_teachers(self) -> List[Dict[str, Any]]:
    """Teachers no better than always guessing the majority class on eval, named in the log.

    A teacher at or below the majority class, or above it only within noise (the gate's
    paired test), has nothing to teach; distilling from it can only pull the student
    towards the constant guess. Called before any student trains, so the user learns it
    at once; the run goes on, and `hand_on='better'` keeps the from-scratch twin if it
    does better.
    """
    eval_set = self.eval_set
    majority = measuring.majority_accuracy(eval_set.labels)
    majority_correct = measuring.majority_correct(eval_set.labels)
    weak, self.teacher_accuracy, self.teacher_correct = [], [], []
    for position, teacher in enumerate(self.teachers):
      correct = measuring.correct_predictions(teacher, eval_set)
      self.teacher_correct.append(correct)
      self.teacher_accuracy.append(float(np.mean(correct)))
      comparison = measuring.paired_comparison(correct, majority_correct)
      if comparison['difference'] <= 0 or comparison['within_noise']:
        weak.append({'teacher': position, 'accuracy': float(np.mean(correct)),
                     'majority_accuracy': majority, 'versus_majority': comparison})
        self.logger.warning(
            'WARNING: teacher %d scores %.4f on %s, %s the majority class (%.4f; McNemar '
            'p = %.3f): it has learnt nothing a student could take from it. Train it '
            'longer or check its label_key (TFX\'s taxi example trains its teacher for '
            '1,000 steps; at 300 it still guesses the majority class).', position,
            float(np.mean(correct)), eval_set.split,
            'at or below' if comparison['difference'] <= 0 else 'within noise of',
            majority, comparison['p_value'])
    return weak

  def execute(self, metrics_dir: str) -> Dict:
    """Runs the whole distillation, exports the chosen student and writes the metrics."""
    settings = self.settings
    temperature, alpha = settings.temperature, settings.alpha
    trials, scratch_validation_accuracy = [], None
    weak_teachers = self.weak_teachers()
    if settings.tune:
      temperature, alpha, trials, scratch_validation_accuracy = self.tune()
      self.logger.info('tuning chose temperature=%g alpha=%g', temperature, alpha)
    size_search, longer = None, None
    student_epochs = self.run.epochs
    if settings.student_parameter_shares:
      student, size_search = self.search_size(temperature, alpha)
      if size_search['chosen_trained_on']:
        student_epochs = 2 * self.run.epochs  # The from-scratch twin gets as many.
    else:
      student = self.train_student(temperature, alpha, 'student')
    eval_set = self.eval_set
    student_correct = measuring.correct_predictions(self.scorer(student), eval_set)
    if not settings.student_parameter_shares:
      # A fixed student has no larger share to climb to: short of the budget with the
      # gate's margin, it trains on from its weights for as many steps again (twice the
      # steps in all, at the cost of one more run of them, with a fresh optimizer so that
      # a decayed learning rate starts again), and the likelier to pass goes on (a tie to
      # the first).
      first = self.gate_figures(student_correct)
      if not measuring.within_budget_with_margin(first, settings.max_accuracy_drop):
        student_epochs = 2 * self.run.epochs
        self.logger.info(
            'Distiller: the student is %+.4f below the teacher on eval, with the gate\'s '
            'margin %.4f past max_accuracy_drop %g: training it on for as many steps again',
            first['drop'], first['margin'], settings.max_accuracy_drop)
        try:
          again = self.train_student(temperature, alpha, 'student-longer', start_from=student)
        except keras_callbacks.TrainingDiverged as diverged:
          self.logger.warning('WARNING: %s; the first student goes on.', diverged)
          again = None
          longer = {'first': first, 'diverged': str(diverged), 'epochs': student_epochs,
                    'kept': 'first'}
        if again is not None:
          again_correct = measuring.correct_predictions(self.scorer(again), eval_set)
          second = self.gate_figures(again_correct)
          longer = {'first': first, 'longer': second, 'epochs': student_epochs,
                    'kept': 'longer' if second['chance_of_passing'] > first['chance_of_passing']
                            else 'first'}
        if longer['kept'] == 'longer':
          student, student_correct = again, again_correct
        else:
          student_epochs = self.run.epochs
    metrics = {
        'teacher_accuracy': self.teacher_accuracy,
        'teacher_parameters': [teacher.count_params() for teacher in self.teachers],
        'teacher_output_kinds': [teacher.output_kind for teacher in self.teachers],
        'teacher_formats': [teacher.format for teacher in self.teachers],
        'student_accuracy': float(np.mean(student_correct)),
        'student_parameters': int(student.count_params()),
        'student': self.student_description,
        'majority_accuracy': measuring.majority_accuracy(eval_set.labels),
        'label_key': self.settings.label_key,
        **self.run.classes.describe(),
        'temperature': temperature,
        'alpha': alpha,
        'multi_teacher_mode': settings.multi_teacher_mode,
        'tuned': settings.tune,
        'trials': trials,
        'tuning_choice': self.tuning_choice,
        'exported_student': 'distilled',
        'hand_on': settings.hand_on,
        'hand_on_reason': 'no from-scratch twin trained (train_baseline=False)',
        'weak_teachers': weak_teachers,
        'transfer_set': transfer_lib.describe(self.transfer),
        'teacher_logits': [record for _, record in self.teacher_caches.values()],
        'size_search': size_search,
        'trained_longer': longer,
        'eval_split': eval_set.split,
        'eval_examples': eval_set.size,
        'train_steps': student_epochs * self.run.steps_per_epoch,
        'random_seed': strategy_lib.settings().random_seed,
    }
    metrics['teacher_parameters_total'] = sum(metrics['teacher_parameters'])
    metrics['student_param_ratio'] = (metrics['student_parameters']
                                      / max(1, max(metrics['teacher_parameters'])))
    exported = student
    scratch = None
    if settings.train_baseline or settings.tune:
      # Like for like: the same student, data, budget and seed as the distilled one just
      # trained (at the tuned setting, when tuning), labels only; both measured on eval.
      try:
        scratch = self.train_student(1.0, 1.0, 'scratch', epochs=student_epochs)
      except keras_callbacks.TrainingDiverged as diverged:
        scratch = None
        self.logger.warning('WARNING: %s; the distilled student goes on.', diverged)
        metrics['scratch_diverged'] = str(diverged)
        metrics['hand_on_reason'] = f'the from-scratch twin diverged: {diverged}'
    if scratch is not None:
      scratch_correct = measuring.correct_predictions(self.scorer(scratch), eval_set)
      metrics['scratch_accuracy'] = float(np.mean(scratch_correct))
      # Paired on the same eval examples: scratch "beats" the distilled student only beyond
      # noise (McNemar at 5%); a lead of a few examples is no reason to switch.
      comparison = measuring.paired_comparison(scratch_correct, student_correct)
      metrics['scratch_versus_distilled'] = comparison
      metrics['scratch_beats_distilled'] = not comparison['within_noise']
      if settings.tune:
        metrics['scratch_validation_accuracy'] = scratch_validation_accuracy
      if settings.hand_on == 'distilled':
        metrics['hand_on_reason'] = ("hand_on='distilled': the distilled student, whatever "
                                     'its from-scratch twin scores')
      if settings.hand_on == 'better':
        # Only a win beyond noise: a lead of a few examples is a tie, and a tie goes to the
        # distilled student (a twin handed on after a one-example lead on 2,966 eval rows
        # lost 0.026 to the teacher on test).
        better = metrics['scratch_beats_distilled']
        metrics['hand_on_reason'] = (
            f"hand_on='better': on {eval_set.size} {eval_set.split} examples the "
            f"from-scratch student scores {metrics['scratch_accuracy']:.4f}, the distilled "
            f"one {metrics['student_accuracy']:.4f}: "
            + (f"the from-scratch one wins beyond noise (McNemar p = "
               f"{comparison['p_value']:.3f})" if better else
               f"no win beyond noise (McNemar p = {comparison['p_value']:.3f}), so the "
               'distilled one goes on'))
        if better:
          exported = scratch
          metrics['exported_student'] = 'scratch'
          self.logger.warning(
              'WARNING: the student trained from scratch (eval accuracy %.4f) beats the '
              'distilled one (%.4f) beyond noise (McNemar p = %.3f) on the same data, budget '
              "and seed; handing on the from-scratch student (hand_on='better').",
              metrics['scratch_accuracy'], metrics['student_accuracy'],
              comparison['p_value'])
      elif metrics['scratch_beats_distilled'] and settings.tune:
        exported = scratch
        metrics['exported_student'] = 'scratch'
        self.logger.warning(
            'WARNING: after tuning, the student trained from scratch (eval accuracy %.4f) beats '
            'the distilled one retrained at temperature=%g alpha=%g (%.4f) on the same data, '
            'budget and seed, beyond noise (McNemar p = %.3f); exporting the from-scratch '
            'student.', metrics['scratch_accuracy'], temperature, alpha,
            metrics['student_accuracy'], comparison['p_value'])
        metrics['hand_on_reason'] = ("hand_on='distilled' after tuning: the from-scratch "
                                     'student wins beyond noise')
      elif metrics['scratch_beats_distilled']:
        self.logger.warning(
            'WARNING: the distilled student (eval accuracy %.4f) is worse than the same student '
            'trained from scratch (%.4f) beyond noise (McNemar p = %.3f) at temperature=%g '
            'alpha=%g; try tune=True.', metrics['student_accuracy'],
            metrics['scratch_accuracy'], comparison['p_value'], temperature, alpha)
    metrics['exported_accuracy'] = (metrics['scratch_accuracy']
                                    if metrics['exported_student'] == 'scratch'
                                    else metrics['student_accuracy'])
    # What the gate is expected to make of the student handed on (its float model; the
    # int8 copy follows by the gate's parent rule when it is within noise of it).
    gate = self.gate_figures(scratch_correct if metrics['exported_student'] == 'scratch'
                             else student_correct)
    metrics['gate_margin'] = {**gate, 'max_accuracy_drop': settings.max_accuracy_drop,
                              'target_chance': measuring.GATE_PASS_CHANCE}
    if gate['chance_of_passing'] < measuring.GATE_PASS_CHANCE:
      self.logger.warning(
          'WARNING: the student handed on is %+.4f below the teacher on eval; with the margin '
          'the gate\'s noise on %s test rows asks for (%.4f), it passes max_accuracy_drop %g '
          'in about %.0f%% of runs, not %.1f%%. A larger student share, more training steps '
          'or a larger budget would raise that.', gate['drop'], gate['test_examples'],
          gate['margin'], settings.max_accuracy_drop, 100 * gate['chance_of_passing'],
          100 * measuring.GATE_PASS_CHANCE)
    self.logger.info(
        'Distiller: teacher accuracy %s, student %.4f (%d parameters, %.3f of the teacher)%s, '
        'majority class %.4f', ', '.join(f'{value:.4f}' for value in metrics['teacher_accuracy']),
        metrics['student_accuracy'], metrics['student_parameters'],
        metrics['student_param_ratio'],
        f", from scratch {metrics['scratch_accuracy']:.4f}" if 'scratch_accuracy' in metrics
        else '', metrics['majority_accuracy'])
    modeling.export_serving_model(exported, self.run.tf_transform_output, self.run.label_column,
                                  self.fn_args.serving_model_dir)
    modeling.write_metrics(self.fn_args.model_run_dir, metrics)
    modeling.write_metrics(metrics_dir, metrics)
    return metrics
