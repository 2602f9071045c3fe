"""LanceDB vector tables (explicit Arrow schemas, full-text index) for search."""

import time

import polars as pl
from dagster import AssetIn, AssetsDefinition, MaterializeResult, asset

from pipeline.vectors import build_vector_table
from resources import DocgraphConfig, EmbedderResource


def _vector_asset(source: str) -> AssetsDefinition:
    @asset(
        name=f"{source}_vectors",
        ins={"frame": AssetIn(source)},
        group_name="vectors",
        description=f"LanceDB table `{source}`: embeddings + full-text index.",
    )
    def _build(
        docgraph: DocgraphConfig, embedder: EmbedderResource, frame: pl.DataFrame
    ) -> MaterializeResult:
        started = time.perf_counter()
        emb = embedder.get()
        rows = build_vector_table(docgraph.settings().output_dir, source, frame, emb)
        return MaterializeResult(
            metadata={
                "rows": rows,
                "model": emb.model_id,
                "elapsed_s": round(time.perf_counter() - started, 3),
            }
        )

    return _build


vector_assets = [
    _vector_asset(name) for name in ("text_units", "entities", "relationships", "community_reports")
]
