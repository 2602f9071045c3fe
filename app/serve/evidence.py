"""What the query page shows beside an answer: an entity and a section, as JSON from the index.

Why a module of its own: the page (app/serve/page.py) opens a citation or a graph node
where it is, and what it shows comes from the tables of the published version the answer
came from, never from a file or from what the client sends. Each function reads one
version's tables (`GraphIndex.latest()`), looks the id up, and returns a small dict of
bounded size (a few sources, relationships and reports, texts cut to a few hundred
characters); an id the version does not hold is a KeyError (404 at the endpoint).

    entity_json(index, entity_id)     -> title, type, description, relationships, sources,
                                         community reports
    section_json(index, section_id, unit_id) -> title, path, document, its content nodes'
                                         text and boxes (PDF), those the cited unit holds
                                         marked `cited`
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables

MAX_RELATIONSHIPS = 20
MAX_SOURCES = 5
MAX_REPORTS = 4
MAX_NODES = 200  # content nodes of one section shown
TEXT_CHARS = 600  # a source's or a node's text at most


def _cut(text: str | None, limit: int = TEXT_CHARS) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def entity_json(index: IndexTables, entity_id: str) -> dict[str, Any]:
    """The entity `entity_id`: its row, its strongest relationships, the first text units
    citing it (with their document, section and pages) and its communities' reports."""
    row = index.entity_row.get(entity_id)
    if row is None:
        raise KeyError(entity_id)
    e = index.entities.row(row, named=True)
    return {
        "id": e["id"],
        "title": e["title"] or "",
        "type": e["type"] or "",
        "description": e["description"] or "",
        "aliases": list(e["aliases"] or [])[:10],
        "degree": int(e["degree"] or 0),
        "relationships": _relationships(index, entity_id),
        "sources": _sources(index, list(e["text_unit_ids"] or [])),
        "reports": _reports(index, row),
    }


def _relationships(index: IndexTables, entity_id: str) -> list[dict[str, Any]]:
    rels = index.relationships.filter(
        (pl.col("source_id") == entity_id) | (pl.col("target_id") == entity_id)
    ).sort("weight", descending=True, nulls_last=True)
    out = []
    for r in rels.head(MAX_RELATIONSHIPS).iter_rows(named=True):
        outgoing = r["source_id"] == entity_id
        out.append(
            {
                "id": r["id"],
                "source": r["source"] or "",
                "target": r["target"] or "",
                "other_id": r["target_id"] if outgoing else r["source_id"],
                "type": r["type"] or "",
                "description": _cut(r["description"]),
                "weight": float(r["weight"] or 0.0),
            }
        )
    return out


def _sources(index: IndexTables, unit_ids: list[str]) -> list[dict[str, Any]]:
    out = []
    for uid in unit_ids:
        row = index.unit_row.get(uid)
        if row is None:
            continue
        r = index.unit_info.row(row, named=True)
        out.append(
            {
                "text_unit_id": uid,
                "document_id": r["document_id"],
                "document_title": r["document_title"] or r["source_path"] or "",
                "section_id": r["section_id"],
                "section_path": list(r["section_path"] or []),
                "pages": list(r["pages"] or []),
                "text": _cut(r["text"]),
            }
        )
        if len(out) >= MAX_SOURCES:
            break
    return out


def _reports(index: IndexTables, entity_row: int) -> list[dict[str, Any]]:
    reps = index.entity_reports.getrow(entity_row).indices
    if len(reps) == 0:
        return []
    frame = (
        index.community_reports.select("community", "level", "title", "summary", "rating")
        .with_row_index("row")
        .filter(pl.col("row").is_in(list(map(int, reps))))
        .sort("level")
    )
    return [
        {
            "community": int(r["community"]),
            "level": int(r["level"]),
            "title": r["title"] or "",
            "summary": _cut(r["summary"], 2 * TEXT_CHARS),
            "rating": float(r["rating"] or 0.0),
        }
        for r in frame.head(MAX_REPORTS).iter_rows(named=True)
    ]


def _box(p: dict[str, Any]) -> dict[str, Any]:
    """A position's page and bounding box (PDF points, origin top left)."""
    return {k: p[k] for k in ("page", "x0", "y0", "x1", "y1")}


def _descendants(sections: pl.DataFrame, root: str) -> set[str]:
    """`root` and every section under it (the content of a chapter is in its subsections)."""
    children: dict[str, list[str]] = {}
    for sid, parent in sections.select("id", "parent_id").iter_rows():
        children.setdefault(parent, []).append(sid)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _has_area(p: dict[str, Any]) -> bool:
    return (p.get("x1") or 0) > (p.get("x0") or 0) and (p.get("y1") or 0) > (p.get("y0") or 0)


def section_json(index: IndexTables, section_id: str, unit_id: str | None) -> dict[str, Any]:
    """The section `section_id`: title, path, document and the content nodes in it and its
    subsections in reading order (text, and page boxes where the document has them), each
    `cited` when the text unit `unit_id` holds it."""
    sections = index.table("sections", ["id", "parent_id", "document_id", "title", "path"])
    section = sections.filter(pl.col("id") == section_id)
    if section.height == 0:
        raise KeyError(section_id)
    s = section.row(0, named=True)
    within = _descendants(sections.filter(pl.col("document_id") == s["document_id"]), section_id)
    cited: set[str] = set()
    row = index.unit_row.get(unit_id) if unit_id else None
    if row is not None:
        found = index.text_units["content_node_ids"][row]
        cited = set(found.to_list() if found is not None else [])
    nodes = (
        index.table(
            "content_nodes", ["id", "section_id", "node_type", "text", "seq_major", "positions"]
        )
        .filter(pl.col("section_id").is_in(list(within)))
        .sort("seq_major", maintain_order=True)
    )
    docs = index.documents.filter(pl.col("id") == s["document_id"])
    title = docs["title"][0] if docs.height else None
    return {
        "id": s["id"],
        "title": s["title"] or "",
        "path": list(s["path"] or []),
        "document_id": s["document_id"],
        "document_title": title or "",
        "nodes": [
            {
                "id": n["id"],
                "type": n["node_type"] or "",
                "text": _cut(n["text"], 4 * TEXT_CHARS),
                "cited": n["id"] in cited,
                "boxes": [_box(p) for p in n["positions"] or [] if _has_area(p)],
            }
            for n in nodes.head(MAX_NODES).iter_rows(named=True)
        ],
        "truncated": nodes.height > MAX_NODES,
    }
