"""Chunking entry points: documents (with sections and content nodes) in, `text_units` out.

`chunk_structured` picks the chunker by `settings.method` and falls back, per document, to the
plain SimpleChunker over its text; `chunk_units` gives its units a frame part at a time (the
chunks step writes each as it comes, one huge document being one shard); `chunk_documents`
is the plain path for a whole frame."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.chunking.semantic import SemanticSmart
from pipeline.chunking.simple import SimpleChunker
from pipeline.chunking.smart import (
    NODE_INPUTS,
    Node,
    Nodes,
    SmartChunker,
    Tree,
    node_columns,
    node_text,
)
from pipeline.chunking.units import Unit, UnitFrames, id_anchors, narrow, source_path
from pipeline.config import ChunkingSettings
from pipeline.failures import failure_row
from pipeline.structure.images import without_data

# Content nodes read from the frame at once: at most this many nodes and bytes of text (a
# few thousand Node objects, a few MB). A document with more is read a batch at a time by
# its chunker (`FrameNodes`); smaller ones are read together, one frame call for many.
READ_NODES = 8192
READ_BYTES = 8 << 20
# The content_nodes columns chunking reads: a node's fields and its place in reading order
# (`_reading_order`); a shard's reader need not load the others.
NODE_COLUMNS = [*NODE_INPUTS, "seq_major", "seq_minor"]


def chunk_documents(documents: pl.DataFrame, settings: ChunkingSettings) -> pl.DataFrame:
    """text_units frame with exactly schemas.TEXT_UNITS columns, ids as in `units_frame`;
    human_readable_id 0..n-1 in (document human_readable_id, seq) order; no section."""
    simple = settings.model_copy(update={"method": "simple"})
    nothing = schemas.empty("sections"), schemas.empty("content_nodes")
    return chunk_units(documents, *nothing, simple).frame()


def chunk_structured(
    documents: pl.DataFrame,
    sections: pl.DataFrame,
    content_nodes: pl.DataFrame,
    settings: ChunkingSettings,
    embedder=None,
    failures: list[dict] | None = None,
) -> pl.DataFrame:
    """Text units of the documents by `settings.method`: "smart" (default; SmartChunker),
    "semantic" (SmartChunker's structure with SemanticChunker cuts; needs `embedder`) or
    "simple" (the document text alone, chunk_documents' units, each in its root section).

    A document without content nodes (no structure parsed) falls back to the SimpleChunker
    over its text, with section_id its root section when it has one; so does a document
    whose structured chunking raises, recorded in `failures` (DOCUMENT_FAILURES rows; when
    even its text cannot be chunked it has no units). Output: schemas TEXT_UNITS columns,
    entity/relationship ids empty, ids as in `units_frame`.

    Memory: documents are read and chunked one at a time, a large one's nodes a batch at a
    time (READ_NODES), and units become frame parts as they come, so a huge document costs
    its output and a bounded working set (smart and simple; semantic embeds every sentence
    of the shard up front, so it holds them all). `chunk_units` gives the parts one by one."""
    return chunk_units(documents, sections, content_nodes, settings, embedder, failures).frame()


def chunk_units(
    documents: pl.DataFrame,
    sections: pl.DataFrame,
    content_nodes: pl.DataFrame,
    settings: ChunkingSettings,
    embedder=None,
    failures: list[dict] | None = None,
    texts: Texts | None = None,
) -> UnitFrames:
    """`chunk_structured`'s units, chunked but not finished: `.finished()` hands them out a
    frame part at a time (the chunks step writes each as it comes), `.frame()` whole. It
    keeps nothing of `content_nodes`. `texts`: the documents' texts by row when `documents`
    has no text column (`LazyTexts`: read only if a document is chunked as plain text)."""
    texts = documents.get_column("text") if texts is None else texts
    docs = _in_order(documents)
    secs_by_doc: dict[str, list[dict]] = {}
    for sec in sections.select("document_id", "id", "parent_id", "title", "path").iter_rows(
        named=True
    ):
        secs_by_doc.setdefault(sec["document_id"], []).append(sec)
    out = UnitFrames(id_anchors(documents))
    if settings.method == "simple":
        simple = SimpleChunker(settings)
        for doc in docs.iter_rows(named=True):
            root = _root_id(secs_by_doc.get(doc["id"]))
            out.extend(_plain_units(simple, doc, texts[doc["_row"]], root))
        return out
    smart = _smart_chunker(settings, embedder)
    work = _work(docs, content_nodes, secs_by_doc, settings)
    _chunk_each(smart, work, secs_by_doc, texts, settings, out, failures)
    return out


class LazyTexts:
    """The documents' texts by row, read (`load`) when one is first asked for: a shard
    whose documents all have content nodes never reads them (one huge document's text is
    150 MB, what its content nodes hold again)."""

    def __init__(self, load: Callable[[], pl.Series]):
        self._load = load
        self._texts: pl.Series | None = None

    def __getitem__(self, row: int) -> str | None:
        if self._texts is None:
            self._texts = self._load()
        return self._texts[row]


# the documents' texts by row: their frame's column or LazyTexts
Texts = pl.Series | LazyTexts


def _smart_chunker(settings: ChunkingSettings, embedder) -> SmartChunker:
    method = settings.method
    if method == "semantic":
        if embedder is None:
            raise ValueError("chunking method 'semantic' needs an embedder")
        return SemanticSmart(settings, embedder)
    if method == "smart":
        return SmartChunker(settings)
    raise ValueError(f"unknown chunking method {method!r}")


def _chunk_each(
    smart: SmartChunker,
    work: Iterable[tuple[dict, Tree | None, list[Node] | Nodes | None]],
    secs_by_doc: dict[str, list[dict]],
    texts: Texts,
    settings: ChunkingSettings,
    out: UnitFrames,
    failures: list[dict] | None,
) -> None:
    """Each document's units into `out`: structured, or plain text (no structure, or its
    structured chunking raised: a failure row then)."""
    if isinstance(smart, SemanticSmart):
        work = list(work)  # every sentence of the shard is embedded up front
        smart.prepare([(t, n) for _, t, n in work if t is not None and n is not None])
    simple = SimpleChunker(settings)
    method = settings.method
    for doc, tree, nodes in work:
        root = _root_id(secs_by_doc.get(doc["id"]))
        mark = out.mark()
        try:
            if tree is None or nodes is None:
                out.extend(_plain_units(simple, doc, texts[doc["_row"]], root))
            else:
                out.extend(smart.chunk_document(doc["id"], tree, nodes))
            continue
        except Exception as exc:  # noqa: BLE001 - this document falls back, the run goes on
            out.rollback(mark)
            row = failure_row(doc, "chunking", exc, "plain paragraphs", f"{method} chunking")
        try:
            out.extend(_plain_units(simple, doc, texts[doc["_row"]], root))
        except Exception as exc:  # noqa: BLE001 - recorded; the document has no units
            out.rollback(mark)
            row = failure_row(doc, "chunking", exc, "none", "plain chunking")
        if failures is not None:
            failures.append(row)


def _in_order(documents: pl.DataFrame) -> pl.DataFrame:
    """id, source_path and row number in `documents` of each document, in
    human_readable_id order: the texts stay in the frame (a sorted copy of a huge text is
    what a document costs twice), each read when its document is chunked."""
    docs = narrow(documents, "id", "human_readable_id", "source_path")
    return docs.select(
        "id",
        "human_readable_id",
        source_path(docs),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
    ).sort("human_readable_id")


def _root_id(sections: list[dict] | None) -> str | None:
    return next((s["id"] for s in sections or () if s["parent_id"] is None), None)


def _plain_units(
    chunker: SimpleChunker, doc: dict, text: str | None, root_id: str | None
) -> Iterator[Unit]:
    """The document's text alone (paragraph/sentence cuts), its units in its root section."""
    for c in chunker.iter_chunks(without_data(text or "")):  # no base64 payload as text
        yield Unit(doc["id"], c.text, c.n_tokens, c.pages, root_id)


# -- reading the content nodes ---------------------------------------------------------------
def _work(
    docs: pl.DataFrame,
    content_nodes: pl.DataFrame,
    secs_by_doc: dict[str, list[dict]],
    settings: ChunkingSettings,
) -> Iterator[tuple[dict, Tree | None, list[Node] | Nodes | None]]:
    """(document, its section tree, its nodes) in docs' order; tree and nodes None for a
    document to chunk as plain text (no nodes, or no sections). Small documents' nodes are
    read together into lists, a large one's stay in the frame (FrameNodes)."""
    rows, sizes, ranges = _reading_order(docs, content_nodes)
    batch: list[tuple[dict, list[dict] | None, int, int]] = []
    held = [0, 0]  # nodes and bytes of the batch
    for k, doc in enumerate(docs.select("id", "source_path", "_row").iter_rows(named=True)):
        secs = secs_by_doc.get(doc["id"])
        lo, hi = ranges.get(k, (0, 0))
        if lo == hi or secs is None:
            lo = hi  # plain text: no node to read
        n_bytes = int(sizes[lo:hi].sum())
        if held[0] + hi - lo > READ_NODES or held[1] + n_bytes > READ_BYTES:
            yield from _read_batch(content_nodes, rows, batch, settings)
            batch, held = [], [0, 0]
        if hi - lo > READ_NODES or n_bytes > READ_BYTES:
            yield doc, Tree(secs, settings), FrameNodes(content_nodes, rows[lo:hi], sizes[lo:hi])
            continue
        batch.append((doc, secs, lo, hi))
        held = [held[0] + hi - lo, held[1] + n_bytes]
    yield from _read_batch(content_nodes, rows, batch, settings)


def _reading_order(
    docs: pl.DataFrame, content_nodes: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[int, int]]]:
    """Row numbers of content_nodes in (document in docs' order, reading order), their
    texts' sizes in bytes, and each document's range (by its position in docs) of them."""
    if content_nodes.height == 0:
        return np.zeros(0, np.uint32), np.zeros(0, np.int64), {}
    rank = docs.select(
        pl.col("id").alias("document_id"), pl.int_range(pl.len(), dtype=pl.Int64).alias("_rank")
    )
    keys = (
        content_nodes.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"),
            "document_id",
            "seq_major",
            "seq_minor",
            "id",
            pl.col("text").str.len_bytes().fill_null(0).alias("_bytes"),
        )
        .join(rank, on="document_id")
        .sort("_rank", "seq_major", "seq_minor", "id")
    )
    runs = keys.select(pl.col("_rank").rle()).unnest("_rank")
    ends = np.cumsum(runs["len"].to_numpy())
    ranges = {
        int(r): (int(e - n), int(e))
        for r, n, e in zip(runs["value"].to_numpy(), runs["len"].to_numpy(), ends, strict=True)
    }
    return keys["_row"].to_numpy(), keys["_bytes"].to_numpy().astype(np.int64), ranges


def _read_batch(
    content_nodes: pl.DataFrame,
    rows: np.ndarray,
    batch: list[tuple[dict, list[dict] | None, int, int]],
    settings: ChunkingSettings,
) -> Iterator[tuple[dict, Tree | None, list[Node] | None]]:
    """The documents of `batch` with their nodes as lists, read in one frame call."""
    if not batch:
        return
    wanted = np.concatenate([rows[lo:hi] for _, _, lo, hi in batch])
    nodes = _read_nodes(content_nodes, wanted)
    at = 0
    for doc, secs, lo, hi in batch:
        if lo == hi:
            yield doc, None, None
            continue
        yield doc, Tree(secs, settings), nodes[at : at + hi - lo]
        at += hi - lo


def _read_nodes(content_nodes: pl.DataFrame, rows: np.ndarray) -> list[Node]:
    if not len(rows):
        return []
    part = node_columns(content_nodes.select(pl.col(NODE_INPUTS).gather(pl.Series(rows))))
    columns = ["id", "section_id", "node_type", "text", "pages"]
    return [Node(*row) for row in part.select(columns).iter_rows()]


class FrameNodes:
    """A large document's content nodes, read from the frame a batch at a time (READ_NODES,
    READ_BYTES): `rows` are their row numbers in reading order, `sizes` their texts' bytes.
    The last batch read is kept: groups are read in order, many of them in one batch."""

    def __init__(self, content_nodes: pl.DataFrame, rows: np.ndarray, sizes: np.ndarray):
        self.frame = content_nodes
        self.rows = rows
        self.sizes = sizes
        self._at = (0, 0)  # the nodes of self._nodes
        self._nodes: list[Node] = []

    def sections_and_texts(self) -> Iterator[tuple[str, str]]:
        lo = 0
        while lo < len(self.rows):
            hi = self._batch_end(lo)
            rows = pl.Series(self.rows[lo:hi])
            part = self.frame.select(pl.col("section_id", "text").gather(rows))
            yield from part.select("section_id", node_text()).iter_rows()
            lo = hi

    def read(self, start: int, stop: int) -> Iterator[Node]:
        pos = start
        while pos < stop:
            lo, hi = self._at
            if not lo <= pos < hi:
                lo, hi = self._at = (pos, self._batch_end(pos))
                self._nodes = _read_nodes(self.frame, self.rows[lo:hi])
            end = min(stop, hi)
            yield from self._nodes[pos - lo : end - lo]
            pos = end

    def _batch_end(self, lo: int) -> int:
        """End of the batch from node lo: at most READ_NODES nodes and READ_BYTES bytes (a
        larger node alone)."""
        ends = np.cumsum(self.sizes[lo : lo + READ_NODES])
        return lo + max(1, int(np.searchsorted(ends, READ_BYTES, side="right")))
