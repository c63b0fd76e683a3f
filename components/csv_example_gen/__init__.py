"""ArrowCsvExampleGen: CsvExampleGen's artifacts from CSV read in Arrow blocks."""

from tfx_distillery.components.csv_example_gen.component import ArrowCsvExampleGen

__all__ = ['ArrowCsvExampleGen']
