"""Chunking, shard by shard: each document's sections and content nodes to token-sized,
content-anchored chunks (pipeline.chunking); the documents table gets its text_unit_ids.

One huge document is one shard, so a shard's chunks are written a row group at a time as
they are finished, the documents' texts are read only when one is chunked as plain text, and
the documents file is rewritten a row group at a time in Arrow (`ShardChunks`)."""

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import polars as pl
from dagster import AssetExecutionContext, multi_asset

from assets.metadata import failures_md
from assets.shards import SHARD_POLICY, run_shards, shard_partitions, specs
from pipeline import memory, schemas
from pipeline.chunking.documents import NODE_COLUMNS, LazyTexts, chunk_units
from pipeline.chunking.units import UnitFrames
from pipeline.compat.columns import set_text_unit_ids
from pipeline.config import ChunkingSettings
from pipeline.failures import failures_frame
from pipeline.storage import shard_files
from pipeline.vectors.texts import embedding_text
from resources import DocgraphConfig, EmbedderResource
from resources.output import run_dir

CHUNK_TABLES = {
    "chunks": "Token-sized chunks inside sections, content-anchored, citing nodes and pages.",
    "chunk_failures": "Documents whose chunking failed: reason, and the fallback they got.",
}
# the units' columns documents.text_unit_ids is made of (pipeline.compat.columns)
UNIT_KEYS = ["id", "document_id", "seq"]
# the documents' columns chunking reads: all but their texts, read (LazyTexts) only for a
# document chunked as plain text
DOCUMENT_COLUMNS = [c for c in schemas.TABLES["documents"].names if c != "text"]


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
        emb = embedder.get() if settings.method == "semantic" else None

        def prefetch(texts: list[str]) -> int:
            # chunk_embeddings runs late (its priority): the worker embeds meanwhile
            return embedder.prefetch(context, texts, "chunk_embeddings")

        work = ShardChunks(run_dir(docgraph, context), settings, emb, prefetch)
        yield from run_shards(context, work.folder, CHUNK_TABLES, work.chunk, work.metadata)

    return chunks


class ShardChunks:
    """The step's work on a shard (`chunk`: its chunks and failures, part by part, for
    run_shards) and its totals (`metadata`); outside the asset so that a benchmark can run
    it on a folder without Dagster."""

    def __init__(
        self,
        folder: Path,
        settings: ChunkingSettings,
        embedder=None,
        prefetch: Callable[[list[str]], int] = lambda texts: 0,
    ):
        self.folder = folder
        self.settings = settings
        self.embedder = embedder  # the semantic method's
        self.prefetch = prefetch
        self.totals = {"tokens_total": 0, "tokens_max": 0, "prefetched": 0}
        self.failed: list[pl.DataFrame] = []

    def chunk(self, key: str) -> Iterator[dict[str, pl.DataFrame]]:
        """The shard's chunks a row group at a time, then its documents file again with
        their text_unit_ids (pipeline.compat.columns: GraphRAG's, known only now)."""
        rows: list[dict] = []
        units = self._units(key, rows)
        self.failed.append(failures_frame(rows, "chunk_failures"))
        keys: list[pl.DataFrame] = []
        yield from self._parts(units, self.failed[-1], keys)
        ids = pl.concat(keys)
        shard_files.rewrite_shard(
            self.folder, "documents", key, lambda docs: set_text_unit_ids(docs, ids)
        )
        memory.release()  # Arrow's pool keeps what reading a huge text took (~0.5 GB)

    def _parts(
        self, units: UnitFrames, failures: pl.DataFrame, keys: list[pl.DataFrame]
    ) -> Iterator[dict[str, pl.DataFrame]]:
        """The units as row groups of the chunks file, the failures with the first (a shard
        without units: its empty tables); each group's UNIT_KEYS into `keys`."""
        for part in _row_groups(units.finished(), shard_files.ROW_GROUP_ROWS):
            keys.append(part.select(UNIT_KEYS))
            self._count(part)
            yield {"chunks": part, "chunk_failures": failures}
            failures = failures.clear()
        if not keys:
            keys.append(schemas.empty("chunks").select(UNIT_KEYS))
            yield {"chunks": schemas.empty("chunks"), "chunk_failures": failures}

    def _units(self, key: str, rows: list[dict]) -> UnitFrames:
        """The shard's units, chunked (pipeline.chunking.documents.chunk_units): the frames
        read here are let go when it returns, the texts read only if one is needed."""
        return chunk_units(
            shard_files.read_shard(self.folder, "documents", key, DOCUMENT_COLUMNS),
            shard_files.read_shard(self.folder, "sections", key),
            shard_files.read_shard(self.folder, "content_nodes", key, NODE_COLUMNS),
            self.settings,
            self.embedder,
            rows,
            LazyTexts(lambda: self._texts(key)),
        )

    def _texts(self, key: str) -> pl.Series:
        return shard_files.read_shard(self.folder, "documents", key, ["text"])["text"]

    def _count(self, part: pl.DataFrame) -> None:
        self.totals["prefetched"] += self.prefetch(embedding_text("text_units", part))
        n_tokens = part.get_column("n_tokens")
        self.totals["tokens_total"] += int(n_tokens.sum() or 0)
        self.totals["tokens_max"] = max(self.totals["tokens_max"], int(n_tokens.max() or 0))

    def metadata(self) -> dict:
        fails = pl.concat(self.failed) if self.failed else failures_frame([], "chunk_failures")
        return {
            **self.totals,
            "method": self.settings.method,
            "failures": failures_md(fails),
        }


def _row_groups(parts: Iterable[pl.DataFrame], rows: int) -> Iterator[pl.DataFrame]:
    """`parts` (in order) joined into frames of `rows` rows, the last one fewer: each is a
    row group of the file, as when the shard's frame was written whole."""
    held: list[pl.DataFrame] = []
    n = 0
    for part in parts:
        while part.height:
            take = part.head(rows - n)
            held.append(take)
            n += take.height
            part = part.slice(take.height)
            if n == rows:
                yield pl.concat(held, rechunk=False)
                held, n = [], 0
    if held:
        yield pl.concat(held, rechunk=False)
