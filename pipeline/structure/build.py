"""Documents to structure tables: each document parsed by its format's parser (with the
plain-text fallback when that raises, recorded as a `structure_failures` row), or taken as
the documents step parsed it (a PDF: `pipeline.pdf.once`, its file not read again), its
cross-references added, links between documents resolved or collected, and the rows
gathered into the sections, content_nodes and structure_edges frames."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import schemas
from pipeline.config import StructureSettings
from pipeline.failures import failure_row
from pipeline.ids import sha256_hex
from pipeline.lazy import deferred
from pipeline.storage.carry import KEY, PASS, Carry, keyed, merge_in_order
from pipeline.structure import markdown, notebook_sections  # noqa: F401  (register their parsers)
from pipeline.structure.model import DocStructure
from pipeline.structure.parsers import PARSERS
from pipeline.structure.text import parse_text

# pipeline/pdf/parse.py registers itself too, when imported: pymupdf loads with the first PDF
PARSERS.setdefault("application/pdf", deferred("pipeline.pdf.parse", "parse_pdf"))


def _plain(doc: dict[str, Any], _: bytes | None, __: Any = None) -> DocStructure:
    return parse_text(doc["id"], doc["source_path"], doc["title"], doc["text"] or "")


def _raw_bytes(doc: dict[str, Any], input_dir: Path | None) -> bytes | None:
    """The document's file, if it is still the one that was loaded (same sha256)."""
    if input_dir is None:
        return None
    path = input_dir / doc["source_path"]
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if sha256_hex(data) == doc["sha256"] else None


def parse_document(
    doc: dict[str, Any],
    input_dir: Path | None,
    settings: StructureSettings | None = None,
    failures: list[dict[str, Any]] | None = None,
    parsed: Mapping[str, DocStructure] | None = None,
) -> DocStructure:
    """The document's structure: as the documents step parsed it (`parsed`, by document
    id), else by its format's parser; when that raises, its plain-text structure, and when
    even that raises, the root section alone (chunking then reads the document's text).
    Each fallback is a row appended to `failures`."""
    parser = PARSERS.get(doc["mime_type"], _plain)
    done = parsed.get(doc["id"]) if parsed else None
    # plain text and a parse handed over read no file
    raw = None if parser is _plain or done is not None else _raw_bytes(doc, input_dir)
    try:
        out = done if done is not None else parser(doc, raw, settings or StructureSettings())
        if failures is not None:  # parts of the document the parser had to leave out
            failures.extend(_part_failure(doc, why, fallback) for why, fallback in out.failures)
        return out
    except Exception as exc:  # noqa: BLE001 - fall back, keep the reason
        what = f"{doc['mime_type']} parser"
        row = failure_row(doc, "structure", exc, "plain paragraphs", what)
    try:
        fallback = _plain(doc, None)
    except Exception as exc:  # noqa: BLE001 - the text alone, chunked without structure
        row = failure_row(doc, "structure", exc, "document text, no structure", what)
        fallback = DocStructure(doc["id"], doc["source_path"], doc["title"] or "")
    fallback.warnings.append(f"structure parser failed ({row['reason']})")
    if failures is not None:
        failures.append(row)
    return fallback


def _part_failure(doc: dict[str, Any], why: str, fallback: str) -> dict[str, Any]:
    """A DOCUMENT_FAILURES row for a part of a parsed document (`DocStructure.failures`)."""
    row = {"document_id": doc.get("id"), "source_path": doc.get("source_path")}
    return {**row, "stage": "structure", "reason": why, "fallback": fallback}


CROSS = "CROSS_REFERENCES"


def _cross_references(doc: DocStructure, failures: list[dict[str, Any]] | None) -> list:
    from pipeline.structure.crossrefs import cross_references

    try:
        found = cross_references(doc)
    except Exception as exc:  # noqa: BLE001 - the document keeps its other edges
        row = {"id": doc.document_id, "source_path": doc.source_path}
        if failures is not None:
            failures.append(failure_row(row, "structure", exc, "no cross-references"))
        doc.warnings.append("cross-references failed")
        return []
    # a PDF's links made some already (pipeline.pdf.build.annotations)
    linked = {(e["source_id"], e["target_id"]) for e in doc.edges if e["type"] == CROSS}
    return [e for e in found if (e["source_id"], e["target_id"]) not in linked]


def _rows(documents: pl.DataFrame) -> Iterator[dict[str, Any]]:
    """The documents as dicts, each text converted when its row is reached: as one Python
    string (`iter_rows` held a second copy meanwhile: +250 MB for a 151 MB text)."""
    texts = documents.get_column("text")
    for i, row in enumerate(documents.drop("text").iter_rows(named=True)):
        yield {**row, "text": texts[i]}


# Rows made a frame at a time, the dicts of each freed as it is made: a huge document's
# 618k content nodes were held as dicts, Arrow and polars at once (+0.5 GB)
FRAME_ROWS = 16_384


def _frame(rows: list[dict[str, Any]], name: str) -> pl.DataFrame:
    """The rows (emptied: this consumes them) as table `name`'s frame."""
    schema = schemas.TABLES[name]
    numbered = name != "structure_edges"
    parts, done = [], 0
    while rows or not parts:
        part = rows[:FRAME_ROWS]
        del rows[:FRAME_ROWS]
        if numbered:
            for i, row in enumerate(part, start=done):
                row["human_readable_id"] = i
        parts.append(pl.from_arrow(schemas.pa.Table.from_pylist(part, schema=schema)))
        done += len(part)
    return pl.concat(parts, rechunk=False)  # type: ignore[arg-type]


@dataclass
class BuiltStructure:
    """The structure of a set of documents, in one value: the three tables; each document's
    warnings (by source_path); the parsers' run statistics summed (e.g. PDF parse and
    table-detection seconds); the fallbacks taken (DOCUMENT_FAILURES rows); and, for one
    shard of a corpus, its links between documents (DOCUMENT_LINKS rows) for
    `links.resolve_link_table` to resolve once every shard is parsed."""

    sections: pl.DataFrame
    content_nodes: pl.DataFrame
    structure_edges: pl.DataFrame
    warnings: dict[str, list[str]] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tables(self) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """(sections, content_nodes, structure_edges)."""
        return self.sections, self.content_nodes, self.structure_edges


def build_structure(
    documents: pl.DataFrame,
    input_dir: str | Path | None = None,
    settings: StructureSettings | None = None,
    resolve_links: bool = True,
    parsed: Mapping[str, DocStructure] | None = None,
) -> BuiltStructure:
    """Each document parsed (pipeline.structure.parsers) or taken from `parsed` (by
    document id: the documents step's PDF parses), with its cross-references. Links
    between documents are resolved among `documents` into edges, or, with
    `resolve_links=False` (one shard of a corpus), returned as rows in `links`."""
    from pipeline.structure.links import link_rows
    from pipeline.structure.links import resolve_links as resolve

    root = Path(input_dir) if input_dir is not None else None
    failures: list[dict[str, Any]] = []
    docs = [parse_document(d, root, settings, failures, parsed) for d in _rows(documents)]
    links = [] if resolve_links else link_rows(docs)
    link_edges = resolve(docs) if resolve_links else []
    sections = [s for d in docs for s in d.sections]
    nodes = [n for d in docs for n in d.nodes]
    edges = [e for d in docs for e in (*d.edges, *_cross_references(d, failures))] + link_edges
    for d in docs:  # `nodes` holds them now: _frame frees them as it goes
        d.nodes = []
    stats: dict[str, float] = {}
    for d in docs:
        for key, value in d.stats.items():
            stats[key] = stats.get(key, 0.0) + value
    return BuiltStructure(
        _frame(sections, "sections"),
        _frame(nodes, "content_nodes"),
        _frame(edges, "structure_edges"),
        warnings={d.source_path: d.warnings for d in docs if d.warnings},
        stats=stats,
        failures=failures,
        links=links,
    )


# The tables of a shard's structure (the structure step's); the fallback of the failures
# `build_structure` writes after every document's parse: those of cross-references.
SHARD_TABLES = ("sections", "content_nodes", "document_edges", "document_links")
FAILURES = "structure_failures"
CROSS_FALLBACK = "no cross-references"


def carry_structure(
    carry: Carry,
    shard: str,
    documents: pl.DataFrame,
    build: Callable[[pl.DataFrame], dict[str, pl.DataFrame]],
) -> dict[str, pl.DataFrame]:
    """Shard `shard`'s structure tables as `build(documents)` makes them, built only for the
    documents the base version lacks: the others' rows are the base's (pipeline.storage.carry;
    a document's structure depends on its file and the settings alone: links between
    documents are resolved later, over every shard)."""
    kept = carry.kept(shard, documents.get_column("id"))
    base = _keyed_tables({t: carry.base_shard(t, shard) for t in (*SHARD_TABLES, FAILURES)})
    if kept and base["document_edges"].get_column(KEY).null_count():
        carry.whole[shard] = "an edge of the base starts at no section or node"
        kept = set()
    if not kept:
        carry.count_keys(0, documents.height)
        return build(documents)
    fresh = _keyed_tables(build(documents.filter(~pl.col("id").is_in(list(kept)))))
    out = {}
    for name, rows in base.items():
        rows = rows.filter(pl.col(KEY).is_in(list(kept)))
        carry.count(name, rows.height)
        out[name] = merge_in_order(name, documents.get_column("id"), rows, fresh[name])
    carry.count_keys(len(kept), documents.height - len(kept))
    return out


def _keyed_tables(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """A shard's structure tables, each row keyed by its document (an edge by its source's:
    a section or a content node), the failures by pass (cross-references last)."""
    edges = tables["document_edges"]
    out = {name: keyed(tables[name], "document_id") for name in tables if name != "document_edges"}
    passes = (pl.col("fallback") == CROSS_FALLBACK).fill_null(False).cast(pl.Int8)
    out[FAILURES] = out[FAILURES].with_columns(passes.alias(PASS))
    owners = pl.concat(
        [out[t].select(pl.col("id").alias("source_id"), KEY) for t in SHARD_TABLES[:2]]
    ).unique("source_id", keep="first")
    out["document_edges"] = edges.join(owners, on="source_id", how="left", maintain_order="left")
    return out
