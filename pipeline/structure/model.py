"""DocStructure: what a format parser builds for one document — a section tree, content
nodes in reading order, and edges — with ids, levels, paths and seqs derived in one place.

Ids are anchored to the document's relative path and their own content, not to the
document id (the hash of its bytes, which any edit changes) nor to positions (which an
insertion shifts): a section's id hashes its title path below the root, a node's its text,
each with the count of earlier equal ones in the document. Editing a paragraph changes that
node's id only; renaming a heading, that section's and its subsections' ids.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from pipeline.ids import stable_id
from pipeline.structure.images import without_data


def slugify(title: str) -> str:
    """Heading anchor as Python-Markdown's toc makes it (`slugify_unicode`, as mkdocs sites
    use): punctuation dropped, lower case, runs of spaces and hyphens to one hyphen
    ("A - B" -> "a-b"); Unicode letters kept."""
    text = unicodedata.normalize("NFKC", title)
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


# A section title is a heading, not a paragraph: a longer one (a 1 MB "# ..." line) is cut,
# so paths, uris and every unit's section prefix stay short. The heading node keeps it all.
MAX_TITLE_CHARS = 200


def short_title(title: str) -> str:
    """`title` cut at a word boundary to at most MAX_TITLE_CHARS (an ellipsis marks a cut)."""
    if len(title) <= MAX_TITLE_CHARS:
        return title
    head = title[: MAX_TITLE_CHARS - 1]
    cut = head.rfind(" ", MAX_TITLE_CHARS // 2)
    return (head[:cut] if cut > 0 else head).rstrip() + "…"


def position(
    page: int = 1,
    page_label: str = "",
    x0: float = 0.0,
    y0: float = 0.0,
    x1: float = 0.0,
    y1: float = 0.0,
) -> dict[str, Any]:
    return {"page": page, "page_label": page_label, "x0": x0, "y0": y0, "x1": x1, "y1": y1}


NO_METADATA = "{}"  # one string for every row without metadata (most of them)


def _json(metadata: dict[str, Any] | None) -> str:
    return json.dumps(metadata, sort_keys=True, ensure_ascii=False) if metadata else NO_METADATA


@dataclass
class DocStructure:
    document_id: str
    source_path: str
    title: str
    sections: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, Any]] = field(default_factory=list)
    # Links to resolve across documents: {source_id, href, text, kind ("inline", "reference",
    # "wikilink", "image", ...)}; pipeline.structure.links turns them into REFERS_TO edges.
    links: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Parts the parser could not read, as (reason, what was done instead): a scanned page
    # whose OCR failed; parse_document makes them rows of the failures table.
    failures: list[tuple[str, str]] = field(default_factory=list)
    # Run statistics (timings, counts) for metadata; never written to the tables.
    stats: dict[str, float] = field(default_factory=dict)
    _children: dict[str, int] = field(default_factory=dict, repr=False)
    _slugs: dict[str, int] = field(default_factory=dict, repr=False)
    _index: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _seen: dict[tuple[str, ...], int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.sections:
            self.add_section(None, "DOCUMENT", self.title)

    @property
    def anchor(self) -> str:
        """What ids are anchored to: the relative path (stable across edits), else the id."""
        return self.source_path or self.document_id

    def _id(self, *key: str) -> str:
        """Id of the next item with content `key`: unique, as repeats are counted."""
        n = self._seen.get(key, 0)
        self._seen[key] = n + 1
        return stable_id(self.anchor, *key, str(n))

    @property
    def root_id(self) -> str:
        return self.sections[0]["id"]

    def section(self, section_id: str) -> dict[str, Any]:
        return self._index[section_id]

    def add_section(
        self,
        parent_id: str | None,
        component_type: str,
        title: str,
        page_start: int | None = None,
        slug: str | None = None,
        uri: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """A new section under `parent_id` (None only for the root); returns its id.
        Slugs repeat-suffixed like Markdown renderers do ("intro", "intro_1")."""
        title = short_title(without_data(title))
        parent = self.section(parent_id) if parent_id else None
        seq = self._children.get(parent_id or "", 0)
        self._children[parent_id or ""] = seq + 1
        level = parent["level"] + 1 if parent else 0
        path = [*parent["path"], title] if parent else [title]
        if uri is None:
            if parent is None:
                uri = self.source_path
            else:
                base = slug if slug is not None else slugify(title)
                n = self._slugs.get(base, 0)
                self._slugs[base] = n + 1
                uri = f"{self.source_path}#{base if n == 0 else f'{base}_{n}'}"
        sid = self._id("section", *path[1:])  # the root's title (a first line) left out
        self.sections.append(
            row := {
                "id": sid,
                "document_id": self.document_id,
                "parent_id": parent_id,
                "component_type": component_type,
                "title": title,
                "level": level,
                "seq": seq,
                "path": path,
                "uri": uri,
                "page_start": page_start,
                "page_end": page_start,
                "metadata": _json(metadata),
            }
        )
        self._index[sid] = row
        return sid

    def add_node(
        self,
        section_id: str,
        node_type: str,
        text: str,
        positions: list[dict[str, Any]] | None = None,
        description: str = "",
        seq_minor: int = 0,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """A content node in reading order; its pages extend its section's page range. A data
        URI in its text reads as a placeholder (pipeline.structure.images): whatever the
        format, no payload reaches a text unit."""
        text = without_data(text)
        positions = positions or [position()]
        nid = self._id("node", text)
        self.nodes.append(
            {
                "id": nid,
                "document_id": self.document_id,
                "section_id": section_id,
                "node_type": node_type,
                "text": text,
                "description": description,
                "seq_major": len(self.nodes),
                "seq_minor": seq_minor,
                "positions": positions,
                "metadata": _json(metadata),
            }
        )
        pages = [p["page"] for p in positions if p.get("page")]
        sid: str | None = section_id
        while pages and sid:  # a section spans the pages of everything under it
            sec = self.section(sid)
            sec["page_start"] = min([sec["page_start"] or min(pages), *pages])
            sec["page_end"] = max([sec["page_end"] or max(pages), *pages])
            sid = sec["parent_id"]
        return nid

    def add_edge(
        self,
        source_id: str,
        target_id: str | None,
        type: str,
        weight: float = 1.0,
        marker_text: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.edges.append(
            {
                "source_id": source_id,
                "target_id": target_id,
                "type": type,
                "weight": weight,
                "marker_text": marker_text,
                "metadata": _json(metadata),
            }
        )
