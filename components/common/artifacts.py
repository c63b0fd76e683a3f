"""Artifact types of ours: where the components' measured figures live."""

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


def model_format(model_artifact: artifact.Artifact) -> str:
  """`tflite` for a Quantizer's folder, `saved_model` for every other Model."""
  if model_artifact.has_custom_property(MODEL_FORMAT_PROPERTY):
    return model_artifact.get_string_custom_property(MODEL_FORMAT_PROPERTY)
  return SAVED_MODEL_FORMAT


def copy_model_format(source: artifact.Artifact, target: artifact.Artifact) -> None:
  """Carries `model_format` and `quantization` from one Model artifact to another."""
  for name in (MODEL_FORMAT_PROPERTY, QUANTIZATION_PROPERTY):
    if source.has_custom_property(name):
      target.set_string_custom_property(name, source.get_string_custom_property(name))
