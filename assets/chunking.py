"""Chunking, shard by shard: each document's sections and content nodes to token-sized,
content-anchored chunks (pipeline.chunking); the documents table gets its text_unit_ids."""

import polars as pl
from dagster import AssetExecutionContext, multi_asset

from assets.metadata import failures_md
from assets.shards import SHARD_POLICY, run_shards, shard_partitions, specs
from pipeline.chunking.documents import chunk_structured
from pipeline.compat.columns import with_text_unit_ids
from pipeline.failures import failures_frame
from pipeline.storage import shard_files
from pipeline.vectors.texts import embedding_text
from resources import DocgraphConfig, EmbedderResource
from resources.output import run_dir

CHUNK_TABLES = {
    "chunks": "Token-sized chunks inside sections, content-anchored, citing nodes and pages.",
    "chunk_failures": "Documents whose chunking failed: reason, and the fallback they got.",
}


def chunks_asset(n_shards: int):
    @multi_asset(
        name="chunks",
        specs=specs("semantic", CHUNK_TABLES, ["documents", "sections", "content_nodes"]),
        partitions_def=shard_partitions(n_shards),
        backfill_policy=SHARD_POLICY,
    )
    def chunks(
        context: AssetExecutionContext, docgraph: DocgraphConfig, embedder: EmbedderResource
    ):
        settings = docgraph.settings().chunking
        folder = run_dir(docgraph, context)
        emb = embedder.get() if settings.method == "semantic" else None
        tokens = {"tokens_total": 0, "tokens_max": 0}
        queued = {"prefetched": 0}
        failed: list[pl.DataFrame] = []

        def chunk(key: str) -> dict[str, pl.DataFrame]:
            rows: list[dict] = []
            docs = shard_files.read_shard(folder, "documents", key)
            df = chunk_structured(
                docs,
                shard_files.read_shard(folder, "sections", key),
                shard_files.read_shard(folder, "content_nodes", key),
                settings,
                emb,
                rows,
            )
            # GraphRAG's documents.text_unit_ids is known only now: the shard's documents
            # file is written again with it (pipeline.compat.columns)
            shard_files.write_shard(folder, "documents", key, with_text_unit_ids(docs, df))
            # chunk_embeddings runs late (its priority): the worker embeds meanwhile
            texts = embedding_text("text_units", df)
            queued["prefetched"] += embedder.prefetch(context, texts, "chunk_embeddings")
            n_tokens = df.get_column("n_tokens")
            tokens["tokens_total"] += int(n_tokens.sum() or 0)
            tokens["tokens_max"] = max(tokens["tokens_max"], int(n_tokens.max() or 0))
            failed.append(failures_frame(rows, "chunk_failures"))
            return {"chunks": df, "chunk_failures": failed[-1]}

        def metadata() -> dict:
            fails = pl.concat(failed) if failed else failures_frame([], "chunk_failures")
            return {
                **tokens,
                **queued,
                "method": settings.method,
                "failures": failures_md(fails),
            }

        yield from run_shards(context, folder, CHUNK_TABLES, chunk, metadata)

    return chunks
