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
from assets.shards import SHARD_POLICY, run_shards, shard_carry, shard_partitions, specs
from pipeline import memory, schemas
from pipeline.chunking.documents import NODE_COLUMNS, LazyTexts, chunk_units
from pipeline.chunking.units import UnitFrames
from pipeline.compat.columns import set_text_unit_ids
from pipeline.config import ChunkingSettings
from pipeline.failures import failures_frame
from pipeline.storage import shard_files
from pipeline.storage.carry import Carry, base_rows, keyed, merge_in_order
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
            # chunk_embeddings waits for them beside the other steps: the worker embeds meanwhile
            return embedder.prefetch(context, texts, "chunk_embeddings")

        carry = shard_carry(context, docgraph.settings())
        work = ShardChunks(run_dir(docgraph, context), settings, emb, prefetch, carry)
        yield from run_shards(context, work.folder, CHUNK_TABLES, work.chunk, work.metadata, carry)

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
        carry: Carry | None = None,
    ):
        self.folder = folder
        self.carry = carry  # the base version's units of unchanged documents
        self.settings = settings
        self.embedder = embedder  # the semantic method's
        self.prefetch = prefetch
        self.totals = {"tokens_total": 0, "tokens_max": 0, "prefetched": 0}
        self.failed: list[pl.DataFrame] = []

    def chunk(self, key: str) -> Iterator[dict[str, pl.DataFrame]]:
        """The shard's chunks a row group at a time, then its documents file again with
        their text_unit_ids (pipeline.compat.columns: GraphRAG's, known only now). The
        documents the base version holds (`carry`) keep its chunks: the others are chunked."""
        rows: list[dict] = []
        docs = shard_files.read_shard(self.folder, "documents", key, DOCUMENT_COLUMNS)
        kept = self.carry.kept(key, docs.get_column("id")) if self.carry else set()
        if kept:
            parts, failures = self._carried(key, docs, kept, rows)
        else:
            if self.carry is not None:
                self.carry.count_keys(0, docs.height)
            parts = self._units(key, docs, rows).finished()
            failures = failures_frame(rows, "chunk_failures")
        self.failed.append(failures)
        keys: list[pl.DataFrame] = []
        yield from self._parts(parts, failures, keys, prefetch=not kept)
        ids = pl.concat(keys)
        shard_files.rewrite_shard(
            self.folder, "documents", key, lambda docs: set_text_unit_ids(docs, ids)
        )
        memory.release()  # Arrow's pool keeps what reading a huge text took (~0.5 GB)

    def _parts(
        self,
        units: Iterable[pl.DataFrame],
        failures: pl.DataFrame,
        keys: list[pl.DataFrame],
        prefetch: bool = True,
    ) -> Iterator[dict[str, pl.DataFrame]]:
        """The units as row groups of the chunks file, the failures with the first (a shard
        without units: its empty tables); each group's UNIT_KEYS into `keys`."""
        for part in _row_groups(units, shard_files.ROW_GROUP_ROWS):
            keys.append(part.select(UNIT_KEYS))
            self._count(part, prefetch)
            yield {"chunks": part, "chunk_failures": failures}
            failures = failures.clear()
        if not keys:
            keys.append(schemas.empty("chunks").select(UNIT_KEYS))
            yield {"chunks": schemas.empty("chunks"), "chunk_failures": failures}

    def _units(self, key: str, docs: pl.DataFrame, rows: list[dict]) -> UnitFrames:
        """The shard's units, chunked (pipeline.chunking.documents.chunk_units): the frames
        read here are let go when it returns, the texts read only if one is needed."""
        return chunk_units(
            docs,
            shard_files.read_shard(self.folder, "sections", key),
            shard_files.read_shard(self.folder, "content_nodes", key, NODE_COLUMNS),
            self.settings,
            self.embedder,
            rows,
            LazyTexts(lambda: self._texts(key)),
        )

    def _carried(
        self, key: str, docs: pl.DataFrame, kept: set[str], rows: list[dict]
    ) -> tuple[list[pl.DataFrame], pl.DataFrame]:
        """The shard's units and failures: the base's of the `kept` documents, the others'
        chunked now (their texts prefetched for chunk_embeddings), in a full run's order."""
        assert self.carry is not None
        todo = ~pl.col("id").is_in(list(kept))
        mask = docs.select(todo).to_series()
        fresh_of = ~pl.col("document_id").is_in(list(kept))
        units = chunk_units(
            docs.filter(mask),
            shard_files.read_shard(self.folder, "sections", key).filter(fresh_of),
            shard_files.read_shard(self.folder, "content_nodes", key, NODE_COLUMNS).filter(
                fresh_of
            ),
            self.settings,
            self.embedder,
            rows,
            LazyTexts(lambda: self._texts(key).filter(mask)),
        ).frame()
        self.totals["prefetched"] += self.prefetch(embedding_text("text_units", units))
        order = docs.sort("human_readable_id").get_column("id")
        self.carry.count_keys(len(kept), docs.height - len(kept))
        fresh = {"chunks": units, "chunk_failures": failures_frame(rows, "chunk_failures")}
        merged = {
            name: merge_in_order(
                name,
                order,
                base_rows(self.carry, name, key, "document_id", kept),
                keyed(frame, "document_id"),
            )
            for name, frame in fresh.items()
        }
        return [merged["chunks"]], merged["chunk_failures"]

    def _texts(self, key: str) -> pl.Series:
        return shard_files.read_shard(self.folder, "documents", key, ["text"])["text"]

    def _count(self, part: pl.DataFrame, prefetch: bool = True) -> None:
        if prefetch:
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
