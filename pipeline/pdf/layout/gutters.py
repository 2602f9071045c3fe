"""Layout-model regions that run across a column gutter, cut into columns.

On narrow columns (three on an A4 page: LaTeX multicol, CSS columns) the layout model
sometimes draws one region over two neighbouring columns: a text region where both columns
start a paragraph at the same height, a heading region over a heading and the rows beside
it in the next column. Its lines were read row by row across the gutter ("where he was
invited by of Grnberg, Hesse"), a heading took the words beside it as its own, and the
columns were read out of order, or a page's four columns were one region (7 of 10 three-
and four-column documents made here).

Here, before pymupdf4llm orders the regions, a region's own text lines are parted where a
blank strip GUTTER wide runs from its top to its bottom. A text region (or a list item: the
model's name for two columns' headings side by side, once) is cut, into text, when every
side is prose (GUTTER_WIDE line heights wide, GUTTER_MIN_ROWS rows or more, most across the side's
width: not a form's labels and values, not a table of short cells); a heading region when
one side is prose and another is not (the heading). A side narrower than GUTTER_MIN_SIDE of the
widest (columns are alike: a list's bullets, a heading's number apart from its words) is
no column: part of the side it leads in a text region, no cut in a heading. Parts that then
overlap a text region of the same column are one region again, so every line belongs to one
region.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pipeline.pdf.read.listings import MONO_NAME
from pipeline.pdf.thresholds import (
    GUTTER,
    GUTTER_ALIGNED,
    GUTTER_FULL,
    GUTTER_FULL_ROWS,
    GUTTER_MIN_ROWS,
    GUTTER_MIN_SIDE,
    GUTTER_WIDE,
)

Box = tuple[Any, ...]  # (x0, y0, x1, y1, class) as pymupdf4llm passes them

# the classes of the regions cut: a list item over two columns' headings is text again,
# whose headings parse_layout tells by their type
SPLIT = ("text", "list-item", "section-header")
MONOSPACED = 8  # MuPDF's span flag for a monospaced font


def split_at_gutters(boxes: Sequence[Box], lines: Iterable[Sequence[float]]) -> list[Box]:
    """`boxes` with every text region that spans columns (by `lines`, the page's text line
    rectangles) cut into one region per column, in place of the region."""
    lines = list(lines)
    out: list[Box] = []
    for box in boxes:
        parts = _columns(box, lines) if len(box) >= 5 and box[4] in SPLIT else []
        out += parts or [tuple(box)]
    return _join_overlaps(out) if len(out) > len(boxes) else out


def _centre_in(line: Sequence[float], box: Box) -> bool:
    cx, cy = (line[0] + line[2]) / 2, (line[1] + line[3]) / 2
    return box[0] <= cx <= box[2] and box[1] <= cy <= box[3]


def _columns(box: Box, lines: list[Sequence[float]]) -> list[Box]:
    """The columns of region `box`, or none when it is one column. A text region is cut
    when every side is prose, a side narrower than GUTTER_MIN_SIDE of the widest (columns are
    alike: a list's bullets, a heading's number apart from its words) being part of the
    side it leads; a heading region when one side is prose and another is not (a heading
    beside the text of the next column: the sides that are not prose stay one heading, and
    no part may be narrow)."""
    sides = _sides([ln for ln in lines if _centre_in(ln, box)])
    heading = box[4] == "section-header"
    if not heading:
        sides = _lead_in(sides)
    prose = [_prose(side) for side in sides]
    cut = any(prose) and not all(prose) if heading else all(prose)
    if len(sides) < 2 or not cut:
        return []
    parts: list[tuple[list[Sequence[float]], str]] = []
    for side, is_prose in zip(sides, prose, strict=True):
        cls = "text" if is_prose or not heading else box[4]
        if heading and parts and cls == parts[-1][1] == box[4]:
            parts[-1][0].extend(side)  # a heading's words either side of a wide space
        else:
            parts.append((list(side), cls))
    out = [_hull(side, cls) for side, cls in parts]
    widths = [b[2] - b[0] for b in out]
    return [] if min(widths) < GUTTER_MIN_SIDE * max(widths) else out


def _lead_in(sides: list[list[Sequence[float]]]) -> list[list[Sequence[float]]]:
    """`sides` with each one narrower than GUTTER_MIN_SIDE of the widest joined to the side after
    it (the last one: before it)."""
    widths = [max(ln[2] for ln in side) - min(ln[0] for ln in side) for side in sides]
    narrow = [w < GUTTER_MIN_SIDE * max(widths, default=0.0) for w in widths]
    while len(sides) > 1 and any(narrow):
        i = narrow.index(True)
        side, _ = sides.pop(i), narrow.pop(i)
        j = i if i < len(sides) else i - 1
        sides[j] = side + sides[j]
    return sides


def _sides(lines: list[Sequence[float]]) -> list[list[Sequence[float]]]:
    """`lines` parted at the blank strips GUTTER wide or more that none of them crosses."""
    sides: list[list[Sequence[float]]] = []
    right = float("-inf")
    for ln in sorted(lines, key=lambda ln: ln[0]):  # x-ranges swept left to right
        if ln[0] - right >= GUTTER:
            sides.append([])
        sides[-1].append(ln)
        right = max(right, ln[2])
    return sides


def _hull(rects: list[Sequence[Any]], cls: str) -> Box:
    """The rectangle around `rects` (lines or regions), as a region of class `cls`."""
    return (
        min(r[0] for r in rects),
        min(r[1] for r in rects),
        max(r[2] for r in rects),
        max(r[3] for r in rects),
        cls,
    )


def _prose(side: list[Sequence[float]]) -> bool:
    """Whether the lines of one side are a column of text: GUTTER_WIDE line heights wide,
    GUTTER_MIN_ROWS rows or more (lines level with each other are one row: MuPDF cuts a
    justified line at its wide spaces), most of them across GUTTER_FULL of the side's
    width."""
    x0, x1 = min(ln[0] for ln in side), max(ln[2] for ln in side)
    if x1 - x0 < GUTTER_WIDE * sorted(ln[3] - ln[1] for ln in side)[len(side) // 2]:
        return False
    rows: list[list[float]] = []  # y0, y1, x0, x1
    for ln in sorted(side, key=lambda ln: (ln[1] + ln[3]) / 2):
        mid = (ln[1] + ln[3]) / 2
        if rows and rows[-1][0] <= mid <= rows[-1][1]:
            row = rows[-1]
            row[2], row[3] = min(row[2], ln[0]), max(row[3], ln[2])
        else:
            rows.append([ln[1], ln[3], ln[0], ln[2]])
    full = sum(1 for r in rows if r[3] - r[2] >= GUTTER_FULL * (x1 - x0))
    return len(rows) >= GUTTER_MIN_ROWS and full >= GUTTER_FULL_ROWS * len(rows)


def _join_overlaps(boxes: list[Box]) -> list[Box]:
    """Text regions of one column (same left and right edges) that overlap, as one region
    where the first of them was."""
    out: list[Box] = []
    for box in boxes:
        for i, other in enumerate(out):
            if box[4] == other[4] == "text" and _same_column(box, other) and _overlap(box, other):
                out[i] = _hull([box, other], "text")
                break
        else:
            out.append(box)
    return out


def _same_column(a: Box, b: Box) -> bool:
    return abs(a[0] - b[0]) <= GUTTER_ALIGNED and abs(a[2] - b[2]) <= GUTTER_ALIGNED


def _overlap(a: Box, b: Box) -> bool:
    return a[1] < b[3] and b[1] < a[3]


def _monospaced(line: dict) -> bool:
    spans = line.get("spans") or [{}]
    return all(
        span.get("flags", 0) & MONOSPACED or MONO_NAME.search(span.get("font", ""))
        for span in spans
    )


def install() -> None:
    """Make pymupdf4llm's reading order cut gutter-crossing text regions first (it looks
    `find_reading_order` up in its module at each call)."""
    from pymupdf4llm.helpers import utils

    order = getattr(utils, "find_reading_order", None)
    if order is None or getattr(order, "cuts_gutters", False):
        return

    def find_reading_order(page_rect: Any, blocks: list[dict], boxes: list, *args, **kwargs):
        lines = (
            ln["bbox"]
            for b in blocks
            if b.get("type") == 0
            for ln in b.get("lines", ())
            if not _monospaced(ln)  # a listing's fields (a hex dump) are no columns
        )
        return order(page_rect, blocks, split_at_gutters(boxes, lines), *args, **kwargs)

    find_reading_order.cuts_gutters = True  # type: ignore[attr-defined]
    utils.find_reading_order = find_reading_order
