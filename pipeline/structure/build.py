"""Documents to structure tables: each document parsed by its format's parser (with the
plain-text fallback when that raises, recorded as a `structure_failures` row), its
cross-references added, links between documents resolved or collected, and the rows
gathered into the sections, content_nodes and structure_edges frames."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from pipeline import schemas
from pipeline.config import StructureSettings
from pipeline.failures import failure_row
from pipeline.ids import sha256_hex
from pipeline.lazy import deferred
from pipeline.structure import markdown, notes  # noqa: F401  (register their parsers)
from pipeline.structure.model import DocStructure
from pipeline.structure.parsers import PARSERS
from pipeline.structure.text import parse_text

# pdf.py registers itself too, when it is imported: pymupdf loads with the first PDF parsed
PARSERS.setdefault("application/pdf", deferred("pipeline.structure.pdf", "parse_pdf"))


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
) -> DocStructure:
    """The document's structure by its format's parser; when that raises, its plain-text
    structure, and when even that raises, the root section alone (chunking then reads the
    document's text). Each fallback is a row appended to `failures`."""
    parser = PARSERS.get(doc["mime_type"], _plain)
    try:
        out = parser(doc, _raw_bytes(doc, input_dir), settings or StructureSettings())
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
    # a PDF's links made some already (pipeline.structure.pdf_links)
    linked = {(e["source_id"], e["target_id"]) for e in doc.edges if e["type"] == CROSS}
    return [e for e in found if (e["source_id"], e["target_id"]) not in linked]


def _frame(rows: list[dict[str, Any]], name: str) -> pl.DataFrame:
    schema = schemas.TABLES[name]
    if name != "structure_edges":
        rows = [{**r, "human_readable_id": i} for i, r in enumerate(rows)]
    return pl.from_arrow(schemas.pa.Table.from_pylist(rows, schema=schema))  # type: ignore[return-value]


def build_structure(
    documents: pl.DataFrame,
    input_dir: str | Path | None = None,
    settings: StructureSettings | None = None,
    stats: dict[str, float] | None = None,
    failures: list[dict[str, Any]] | None = None,
    links: list[dict[str, Any]] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, dict[str, list[str]]]:
    """(sections, content_nodes, structure_edges, warnings by source_path); parsers' run
    statistics (e.g. PDF parse and table-detection seconds) are summed into `stats`, and
    documents that needed a fallback are appended to `failures` (DOCUMENT_FAILURES rows).

    Links between documents are resolved among `documents`, or, when a `links` list is
    given (one shard of a corpus), appended to it as DOCUMENT_LINKS rows for
    `links.resolve_link_table` to resolve once every shard is parsed."""
    from pipeline.structure.links import link_rows, resolve_links

    root = Path(input_dir) if input_dir is not None else None
    docs = [parse_document(d, root, settings, failures) for d in documents.iter_rows(named=True)]
    if links is None:
        link_edges = resolve_links(docs)
    else:
        links.extend(link_rows(docs))
        link_edges = []
    sections = [s for d in docs for s in d.sections]
    nodes = [n for d in docs for n in d.nodes]
    edges = [e for d in docs for e in (*d.edges, *_cross_references(d, failures))] + link_edges
    warnings = {d.source_path: d.warnings for d in docs if d.warnings}
    if stats is not None:
        for d in docs:
            for key, value in d.stats.items():
                stats[key] = stats.get(key, 0.0) + value
    return (
        _frame(sections, "sections"),
        _frame(nodes, "content_nodes"),
        _frame(edges, "structure_edges"),
        warnings,
    )
