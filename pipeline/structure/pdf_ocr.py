"""Scanned PDF pages in the structure parser: the OCR'd lines of an image-only page
(`pipeline.ingest.pdf_ocr`) made into the units the text-layer pages give (`pdf_layout`),
so paragraphs, reading order (XY-cut) and headings by size work on them as far as the
recognised boxes allow. OCR knows no fonts: a line's size is estimated from its width per
character (its box height for short lines), and lines of about the page's usual size get
that one size (a scan has one body size, as a text layer has). Nothing is bold or set in a
math font."""

from __future__ import annotations

import json
import statistics
from typing import Any

import pymupdf

from pipeline.config import StructureSettings
from pipeline.ingest.pdf import PAGE_BREAK
from pipeline.ingest.pdf_ocr import OCR_DPI, OcrLine, OcrReport, ocr_document
from pipeline.structure.model import DocStructure
from pipeline.structure.pdf_layout import Line, Unit, split_block
from pipeline.structure.pdf_sections import SENT_END

# A line's font size from its width: Latin text averages about half an em a character,
# whatever letters the line holds; its box height (ascenders, descenders, the detector's
# margin) varies by a third between "same." and "percent while staff". Short lines are
# measured by height (box height / font size ~ BOX_PER_POINT).
EM_PER_CHAR = 0.5
MIN_CHARS = 8
BOX_PER_POINT = 1.3
# Lines from 35% below to 20% above the page's median estimate are body size (words the
# recogniser ran together make a line look ~15% larger); headings ~1.3x the body or more
# keep their own size.
SAME_SIZE = (0.35, 0.2)
# Boxes on one row closer than this many box heights are one line (the detector cut it at a
# wide space); a two-column paper's gutter (~17 pt at 10 pt text) left ~1 box height
# between the expanded boxes, and a join there interleaved the columns' sentences.
ROW_GAP = 0.5


def _estimate(ln: OcrLine) -> float:
    width, height = ln.bbox[2] - ln.bbox[0], ln.bbox[3] - ln.bbox[1]
    n = len(ln.text)
    return width / (EM_PER_CHAR * n) if n >= MIN_CHARS else height / BOX_PER_POINT


def _sizes(lines: list[OcrLine]) -> list[float]:
    """Font size per line, estimated (see `_estimate`); body-like lines get the page's one
    body size, as a text layer has (not one per line's pixels)."""
    est = [_estimate(ln) for ln in lines]
    if not est:
        return []
    med = statistics.median([e for ln, e in zip(lines, est, strict=True) for _ in ln.text])
    return [
        round(2 * (med if -SAME_SIZE[0] <= e / med - 1 <= SAME_SIZE[1] else e)) / 2 for e in est
    ]


def _rows(lines: list[Line]) -> list[Line]:
    """Boxes on one row less than ROW_GAP box heights apart joined (the detector cuts a line
    at a wide space); boxes farther apart on a row stay apart (columns: a gutter is wider)."""
    out: list[Line] = []
    for ln in sorted(lines, key=lambda ln: (ln.bbox[1], ln.bbox[0])):
        for i, prev in enumerate(out):
            h = min(prev.bbox[3] - prev.bbox[1], ln.bbox[3] - ln.bbox[1])
            cy, pcy = (ln.bbox[1] + ln.bbox[3]) / 2, (prev.bbox[1] + prev.bbox[3]) / 2
            left, right = (prev, ln) if prev.bbox[0] <= ln.bbox[0] else (ln, prev)
            if abs(cy - pcy) < 0.4 * h and 0 <= right.bbox[0] - left.bbox[2] < ROW_GAP * h:
                out[i] = Line(
                    f"{left.text} {right.text}",
                    (
                        left.bbox[0],
                        min(left.bbox[1], right.bbox[1]),
                        right.bbox[2],
                        max(left.bbox[3], right.bbox[3]),
                    ),
                    left.size if len(left.text) >= len(right.text) else right.size,
                    0.0,
                    0.0,
                )
                break
        else:
            out.append(ln)
    return out


def ocr_units(lines: list[OcrLine], pno: int) -> list[Unit]:
    """Units of one OCR'd page: lines grouped into blocks (a line under another, overlapping
    it, less than a line apart), each block split where the size changes or a gap opens
    (`split_block`), as on a text page."""
    made = [
        Line(ln.text, ln.bbox, size, 0.0, 0.0)
        for ln, size in zip(lines, _sizes(lines), strict=True)
    ]
    blocks: list[list[Line]] = []
    for ln in _rows(made):
        h = ln.bbox[3] - ln.bbox[1]
        for block in blocks:
            last = block[-1]
            gap = ln.bbox[1] - last.bbox[3]
            if (
                -0.3 * h <= gap < 1.0 * h
                and ln.bbox[0] < last.bbox[2]
                and ln.bbox[2] > last.bbox[0]
            ):
                block.append(ln)
                break
        else:
            blocks.append([ln])
    return [u for block in blocks for u in split_block(block, pno)]


def heading_classes(units: list[Unit], body: float) -> dict[int, str]:
    """Layout-path classes of an OCR'd page's units (the model saw no text there): a short
    line clearly larger than the body text and not a sentence is a section header."""
    out = {}
    for u in units:
        text = u.text.strip()
        words = text.split()
        short = 0 < len(words) <= 12 and len(u.lines) <= 2
        if short and not SENT_END.search(text) and u.size >= 1.15 * body:
            out[id(u)] = "section-header"
    return out


def _has_text(pdf: pymupdf.Document, doc: dict[str, Any]) -> list[bool]:
    """Per page, whether it has a text layer, from the loaded document (its text by page,
    the pages the loader OCR'd): no second pass over every page of every PDF for the few
    scans. Read from the pages when the stored text does not match them."""
    pages = (doc.get("text") or "").split(PAGE_BREAK)
    if len(pages) != pdf.page_count:
        return [bool(pdf[pno].get_text("text").strip()) for pno in range(pdf.page_count)]
    try:
        ocred = set(json.loads(doc.get("metadata") or "{}").get("ocr_pages", []))
    except (ValueError, AttributeError):
        ocred = set()
    return [bool(t.strip()) and pno + 1 not in ocred for pno, t in enumerate(pages)]


def structure_ocr(
    out: DocStructure, pdf: pymupdf.Document, cfg: StructureSettings, doc: dict[str, Any]
) -> tuple[dict[int, list[Unit]], OcrReport]:
    """Units of the image-only pages of document row `doc` that were OCR'd, by page, and the
    OCR report (its warnings added to `out`, pages the engine failed on to `out.failures`;
    time and page count to `out.stats`)."""
    has_text = _has_text(pdf, doc)
    found, report = ocr_document(pdf, has_text, cfg.ocr, out.stats)
    out.warnings.extend(report.warnings())
    for pno in report.failed:
        out.failures.append((f"page {pno + 1}: {report.skipped[pno]}", "page left out"))
    # a page where OCR read nothing (a photo, a chart) keeps its picture as a figure
    units = {pno: ocr_units(lines, pno) for pno, lines in found.items()}
    return {pno: us for pno, us in units.items() if us}, report


def mark_ocr(
    items: list[dict[str, Any]], read: set[int], report: OcrReport, meta: dict[str, Any]
) -> None:
    """In place: items of the pages whose text came from OCR (`read`) carry `ocr: true` in
    their node metadata; the document's metadata lists the OCR'd pages (1-based) and those
    skipped, with why."""
    done = set(report.done)
    for it in items:
        if it["unit"].page in read:
            it["meta"] = {**(it.get("meta") or {}), "ocr": True}
    if report.done:
        meta |= {"ocr_pages": sorted(p + 1 for p in done), "ocr_dpi": OCR_DPI}
    if report.skipped:
        meta["ocr_skipped"] = {str(p + 1): why for p, why in sorted(report.skipped.items())}


__all__ = ["heading_classes", "mark_ocr", "ocr_units", "structure_ocr"]
