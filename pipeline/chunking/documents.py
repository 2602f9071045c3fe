"""Chunking entry points: documents (with sections and content nodes) in, `text_units` out.

`chunk_structured` picks the chunker by `settings.method` and falls back, per document, to the
plain SimpleChunker over its text; `chunk_documents` is that plain path for a whole frame."""

from __future__ import annotations

import polars as pl

from pipeline import schemas
from pipeline.chunking.semantic import SemanticSmart
from pipeline.chunking.simple import SimpleChunker
from pipeline.chunking.smart import Node, SmartChunker, Tree, node_rows
from pipeline.chunking.units import Unit, id_anchors, source_path, units_frame
from pipeline.config import ChunkingSettings
from pipeline.failures import failure_row


def chunk_documents(documents: pl.DataFrame, settings: ChunkingSettings) -> pl.DataFrame:
    """text_units frame with exactly schemas.TEXT_UNITS columns, ids as in `units_frame`;
    human_readable_id 0..n-1 in (document human_readable_id, seq) order."""
    chunker = SimpleChunker(settings)
    docs = documents.select("id", "human_readable_id", "text").sort("human_readable_id")
    units: list[Unit] = []
    for doc_id, _, text in docs.iter_rows():
        units += [Unit(doc_id, c.text, c.n_tokens, c.pages) for c in chunker.chunk(text or "")]
    return units_frame(units, id_anchors(documents))


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
    "simple" (chunk_documents: the document text alone, no sections).

    A document without content nodes (no structure parsed) falls back to the SimpleChunker
    over its text, with section_id its root section when it has one; so does a document
    whose structured chunking raises, recorded in `failures` (DOCUMENT_FAILURES rows; when
    even its text cannot be chunked it has no units). Output: schemas TEXT_UNITS columns,
    entity/relationship ids empty, ids as in `units_frame`."""
    method = settings.method
    if method == "simple":
        units = chunk_documents(documents, settings)
        if sections.height == 0 or units.height == 0:
            return units
        roots = (
            sections.filter(pl.col("parent_id").is_null())
            .select(pl.col("document_id"), pl.col("id").alias("_root"))
            .unique("document_id", keep="first")
        )
        units = units.join(roots, on="document_id", how="left", maintain_order="left")
        units = units.with_columns(section_id=pl.col("_root"))
        return pl.from_arrow(schemas.conform(units, "text_units"))  # type: ignore[return-value]
    if method == "semantic":
        if embedder is None:
            raise ValueError("chunking method 'semantic' needs an embedder")
        smart: SmartChunker = SemanticSmart(settings, embedder)
    elif method == "smart":
        smart = SmartChunker(settings)
    else:
        raise ValueError(f"unknown chunking method {method!r}")

    docs = documents.sort("human_readable_id")
    # each document's nodes and sections, grouped in one pass over each table (per-document
    # polars calls cost more than the chunking of a short document)
    nodes_by_doc: dict[str, list[Node]] = {}
    if content_nodes.height:
        columns = ["document_id", "id", "section_id", "node_type", "text", "pages"]
        for doc_id, *row in node_rows(content_nodes).select(columns).iter_rows():
            nodes_by_doc.setdefault(doc_id, []).append(Node(*row))
    secs_by_doc: dict[str, list[dict]] = {}
    for sec in sections.select("document_id", "id", "parent_id", "title", "path").iter_rows(
        named=True
    ):
        secs_by_doc.setdefault(sec["document_id"], []).append(sec)
    simple = SimpleChunker(settings)
    work: list[tuple[dict, Tree | None, list[Node] | None]] = []
    for doc in docs.select(pl.col("id", "text"), source_path(docs)).iter_rows(named=True):
        secs = secs_by_doc.get(doc["id"])
        nodes = nodes_by_doc.get(doc["id"])
        if not nodes or secs is None:
            work.append((doc, None, None))
            continue
        work.append((doc, Tree(secs, settings), nodes))
    if isinstance(smart, SemanticSmart):
        smart.prepare([(t, n) for _, t, n in work if t is not None])  # type: ignore[misc]
    units: list[Unit] = []
    for doc, tree, nodes in work:
        root = _root_id(secs_by_doc.get(doc["id"]))
        try:
            if tree is None or nodes is None:
                units += _plain_units(simple, doc, root)
            else:
                units += smart.chunk_document(doc["id"], tree, nodes)
            continue
        except Exception as exc:  # noqa: BLE001 - this document falls back, the run goes on
            row = failure_row(doc, "chunking", exc, "plain paragraphs", f"{method} chunking")
        try:
            units += _plain_units(simple, doc, root)
        except Exception as exc:  # noqa: BLE001 - recorded; the document has no units
            row = failure_row(doc, "chunking", exc, "none", "plain chunking")
        if failures is not None:
            failures.append(row)
    return units_frame(units, id_anchors(documents))


def _root_id(sections: list[dict] | None) -> str | None:
    return next((s["id"] for s in sections or () if s["parent_id"] is None), None)


def _plain_units(chunker: SimpleChunker, doc: dict, root_id: str | None) -> list[Unit]:
    """The document's text alone (paragraph/sentence cuts), its units in its root section."""
    chunks = chunker.chunk(doc["text"] or "")
    return [Unit(doc["id"], c.text, c.n_tokens, c.pages, root_id) for c in chunks]
