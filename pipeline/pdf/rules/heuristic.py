"""The fast PDF path: document structure from hand-written rules over pymupdf's text
(font sizes, weights, positions). About 20x faster than the layout model, for very large
corpora; weaker on unusual layouts (see `layout.parse_layout` for the default path).

Layout work (lines and running headers in `read/lines.py`; units and the column order by
XY-cut in `pipeline.pdf.read.page_units`) is done before; this module classifies the units of
each page in reading order."""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Any

import pymupdf

from pipeline.config import StructureSettings
from pipeline.pdf.build.sections import NUMBERED, dedupe_headings
from pipeline.pdf.covers import below, cover_pages
from pipeline.pdf.read.lines import (
    CAPTION,
    body_size,
    is_caption,
    normalise_margin_text,
    note_start,
    page_number_token,
    page_units,
)
from pipeline.pdf.read.page_units import BULLET, Unit, xy_cut
from pipeline.pdf.thresholds import (
    BOLD_HEADING_RATIO,
    BOLD_HEADING_WORDS,
    BOLD_SHARE,
    CHAPTER_NUMBER_CHARS,
    CHAPTER_NUMBER_RATIO,
    COLUMN_NEAR,
    FORMULA_MATH_SHARE,
    FORMULA_MAX_CHARS,
    HEADING_GAP_RATIO,
    HEADING_MAX_LINES,
    HEADING_RATIO,
    INDENT,
    MARGIN_MAX_LINES,
    MARGIN_NUMBER_WORDS,
    MATH_SHARE,
    MIN_REPEAT_PAGES,
    NEIGHBOUR_BODY_RATIO,
    NOTE_RATIO,
    OFF_CENTRE,
    OVER_NEXT_RATIO,
    PAGE_NUMBER_SIZE_SLACK,
    STEP_HEADING_WORDS,
    TITLE_RATIO,
    XY_MIN_HGAP,
    XY_MIN_VGAP,
    XY_VGAP_RATIO,
)
from pipeline.structure.model import DocStructure

DOT_LEADER = re.compile(r"(\.\s?){4,}\s*\S*$")


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
            if u.image or len(u.lines) > MARGIN_MAX_LINES:
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
    body = body_size([u for us in pages for u in us])
    drop: set[int] = set()
    labels: dict[int, str] = {}
    numbers: dict[int, str] = {}
    for pno, u in band:
        key = normalise_margin_text(u.text)
        repeated = n >= MIN_REPEAT_PAGES and pages_with[key] >= max(
            MIN_REPEAT_PAGES, cfg.header_footer_min_repeat * n
        )
        tok = toks[id(u)]
        words = len(u.text.split())
        small_numbered = (
            tok is not None
            and words <= MARGIN_NUMBER_WORDS
            and u.size <= body + PAGE_NUMBER_SIZE_SLACK
        )
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
    if not words or len(words) > cfg.heading_max_words or len(u.lines) > HEADING_MAX_LINES:
        return False
    if (
        CAPTION.match(text)
        or DOT_LEADER.search(text)
        or text.endswith((".", ",", ";"))
        and not NUMBERED.match(text)
    ):
        return False
    if not re.search(r"[^\W\d_]", text):  # numbers only: a chapter number if very large
        return u.size >= CHAPTER_NUMBER_RATIO * body and len(text) <= CHAPTER_NUMBER_CHARS
    if u.math > MATH_SHARE or BULLET.match(text) and not NUMBERED.match(text):
        return False
    left, center = col
    if u.bbox[0] > left + INDENT and abs((u.bbox[0] + u.bbox[2]) / 2 - center) > OFF_CENTRE:
        return False  # indented and not centred: text inside a figure or a table
    larger = u.size >= HEADING_RATIO * body
    bold = u.bold > BOLD_SHARE and u.size >= BOLD_HEADING_RATIO * body
    if larger or bold:
        if NUMBERED.match(text) or larger:
            return True
        return len(words) <= BOLD_HEADING_WORDS
    if (
        nxt is not None
        and not nxt.image
        and u.size >= OVER_NEXT_RATIO * nxt.size
        and u.size >= NEIGHBOUR_BODY_RATIO * body
    ):
        gap = nxt.bbox[1] - u.bbox[3]
        return gap < HEADING_GAP_RATIO * u.size and len(words) <= STEP_HEADING_WORDS
    return False


def _is_note(u: Unit, body: float, height: float, cfg: StructureSettings) -> str | None:
    """A footnote's marker, if `u` is a footnote: small text low on the page, marker first."""
    if u.image or u.bbox[1] < (1 - cfg.footnote_zone) * height or u.size > NOTE_RATIO * body:
        return None
    first = u.lines[0]
    if first.first_small:
        return first.first_small
    m = note_start(first.text.strip())
    return m.group(1) if m else None


def parse_heuristic(
    out: DocStructure,
    pdf: pymupdf.Document,
    cfg: StructureSettings,
    ocr: dict[int, list[Unit]] | None = None,
) -> tuple[list[dict[str, Any]], dict[int, str], dict[str, Any]]:
    """Classified items in reading order, printed page numbers by page and metadata; `ocr`
    holds the units of scanned pages (`ocr_pages`), read in place of their text layer."""
    pages, heights = _read_pages(out, pdf, ocr)
    all_units = [u for us in pages for u in us if not u.image]
    body = body_size(all_units)
    drop, printed, page_numbers = _margins(pages, heights, cfg)
    tables, table_s = _find_tables(out, pdf, cfg)

    # Per page: reading order, classification.
    items: list[dict[str, Any]] = []  # logical units before merging, in reading order
    for pno, units in enumerate(pages):
        kept = [u for u in units if id(u) not in drop]
        kept = _table_units(kept, tables.get(pno, []), pno, body)
        items.extend(_page_items(kept, units, page_numbers, body, heights[pno], cfg))
    _mark_title(items, body)
    cover_pages(items, pdf.page_count, body)
    dedupe_headings(items)

    meta = {"body_font_size": body, "pdf_tables": cfg.pdf_tables}
    out.stats["pdf_table_s"] = table_s
    return items, printed, meta


def _read_pages(
    out: DocStructure, pdf: pymupdf.Document, ocr: dict[int, list[Unit]] | None
) -> tuple[list[list[Unit]], list[float]]:
    """The units of every page (a scanned page's from `ocr`) and the page heights; a page
    that fails, is rotated or has no text is a warning on `out`."""
    pages: list[list[Unit]] = []
    heights: list[float] = []
    for pno in range(pdf.page_count):
        page = pdf[pno]
        try:
            units = ocr[pno] if ocr and pno in ocr else page_units(page, pno)
        except Exception as exc:  # noqa: BLE001 - one odd page must not cost the document
            out.warnings.append(f"page {pno + 1}: text extraction failed ({exc})")
            units = []
        if page.rotation:
            out.warnings.append(f"page {pno + 1}: rotated {page.rotation} degrees")
        if not any(not u.image for u in units):
            out.warnings.append(f"page {pno + 1}: no text")
        pages.append(units)
        heights.append(page.rect.height or 792.0)
    return pages, heights


Table = tuple[tuple[float, float, float, float], str]


def _find_tables(
    out: DocStructure, pdf: pymupdf.Document, cfg: StructureSettings
) -> tuple[dict[int, list[Table]], float]:
    """Tables (optional, costly): each page's table boxes with their markdown, and the
    seconds spent finding them."""
    table_s = 0.0
    tables: dict[int, list[Table]] = {}
    if cfg.pdf_tables:
        t = time.perf_counter()
        for pno in range(pdf.page_count):
            try:
                found = pdf[pno].find_tables()
                tables[pno] = [(tuple(tb.bbox), tb.to_markdown()) for tb in found.tables]
            except Exception as exc:  # noqa: BLE001
                out.warnings.append(f"page {pno + 1}: table detection failed ({exc})")
        table_s = time.perf_counter() - t
    return tables, table_s


def _table_units(kept: list[Unit], page_tables: list[Table], pno: int, body: float) -> list[Unit]:
    """Units inside a table's bbox become one TABLE unit."""
    for bbox, md in page_tables:
        inside = [u for u in kept if _inside(u.bbox, bbox)]
        if inside:
            kept = [u for u in kept if not _inside(u.bbox, bbox)]
            tu = Unit(inside[0].lines[:1], pno, kind="TABLE")
            tu.lines = [type(inside[0].lines[0])(md, bbox, body, 0, 0)]
            kept.append(tu)
    return kept


def _page_items(
    kept: list[Unit],
    units: list[Unit],
    page_numbers: dict[int, str],
    body: float,
    height: float,
    cfg: StructureSettings,
) -> list[dict[str, Any]]:
    """The classified items of one page: its flow in reading order, then its footnotes,
    then its printed page numbers."""
    items: list[dict[str, Any]] = []
    notes = []
    flow = []
    for u in kept:
        marker = None if u.kind == "TABLE" else _is_note(u, body, height, cfg)
        if marker is not None:
            u.kind = "NOTE"
            notes.append((u, marker))
        elif (
            notes
            and not u.image
            and u.size <= NOTE_RATIO * body
            and u.bbox[1] > notes[-1][0].bbox[1]
        ):
            notes[-1][0].lines.extend(u.lines)  # a footnote's continuation block
        else:
            flow.append(u)
    ordered = xy_cut(flow, min_vgap=max(XY_VGAP_RATIO * body, XY_MIN_VGAP), min_hgap=XY_MIN_HGAP)
    col_x0 = _column_lefts(ordered)
    for u in ordered:
        kind = _kind(u, ordered, col_x0, body, cfg)
        items.append({"kind": kind, "unit": u, "text": u.text, "marker": None})
    for u, marker in sorted(notes, key=lambda nm: (nm[0].bbox[1], nm[0].bbox[0])):
        text = u.text
        if text.startswith(marker):
            text = text[len(marker) :].lstrip()
        items.append({"kind": "NOTE", "unit": u, "text": text, "marker": marker})
    for u in sorted(units, key=lambda u: (u.bbox[1], u.bbox[0])):
        if id(u) in page_numbers:
            items.append({"kind": "PAGE_NUMBER", "unit": u, "text": page_numbers[id(u)]})
    return items


def _kind(u: Unit, ordered: list[Unit], col_x0, body: float, cfg: StructureSettings) -> str:  # noqa: ANN001
    """The kind of a unit of a page's flow."""
    text = u.text
    if u.image:
        return "FIGURE"
    if u.kind == "TABLE":
        return "TABLE"
    if is_caption(u, text, body):
        return "CAPTION"
    if _is_heading(u, body, below(u, ordered), col_x0(u), cfg):
        return "HEADING"
    if u.math > FORMULA_MATH_SHARE and len(text) < FORMULA_MAX_CHARS:
        return "FORMULA"
    if BULLET.match(text) and not NUMBERED.match(text) or re.match(r"^[•·▪◦●■–]\s*", text):
        return "LIST_ITEM"
    return "PARAGRAPH"


def _mark_title(items: list[dict[str, Any]], body: float) -> None:
    """The document title: the largest heading on page 1 when clearly above body size."""
    first = [it for it in items if it["kind"] == "HEADING" and it["unit"].page == 0]
    if first:
        top = max(first, key=lambda it: it["unit"].size)
        if top["unit"].size >= TITLE_RATIO * body:
            top["kind"] = "TITLE"


def _inside(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    cx, cy = (a[0] + a[2]) / 2, (a[1] + a[3]) / 2
    return b[0] <= cx <= b[2] and b[1] <= cy <= b[3]


def _column_lefts(units: list[Unit]):  # noqa: ANN202 - a small closure
    """Left edge of the text column a unit sits in (the smallest x0 of multi-line units
    overlapping it horizontally and near it vertically): headings must start there or be
    centred. Nearness matters: a full-width banner elsewhere on the page is no column."""
    text = [u for u in units if not u.image and len(u.lines) >= 2]

    def left(u: Unit) -> tuple[float, float]:
        over = [v.bbox for v in text if v.bbox[0] < u.bbox[2] and v.bbox[2] > u.bbox[0]]
        if over:
            dist = [max(0.0, b[1] - u.bbox[3], u.bbox[1] - b[3]) for b in over]
            near = min(dist) + COLUMN_NEAR
            over = [b for b, d in zip(over, dist, strict=True) if d <= near]
        if not over:
            return u.bbox[0], (u.bbox[0] + u.bbox[2]) / 2
        x0, x1 = min(b[0] for b in over), max(b[2] for b in over)
        return x0, (x0 + x1) / 2

    return left
