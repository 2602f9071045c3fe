"""Lines and units of a PDF page, and their reading order: the geometry that both the
loader (a scanned page's OCR text, ocr_units.py) and the structure parser's page layout
(pipeline.pdf.read.lines) work on. A Line is one visual line with its box and font
measures; a Unit a paragraph-like run of lines (a block split where font size or weight
changes, at bullets and at wide gaps); recursive XY-cut orders units column by column."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from pipeline.pdf.thresholds import BLOCK_GAP_RATIO, BLOCK_SIZE_RATIO, BOLD_SHARE


@dataclass
class Line:
    text: str
    bbox: tuple[float, float, float, float]
    size: float  # dominant font size by characters
    bold: float  # share of characters in bold
    math: float  # share of characters in math fonts
    markers: list[str] = field(default_factory=list)  # superscript note markers
    first_small: str = ""  # leading small/superscript token (a footnote's own marker)
    mono: float = 0.0  # share of characters in monospaced fonts (pipeline.pdf.read.listings)


@dataclass
class Unit:
    lines: list[Line]
    page: int  # 0-based
    kind: str = "PARAGRAPH"
    image: bool = False

    @property
    def bbox(self) -> tuple[float, float, float, float]:
        xs0, ys0, xs1, ys1 = zip(*(ln.bbox for ln in self.lines), strict=True)
        return min(xs0), min(ys0), max(xs1), max(ys1)

    @property
    def size(self) -> float:
        c: Counter[float] = Counter()
        for ln in self.lines:
            c[ln.size] += len(ln.text)
        return c.most_common(1)[0][0] if c else 0.0

    @property
    def bold(self) -> float:
        n = sum(len(ln.text) for ln in self.lines) or 1
        return sum(ln.bold * len(ln.text) for ln in self.lines) / n

    @property
    def math(self) -> float:
        n = sum(len(ln.text) for ln in self.lines) or 1
        return sum(ln.math * len(ln.text) for ln in self.lines) / n

    @property
    def mono(self) -> float:
        n = sum(len(ln.text) for ln in self.lines) or 1
        return sum(ln.mono * len(ln.text) for ln in self.lines) / n

    @property
    def text(self) -> str:
        return join_lines([ln.text for ln in self.lines])

    @property
    def markers(self) -> list[str]:
        return [m for ln in self.lines for m in ln.markers]


def join_lines(lines: list[str]) -> str:
    """Lines to one clean string: line-end hyphens of split words removed (kept before a
    capitalised word: a compound), spaces between."""
    out = ""
    for raw in lines:
        t = " ".join(raw.split())
        if not t:
            continue
        if out.endswith("-") and len(out) > 1 and out[-2].isalpha() and t[:1].isalpha():
            # "sepa-" "rated", "ELE-" "MENT": one word; "Maison-" "Rouge": a compound
            head, tail = out[:-1].rsplit(" ", 1)[-1], t.split(" ", 1)[0]
            split = t[:1].islower() or head.isupper() and tail.isupper()
            out = (out[:-1] if split else out) + t
        else:
            out = f"{out} {t}" if out else t
    return out


def split_block(lines: list[Line], page: int) -> list[Unit]:
    """A block splits where size or boldness changes (a heading set inside a text block),
    at bullets, and at vertical gaps wider than a line."""
    units: list[Unit] = []
    cur: list[Line] = []
    for ln in lines:
        if cur:
            prev = cur[-1]
            ratio = max(ln.size, prev.size) / max(min(ln.size, prev.size), 0.1)
            gap = ln.bbox[1] - prev.bbox[3]
            weight_change = (prev.bold > BOLD_SHARE) != (ln.bold > BOLD_SHARE)
            bullet = bool(BULLET.match(ln.text.strip()))
            if (
                ratio > BLOCK_SIZE_RATIO
                or weight_change
                or bullet
                or gap > BLOCK_GAP_RATIO * prev.size
            ):
                units.append(Unit(cur, page))
                cur = []
        cur.append(ln)
    if cur:
        units.append(Unit(cur, page))
    return units


BULLET = re.compile(r"^([•·▪◦‣●○■□–—\-*]|\(?[a-z0-9]{1,2}\)|\d{1,2}\.)\s+\S")


# ---- reading order: recursive XY-cut -------------------------------------------------------


def _gaps(intervals: list[tuple[float, float]], min_gap: float) -> list[tuple[float, float]]:
    ivs = sorted(intervals)
    gaps = []
    end = ivs[0][1]
    for a, b in ivs[1:]:
        if a - end >= min_gap:
            gaps.append((end, a))
        end = max(end, b)
    return gaps


def xy_cut(units: list[Unit], min_vgap: float, min_hgap: float) -> list[Unit]:
    """Order units: split at a vertical whitespace strip (columns, left to right) when one
    crosses the whole region, else at horizontal strips (top to bottom), recursively."""
    if len(units) <= 1:
        return list(units)
    boxes = [u.bbox for u in units]
    vg = _gaps([(b[0], b[2]) for b in boxes], min_vgap)
    if vg:
        cut = max(vg, key=lambda g: g[1] - g[0])
        x = (cut[0] + cut[1]) / 2
        left = [u for u in units if u.bbox[2] <= x]
        right = [u for u in units if u.bbox[2] > x]
        return xy_cut(left, min_vgap, min_hgap) + xy_cut(right, min_vgap, min_hgap)
    hg = _gaps([(b[1], b[3]) for b in boxes], min_hgap)
    if hg:
        out: list[Unit] = []
        rest = units
        for _, y in hg:
            top = [u for u in rest if u.bbox[3] <= y]
            rest = [u for u in rest if u.bbox[3] > y]
            out += xy_cut(top, min_vgap, min_hgap)
        return out + xy_cut(rest, min_vgap, min_hgap)
    return sorted(units, key=lambda u: (u.bbox[1], u.bbox[0]))
