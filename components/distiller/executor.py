"""Distiller's executor: the DistributedTrainer's processes, running the distillation."""

import json
from typing import Any, Dict, List

from tfx import types
from tfx.components.trainer import executor as trainer_executor
from tfx.components.util import udf_utils
from tfx.types import artifact_utils
from tfx.types import standard_component_specs

from tfx_distillery.components.common import artifacts
from tfx_distillery.components.common import evaluation
from tfx_distillery.components.distiller import spec as distiller_spec
from tfx_distillery.components.distiller import training
from tfx_distillery.components.distiller import transfer
from tfx_distillery.components.distributed_trainer import executor as trainer_executor_lib
from tfx_distillery.trainer_modules import builtin_student

# Called by the Distiller in the student module file.
STUDENT_FN = 'build_student'


class TrainingExecutor(trainer_executor.GenericExecutor):
  """Distills inside one training process (the chief, or every worker of a cluster)."""

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    fn_args = self._GetFnArgs(input_dict, output_dict, exec_properties)
    if not (exec_properties.get(standard_component_specs.MODULE_FILE_KEY)
            or exec_properties.get(standard_component_specs.MODULE_PATH_KEY)):
      build_student = builtin_student.build_student
    else:
      try:
        build_student = udf_utils.get_fn(exec_properties, STUDENT_FN)
      except AttributeError as error:
        raise ValueError(f'The Distiller\'s module_file must define {STUDENT_FN}('
                         f'tf_transform_output, hyperparameters); {error}') from error
    teacher_paths = [evaluation.serving_model_path(artifact_utils.get_single_uri(
        input_dict[key])) for key in distiller_spec.TEACHER_MODEL_KEYS if input_dict.get(key)]
    settings = training.DistillationSettings.from_json(
        exec_properties[distiller_spec.DISTILLATION_KEY])
    metrics_dir = artifact_utils.get_single_uri(output_dict[distiller_spec.METRICS_KEY])
    statistics = input_dict.get(standard_component_specs.STATISTICS_KEY)
    statistics_uri = artifact_utils.get_single_uri(statistics) if statistics else None
    transfer_artifacts = input_dict.get(distiller_spec.TRANSFER_EXAMPLES_KEY)
    transfer_examples = None
    if transfer_artifacts:
      transfer_artifact = artifact_utils.get_single_instance(transfer_artifacts)
      transfer_examples = (transfer_artifact.uri, transfer.split_names(transfer_artifact))
    training.Distillation(fn_args, build_student, teacher_paths, settings,
                          statistics_uri, transfer_examples).execute(metrics_dir)


class Executor(trainer_executor_lib.Executor):
  """Runs the distillation in this process or on a local cluster, as DistributedTrainer trains."""

  PROCESS_EXECUTOR = f'{__name__}.TrainingExecutor'
  COMPONENT_NAME = 'Distiller'

  def Do(self, input_dict: Dict[str, List[types.Artifact]],
         output_dict: Dict[str, List[types.Artifact]],
         exec_properties: Dict[str, Any]) -> None:
    super().Do(input_dict, output_dict, exec_properties)
    # Training ran in this process or in workers of its own; the plan they recorded goes on
    # the model, where the gate's report reads it.
    plan = read_metrics(artifact_utils.get_single_uri(
        output_dict[distiller_spec.METRICS_KEY])).get('student', {}).get('features')
    if plan:
      for model in output_dict[standard_component_specs.MODEL_KEY]:
        model.set_string_custom_property(artifacts.FEATURE_PLAN_PROPERTY,
                                         json.dumps(plan, sort_keys=True))


def read_metrics(metrics_uri: str) -> Dict[str, Any]:
  """The metrics JSON a Distiller execution wrote into its `metrics` artifact."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  with tf.io.gfile.GFile(f'{metrics_uri.rstrip("/")}/{training.METRICS_FILE_NAME}') as handle:
    return json.load(handle)
