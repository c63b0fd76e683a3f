"""Artifact types of ours: where the components' measured figures live."""

from tfx.types import artifact


class ModelMetrics(artifact.Artifact):
  """A folder with `metrics.json`: accuracies, sizes, latencies and trials of a stage.

  Written by the Distiller, Pruner and Quantizer and read by the gate and the report.
  """
  # namespace.Name: the form Kubeflow Pipelines accepts as a schema title.
  TYPE_NAME = 'distillery.ModelMetrics'
