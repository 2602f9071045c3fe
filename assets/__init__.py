"""Thin Dagster assets, one module per stage group named like the pipeline package it calls,
in DAG order: ingest, structure, chunking, extract, graph, communities, vectors, lexical,
publish. The input folder goes in, the index's tables, vector tables and BM25 index come out
as one published version; each asset reads its upstream tables, calls pipeline/, writes, and
attaches metadata (metadata.py). shards.py partitions the per-document stages, checks.py
holds the blocking asset checks and automation.py the schedule and sensor (the job is run
from Python by app/run.py)."""

from dagster import AssetsDefinition, get_dagster_logger

from assets import (
    checks,
    chunking,
    communities,
    extract,
    graph,
    ingest,
    lexical,
    publish,
    structure,
    vectors,
)
from pipeline import progress

# long stages log `stage n/total (rate/s)` every 10 s into the run's log (pipeline/progress.py)
progress.set_default(progress.LogReporter(get_dagster_logger("docgraph.progress").info))


def index_assets(n_shards: int) -> list[AssetsDefinition]:
    """Every asset of the index, the per-document ones partitioned into `n_shards` shards
    (assets.shards), `published_index` last."""
    assets = [
        ingest.documents_asset(n_shards),
        ingest.publications,
        structure.structure_asset(n_shards),
        chunking.chunks_asset(n_shards),
        extract.extraction_asset(n_shards),
        vectors.chunk_embeddings_asset(n_shards),
        structure.structure_edges,
        graph.graph,
        communities.communities,
        communities.community_reports,
        *vectors.vector_assets,
        lexical.lexical_index,
    ]
    return [*assets, publish.published_index_asset([key for a in assets for key in a.keys])]


index_checks = checks.index_checks

__all__ = ["index_assets", "index_checks"]
