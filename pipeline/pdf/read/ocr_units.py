"""A scanned page's OCR'd lines (pipeline.pdf.read.ocr_engine) made into the units a text-layer
page gives (pipeline.pdf.read.page_units), so paragraphs, reading order (XY-cut) and headings by
size work on them as far as the recognised boxes allow: the loader reads them as the page's
text, the structure parser as its units. OCR knows no fonts: a line's size is estimated
from its width per character (its box height for short lines), and lines of about the
page's usual size get that one size (a scan has one body size, as a text layer has)."""

from __future__ import annotations

import statistics

from pipeline.pdf.read.ocr_engine import OcrLine
from pipeline.pdf.read.page_units import Line, Unit, split_block, xy_cut
from pipeline.pdf.thresholds import (
    BOX_PER_POINT,
    EM_PER_CHAR,
    OCR_MIN_CHARS,
    OCR_OVERLAP,
    OCR_ROW,
    OCR_ROW_GAP,
    OCR_SAME_SIZE,
    XY_MIN_HGAP,
    XY_MIN_VGAP,
)


def _estimate(ln: OcrLine) -> float:
    width, height = ln.bbox[2] - ln.bbox[0], ln.bbox[3] - ln.bbox[1]
    n = len(ln.text)
    return width / (EM_PER_CHAR * n) if n >= OCR_MIN_CHARS else height / BOX_PER_POINT


def _sizes(lines: list[OcrLine]) -> list[float]:
    """Font size per line, estimated (see `_estimate`); body-like lines get the page's one
    body size, as a text layer has (not one per line's pixels)."""
    est = [_estimate(ln) for ln in lines]
    if not est:
        return []
    med = statistics.median([e for ln, e in zip(lines, est, strict=True) for _ in ln.text])
    return [
        round(2 * (med if -OCR_SAME_SIZE[0] <= e / med - 1 <= OCR_SAME_SIZE[1] else e)) / 2
        for e in est
    ]


def _rows(lines: list[Line]) -> list[Line]:
    """Boxes on one row less than OCR_ROW_GAP box heights apart joined (the detector cuts a line
    at a wide space); boxes farther apart on a row stay apart (columns: a gutter is wider)."""
    out: list[Line] = []
    for ln in sorted(lines, key=lambda ln: (ln.bbox[1], ln.bbox[0])):
        for i, prev in enumerate(out):
            h = min(prev.bbox[3] - prev.bbox[1], ln.bbox[3] - ln.bbox[1])
            cy, pcy = (ln.bbox[1] + ln.bbox[3]) / 2, (prev.bbox[1] + prev.bbox[3]) / 2
            left, right = (prev, ln) if prev.bbox[0] <= ln.bbox[0] else (ln, prev)
            if abs(cy - pcy) < OCR_ROW * h and 0 <= right.bbox[0] - left.bbox[2] < OCR_ROW_GAP * h:
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
                -OCR_OVERLAP * h <= gap < 1.0 * h
                and ln.bbox[0] < last.bbox[2]
                and ln.bbox[2] > last.bbox[0]
            ):
                block.append(ln)
                break
        else:
            blocks.append([ln])
    return [u for block in blocks for u in split_block(block, pno)]


def page_text(lines: list[OcrLine]) -> str:
    """A page's OCR lines as text in reading order, a line per paragraph: the blocks and
    column order the structure parser gives them (rows across two columns would interleave
    the columns' sentences)."""
    units = xy_cut(ocr_units(lines, 0), min_vgap=XY_MIN_VGAP, min_hgap=XY_MIN_HGAP)
    return "\n".join(u.text for u in units)
