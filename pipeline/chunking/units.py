"""Text units of documents as the `text_units` table, and the ids that keep them stable.

Every chunker ends here: a unit's id hashes its document's anchor (its relative path), its text
and the occurrence of that text in the document, so a unit an edit left alone keeps its id
(and its cached LLM calls and embeddings)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline import schemas
from pipeline.ids import stable_id_expr


def id_anchors(documents: pl.DataFrame) -> dict[str, str]:
    """document id -> what its unit ids are anchored to: its relative path, which an edit
    keeps (the id, the hash of its bytes, changes), or the id when there is no path."""
    path = source_path(documents)
    rows = documents.select("id", pl.coalesce(path, pl.col("id")).alias("anchor")).iter_rows()
    return dict(rows)


def source_path(docs: pl.DataFrame) -> pl.Expr:
    return pl.col("source_path") if "source_path" in docs.columns else pl.lit(None, pl.Utf8)


@dataclass(frozen=True)
class Unit:
    document_id: str
    text: str
    n_tokens: int
    pages: list[int]
    section_id: str | None = None
    content_node_ids: tuple[str, ...] = ()


def units_frame(units: list[Unit], anchors: dict[str, str]) -> pl.DataFrame:
    """Units (in document, then reading order) as a text_units frame: id = stable_id(anchor
    of the document (`id_anchors`), text, occurrence of that text in the document), so a unit
    whose text an edit left alone keeps its id; seq per document, human_readable_id in the
    given order."""
    if not units:
        return schemas.empty("text_units")
    df = pl.DataFrame(
        {
            "document_id": [u.document_id for u in units],
            "anchor": [anchors.get(u.document_id, u.document_id) for u in units],
            "text": [u.text for u in units],
            "n_tokens": [u.n_tokens for u in units],
            "pages": [u.pages for u in units],
            "section_id": [u.section_id for u in units],
            "content_node_ids": [list(u.content_node_ids) for u in units],
        },
        schema_overrides={
            "pages": pl.List(pl.Int64),
            "n_tokens": pl.Int64,
            "section_id": pl.Utf8,
            "content_node_ids": pl.List(pl.Utf8),
        },
    )
    # A text repeated verbatim inside one document (boilerplate, a book pasted twice) is kept
    # every time: its occurrence number keeps the ids unique.
    occurrence = pl.int_range(pl.len(), dtype=pl.Int64).over("document_id", "text")
    df = df.with_columns(
        seq=pl.int_range(pl.len(), dtype=pl.Int64).over("document_id"),
        id=stable_id_expr("anchor", "text", occurrence),
        human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64),
        entity_ids=pl.lit([], dtype=pl.List(pl.Utf8)),
        relationship_ids=pl.lit([], dtype=pl.List(pl.Utf8)),
    )
    return pl.from_arrow(schemas.conform(df, "text_units"))  # type: ignore[return-value]
