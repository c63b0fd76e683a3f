"""StrictExampleValidator: TFX's ExampleValidator that stops the pipeline on anomalies."""

from tfx_distillery.components.example_validator.component import StrictExampleValidator
from tfx_distillery.components.example_validator.executor import DataAnomaliesError

__all__ = ['DataAnomaliesError', 'StrictExampleValidator']
