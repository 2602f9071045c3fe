"""Text units of documents as the `text_units` table, and the ids that keep them stable.

Every chunker ends here: a unit's id hashes its document's anchor (its relative path), its text
and the occurrence of that text in the document, so a unit an edit left alone keeps its id
(and its cached LLM calls and embeddings)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import polars as pl

from pipeline import schemas
from pipeline.ids import stable_id_expr


def id_anchors(documents: pl.DataFrame) -> dict[str, str]:
    """document id -> what its unit ids are anchored to: its relative path, which an edit
    keeps (the id, the hash of its bytes, changes), or the id when there is no path."""
    docs = narrow(documents, "id", "source_path")
    rows = docs.select("id", pl.coalesce(source_path(docs), pl.col("id")).alias("anchor"))
    return dict(rows.iter_rows())


def narrow(documents: pl.DataFrame, *columns: str) -> pl.DataFrame:
    """The documents' `columns` (those it has) without their texts. A `select` on the whole
    frame costs twice its largest column for a moment (polars 2.1: +76 MB over a 38 MB
    text), as much as chunking that document; picking columns first costs nothing."""
    return documents[[c for c in columns if c in documents.columns]]


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


# Units turned into a frame part at a time: a huge document's units are never all Python
# objects at once (4,096 units are ~5 MB of text).
UNITS_PER_PART = 4096


class UnitFrames:
    """Text units collected into frame parts of UNITS_PER_PART as they come, then one
    text_units frame (`frame`). `mark` / `rollback` take back a document's units when its
    chunking fails half-way."""

    def __init__(self, anchors: dict[str, str]):
        self.anchors = anchors
        self.parts: list[pl.DataFrame] = []
        self.pending: list[Unit] = []

    def extend(self, units: Iterable[Unit]) -> None:
        for unit in units:
            self.pending.append(unit)
            if len(self.pending) >= UNITS_PER_PART:
                self.parts.append(_columns(self.pending, self.anchors))
                self.pending = []

    def mark(self) -> tuple[int, int]:
        return len(self.parts), len(self.pending)

    def rollback(self, mark: tuple[int, int]) -> None:
        """Drop every unit added since `mark`."""
        parts, pending = mark
        if len(self.parts) == parts:
            del self.pending[pending:]
            return
        self.parts[parts] = self.parts[parts].head(pending)
        del self.parts[parts + 1 :]
        self.pending = []

    def finished(self) -> Iterator[pl.DataFrame]:
        """The text_units frame a part at a time, in order (nothing when there are no units):
        each part is finished and let go in turn, so the units' texts are held about once,
        not twice, and a caller that writes each part as it comes never holds them all
        finished. The numbers (occurrence, seq, human_readable_id) count over every part."""
        if self.pending:
            self.parts.append(_columns(self.pending, self.anchors))
            self.pending = []
        if not self.parts:
            return
        numbers = _numbers(pl.concat([p.select("document_id", "_digest") for p in self.parts]))
        at = 0
        while self.parts:
            part = self.parts.pop(0)
            at += part.height
            yield _finish(part, numbers.slice(at - part.height, part.height))

    def frame(self) -> pl.DataFrame:
        """The text_units frame: `finished`'s parts together."""
        out = list(self.finished())
        return pl.concat(out, rechunk=False) if out else schemas.empty("text_units")


def units_frame(units: list[Unit], anchors: dict[str, str]) -> pl.DataFrame:
    """Units (in document, then reading order) as a text_units frame: id = stable_id(anchor
    of the document (`id_anchors`), text, occurrence of that text in the document), so a unit
    whose text an edit left alone keeps its id; seq per document, human_readable_id in the
    given order."""
    frames = UnitFrames(anchors)
    frames.extend(units)
    return frames.frame()


def _columns(units: list[Unit], anchors: dict[str, str]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "document_id": [u.document_id for u in units],
            "anchor": [anchors.get(u.document_id, u.document_id) for u in units],
            "text": [u.text for u in units],
            "n_tokens": [u.n_tokens for u in units],
            "pages": [u.pages for u in units],
            "section_id": [u.section_id for u in units],
            "content_node_ids": [list(u.content_node_ids) for u in units],
            "_digest": [_digest(u.text) for u in units],
        },
        schema_overrides={
            "pages": pl.List(pl.Int64),
            "n_tokens": pl.Int64,
            "section_id": pl.Utf8,
            "content_node_ids": pl.List(pl.Utf8),
            "_digest": pl.Binary,
        },
    )


def _digest(text: str) -> bytes:
    """What equal texts share: the occurrence of a text is counted by its digest (grouping
    the frame by the texts themselves copies them all; 128 bits never collide in practice)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _numbers(keys: pl.DataFrame) -> pl.DataFrame:
    """Each unit's occurrence of its text in its document, seq in its document, and
    human_readable_id, from (document_id, _digest) in order."""
    # A text repeated verbatim inside one document (boilerplate, a book pasted twice) is kept
    # every time: its occurrence number keeps the ids unique.
    return keys.select(
        _occurrence=pl.int_range(pl.len(), dtype=pl.Int64).over("document_id", "_digest"),
        seq=pl.int_range(pl.len(), dtype=pl.Int64).over("document_id"),
        human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64),
    )


def _finish(part: pl.DataFrame, numbers: pl.DataFrame) -> pl.DataFrame:
    """A part with its ids and numbers, as the text_units schema."""
    part = part.hstack(numbers).with_columns(
        id=stable_id_expr("anchor", "text", "_occurrence"),
        entity_ids=pl.lit([], dtype=pl.List(pl.Utf8)),
        relationship_ids=pl.lit([], dtype=pl.List(pl.Utf8)),
    )
    return pl.from_arrow(schemas.conform(part, "text_units"))  # type: ignore[return-value]
