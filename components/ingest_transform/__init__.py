"""IngestionTransform: a drop-in Transform whose output keeps training fed."""

from tfx_distillery.components.ingest_transform.component import IngestionTransform

__all__ = ['IngestionTransform']
