"""docgraph domain library: pure functions and classes, no Dagster import."""

from pipeline import memory

memory.configure()  # before any module of this package imports polars (see pipeline.memory)
