"""Dagster resources: typed, configurable wrappers around pipeline/ objects."""

from resources.config import DocgraphConfig
from resources.embedder import EmbedderResource
from resources.llm import LlmResource
from resources.parquet_io import ParquetIOManager


def build_resources(
    config_path: str | None = None, input_dir: str | None = None, output_dir: str | None = None
) -> dict[str, object]:
    """The resources of one run; every one reads the same DocgraphConfig."""
    config = DocgraphConfig(config_path=config_path, input_dir=input_dir, output_dir=output_dir)
    return {
        "docgraph": config,
        "io_manager": ParquetIOManager(config=config),
        "embedder": EmbedderResource(config=config),
        "llm": LlmResource(config=config),
    }


__all__ = [
    "DocgraphConfig",
    "EmbedderResource",
    "LlmResource",
    "ParquetIOManager",
    "build_resources",
]
