"""The embedding model as a resource, with its on-disk cache under the output folder."""

# No `from __future__ import annotations`: Dagster reads the `config` annotation as a class to
# accept the launch-configured `docgraph` resource there (see resources.config).

from dagster import AssetExecutionContext, AssetKey, ConfigurableResource

from resources.config import DocgraphConfig
from resources.executors import IN_PROCESS_EXECUTORS


class EmbedderResource(ConfigurableResource):
    config: DocgraphConfig  # the run's `docgraph` resource (build_resources)

    def get(self):
        from pipeline.vectors.embed import CachedEmbedder
        from pipeline.vectors.embed_cache import embedding_cache_dir
        from pipeline.vectors.embed_onnx import index_embedder
        from pipeline.vectors.embed_worker import get_worker

        settings = self.config.settings()
        cache_dir = embedding_cache_dir(settings.output_dir)
        inline = settings.embedding.process == "inline"
        model = index_embedder(settings.embedding) if inline else get_worker(settings.embedding)
        return CachedEmbedder(model, cache_dir)

    def prefetch(self, context: AssetExecutionContext, texts: list[str], for_asset: str) -> int:
        """Queue `texts` on the embedding worker now for `for_asset`, a later step of this
        run, which takes the vectors when it asks for them (CachedEmbedder.prefetch); the
        steps between run meanwhile. Only when the run's steps share this process (the
        in_process executor: a step in a process of its own would exit, and stop its worker,
        first) and the run materializes `for_asset` (else nobody would take them)."""
        if context.job_def.executor_def.name not in IN_PROCESS_EXECUTORS:
            return 0
        if AssetKey(for_asset) not in context.job_def.asset_layer.selected_asset_keys:
            return 0
        return self.get().prefetch(texts)
