"""The note shapes of the Doughnut graph RAG design: BareNote, NoteWithContextualPath, FocusNote."""

from __future__ import annotations

from typing import Any

from pipeline.query.focus.graph import NoteGraph
from pipeline.tokens import truncate_tokens

RELATED_DETAILS_TOKENS = 80  # a related note's details are cut to this many tokens
ELLIPSIS = "…"


# ---- notes -----------------------------------------------------------------------------
def truncated_details(g: NoteGraph, row: int, max_tokens: int) -> str:
    text = g.details.get(row, "")
    if not text:
        return ""
    cut = truncate_tokens(text, max_tokens)
    return cut if cut == text else cut.rstrip() + ELLIPSIS


def bare_note(g: NoteGraph, row: int, max_tokens: int = RELATED_DETAILS_TOKENS) -> dict[str, Any]:
    parent = g.parent[row]
    return {
        "uri_and_title": g.link(row),
        "details_truncated": truncated_details(g, row, max_tokens),
        "parent_uri_and_title": g.link(parent),
        "object_uri_and_title": g.link(g.object.get(row)),
    }


def note_with_path(g: NoteGraph, row: int, max_tokens: int = RELATED_DETAILS_TOKENS) -> dict:
    return {**bare_note(g, row, max_tokens), "contextualPath": _path(g, row)}


def _path(g: NoteGraph, row: int) -> list[str]:
    return [g.link(a) for a in reversed(g.ancestors(row))]  # type: ignore[misc]


def focus_note(g: NoteGraph, row: int, details_tokens: int, limit: int) -> dict[str, Any]:
    parent = g.parent[row]
    sibs = g.children.get(parent, []) if parent >= 0 else []
    pos = sibs.index(row) if row in sibs else len(sibs)
    return {
        **note_with_path(g, row, details_tokens),
        "children": [g.link(k) for k in g.children.get(row, [])[:limit]],
        "referrings": [g.link(r) for r in g.referrers.get(row, [])[:limit]],
        "prior_siblings": [g.link(s) for s in sibs[max(0, pos - limit) : pos]],
        "younger_siblings": [g.link(s) for s in sibs[pos + 1 : pos + 1 + limit]],
    }
