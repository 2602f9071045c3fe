"""Result records: the one place a search mode turns an index row into a result record.

Every record has kind, id, human_readable_id and provenance (document, publication, section,
pages). Text units carry their own row's provenance and content node positions; entities,
relationships and reports (`graph_record`) the provenance of the first text unit they cite;
sections and content nodes their own document and place in it (nodes with bounding boxes);
focus context's related notes their uri, priority and note shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


def unit_record(index: IndexTables, row: int, score: float, **extra: Any) -> dict[str, Any]:
    """The text unit at `row` of `index.text_units` as a result record."""
    r = index.unit_info.row(row, named=True)
    return {
        "kind": "text_unit",
        "id": r["id"],
        "human_readable_id": r["human_readable_id"],
        "score": float(score),
        "text": r["text"],
        "n_tokens": r["n_tokens"],
        **provenance(r),
        "positions": index.positions(list(r.get("content_node_ids") or [])),
        **extra,
    }


def graph_record(
    index: IndexTables, kind: str, row: dict[str, Any], unit_ids: list[str], **fields: Any
) -> dict[str, Any]:
    """An entity, relationship or report row (as a dict) as a result record: kind, id,
    human_readable_id, the `fields` in the order given, then its first unit's provenance."""
    return {
        "kind": kind,
        "id": row["id"],
        "human_readable_id": row["human_readable_id"],
        **fields,
        **provenance_of_units(index, list(unit_ids or [])),
    }


def entity_record(index: IndexTables, e: dict[str, Any], text: str, **extra: Any) -> dict[str, Any]:
    """An entities row (as a dict) as a result record, with its first unit's provenance."""
    return graph_record(
        index, "entity", e, e["text_unit_ids"], title=e["title"], type=e["type"], text=text, **extra
    )


def section_record(s: dict[str, Any], document_title: str | None, **scores: Any) -> dict[str, Any]:
    """A sections row (as a dict) as a result record: the `scores` fields in the order given,
    then its title, document and place in the document."""
    return {
        "kind": "section",
        "id": s["id"],
        "human_readable_id": s["human_readable_id"],
        **scores,
        "title": s["title"],
        "text": s["title"] or "",
        "component_type": s["component_type"],
        "document_id": s["document_id"],
        "document_title": document_title,
        "section_id": s["id"],
        "section_path": list(s["path"] or []),
        "section_uri": s["uri"],
    }


def note_record(
    note_id: str,
    uri: str,
    title: str,
    document_id: str,
    rank: int,
    priority: int,
    relation: str,
    tokens: int,
    note: dict[str, Any],
) -> dict[str, Any]:
    """A related note of focus context as a result record (`note` is its JSON shape)."""
    return {
        "kind": "note",
        "id": note_id,
        "uri": uri,
        "title": title,
        "document_id": document_id,
        "rank": rank,
        "priority": priority,
        "relation": relation,
        "score": 1.0 / rank,  # rank-based: selection is by priority, not by a score
        "tokens": tokens,
        "note": note,
    }


def provenance(r: dict[str, Any]) -> dict[str, Any]:
    """Document, publication, section and pages of a `unit_info` row."""
    return {
        "document_id": r.get("document_id"),
        "document_title": r.get("document_title"),
        "source_path": r.get("source_path"),
        "publication_id": r.get("publication_id"),
        "publication_title": r.get("publication_title"),
        "section_id": r.get("section_id"),
        "section_path": list(r.get("section_path") or []),
        "section_uri": r.get("section_uri"),
        "pages": list(r.get("pages") or []),
    }


def provenance_of_units(index: IndexTables, unit_ids: list[str]) -> dict[str, Any]:
    """Provenance of the first known unit of a list (entities, relationships, reports)."""
    for uid in unit_ids or []:
        row = index.unit_row.get(uid)
        if row is not None:
            prov = provenance(index.unit_info.row(row, named=True))
            prov["text_unit_ids"] = list(unit_ids[:10])
            return prov
    return {
        "document_id": None,
        "document_title": None,
        "source_path": None,
        "publication_id": None,
        "publication_title": None,
        "section_id": None,
        "section_path": [],
        "section_uri": None,
        "pages": [],
        "text_unit_ids": [],
    }


def node_record(r: dict[str, Any], unit_ids: list[str], score: float, rank: int) -> dict[str, Any]:
    """A content node (a row of node search's info frame, as a dict) as a result record, with
    its pages and bounding boxes; `unit_ids` are the text units holding it."""
    positions = list(r["positions"] or [])
    return {
        "kind": "content_node",
        "id": r["id"],
        "human_readable_id": r["human_readable_id"],
        "score": float(score),
        "rank": rank,
        "node_type": r["node_type"],
        "text": r["text"] or r["description"] or "",
        "document_id": r["document_id"],
        "document_title": r["document_title"],
        "source_path": r["source_path"],
        "section_id": r["section_id"],
        "section_path": list(r["section_path"] or []),
        "uri": r["uri"],
        "pages": sorted({p["page"] for p in positions if p.get("page")}),
        "bbox": [
            {k: p[k] for k in ("page", "page_label", "x0", "y0", "x1", "y1")} for p in positions
        ],
        "text_unit_ids": unit_ids[:10],
    }
