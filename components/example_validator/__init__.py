"""StrictExampleValidator: TFX's ExampleValidator that stops the pipeline on anomalies."""

from components.example_validator.component import StrictExampleValidator
from components.example_validator.executor import DataAnomaliesError

__all__ = ['DataAnomaliesError', 'StrictExampleValidator']
