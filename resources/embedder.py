"""The embedding model as a resource, with its on-disk cache under the output folder."""

# No `from __future__ import annotations`: Dagster reads the `config` annotation as a class to
# accept the launch-configured `docgraph` resource there (see resources.config).
from pathlib import Path

from dagster import ConfigurableResource

from resources.config import DocgraphConfig


class EmbedderResource(ConfigurableResource):
    config: DocgraphConfig  # the run's `docgraph` resource (build_resources)

    def get(self):
        from pipeline.vectors.embed import CachedEmbedder, get_embedder
        from pipeline.vectors.embed_worker import get_worker

        settings = self.config.settings()
        cache_dir = Path(settings.output_dir) / "cache" / "embeddings"
        inline = settings.embedding.process == "inline"
        model = get_embedder(settings.embedding) if inline else get_worker(settings.embedding)
        return CachedEmbedder(model, cache_dir)
