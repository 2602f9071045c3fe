"""Thin Dagster assets: read upstream tables, call pipeline/, write, attach metadata."""

from dagster import AssetsDefinition, get_dagster_logger

from assets.checks import integrity_checks
from assets.ingest import documents_asset, publications
from assets.publish import published_index_asset
from assets.semantic import (
    chunks_asset,
    communities,
    community_reports,
    extraction_asset,
    graph,
)
from assets.structure import structure_asset, structure_edges
from assets.vectors import chunk_embeddings_asset, vector_assets
from pipeline import progress

# long stages log `stage n/total (rate/s)` every 10 s into the run's log (pipeline/progress.py)
progress.set_default(progress.LogReporter(get_dagster_logger("docgraph.progress").info))


def index_assets(n_shards: int) -> list[AssetsDefinition]:
    """Every asset of the index, the per-document ones partitioned into `n_shards` shards
    (assets.shards), `published_index` last."""
    assets = [
        documents_asset(n_shards),
        publications,
        structure_asset(n_shards),
        chunks_asset(n_shards),
        extraction_asset(n_shards),
        chunk_embeddings_asset(n_shards),
        structure_edges,
        graph,
        communities,
        community_reports,
        *vector_assets,
    ]
    return [*assets, published_index_asset([key for a in assets for key in a.keys])]


index_checks = integrity_checks

__all__ = ["index_assets", "index_checks"]
