"""Artifact types of ours: where the components' measured figures live."""

from typing import Optional

from tfx.types import artifact


class ModelMetrics(artifact.Artifact):
  """A folder with `metrics.json`: accuracies, sizes, latencies and trials of a stage.

  Written by the Distiller, Pruner and Quantizer and read by the gate and the report.
  """
  # namespace.Name: the form Kubeflow Pipelines accepts as a schema title.
  TYPE_NAME = 'distillery.ModelMetrics'


# Custom properties a Model artifact of ours carries, so the gate, the Pusher and the
# report know a TFLite folder from a SavedModel without looking inside.
MODEL_FORMAT_PROPERTY = 'model_format'
QUANTIZATION_PROPERTY = 'quantization'
SAVED_MODEL_FORMAT = 'saved_model'
# Set by the Pruner on the model it hands on when pruning did not pay (its input unchanged,
# or a pruned model whose shipped file is no smaller), and carried by the Quantizer: the gate
# leaves such a model out, with this reason, instead of measuring a copy twice.
NOT_A_CANDIDATE_PROPERTY = 'not_a_candidate'
# The Pruner's per-layer sparsities (JSON), carried by the Quantizer into the gate's report.
LAYER_SPARSITY_PROPERTY = 'layer_sparsity'
# The built-in student's plan for each transformed feature (JSON: name -> what it became), set
# by the Distiller and carried by the Pruner and the Quantizer into the gate's report.
FEATURE_PLAN_PROPERTY = 'feature_plan'


def model_format(model_artifact: artifact.Artifact) -> str:
  """`tflite` for a Quantizer's folder, `saved_model` for every other Model."""
  if model_artifact.has_custom_property(MODEL_FORMAT_PROPERTY):
    return model_artifact.get_string_custom_property(MODEL_FORMAT_PROPERTY)
  return SAVED_MODEL_FORMAT


def not_a_candidate(model_artifact: artifact.Artifact) -> Optional[str]:
  """Why the gate should leave this model out, or None when it is a candidate."""
  if model_artifact.has_custom_property(NOT_A_CANDIDATE_PROPERTY):
    return model_artifact.get_string_custom_property(NOT_A_CANDIDATE_PROPERTY) or None
  return None


def carry_properties(source: artifact.Artifact, target: artifact.Artifact, *names: str) -> None:
  """Copies the string custom properties `names` that `source` has to `target`."""
  for name in names:
    if source.has_custom_property(name):
      target.set_string_custom_property(name, source.get_string_custom_property(name))


def copy_model_format(source: artifact.Artifact, target: artifact.Artifact) -> None:
  """Carries `model_format`, `quantization`, `layer_sparsity` and `feature_plan` to another
  Model artifact."""
  carry_properties(source, target, MODEL_FORMAT_PROPERTY, QUANTIZATION_PROPERTY,
                   LAYER_SPARSITY_PROPERTY, FEATURE_PLAN_PROPERTY)
