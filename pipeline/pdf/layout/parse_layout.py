"""The layout-model PDF path (the default): pymupdf's layout-analysis model (an ONNX model
shipped with pymupdf 2.x, run on the CPU, nothing downloaded) classes the regions of each
page (text, section-header, title, caption, footnote, list-item, formula, picture, table,
page-header, page-footer) and pymupdf4llm puts them in reading order, columns included.

The model gives regions; the text comes from pymupdf's own lines (`read.lines`), each span
given to the region that holds it, so superscript note markers, font sizes and
hyphenation are read as on the heuristic path. Lines in no region (text the model left
out) become paragraphs placed by position; rotated lines (margin text, axis labels) are
dropped. Page headers/footers are dropped, their page numbers kept as page labels."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pymupdf

from pipeline.config import StructureSettings
from pipeline.pdf.build.sections import SENT_END
from pipeline.pdf.layout.classify import (
    classify_page,
    heading_classes,
    title_and_headings,
)
from pipeline.pdf.layout.page_numbers import printed_numbers, roman_value, running_text
from pipeline.pdf.layout.regions import FAILED, MARGIN_CLASSES, Region
from pipeline.pdf.layout.workers import Pages, layout_regions
from pipeline.pdf.read.bullets import LIST_GLYPH
from pipeline.pdf.read.lines import (
    PAGE_NO,
    attach_markers,
    body_size,
    make_line,
    merge_same_row,
    normalise_margin_text,
    note_start,
    page_dict,
)
from pipeline.pdf.read.page_units import Line, Unit, split_block, xy_cut
from pipeline.pdf.thresholds import (
    BOLD_SHARE,
    HALF_BOLD,
    HEADING_RATIO,
    HORIZONTAL_DX,
    HORIZONTAL_DY,
    MARGIN_CONTENT_WORDS,
    SHORT_HEADING_LINES,
    SHORT_HEADING_WORDS,
    UPRIGHT_SHARE,
    XY_MIN_HGAP,
    XY_MIN_VGAP,
)
from pipeline.structure.model import DocStructure

NO_TEXT_CLASSES = ("picture",)


def _horizontal(line: dict[str, Any]) -> bool:
    dx, dy = line.get("dir", (1.0, 0.0))
    return dx > HORIZONTAL_DX and abs(dy) < HORIZONTAL_DY


def _region_of(bbox: tuple[float, ...], regions: list[Region]) -> int:
    """Index of the region holding a span (its centre; the smallest such region), -1 if
    none."""
    cx, cy = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    best, area = -1, float("inf")
    for i, r in enumerate(regions):
        x0, y0, x1, y1 = r.bbox
        if x0 - 1 <= cx <= x1 + 1 and y0 - 1 <= cy <= y1 + 1:
            a = (x1 - x0) * (y1 - y0)
            if a < area:
                best, area = i, a
    return best


def _page_text(page: pymupdf.Page, pno: int, regions: list[Region]) -> list[Unit]:
    """Give every region its lines (spans split between regions where one pymupdf line
    crosses two, as two captions on one row); return the units of text in no region."""
    d = page_dict(page)
    groups: dict[tuple[int, int], list[Line]] = {}
    seen: set[tuple[str, int, int]] = set()
    raws = [(bno, ln) for bno, b in enumerate(d["blocks"]) if b["type"] == 0 for ln in b["lines"]]
    size = [sum(len(s["text"]) for s in ln["spans"]) for _, ln in raws]
    across = sum(n for n, (_, ln) in zip(size, raws, strict=True) if _horizontal(ln))
    upright = across >= UPRIGHT_SHARE * sum(size)  # else a page set sideways: its text is all kept
    for bno, raw in raws:
        if upright and not _horizontal(raw):
            continue  # rotated on an upright page: margin text or a figure's axis label
        parts: dict[int, list[dict[str, Any]]] = {}
        spans = raw["spans"]
        for i, s in enumerate(spans):
            # a drawn bullet's span (read.bullets) goes where its text goes
            box = spans[i + 1]["bbox"] if s.get("bullet") and i + 1 < len(spans) else s["bbox"]
            parts.setdefault(_region_of(box, regions), []).append(s)
        for rno, spans in parts.items():
            ln = make_line(spans)
            if ln is None:
                continue
            key = (ln.text, round(ln.bbox[0]), round(ln.bbox[1]))
            if key not in seen:  # text drawn twice (fake bold)
                seen.add(key)
                groups.setdefault((rno, bno if rno < 0 else -1), []).append(ln)
    images = [tuple(b["bbox"]) for b in d["blocks"] if b["type"] == 1]
    drawings: list[pymupdf.Rect] | None = None  # read once, for a picture with text only
    keys = list(groups)
    kept = attach_markers([groups[k] for k in keys])
    orphans: list[Unit] = []
    for (rno, _), lines in zip(keys, kept, strict=True):
        if not lines:
            continue
        lines = merge_same_row(sorted(lines, key=lambda ln: (ln.bbox[1], ln.bbox[0])))
        if rno < 0:
            orphans.extend(split_block(lines, pno))
            continue
        r = regions[rno]
        if r.cls == "picture" and drawings is None:
            drawings = [pymupdf.Rect(dr["rect"]) for dr in page.get_drawings()]
        if r.cls == "picture" and not _drawn(r.bbox, images, drawings or []):
            r.cls = "text"  # only text in it: no picture (display type, a logo in letters)
        if r.cls not in NO_TEXT_CLASSES:
            r.unit = Unit(lines, pno)
            if r.cls == "text":
                _split_text(r)
    return orphans


def _split_text(region: Region) -> None:
    """A text region holding a short bold or larger line set off from the text above or
    below it (the model took a heading and a paragraph for one block), or list items led by
    a bullet glyph (a list the model read as text: read.bullets)."""
    assert region.unit is not None
    parts = split_block(region.unit.lines, region.unit.page)
    if len(parts) < 2 and not LIST_GLYPH.match(parts[0].text):
        return
    out: list[tuple[str, Unit]] = []
    run: list[Unit] = []
    for i, p in enumerate(parts):
        around = [parts[j] for j in (i - 1, i + 1) if 0 <= j < len(parts)]
        if LIST_GLYPH.match(p.text):
            cls = "list-item"
        elif _heading_like(p, around):
            cls = "section-header"
        else:
            run.append(p)
            continue
        if run:
            out.append(("text", Unit([ln for u in run for ln in u.lines], p.page)))
            run = []
        out.append((cls, p))
    if run:
        out.append(("text", Unit([ln for u in run for ln in u.lines], parts[0].page)))
    if len(out) > 1 or out[0][0] != "text":
        region.parts = out


def _heading_like(u: Unit, around: list[Unit]) -> bool:
    words = u.text.split()
    if not words or len(words) > SHORT_HEADING_WORDS or SENT_END.search(u.text):
        return False
    if (
        len(u.lines) > SHORT_HEADING_LINES
    ):  # a heading wrapped in a narrow column is set larger, not only bold
        return all(u.size >= HEADING_RATIO * n.size for n in around)
    return all(
        u.bold > BOLD_SHARE and n.bold < HALF_BOLD or u.size >= HEADING_RATIO * n.size
        for n in around
    )


def _drawn(bbox: tuple[float, ...], images: list[Any], drawings: list[pymupdf.Rect]) -> bool:
    """Whether anything but text is drawn in a region: an image or a vector drawing no
    larger than the region (a page background or frame around it does not count)."""
    rect = pymupdf.Rect(bbox)
    if any(rect.intersects(pymupdf.Rect(b)) for b in images):
        return True
    area = rect.width * rect.height
    return any(
        pymupdf.Rect(r.x0 - 1, r.y0 - 1, r.x1 + 1, r.y1 + 1).intersects(rect)
        and r.width * r.height <= area
        for r in drawings
    )


def _place_orphans(flow: list[Unit], orphans: list[Unit]) -> list[Unit]:
    """Units the model left out, each before the first unit of its column that starts below
    it (after everything when there is none)."""
    if not flow:
        return list(orphans)
    out = list(flow)
    for o in sorted(orphans, key=lambda u: (u.bbox[1], u.bbox[0])):
        at = len(out)
        for i, u in enumerate(out):
            overlap = min(u.bbox[2], o.bbox[2]) - max(u.bbox[0], o.bbox[0])
            if overlap > 0 and u.bbox[1] >= o.bbox[1]:
                at = i
                break
        out.insert(at, o)
    return out


def _table_text(region: Region) -> tuple[str, dict[str, Any]]:
    """A table as Markdown rows from the model's cell grid, with its shape as metadata; the
    text of its lines when the model gave no grid."""
    tab = region.table or {}
    cells = tab.get("extract")
    if cells:
        rows = [[" ".join(str(c or "").split()).replace("|", "\\|") for c in r] for r in cells]
        md = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        md += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        return "\n".join(md), {"rows": tab.get("row_count"), "cols": tab.get("col_count")}
    return (region.unit.text if region.unit else ""), {}


def _keep_margin_content(
    pages: list[list[Region]], orphans: list[list[Unit]], body: float
) -> set[int]:
    """In place: margin regions no other page repeats (digits aside) become text where
    dropping them lost content: a sentence (a one-page document's footnote, a closing
    remark), a line set clearly larger than the body text (`body`, its font size: a
    one-page document's title at the top; running headers are set no larger than the
    text), or any line but a page number on a page with no other text (a one-line
    document, a title or divider page: the model calls a lone line a header or footer).
    Page numbers, running titles, journal lines ("Vol. 85, No. 152": no sentence) and lines
    repeated across pages stay margins. Returns the ids of the lone and large lines' units,
    which the caller classes by size (a large one heads)."""
    margins = [[r for r in rs if r.unit and r.cls in MARGIN_CLASSES] for rs in pages]
    seen = Counter(
        key for rs in margins for key in {normalise_margin_text(r.unit.text) for r in rs}
    )
    lone: set[int] = set()
    for regions, mine, left_out in zip(pages, margins, orphans, strict=True):
        bare = not left_out and all(r.cls in MARGIN_CLASSES for r in regions)
        for r in mine:
            text = r.unit.text.strip()
            if seen[normalise_margin_text(text)] > 1:
                continue
            if r.cls == "page-footer" and _footnote(text):
                r.cls = "footnote"
            elif len(text.split()) >= MARGIN_CONTENT_WORDS and SENT_END.search(text):
                r.cls = "text"
            elif text and not _page_number(text) and (bare or r.unit.size >= HEADING_RATIO * body):
                r.cls = "text"
                lone.add(id(r.unit))
    return lone


def _split_page_number(r: Region) -> list[Region]:
    """A margin region whose page number lines share it with others (a page's last
    footnote just above "Page 1": the model drew one footer around both): the number's
    lines a region of their own, so each is judged alone."""
    if r.cls not in MARGIN_CLASSES or r.unit is None or len(r.unit.lines) < 2:
        return [r]
    numbers = [ln for ln in r.unit.lines if _page_number(ln.text.strip())]
    rest = [ln for ln in r.unit.lines if not _page_number(ln.text.strip())]
    if not numbers or not rest:
        return [r]
    units = [Unit(lines, r.unit.page) for lines in (rest, numbers)]
    return [Region(r.cls, u.bbox, None, u) for u in units]


def _footnote(text: str) -> bool:
    """A footer line that reads as a note: a marker ("1", "*", "†"), then words ending a
    sentence ("1 Figures are provisional."), not a number that opens a figure ("12.5 %")."""
    m = note_start(text)
    rest = text[m.end() :] if m else ""
    return len(rest.split()) >= 2 and bool(SENT_END.search(rest))


def _page_number(text: str) -> bool:
    """A margin line that is only a page number ("12", "Page 3", "iv")."""
    m = PAGE_NO.match(text)
    return m is not None and (m.group(1).isdigit() or roman_value(m.group(1).lower()) is not None)


def parse_layout(
    out: DocStructure,
    pdf: pymupdf.Document,
    cfg: StructureSettings,
    data: bytes | None = None,
    ocr: dict[int, list[Unit]] | None = None,
    ahead: Pages | None = None,
) -> tuple[list[dict[str, Any]], dict[int, str], dict[str, Any]]:
    """Classified items in reading order, printed page numbers by page and metadata;
    `ahead`: the pages' regions read by worker processes before (`pipeline.pdf.once`), else
    `data` (the PDF's bytes) lets a long PDF be read by several processes. `ocr` holds the
    units of scanned pages (`read.ocr_pages`): the model's regions there (a picture) are dropped,
    the units read by position with headings by size."""
    ocr = ocr or {}
    pages = layout_regions(pdf, data, cfg.pdf_workers, ahead)
    orphans: list[list[Unit]] = []
    heights: list[float] = []
    for pno, regions in enumerate(pages):
        page = pdf[pno]
        if pno in ocr:
            regions.clear()
        if regions and regions[0].cls == FAILED:
            err = (regions[0].table or {}).get("error", "")
            out.warnings.append(
                f"page {pno + 1}: not read by the layout model ({err}); text by position"
            )
            regions.clear()
        orphans.append(list(ocr[pno]) if pno in ocr else _page_text(page, pno, regions))
        if not regions:  # no model regions: the heuristic path's column-aware order
            orphans[-1] = xy_cut(orphans[-1], min_vgap=XY_MIN_VGAP, min_hgap=XY_MIN_HGAP)
        heights.append(page.rect.height or 792.0)
        if not any(r.unit for r in regions) and not orphans[-1]:
            out.warnings.append(f"page {pno + 1}: no text")
    every = [r.unit for rs in pages for r in rs if r.unit] + [u for us in orphans for u in us]
    for regions in pages:
        regions[:] = [part for r in regions for part in _split_page_number(r)]
    lone = _keep_margin_content(pages, orphans, body_size(every))
    margins = [[r.unit for r in rs if r.unit and r.cls in MARGIN_CLASSES] for rs in pages]
    numbers = printed_numbers(margins)
    body_units = [
        [r.unit for r in rs if r.unit and r.cls not in MARGIN_CLASSES] + orphans[pno]
        for pno, rs in enumerate(pages)
    ]
    body = body_size([u for us in body_units for u in us])
    running = running_text(
        body_units, heights, cfg.header_footer_margin, cfg.header_footer_min_repeat, margins
    )
    items: list[dict[str, Any]] = []
    for pno, regions in enumerate(pages):
        flow: list[Unit] = []
        cls_of: dict[int, str] = heading_classes(ocr[pno], body) if pno in ocr else {}
        cls_of |= heading_classes([r.unit for r in regions if id(r.unit) in lone], body)
        tables: dict[int, tuple[str, dict[str, Any]]] = {}
        for r in regions:
            if r.cls in MARGIN_CLASSES or r.unit is not None and id(r.unit) in running:
                continue
            if r.cls in ("picture", "table"):
                unit = Unit([Line("", r.bbox, 0.0, 0.0, 0.0)], pno, image=r.cls == "picture")
                if r.cls == "table":
                    tables[id(unit)] = _table_text(r)
            elif r.unit is None:
                continue
            elif r.parts:
                for cls, part in r.parts:
                    cls_of[id(part)] = cls
                    flow.append(part)
                continue
            else:
                unit = r.unit
            cls_of.setdefault(id(unit), r.cls)
            flow.append(unit)
        units = _place_orphans(flow, [o for o in orphans[pno] if id(o) not in running])
        items += classify_page(units, cls_of, tables, body, cfg.heading_max_words)
        if pno in numbers:
            tok, u = numbers[pno]
            items.append({"kind": "PAGE_NUMBER", "unit": u, "text": tok, "marker": None})
    title_and_headings(items, pdf.page_count, body)
    return items, {p: tok for p, (tok, _) in numbers.items()}, {"body_font_size": body}
