"""Markdown as structure: a section tree from ATX/Setext headings, typed content nodes and
the links to resolve across documents, on markdown-it-py (CommonMark) with the mkdocs
extensions (`markdown_syntax`); tokens become blocks in `markdown_tokens`, inline links,
anchors and heading text come from `markdown_inline`.

Headings are only sections at the top level (not inside list items, quotes or containers),
as mkdocs' table of contents sees them. Every heading opens a section under the nearest
preceding heading of a lower level (the DOCUMENT root when none). component_type is
SECTION, or CHAPTER for level-1 headings when the document has several H1s (one H1 is the
page title, not a chapter). Section uris are `<source_path>#<slug>` with Python-Markdown toc
slugs (an attr_list id, `{#id}`, `{: #id }` or `{ id="x" }`, wins); other anchors found in
or just before a heading (`[](){#old-id}`, `<a name="x">`, a `{#id}` line) and ids declared
in the section's content are kept in the section metadata as `anchors`. Line numbers
(1-based, of the file when it is available) are in node and section metadata.

Footnote definitions are NOTE nodes (`marker` = the label) where they are written, with a
REFERENCES_NOTE edge from every node whose text has the marker, as PDF footnotes have.
A caption paragraph ("Table 1: ...", "**Table 1.** ...", "Таблица 1 — ...") right before or
after a table of the same section gets an IS_CAPTIONED_BY edge from the table, as in PDFs.
Image paragraphs stay PARAGRAPH nodes (there are no FIGURE nodes), so figure captions
("Figure 2: ...", "Рисунок 2 — ...") are recognised but link only once a FIGURE node exists.
An image (`![alt](src "title")`, by reference, or an HTML `<img>`) reads as its alt text and
title where it stands, its address is a link of kind `image`, and a data URI is neither text
nor link (pipeline.structure.images).
Content nested past markdown_syntax.FLAT_LEVEL (a list 1,000 deep) is read flat: a
LIST_ITEM per list-marker line, no recursion.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pipeline.ingest.markdown import split_front_matter
from pipeline.ingest.text import decode_text
from pipeline.structure.markdown_inline import (
    autodoc_object,
    extract_links,
    heading_anchor,
    plain_inline,
)
from pipeline.structure.markdown_tokens import Block, parse_blocks, parse_tokens
from pipeline.structure.model import DocStructure, position
from pipeline.structure.parsers import register

# Block, parse_blocks, extract_links, heading_anchor and plain_inline: what callers (notes,
# tests) imported from here before the parser was split into modules.
__all__ = [
    "Block",
    "extract_links",
    "heading_anchor",
    "parse_blocks",
    "parse_markdown",
    "parse_markdown_document",
    "plain_inline",
]

# A caption paragraph: emphasis, keyword, label, then a separator or nothing ("Table 1: ...",
# "**Table 1.** ...", "*Figure 2.* ...", "Таблица 1 — ..."); "Table 1 shows ..." is a sentence.
_CAPTION = re.compile(
    r"^[\s*_]*(?:(?P<TABLE>(?i:table|tab\.|таблица))|(?P<FIGURE>(?i:figure|fig\.|рисунок|рис\.)))"
    r"[\s\u00a0]*(?:\d{1,3}(?:[.\-–]\d{1,3})*[a-z]?|[IVXLC]{1,6})(?!\w|[.\-–]\d)[*_\s]*(?:[:.|—–-]|$)"
)


def _dedupe(items: list[str]) -> list[str]:
    """Order-keeping unique: one anchor can be declared twice (attrs plugin and regex)."""
    return list(dict.fromkeys(items))


def parse_markdown(
    document_id: str,
    source_path: str,
    title: str,
    text: str,
    front_matter: dict[str, Any] | None = None,
    line_offset: int = 0,
) -> DocStructure:
    """The DocStructure of one Markdown text (front matter already removed, or left for the
    parser to skip; `line_offset` = the lines it took, so recorded line numbers are the
    file's)."""
    doc = DocStructure(document_id, source_path, title)
    root = doc.sections[0]
    root_meta: dict[str, Any] = {"front_matter": front_matter} if front_matter else {}
    if "\r" in text:  # markdown-it's line numbers count lone CRs as line ends too
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    blocks, _ = parse_tokens(text)
    n_lines = text.count("\n") + 1
    n_h1 = sum(1 for b in blocks if b.kind == "HEADING" and b.meta["level"] == 1)

    stack: list[tuple[int, str]] = []  # (heading level, section id)
    anchors: dict[str, list[str]] = {}
    objects: dict[str, list[str]] = {}  # mkdocstrings objects documented in a section
    sec_lines: dict[str, list[int]] = {root["id"]: [1 + line_offset, n_lines + line_offset]}
    pending: list[str] = []
    heading_levels: dict[str, int] = {}
    current = root["id"]
    order: list[tuple[str, str, str, str, str]] = []  # (section, container, kind, text, id)
    notes: dict[str, str] = {}  # footnote label -> NOTE node id
    markers: list[tuple[str, list[str]]] = []  # (node id, footnote labels it references)
    for k, b in enumerate(blocks):
        lo, hi = b.start + 1 + line_offset, b.end + 1 + line_offset
        if b.kind == "ANCHOR":  # an anchor line right before a heading names that heading
            nxt = blocks[k + 1] if k + 1 < len(blocks) else None
            if nxt is not None and nxt.kind in ("HEADING", "ANCHOR"):
                pending += b.ids
            else:
                anchors.setdefault(current, []).extend(b.ids)
            continue
        if b.kind == "HEADING":
            end = n_lines + line_offset
            sid, title_text, extra, hid = _open_section(doc, b, lo, hi, end, n_h1, stack, sec_lines)
            if extra or pending:
                anchors[sid] = [*pending, *extra]
            if autodoc_object(b.text):
                objects[sid] = [title_text]
            pending = []
            current = sid
            heading_levels[sid] = b.meta["level"]
            order.append((sid, "", "HEADING", b.text, hid))
            continue
        if b.kind == "SNIPPET":  # included files, markup's links: links of the section
            doc.links += [{"source_id": current, **link, "line": lo} for link in b.links]
            anchors.setdefault(current, []).extend(b.ids)
            continue
        if b.ids:
            anchors.setdefault(current, []).extend(b.ids)
            if b.meta.get("directive") == "mkdocstrings":
                objects.setdefault(current, []).extend(b.ids)
        meta = {"line_start": lo, "line_end": hi, **b.meta}
        nid = doc.add_node(current, b.kind, b.text, [position(1)], seq_minor=b.minor, metadata=meta)
        order.append((current, b.meta.get("container", ""), b.kind, b.text, nid))
        if b.kind == "NOTE":
            notes.setdefault(b.meta["marker"], nid)
        if b.notes:
            markers.append((nid, b.notes))
        for link in b.links:
            doc.links.append({"source_id": nid, **link, "line": lo})
    if pending:
        anchors.setdefault(current, []).extend(pending)
    _caption_edges(doc, order)
    _note_edges(doc, markers, notes)
    _section_metadata(doc, root_meta, heading_levels, sec_lines, anchors, objects)
    return doc


def _open_section(
    doc: DocStructure,
    b: Block,
    lo: int,
    hi: int,
    end: int,
    n_h1: int,
    stack: list[tuple[int, str]],
    sec_lines: dict[str, list[int]],
) -> tuple[str, str, list[str], str]:
    """A heading's section: closes the open sections of its level or deeper (they end on the
    line before), opens it under the nearest lower-level heading (the root when none) and
    adds its HEADING node; (section id, title, anchors the heading declares, node id)."""
    level = b.meta["level"]
    title_text, explicit, extra = heading_anchor(b.text)
    while stack and stack[-1][0] >= level:
        closed = stack.pop()[1]
        sec_lines[closed][1] = lo - 1
    parent = stack[-1][1] if stack else doc.sections[0]["id"]
    ctype = "CHAPTER" if level == 1 and n_h1 > 1 else "SECTION"
    sid = doc.add_section(parent, ctype, title_text or f"(untitled h{level})", 1, explicit)
    sec_lines[sid] = [lo, end]
    stack.append((level, sid))
    hid = doc.add_node(
        sid,
        "HEADING",
        title_text,
        [position(1)],
        metadata={"line_start": lo, "line_end": hi, "level": level},
    )
    return sid, title_text, extra, hid


def _note_edges(
    doc: DocStructure, markers: list[tuple[str, list[str]]], notes: dict[str, str]
) -> None:
    """Node -> footnote (REFERENCES_NOTE) for every label a node's text has, once a label."""
    for nid, labels in markers:
        for label in dict.fromkeys(labels):
            if label in notes and notes[label] != nid:
                doc.add_edge(nid, notes[label], "REFERENCES_NOTE", marker_text=label)


def _section_metadata(
    doc: DocStructure,
    root_meta: dict[str, Any],
    heading_levels: dict[str, int],
    sec_lines: dict[str, list[int]],
    anchors: dict[str, list[str]],
    objects: dict[str, list[str]],
) -> None:
    """Each section's metadata gets its lines, heading level (the root: the front matter),
    anchors and documented objects."""
    root_id = doc.sections[0]["id"]
    for sec in doc.sections:
        meta = json.loads(sec["metadata"])
        if sec["id"] == root_id:
            meta.update(root_meta)
        else:
            meta["heading_level"] = heading_levels[sec["id"]]
        start, end = sec_lines[sec["id"]]
        meta.update(line_start=start, line_end=max(start, end))
        if sec["id"] in anchors:
            meta["anchors"] = _dedupe(anchors[sec["id"]])
        if sec["id"] in objects:
            meta["objects"] = _dedupe(objects[sec["id"]])
        sec["metadata"] = json.dumps(meta, sort_keys=True, ensure_ascii=False, default=str)


def _caption_edges(doc: DocStructure, order: list[tuple[str, str, str, str, str]]) -> None:
    """Table/figure -> caption (IS_CAPTIONED_BY, weight 1.0, as the PDF parser links them):
    the caption paragraph right before the node, else the one right after it, in the same
    section and container. Each caption captions one node, so in "T1 / Table 1: ... / T2 /
    Table 2: ..." (captions below) the first caption goes to T1 and the second to T2."""
    taken: set[int] = set()
    for k, (section, container, kind, _, node_id) in enumerate(order):
        if kind not in ("TABLE", "FIGURE"):
            continue
        for j in (k - 1, k + 1):
            if j in taken or not 0 <= j < len(order):
                continue
            sec2, cont2, kind2, text, cap_id = order[j]
            m = _CAPTION.match(text) if kind2 == "PARAGRAPH" else None
            if m and m.group(kind) and (sec2, cont2) == (section, container):
                doc.add_edge(node_id, cap_id, "IS_CAPTIONED_BY")
                taken.add(j)
                break


@register("text/markdown")
def parse_markdown_document(
    doc: dict[str, Any], raw: bytes | None, settings: Any = None
) -> DocStructure:
    """Parses documents.text (what chunking sees); the file, when still there, only gives
    the front matter's line count so node line numbers are the file's."""
    text = doc["text"] or ""
    meta, body, _ = split_front_matter(text)  # in case the loader kept it (invalid YAML)
    offset = text[: len(text) - len(body)].count("\n")
    if raw is not None:
        try:  # the loader's body (MDX's code blanked) has the lines of the file's
            full = decode_text(raw)
            file_body = split_front_matter(full)[1]
            if file_body.count("\n") == body.count("\n"):
                offset = full[: len(full) - len(file_body)].count("\n")
        except Exception:  # noqa: BLE001 - line numbers then count from the text
            pass
    if not meta:
        try:
            meta = json.loads(doc.get("metadata") or "{}")
        except (TypeError, json.JSONDecodeError):
            meta = {}
    return parse_markdown(doc["id"], doc["source_path"], doc["title"], body, meta, offset)
