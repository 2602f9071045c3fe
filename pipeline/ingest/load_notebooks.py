"""Notebook exports (Doughnut-style notes) as documents.

A `.json` file holding a list of notes (or {"notes": [...]}) or a `.jsonl` file with one
note per line, each an object with at least `uri` and `title` (optional `details`,
`parent_uri`, `object_uri`, `sibling_order`; camelCase and short aliases accepted), is one
document of mime type application/x-notes+json. Its text is the notes rendered as
Markdown-ish text (a heading per note, its details below, in tree order) so chunking and
extraction work on it like on any other text; the tree itself is rebuilt from the file by
pipeline.structure.notebook_sections. A `.json` that is not a notes export is rejected with
the reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.ingest.formats import LoadedDoc, LoadError, register
from pipeline.ingest.text import decode_text

MIME_TYPE = "application/x-notes+json"

_ALIASES = {
    "parent_uri": ("parent_uri", "parentUri", "parent"),
    "object_uri": ("object_uri", "objectUri", "object"),
    "sibling_order": ("sibling_order", "siblingOrder", "order", "seq"),
    "details": ("details", "content", "body"),
}


@dataclass
class Note:
    uri: str
    title: str
    details: str = ""
    parent_uri: str | None = None
    object_uri: str | None = None
    sibling_order: float | None = None
    index: int = 0  # position in the export: the tie-breaker for sibling order


def _field(obj: dict[str, Any], name: str) -> Any:
    for key in _ALIASES[name]:
        value = obj.get(key)
        if isinstance(value, dict):  # {"parent": {"uri": ...}}
            value = value.get("uri")
        if value not in (None, ""):
            return value
    return None


def _objects(path: Path, text: str) -> tuple[list[Any], str, list[str]]:
    """(raw note objects, notebook title or "", warnings) of a .json / .jsonl text."""
    warnings: list[str] = []
    if path.suffix.lower() == ".jsonl":
        items: list[Any] = []
        for n, line in enumerate(text.split("\n"), start=1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as e:
                    warnings.append(f"line {n}: invalid JSON ({e.msg}); skipped")
        if not items:
            raise LoadError("JSONL has no valid JSON line")
        return items, "", warnings
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise LoadError(f"invalid JSON: {e.msg} at line {e.lineno}") from None
    if isinstance(data, dict):
        if not isinstance(data.get("notes"), list):
            raise LoadError("JSON is not a notes export: an object without a 'notes' list")
        name = data.get("title") or data.get("name") or ""
        return data["notes"], str(name) if isinstance(name, str) else "", warnings
    if isinstance(data, list):
        return data, "", warnings
    raise LoadError(f"JSON is not a notes export: top level is {type(data).__name__}")


def parse_notes(path: Path, data: bytes) -> tuple[list[Note], str, list[str]]:
    """(notes in export order, notebook title, warnings); raises LoadError for a file that
    is no notes export. Notes without uri/title or with a repeated uri are skipped."""
    items, name, warnings = _objects(path, decode_text(data))
    notes: list[Note] = []
    seen: set[str] = set()
    for i, obj in enumerate(items):
        if not isinstance(obj, dict) or not obj.get("uri") or not obj.get("title"):
            warnings.append(f"item {i}: not a note object with 'uri' and 'title'; skipped")
            continue
        uri = str(obj["uri"])
        if uri in seen:
            warnings.append(f"item {i}: duplicate uri {uri}; skipped")
            continue
        seen.add(uri)
        order = _field(obj, "sibling_order")
        parent, obj_uri = _field(obj, "parent_uri"), _field(obj, "object_uri")
        notes.append(
            Note(
                uri=uri,
                title=str(obj["title"]).strip(),
                details=str(_field(obj, "details") or "").strip(),
                parent_uri=str(parent) if parent is not None else None,
                object_uri=str(obj_uri) if obj_uri is not None else None,
                sibling_order=float(order) if isinstance(order, int | float) else None,
                index=i,
            )
        )
    if not notes:
        raise LoadError(
            "JSON is not a notes export: no object has both 'uri' and 'title'"
            if items
            else "JSON is not a notes export: no notes"
        )
    return notes, name, warnings


def note_tree(notes: list[Note]) -> tuple[list[tuple[Note, int]], list[str]]:
    """Notes in tree order (depth-first, siblings by sibling_order then export order) with
    their depth (0 = top level). A parent not in the export, or a parent cycle, makes the
    note top level, with a warning."""
    by_uri = {n.uri: n for n in notes}
    warnings: list[str] = []
    parent: dict[str, str | None] = {}
    for n in notes:
        p = n.parent_uri
        if p is not None and p not in by_uri:
            warnings.append(f"note {n.uri}: parent {p} not in export; kept at top level")
            p = None
        parent[n.uri] = p
    for n in notes:  # break cycles: walk up; a revisit means a cycle
        seen, cur = {n.uri}, parent[n.uri]
        while cur is not None:
            if cur in seen:
                warnings.append(f"note {n.uri}: parent cycle; kept at top level")
                parent[n.uri] = None
                break
            seen.add(cur)
            cur = parent[cur]
    children: dict[str | None, list[Note]] = {}
    for n in notes:
        children.setdefault(parent[n.uri], []).append(n)

    def key(n: Note) -> tuple[bool, float, int]:
        return (n.sibling_order is None, n.sibling_order or 0.0, n.index)

    out: list[tuple[Note, int]] = []
    stack = [(n, 0) for n in sorted(children.get(None, []), key=key, reverse=True)]
    while stack:
        n, depth = stack.pop()
        out.append((n, depth))
        stack += [(c, depth + 1) for c in sorted(children.get(n.uri, []), key=key, reverse=True)]
    return out, warnings


def render_notes(tree: list[tuple[Note, int]], by_uri: dict[str, Note]) -> str:
    """The notebook as Markdown-ish text: '#' * depth title, the object line, details."""
    parts = []
    for n, depth in tree:
        block = [f"{'#' * min(depth + 1, 6)} {n.title}"]
        if n.object_uri:
            obj = by_uri.get(n.object_uri)
            block.append(f"Object: {obj.title if obj else n.object_uri}")
        if n.details:
            block.append(n.details)
        parts.append("\n\n".join(block))
    return "\n\n".join(parts) + "\n"


@register(".json", ".jsonl")
def load_notes(path: Path, data: bytes) -> LoadedDoc:
    notes, name, warnings = parse_notes(path, data)
    tree, tree_warnings = note_tree(notes)
    roots = [n for n, depth in tree if depth == 0]
    title = name or (roots[0].title if len(roots) == 1 else path.stem)
    return LoadedDoc(
        title=title,
        mime_type=MIME_TYPE,
        text=render_notes(tree, {n.uri: n for n in notes}),
        metadata={"n_notes": len(notes)},
        warnings=warnings + tree_warnings,
    )
