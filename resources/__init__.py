"""Dagster resources: typed, configurable wrappers around pipeline/ objects."""

from resources.config import DocgraphConfig
from resources.embedder import EmbedderResource
from resources.parquet_io import ParquetIOManager

__all__ = ["DocgraphConfig", "EmbedderResource", "ParquetIOManager"]
