"""The embedding model as a resource, with its on-disk cache under the output folder."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource

from resources.config import DocgraphConfig


class EmbedderResource(ConfigurableResource):
    config: DocgraphConfig

    def get(self):
        from pipeline.embed import CachedEmbedder, get_embedder

        settings = self.config.settings()
        cache_dir = Path(settings.output_dir) / "cache" / "embeddings"
        return CachedEmbedder(get_embedder(settings.embedding), cache_dir)
