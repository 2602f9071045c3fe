"""Dagster resources: typed, configurable wrappers around pipeline/ objects."""

from resources.config import (
    OUTPUT_ROOT,
    DocgraphAtLaunch,
    DocgraphConfig,
    output_root_entry,
    output_root_metadata,
)
from resources.embedder import EmbedderResource
from resources.llm import LlmResource
from resources.parquet_io import ParquetIOManager


def build_resources(
    config_path: str | None = None, input_dir: str | None = None, output_dir: str | None = None
) -> dict[str, object]:
    """The resources of one run. The folders come from one place, the `docgraph` resource:
    the IO manager, embedder and LLM resource depend on it by key, so run config that
    overrides `resources.docgraph.config.*` (Launchpad, GraphQL) moves every output of the
    run. The others have no config of their own to override."""
    docgraph = DocgraphConfig.at_launch(config_path, input_dir, output_dir)
    return {
        "docgraph": docgraph,
        "io_manager": ParquetIOManager(config=docgraph),
        "embedder": EmbedderResource(config=docgraph),
        "llm": LlmResource(config=docgraph),
    }


__all__ = [
    "OUTPUT_ROOT",
    "DocgraphAtLaunch",
    "DocgraphConfig",
    "EmbedderResource",
    "LlmResource",
    "ParquetIOManager",
    "build_resources",
    "output_root_entry",
    "output_root_metadata",
]
