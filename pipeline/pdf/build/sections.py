"""From classified PDF items (in reading order) to the structure: paragraphs split by page or
column breaks merged, the section tree (outline and detected headings), content nodes with
positions, and the edges of `build.edges`. Shared by the layout-model and heuristic paths."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pipeline.pdf.read.page_units import Unit, join_lines
from pipeline.structure.model import DocStructure, position
from pipeline.pdf.build.edges import caption_edges, citation_edges, note_edges
from pipeline.pdf.thresholds import BIB_INDENT, CHAPTER_LEVELS, MIN_MATCH_CHARS, PROSE_MAX_DIGITS, SAME_FONT_RATIO
from pipeline.pdf.thresholds import OUTLINE_COVERS

NUMBERED = re.compile(r"^((?:\d+|[A-Z])(?:\.\d+)*)\.?\s+\S")
CHAPTER_WORD = re.compile(r"^(chapter|part|appendix)\b", re.I)
BIB_NUM = re.compile(r"^\[(\d+)\]\s*")
BIB_TITLES = re.compile(
    r"^(\d+\.?\s*)?(references|bibliography|works cited|literature( cited)?)$", re.I
)
FRONT = re.compile(
    r"^(abstract|preface|foreword|contents|table of contents|acknowledg\w*|notices)$", re.I
)
BACK = re.compile(r"^(index|glossary|notes|endnotes|related publications|back cover)$", re.I)
SENT_END = re.compile(r"[.!?:;\"”’)\]]$")

Anchor = tuple[int, str, str, int]  # level, title, component type, 0-based page


def norm(text: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def dedupe_headings(items: list[dict[str, Any]], kinds: tuple[str, ...] = ("HEADING",)) -> None:
    """In place: the same heading text twice on one page (a masthead over the display
    heading): only the larger one heads a section, the other is a PARAGRAPH."""
    best: dict[tuple[int, str], dict[str, Any]] = {}
    for it in items:
        if it["kind"] not in kinds:
            continue
        key = (it["unit"].page, norm(it["text"]))
        other = best.get(key)
        if other is None:
            best[key] = it
        elif it["unit"].size > other["unit"].size:
            other["kind"] = "PARAGRAPH"
            best[key] = it
        else:
            it["kind"] = "PARAGRAPH"


def merge_continuations(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One node for a paragraph split by a page or column break (or a block split by pymupdf):
    the previous paragraph does not end a sentence and this one starts in lower case, in about
    the same font size (a chart's small labels continue nothing). Notes, page numbers and
    running text in between do not stop the merge; when a figure, table, caption, formula or
    code listing sits in between, merging would move text across it, so the second part stays
    its own node and `continues` names the item it continues (a CONTINUES edge)."""
    out: list[dict[str, Any]] = []
    last_para: dict[str, Any] | None = None
    between = False  # a figure/table/caption/formula since last_para
    for it in items:
        it = {**it, "units": [it["unit"]]}
        if it["kind"] == "PARAGRAPH" and last_para is not None:
            prev = last_para["text"]
            t = it["text"]
            same_font = it["unit"].size >= SAME_FONT_RATIO * last_para["unit"].size  # not a chart label
            if t[:1].islower() and not SENT_END.search(prev) and same_font:
                if not between:
                    last_para["text"] = join_text(prev, t)
                    last_para["units"].append(it["unit"])
                    continue
                it["continues"] = last_para
        if it["kind"] in ("HEADING", "TITLE", "LIST_ITEM"):
            last_para = None
        elif it["kind"] in ("FIGURE", "TABLE", "CAPTION", "FORMULA", "CODE"):
            between = True
        out.append(it)
        if it["kind"] == "PARAGRAPH":
            smaller = last_para is not None and it["unit"].size < SAME_FONT_RATIO * last_para["unit"].size
            if _prose(it["text"]) and not smaller:
                last_para = it
                between = False
            else:  # figure or table text drawn as lines: it intervenes like a figure
                between = True
    return out


def _prose(text: str) -> bool:
    """Running text rather than a chart's labels or an undetected table's cells."""
    chars = [c for c in text if not c.isspace()]
    digits = sum(c.isdigit() for c in chars)
    return len(text.split()) >= 2 and digits <= PROSE_MAX_DIGITS * len(chars) and text[:1] not in "=+−-"


def join_text(a: str, b: str) -> str:
    """`a` and `b` as page_units.join_lines joins two lines."""
    return join_lines([a, b])


def toc_component(title: str, level: int, levels: int) -> str:
    t = re.sub(r"^[\dIVX.]+\s*", "", title.strip())
    if BIB_TITLES.match(t):
        return "BIBLIOGRAPHY"
    if re.match(r"^abstract$", t, re.I):
        return "ABSTRACT"
    if re.match(r"^appendi(x|ces)\b", t, re.I):
        return "APPENDIX"
    if FRONT.match(t):
        return "FRONT_MATTER"
    if re.match(r"^(notes|endnotes)$", t, re.I):
        return "NOTES_SECTION"
    if BACK.match(t):
        return "BACK_MATTER"
    if level == 1 and (CHAPTER_WORD.match(title) or levels >= CHAPTER_LEVELS):
        return "CHAPTER"
    return "SECTION"


def heading_levels(heads: list[dict[str, Any]]) -> dict[int, int]:
    """Level per heading item: numbering depth when numbered, else the rank of its font size
    (sizes seen on numbered headings keep their depth)."""
    size_depth: dict[float, int] = {}
    for h in heads:
        m = NUMBERED.match(h["text"])
        if m and "." in m.group(1):
            size_depth.setdefault(h["unit"].size, m.group(1).count(".") + 1)
    sizes = sorted({h["unit"].size for h in heads}, reverse=True)
    levels = {}
    for h in heads:
        m = NUMBERED.match(h["text"])
        if m and re.match(r"^\d+(\.\d+)*$", m.group(1)):
            lv = m.group(1).count(".") + 1
        elif h["unit"].size in size_depth:
            lv = size_depth[h["unit"].size]
        else:
            lv = sizes.index(h["unit"].size) + 1
        levels[id(h)] = max(1, min(lv, 6))
    return levels


def match_toc(items: list[dict[str, Any]], title: str, page0: int) -> tuple[int, bool]:
    """Item where an outline entry starts, and whether its text was found: a heading-like
    item on its page with that text, else the first item on (or after) the page."""
    key = norm(title)
    first_on_page = None
    for i, it in enumerate(items):
        if it["unit"].page != page0:
            continue
        if first_on_page is None:
            first_on_page = i
        t = norm(it["text"])
        if t and key and (t == key or t.endswith(key) or key.endswith(t) and len(t) > MIN_MATCH_CHARS):
            if it["kind"] in ("PARAGRAPH", "LIST_ITEM"):
                it["kind"] = "HEADING"
            return i, True
    if first_on_page is not None:
        return first_on_page, False
    later = [i for i, it in enumerate(items) if it["unit"].page > page0]
    return (later[0] if later else len(items)), False


def section_anchors(items: list[dict[str, Any]], toc: list[list[Any]]) -> dict[int, list[Anchor]]:
    """Where sections start (item index -> anchors). The outline alone when it names most
    detected headings; else detected headings and outline entries together (a partial
    outline, e.g. chapters only or the first part only, must not hide the other headings),
    the detected ones placed on the outline's levels by the levels of those it names."""
    heads = [it for it in items if it["kind"] == "HEADING"]
    lv = heading_levels(heads)
    anchors: dict[int, list[Anchor]] = {}
    named: dict[int, int] = {}  # id(item) -> outline level, for outline entries found as text
    if toc:
        levels = max(e[0] for e in toc)
        for level, title, page, *_ in toc:
            page0 = max(0, int(page) - 1)
            idx, found = match_toc(items, str(title), page0)
            comp = toc_component(str(title), level, levels)
            anchors.setdefault(idx, []).append((level, str(title).strip(), comp, page0))
            if found:
                named.setdefault(id(items[idx]), level)
        if not heads or sum(id(h) in named for h in heads) >= OUTLINE_COVERS * len(heads):
            return anchors
    shift = Counter(named[id(h)] - lv[id(h)] for h in heads if id(h) in named)
    delta = shift.most_common(1)[0][0] if shift else 0
    n_levels = len(set(lv.values()))
    for i, it in enumerate(items):
        if it["kind"] == "HEADING" and id(it) not in named:
            level = max(1, lv[id(it)] + delta)
            comp = toc_component(it["text"], level, n_levels + 1)
            anchors.setdefault(i, []).append((level, it["text"], comp, it["unit"].page))
    return anchors


def _pos(u: Unit, labels: list[str]) -> dict[str, Any]:
    x0, y0, x1, y1 = u.bbox
    return position(
        u.page + 1, labels[u.page], round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2)
    )


def build(
    out: DocStructure, toc: list[list[Any]], items: list[dict[str, Any]], labels: list[str]
) -> None:
    """Sections and nodes of `items` (merged by `merge_continuations`) into `out`, then the
    continuation, note, citation and caption edges."""
    toc = [e for e in toc if len(e) >= 3 and str(e[1]).strip()]
    anchors = section_anchors(items, toc)
    stack: list[tuple[int, str]] = [(0, out.root_id)]
    in_bib = False
    notes_by_page: dict[int, dict[str, str]] = {}
    bib: dict[str, str] = {}
    for i, it in enumerate(items):
        for level, title, comp, page0 in anchors.get(i, []):
            while stack[-1][0] >= level:
                stack.pop()
            sid = out.add_section(stack[-1][1], comp, title, page_start=page0 + 1)
            stack.append((level, sid))
            in_bib = comp == "BIBLIOGRAPHY" or bool(BIB_TITLES.match(title.strip()))
        section = stack[-1][1]
        positions = [_pos(u, labels) for u in it["units"]]
        kind = it["kind"]
        if in_bib and kind in ("PARAGRAPH", "LIST_ITEM"):
            for entry in _bib_entries(it):
                m = BIB_NUM.match(entry)
                nid = out.add_node(section, "BIBLIOGRAPHIC_ENTRY", entry, positions)
                if m:
                    bib.setdefault(m.group(1), nid)
            continue
        meta: dict[str, Any] = dict(it.get("meta") or {})
        if kind == "NOTE":
            meta["marker"] = it["marker"]
        if kind in ("HEADING", "TITLE"):
            meta["font_size"] = it["unit"].size
        if it["unit"].image:
            meta["image"] = True
        it["id"] = out.add_node(section, kind, it["text"], positions, metadata=meta)
        if kind == "NOTE":
            notes_by_page.setdefault(it["unit"].page, {}).setdefault(it["marker"], it["id"])
    for it in items:
        if "continues" in it and "id" in it and "id" in it["continues"]:
            out.add_edge(it["continues"]["id"], it["id"], "CONTINUES")
    note_edges(out, items, notes_by_page)
    citation_edges(out, items, bib)
    caption_edges(out, items)


def _bib_entries(it: dict[str, Any]) -> list[str]:
    """A bibliography block split into entries: at '[n]' starts or hanging indents."""
    entries: list[list[str]] = []
    lines = [ln for u in it["units"] for ln in u.lines]
    x_min = min(ln.bbox[0] for ln in lines)
    bracketed = any(BIB_NUM.match(ln.text.strip()) for ln in lines)
    for ln in lines:
        starts = BIB_NUM.match(ln.text.strip()) or ln.bbox[0] <= x_min + BIB_INDENT
        if not entries or starts and (BIB_NUM.match(ln.text.strip()) or not bracketed):
            entries.append([ln.text])
        else:
            entries[-1].append(ln.text)
    return [join_lines(e) for e in entries if join_lines(e)]
