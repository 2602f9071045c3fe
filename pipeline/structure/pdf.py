"""PDF structure (pymupdf): logical content nodes in reading order, a section tree from the
outline or from detected headings, page labels on every node, and note/citation/caption edges.

Layout work (lines, units, columns, running headers) is in `pdf_layout.py`; this module
classifies units, merges paragraphs split by page or column breaks and builds the structure.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from typing import Any

import pymupdf

from pipeline.config import StructureSettings
from pipeline.structure import register
from pipeline.structure.model import DocStructure, position
from pipeline.structure.pdf_layout import (
    BULLET,
    ROMAN,
    Unit,
    normalise_margin_text,
    page_number_token,
    page_units,
    xy_cut,
)
from pipeline.structure.text import parse_text

CAPTION = re.compile(r"^(figure|fig\.|table|tab\.|example|listing|chart|exhibit)\s*[\dIVX]+", re.I)
# A caption's leading label ("Figure 3", "Fig. 3a", "Table 2-1", "TABLE IV") and what follows.
CAPTION_LABEL = re.compile(
    r"^(?i:figure|fig\.|table|tab\.|example|listing|chart|exhibit)\s*"
    r"(?:\d{1,3}(?:[.\-–]\d{1,3})*[a-z]?|[IVXLC]{1,6})(?!\w)"
)
NUMBERED = re.compile(r"^((?:\d+|[A-Z])(?:\.\d+)*)\.?\s+\S")
CHAPTER_WORD = re.compile(r"^(chapter|part|appendix)\b", re.I)
NOTE_START = re.compile(r"^(\d{1,3}|[*†‡§¶]+)\s?(?=\S)")
CITATION = re.compile(r"\[(\d+(?:\s*[,–-]\s*\d+)*)\]")
BIB_NUM = re.compile(r"^\[(\d+)\]\s*")
DOT_LEADER = re.compile(r"(\.\s?){4,}\s*\S*$")
BIB_TITLES = re.compile(
    r"^(\d+\.?\s*)?(references|bibliography|works cited|literature( cited)?)$", re.I
)
FRONT = re.compile(
    r"^(abstract|preface|foreword|contents|table of contents|acknowledg\w*|notices)$", re.I
)
BACK = re.compile(r"^(index|glossary|notes|endnotes|related publications|back cover)$", re.I)
SENT_END = re.compile(r"[.!?:;\"”’)\]]$")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def _body_size(units: list[Unit]) -> float:
    c: Counter[float] = Counter()
    for u in units:
        for ln in u.lines:
            c[ln.size] += len(ln.text)
    return c.most_common(1)[0][0] if c else 10.0


def _margins(
    pages: list[list[Unit]], heights: list[float], cfg: StructureSettings
) -> tuple[set[int], dict[int, str], dict[int, str]]:
    """Ids of running header/footer units (out of the body text), printed page numbers by
    page, and the printed page number of each margin unit that carries one (a PAGE_NUMBER
    node). A number that stays the same on every page ('vol. 3') is no page number."""
    band: list[tuple[int, Unit]] = []
    for pno, units in enumerate(pages):
        h = heights[pno]
        for u in units:
            if u.image or len(u.lines) > 2:
                continue
            y0, y1 = u.bbox[1], u.bbox[3]
            if y1 <= cfg.header_footer_margin * h or y0 >= (1 - cfg.header_footer_margin) * h:
                band.append((pno, u))
    pages_with: Counter[str] = Counter()
    for key in {(p, normalise_margin_text(u.text)) for p, u in band}:
        pages_with[key[1]] += 1
    toks = {id(u): page_number_token(u.text) for _, u in band}
    constant = Counter((" ".join(u.text.lower().split()), toks[id(u)]) for _, u in band)
    n = len(pages)
    body = _body_size([u for us in pages for u in us])
    drop: set[int] = set()
    labels: dict[int, str] = {}
    numbers: dict[int, str] = {}
    for pno, u in band:
        key = normalise_margin_text(u.text)
        repeated = n >= 2 and pages_with[key] >= max(2, cfg.header_footer_min_repeat * n)
        tok = toks[id(u)]
        words = len(u.text.split())
        small_numbered = tok is not None and words <= 15 and u.size <= body + 0.5
        if repeated or small_numbered or (tok is not None and words == 1):
            drop.add(id(u))
            if tok is not None and constant[(" ".join(u.text.lower().split()), tok)] < 2:
                numbers[id(u)] = tok
                labels.setdefault(pno, tok)
    return drop, labels, numbers


def _is_heading(
    u: Unit, body: float, nxt: Unit | None, col: tuple[float, float], cfg: StructureSettings
) -> bool:
    text = u.text.strip()
    words = text.split()
    if not words or len(words) > cfg.heading_max_words or len(u.lines) > 4:
        return False
    if (
        CAPTION.match(text)
        or DOT_LEADER.search(text)
        or text.endswith((".", ",", ";"))
        and not NUMBERED.match(text)
    ):
        return False
    if not re.search(r"[^\W\d_]", text):  # numbers only: a chapter number if very large
        return u.size >= 2 * body and len(text) <= 3
    if u.math > 0.3 or BULLET.match(text) and not NUMBERED.match(text):
        return False
    left, center = col
    if u.bbox[0] > left + 6 and abs((u.bbox[0] + u.bbox[2]) / 2 - center) > 20:
        return False  # indented and not centred: text inside a figure or a table
    larger = u.size >= 1.15 * body
    bold = u.bold > 0.9 and u.size >= 0.95 * body
    if larger or bold:
        if NUMBERED.match(text) or larger:
            return True
        return len(words) <= 12
    if nxt is not None and not nxt.image and u.size >= 1.2 * nxt.size and u.size >= 0.9 * body:
        gap = nxt.bbox[1] - u.bbox[3]
        return gap < 1.2 * u.size and len(words) <= 10
    return False


def _is_caption(u: Unit, text: str, body: float) -> bool:
    """A figure/table caption rather than a sentence about one: the label is followed by a
    separator ("Table 2:", "Figure 3 –"), a capitalised title ("Table 2-1 FUNCTION_USAGE
    view"), or nothing. A lower-case word after it ("Table 2 compares ...", "Figure 3-5
    shows ...") makes a sentence of running text, a caption only when set off from the body
    text by a smaller or bold font."""
    m = CAPTION_LABEL.match(text)
    if m is None:
        return False
    rest = text[m.end() :].lstrip()
    if not rest[:1].islower():
        return True
    return u.size < 0.95 * body or u.bold > 0.9


def _is_note(u: Unit, body: float, height: float, cfg: StructureSettings) -> str | None:
    """A footnote's marker, if `u` is a footnote: small text low on the page, marker first."""
    if u.image or u.bbox[1] < (1 - cfg.footnote_zone) * height or u.size > 0.92 * body:
        return None
    first = u.lines[0]
    if first.first_small:
        return first.first_small
    m = NOTE_START.match(first.text.strip())
    if m and not re.match(r"^\d+\s*[.,%]", first.text.strip()):
        return m.group(1)
    return None


def _toc_component(title: str, level: int, levels: int) -> str:
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
    if level == 1 and (CHAPTER_WORD.match(title) or levels >= 3):
        return "CHAPTER"
    return "SECTION"


def _pos(u: Unit, labels: list[str]) -> dict[str, Any]:
    x0, y0, x1, y1 = u.bbox
    return position(
        u.page + 1, labels[u.page], round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2)
    )


def _label_pages(doc: pymupdf.Document, printed: dict[int, str]) -> list[str]:
    labels = []
    for pno in range(doc.page_count):
        try:
            lab = doc[pno].get_label()
        except Exception:  # noqa: BLE001 - a broken label tree must not cost the document
            lab = ""
        labels.append(lab or printed.get(pno, ""))
    return labels


def parse_pdf(
    doc: dict[str, Any], data: bytes | None, settings: StructureSettings | None = None
) -> DocStructure:
    """Structure of one PDF; plain-text structure (with a warning) when the bytes are gone."""
    cfg = settings or StructureSettings()
    if data is None:
        out = parse_text(doc["id"], doc["source_path"], doc["title"], doc["text"] or "")
        out.warnings.append("PDF file changed or missing: plain-text structure from stored text")
        return out
    t_start = time.perf_counter()
    with pymupdf.open(stream=data, filetype="pdf") as pdf:
        return _parse(doc, pdf, cfg, t_start)


def _parse(
    doc: dict[str, Any], pdf: pymupdf.Document, cfg: StructureSettings, t0: float
) -> DocStructure:
    out = DocStructure(doc["id"], doc["source_path"], doc["title"])
    pages: list[list[Unit]] = []
    heights: list[float] = []
    widths: list[float] = []
    for pno in range(pdf.page_count):
        page = pdf[pno]
        try:
            units = page_units(page, pno)
        except Exception as exc:  # noqa: BLE001 - one odd page must not cost the document
            out.warnings.append(f"page {pno + 1}: text extraction failed ({exc})")
            units = []
        if page.rotation:
            out.warnings.append(f"page {pno + 1}: rotated {page.rotation} degrees")
        if not any(not u.image for u in units):
            out.warnings.append(f"page {pno + 1}: no text")
        pages.append(units)
        heights.append(page.rect.height or 792.0)
        widths.append(page.rect.width or 612.0)
    all_units = [u for us in pages for u in us if not u.image]
    body = _body_size(all_units)
    drop, printed, page_numbers = _margins(pages, heights, cfg)
    labels = _label_pages(pdf, printed)

    # Tables (optional, costly): units inside a table's bbox become one TABLE unit.
    table_s = 0.0
    tables: dict[int, list[tuple[tuple[float, float, float, float], str]]] = {}
    if cfg.pdf_tables:
        t = time.perf_counter()
        for pno in range(pdf.page_count):
            try:
                found = pdf[pno].find_tables()
                tables[pno] = [(tuple(tb.bbox), tb.to_markdown()) for tb in found.tables]
            except Exception as exc:  # noqa: BLE001
                out.warnings.append(f"page {pno + 1}: table detection failed ({exc})")
        table_s = time.perf_counter() - t

    # Per page: reading order, classification.
    items: list[dict[str, Any]] = []  # logical units before merging, in reading order
    for pno, units in enumerate(pages):
        kept = [u for u in units if id(u) not in drop]
        page_tables = tables.get(pno, [])
        for bbox, md in page_tables:
            inside = [u for u in kept if _inside(u.bbox, bbox)]
            if inside:
                kept = [u for u in kept if not _inside(u.bbox, bbox)]
                tu = Unit(inside[0].lines[:1], pno, kind="TABLE")
                tu.lines = [type(inside[0].lines[0])(md, bbox, body, 0, 0)]
                kept.append(tu)
        notes = []
        flow = []
        for u in kept:
            marker = None if u.kind == "TABLE" else _is_note(u, body, heights[pno], cfg)
            if marker is not None:
                u.kind = "NOTE"
                notes.append((u, marker))
            elif (
                notes and not u.image and u.size <= 0.92 * body and u.bbox[1] > notes[-1][0].bbox[1]
            ):
                notes[-1][0].lines.extend(u.lines)  # a footnote's continuation block
            else:
                flow.append(u)
        ordered = xy_cut(flow, min_vgap=max(0.8 * body, 6.0), min_hgap=0.5)
        col_x0 = _column_lefts(ordered)
        for u in ordered:
            text = u.text
            if u.image:
                kind = "FIGURE"
            elif u.kind == "TABLE":
                kind = "TABLE"
            elif _is_caption(u, text, body):
                kind = "CAPTION"
            elif _is_heading(u, body, _below(u, ordered), col_x0(u), cfg):
                kind = "HEADING"
            elif u.math > 0.4 and len(text) < 300:
                kind = "FORMULA"
            elif (
                BULLET.match(text) and not NUMBERED.match(text) or re.match(r"^[•·▪◦●■–]\s*", text)
            ):
                kind = "LIST_ITEM"
            else:
                kind = "PARAGRAPH"
            items.append({"kind": kind, "unit": u, "text": text, "marker": None})
        for u, marker in sorted(notes, key=lambda nm: (nm[0].bbox[1], nm[0].bbox[0])):
            text = u.text
            if text.startswith(marker):
                text = text[len(marker) :].lstrip()
            items.append({"kind": "NOTE", "unit": u, "text": text, "marker": marker})
        for u in sorted(units, key=lambda u: (u.bbox[1], u.bbox[0])):
            if id(u) in page_numbers:
                items.append({"kind": "PAGE_NUMBER", "unit": u, "text": page_numbers[id(u)]})

    # The document title: the largest heading on page 1 when clearly above body size.
    first = [it for it in items if it["kind"] == "HEADING" and it["unit"].page == 0]
    if first:
        top = max(first, key=lambda it: it["unit"].size)
        if top["unit"].size >= 1.5 * body:
            top["kind"] = "TITLE"
    _cover_pages(items, pdf.page_count, body)
    _dedupe_headings(items)

    merged = _merge_continuations(items)
    _build(out, pdf, merged, labels, body)
    meta = {
        "parser": "pymupdf",
        "pages": pdf.page_count,
        "body_font_size": body,
        "pdf_tables": cfg.pdf_tables,
        "page_labels": sum(1 for lab in labels if lab),
        "outline_entries": len(pdf.get_toc()),
    }
    out.sections[0]["metadata"] = json.dumps(meta, sort_keys=True)
    # Timings vary run to run: they go to run metadata, never into the tables.
    out.stats.update(
        pdf_pages=pdf.page_count,
        pdf_parse_s=time.perf_counter() - t0,
        pdf_table_s=table_s,
    )
    return out


def _inside(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    cx, cy = (a[0] + a[2]) / 2, (a[1] + a[3]) / 2
    return b[0] <= cx <= b[2] and b[1] <= cy <= b[3]


def _below(u: Unit, units: list[Unit]) -> Unit | None:
    """The unit right under `u` in its column (nearest top edge below it, overlapping it
    horizontally): what a heading is compared with. Reading order is no substitute: a
    heading with a tiny gap under it is cut off as its own band by the XY-cut."""
    cands = [
        v
        for v in units
        if v is not u
        and v.bbox[1] >= u.bbox[3] - 1
        and v.bbox[0] < u.bbox[2]
        and v.bbox[2] > u.bbox[0]
    ]
    return min(cands, key=lambda v: (v.bbox[1], v.bbox[0])) if cands else None


def _column_lefts(units: list[Unit]):  # noqa: ANN202 - a small closure
    """Left edge of the text column a unit sits in (the smallest x0 of multi-line units
    overlapping it horizontally and near it vertically): headings must start there or be
    centred. Nearness matters: a full-width banner elsewhere on the page is no column."""
    text = [u for u in units if not u.image and len(u.lines) >= 2]

    def left(u: Unit) -> tuple[float, float]:
        over = [v.bbox for v in text if v.bbox[0] < u.bbox[2] and v.bbox[2] > u.bbox[0]]
        if over:
            dist = [max(0.0, b[1] - u.bbox[3], u.bbox[1] - b[3]) for b in over]
            near = min(dist) + 60
            over = [b for b, d in zip(over, dist, strict=True) if d <= near]
        if not over:
            return u.bbox[0], (u.bbox[0] + u.bbox[2]) / 2
        x0, x1 = min(b[0] for b in over), max(b[2] for b in over)
        return x0, (x0 + x1) / 2

    return left


def _cover_pages(items: list[dict[str, Any]], n_pages: int, body: float) -> None:
    """Front/back covers (first/last page with little body-size text): only the largest
    multi-word heading there is one; the rest is display type."""
    for pno in {0, n_pages - 1}:
        on = [it for it in items if it["unit"].page == pno and not it["unit"].image]
        chars = sum(len(it["text"]) for it in on)
        body_chars = sum(len(it["text"]) for it in on if abs(it["unit"].size - body) <= 0.6)
        cover = bool(on) and re.match(r"^(front |back )?cover$", on[0]["text"].strip(), re.I)
        if not on or body_chars > 0.3 * chars and not cover:
            continue
        heads = [it for it in on if it["kind"] in ("HEADING", "TITLE")]
        multi = [it for it in heads if len(it["text"].split()) >= 3]
        keep = max(multi, key=lambda it: it["unit"].size) if multi else None
        units = [it["unit"] for it in on]
        for it in heads:
            if it is not keep and not _over_text(it["unit"], units):
                it["kind"] = "PARAGRAPH"
        if keep is not None and pno == 0:
            keep["kind"] = "TITLE"


def _over_text(u: Unit, units: list[Unit]) -> bool:
    """A multi-word display line set right over a block of smaller running text (a cover's
    blurb heading), as opposed to a free-standing slogan."""
    b = _below(u, units)
    if b is None or len(u.text.split()) < 3 or len(b.lines) < 3:
        return False
    return b.bbox[1] - u.bbox[3] < 2 * u.size and b.size < u.size and abs(b.bbox[0] - u.bbox[0]) < 3


def _dedupe_headings(items: list[dict[str, Any]]) -> None:
    """The same heading text twice on one page (a masthead over the display heading): only
    the larger one heads a section."""
    best: dict[tuple[int, str], dict[str, Any]] = {}
    for it in items:
        if it["kind"] != "HEADING":
            continue
        key = (it["unit"].page, _norm(it["text"]))
        other = best.get(key)
        if other is None:
            best[key] = it
        elif it["unit"].size > other["unit"].size:
            other["kind"] = "PARAGRAPH"
            best[key] = it
        else:
            it["kind"] = "PARAGRAPH"


def _merge_continuations(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One node for a paragraph split by a page or column break (or a block split by pymupdf):
    the previous paragraph does not end a sentence and this one starts in lower case, in about
    the same font size (a chart's small labels continue nothing). Notes, page numbers and
    running text in between do not stop the merge; when a figure, table, caption or formula
    sits in between, merging would move text across it, so the second part stays its own node
    and `continues` names the item it continues (a CONTINUES edge)."""
    out: list[dict[str, Any]] = []
    last_para: dict[str, Any] | None = None
    between = False  # a figure/table/caption/formula since last_para
    for it in items:
        it = {**it, "units": [it["unit"]]}
        if it["kind"] == "PARAGRAPH" and last_para is not None:
            prev = last_para["text"]
            t = it["text"]
            same_font = it["unit"].size >= 0.9 * last_para["unit"].size  # not a chart label
            if t[:1].islower() and not SENT_END.search(prev) and same_font:
                if not between:
                    last_para["text"] = join_text(prev, t)
                    last_para["units"].append(it["unit"])
                    continue
                it["continues"] = last_para
        if it["kind"] in ("HEADING", "TITLE", "LIST_ITEM"):
            last_para = None
        elif it["kind"] in ("FIGURE", "TABLE", "CAPTION", "FORMULA"):
            between = True
        out.append(it)
        if it["kind"] == "PARAGRAPH":
            smaller = last_para is not None and it["unit"].size < 0.9 * last_para["unit"].size
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
    return len(text.split()) >= 2 and digits <= 0.2 * len(chars) and text[:1] not in "=+−-"


def join_text(a: str, b: str) -> str:
    if a.endswith("-") and len(a) > 1 and a[-2].isalpha():
        return a[:-1] + b
    return f"{a} {b}"


def _heading_levels(heads: list[dict[str, Any]]) -> dict[int, int]:
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


def _build(
    out: DocStructure,
    pdf: pymupdf.Document,
    items: list[dict[str, Any]],
    labels: list[str],
    body: float,
) -> None:
    toc = [e for e in pdf.get_toc(simple=True) if len(e) >= 3 and str(e[1]).strip()]
    # Section anchors: item index -> (level, title, component).
    anchors: dict[int, list[tuple[int, str, str, int]]] = {}
    if toc:
        levels = max(e[0] for e in toc)
        for level, title, page, *_ in toc:
            page0 = max(0, int(page) - 1)
            idx = _match_toc(items, str(title), page0)
            comp = _toc_component(str(title), level, levels)
            anchors.setdefault(idx, []).append((level, str(title).strip(), comp, page0))
    else:
        heads = [it for it in items if it["kind"] == "HEADING"]
        lv = _heading_levels(heads)
        n_levels = len(set(lv.values()))
        for i, it in enumerate(items):
            if it["kind"] == "HEADING":
                comp = _toc_component(it["text"], lv[id(it)], n_levels + 1)
                anchors.setdefault(i, []).append((lv[id(it)], it["text"], comp, it["unit"].page))

    stack: list[tuple[int, str]] = [(0, out.root_id)]
    in_bib = False
    ids: list[str] = []
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
        meta: dict[str, Any] = {}
        if in_bib and kind in ("PARAGRAPH", "LIST_ITEM"):
            for entry in _bib_entries(it):
                m = BIB_NUM.match(entry)
                nid = out.add_node(section, "BIBLIOGRAPHIC_ENTRY", entry, positions)
                if m:
                    bib.setdefault(m.group(1), nid)
                ids.append(nid)
            continue
        if kind == "NOTE":
            meta["marker"] = it["marker"]
        if kind in ("HEADING", "TITLE"):
            meta["font_size"] = it["unit"].size
        if it["unit"].image:
            meta["image"] = True
        nid = out.add_node(section, kind, it["text"], positions, metadata=meta)
        it["id"] = nid
        ids.append(nid)
        if kind == "NOTE":
            notes_by_page.setdefault(it["unit"].page, {}).setdefault(it["marker"], nid)
    for it in items:
        if "continues" in it and "id" in it and "id" in it["continues"]:
            out.add_edge(it["continues"]["id"], it["id"], "CONTINUES")
    _note_edges(out, items, notes_by_page)
    _citation_edges(out, items, bib)
    _caption_edges(out, items)


def _match_toc(items: list[dict[str, Any]], title: str, page0: int) -> int:
    """Item where an outline entry starts: a heading-like item on its page with that text."""
    key = _norm(title)
    first_on_page = None
    for i, it in enumerate(items):
        if it["unit"].page != page0:
            continue
        if first_on_page is None:
            first_on_page = i
        t = _norm(it["text"])
        if t and key and (t == key or t.endswith(key) or key.endswith(t) and len(t) > 3):
            if it["kind"] in ("PARAGRAPH", "LIST_ITEM"):
                it["kind"] = "HEADING"
            return i
    if first_on_page is not None:
        return first_on_page
    later = [i for i, it in enumerate(items) if it["unit"].page > page0]
    return later[0] if later else len(items)


def _bib_entries(it: dict[str, Any]) -> list[str]:
    """A bibliography block split into entries: at '[n]' starts or hanging indents."""
    from pipeline.structure.pdf_layout import join_lines

    entries: list[list[str]] = []
    lines = [ln for u in it["units"] for ln in u.lines]
    x_min = min(ln.bbox[0] for ln in lines)
    for ln in lines:
        starts = BIB_NUM.match(ln.text.strip()) or ln.bbox[0] <= x_min + 2
        if not entries or starts and (BIB_NUM.match(ln.text.strip()) or not _has_bracket(lines)):
            entries.append([ln.text])
        else:
            entries[-1].append(ln.text)
    return [join_lines(e) for e in entries if join_lines(e)]


def _has_bracket(lines: list[Any]) -> bool:
    return any(BIB_NUM.match(ln.text.strip()) for ln in lines)


def _note_edges(
    out: DocStructure, items: list[dict[str, Any]], notes: dict[int, dict[str, str]]
) -> None:
    for it in items:
        if it["kind"] == "NOTE" or "id" not in it:
            continue
        for u in it["units"]:
            for m in u.markers:
                target = notes.get(u.page, {}).get(m) or notes.get(u.page + 1, {}).get(m)
                if target:
                    out.add_edge(it["id"], target, "REFERENCES_NOTE", marker_text=m)


def _citation_edges(out: DocStructure, items: list[dict[str, Any]], bib: dict[str, str]) -> None:
    if not bib:
        return
    for it in items:
        if "id" not in it or it["kind"] in ("NOTE",):
            continue
        for m in CITATION.finditer(it["text"]):
            for num in _expand(m.group(1)):
                if num in bib:
                    out.add_edge(it["id"], bib[num], "REFERENCES_CITATION", marker_text=m.group(0))


def _expand(spec: str) -> list[str]:
    """'2, 5-7' -> ['2', '5', '6', '7']."""
    nums: list[str] = []
    for part in spec.split(","):
        part = part.strip()
        m = re.match(r"^(\d+)\s*[–-]\s*(\d+)$", part)
        if m and 0 < int(m.group(2)) - int(m.group(1)) < 50:
            nums += [str(n) for n in range(int(m.group(1)), int(m.group(2)) + 1)]
        elif part.isdigit():
            nums.append(part)
    return nums


def _caption_edges(out: DocStructure, items: list[dict[str, Any]]) -> None:
    """Figure/table -> caption (IS_CAPTIONED_BY): the nearest figure or table on the page."""
    for it in items:
        if it["kind"] != "CAPTION" or "id" not in it:
            continue
        u = it["unit"]
        want = "TABLE" if re.match(r"^tab", it["text"], re.I) else "FIGURE"
        cands = [
            c
            for c in items
            if "id" in c and c["unit"].page == u.page and c["kind"] in (want, "FIGURE", "TABLE")
        ]
        if not cands:
            continue

        def dist(c: dict[str, Any], u: Unit = u, want: str = want) -> float:
            b = c["unit"].bbox
            return max(0.0, b[1] - u.bbox[3], u.bbox[1] - b[3]) + (0 if c["kind"] == want else 50)

        best = min(cands, key=dist)
        if dist(best) < 150:
            out.add_edge(best["id"], it["id"], "IS_CAPTIONED_BY")


@register("application/pdf")
def _parse_pdf_registered(
    doc: dict[str, Any], data: bytes | None, settings: StructureSettings | None = None
) -> DocStructure:
    return parse_pdf(doc, data, settings)


__all__ = ["parse_pdf", "ROMAN"]
