"""Code listings in PDFs: text set in a monospaced font is a CODE node, its lines and their
indentation kept, as Markdown's fenced code is.

A font is monospaced when its glyphs advance alike (`i`, `m`, `W`, `.`, ... of the embedded
font program, as pymupdf reads it): the PDF's own "fixed pitch" flag is unreliable (TeX's
and Ghostscript's Nimbus Mono subsets leave it unset, IBM's BookMaster Gothic too). A font
not embedded is judged by its name (Courier, ... Mono). A document set mostly in such a
font (a typewritten report, an RFC) has no listings to tell apart: nothing is code there.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

import pymupdf

from pipeline.pdf.read.page_units import Line, Unit
from pipeline.pdf.thresholds import (
    ALL_MONO,
    CODE_SHARE,
    LISTING_MAX_BLANKS,
    LISTING_MAX_PITCH,
    LISTING_MIN_STEP,
    LISTING_PITCH,
    LISTING_ROW,
    MIN_ADVANCES,
    MONO_SPREAD,
    TYPEWRITTEN_SHARE,
)

MONO_NAME = re.compile(
    r"Courier|Mono|NimbusMonL|Consol|Menlo|Monaco|Typewriter|CMS?L?TT|SFTT", re.IGNORECASE
)
_PROBE = "ilmW.0aA"  # glyphs of different widths in a proportional font


def monospaced_fonts(doc: pymupdf.Document) -> frozenset[str]:
    """Names (`font_key`) of the document's monospaced fonts; read once per document."""
    cached = getattr(doc, "_docgraph_mono", None)
    if cached is not None:
        return cached
    verdict: dict[str, bool] = {}  # a name is monospaced if every font of that name is
    seen: set[int] = set()
    for pno in range(doc.page_count):
        for xref, _ext, _type, base, *_ in doc.get_page_fonts(pno, full=True):
            if xref in seen:
                continue
            seen.add(xref)
            names, mono = _monospaced(doc, xref, base.split("+", 1)[-1])
            for name in map(font_key, names):
                verdict[name] = verdict.get(name, True) and mono
    mono_names = frozenset(name for name, yes in verdict.items() if yes)
    doc._docgraph_mono = mono_names  # type: ignore[attr-defined]
    return mono_names


def font_key(name: str) -> str:
    """A font's name as spans and font dictionaries both spell it (`Nimbus Mono PS Regular`
    there, `NimbusMonoPS-Regular` here): letters and digits, lower case."""
    return re.sub(r"[^0-9a-z]", "", name.lower())


def _monospaced(doc: pymupdf.Document, xref: int, base: str) -> tuple[list[str], bool]:
    """(the font's names: its dictionary's and its program's, whether it is monospaced)."""
    by_name = MONO_NAME.search(base) is not None
    try:
        buffer = doc.extract_font(xref)[3]
        font = pymupdf.Font(fontbuffer=buffer) if buffer else None
    except Exception:  # noqa: BLE001 - a font pymupdf cannot read: its name decides
        font = None
    if font is None:
        return [base], by_name
    advances = [font.glyph_advance(ord(c)) for c in _PROBE if font.has_glyph(ord(c))]
    if len(advances) < MIN_ADVANCES:  # a subset of a few glyphs says nothing
        return [base, font.name], by_name
    return [base, font.name], max(advances) - min(advances) < MONO_SPREAD and max(advances) > 0


def mark_monospace(page: pymupdf.Page, d: dict[str, Any]) -> None:
    """Flags the spans of `d` (page.get_text("dict")) set in a monospaced font (`mono`)."""
    mono = monospaced_fonts(page.parent)
    if not mono:
        return
    for b in d["blocks"]:
        for ln in b.get("lines", ()):
            for s in ln["spans"]:
                s["mono"] = font_key(s["font"]) in mono


def mark_code(items: list[dict[str, Any]]) -> None:
    """Paragraphs set in a monospaced font become CODE with their lines kept; listings split
    by a page or column break (or a blank line pymupdf made two blocks of) are one node."""
    chars = [(it["unit"], len(it["text"])) for it in items if it["kind"] == "PARAGRAPH"]
    total = sum(n for _, n in chars) or 1
    if (
        sum(u.mono * n for u, n in chars) > TYPEWRITTEN_SHARE * total
    ):  # typewritten: no listings in it
        return
    listing: list[dict[str, Any]] = []  # the items of the listing being read
    for it in [*items, None]:
        if it is not None and _is_code(it, continuing=bool(listing)):
            it["kind"] = "MERGED" if listing else "CODE"
            listing.append(it)
        elif it is None or it["kind"] not in ("PAGE_NUMBER", "NOTE"):
            if listing:
                head, units = listing[0], [x["unit"] for x in listing]
                head["text"] = code_text(units)
                head["unit"] = Unit([ln for u in units for ln in u.lines], units[0].page)
            listing = []
    items[:] = [it for it in items if it["kind"] != "MERGED"]


def _is_code(it: dict[str, Any], continuing: bool) -> bool:
    """A paragraph set in a monospaced font; or a list item that is: a listing's line that
    opens with a dash ("-h, --hour") reads as one, and is code within a listing or when even
    its marker is monospaced (a bulleted list's marker is set in the text's own font)."""
    mono = it["unit"].mono
    if it["kind"] == "PARAGRAPH":
        return mono >= CODE_SHARE
    return it["kind"] == "LIST_ITEM" and (mono >= ALL_MONO or continuing and mono >= CODE_SHARE)


def code_text(units: list[Unit]) -> str:
    """The listing's lines, one a line: indented by their offset from the leftmost line of
    their column in character widths (a monospaced character is as wide as the line over its
    length) and by the spaces they start with, and blank lines kept where the line pitch
    says a line was left empty. A page or column break starts a new column."""
    rows = [(u.page, ln) for u in units for ln in u.lines if ln.text.strip()]
    runs: list[list[Line]] = []
    for i, (page, ln) in enumerate(rows):
        if not i or page != rows[i - 1][0] or ln.bbox[1] < rows[i - 1][1].bbox[1] - 1:
            runs.append([])
        runs[-1].append(ln)
    return "\n".join(_run_text(run) for run in runs)


def row_gap(left: Line, right: Line) -> str:
    """The spaces between two lines of a row: one, or in a monospaced font as many as
    characters fit in the gap (a listing's aligned columns, pymupdf's lines of their own)."""
    if min(left.mono, right.mono) < CODE_SHARE:
        return " "
    chars = len(left.text.strip()) + len(right.text.strip())
    width = (left.bbox[2] - left.bbox[0] + right.bbox[2] - right.bbox[0]) / max(chars, 1)
    return " " * max(1, round((right.bbox[0] - left.bbox[2]) / width))


def _rows(lines: list[Line]) -> list[Line]:
    """Lines next to each other in reading order that share a row (their bottoms within half
    a line: pymupdf put one a point higher than the other, and after it) joined left to right."""
    rows: list[list[Line]] = []
    for ln in lines:
        first = rows[-1][0] if rows else None
        if first and abs(ln.bbox[3] - first.bbox[3]) < LISTING_ROW * min(
            _height(first), _height(ln)
        ):
            rows[-1].append(ln)
        else:
            rows.append([ln])
    out = []
    for row in rows:
        row.sort(key=lambda ln: ln.bbox[0])
        text = row[0].text.rstrip()
        for left, right in pairwise(row):
            text += row_gap(left, right) + right.text.strip()
        box = (
            row[0].bbox[0],
            min(ln.bbox[1] for ln in row),
            max(ln.bbox[2] for ln in row),
            max(ln.bbox[3] for ln in row),
        )
        out.append(Line(text, box, row[0].size, 0.0, 0.0, mono=1.0))
    return out


def _height(ln: Line) -> float:
    return ln.bbox[3] - ln.bbox[1]


def _run_text(lines: list[Line]) -> str:
    lines = _rows(lines)
    widest = max(lines, key=lambda ln: len(ln.text))
    width = (widest.bbox[2] - widest.bbox[0]) / max(len(widest.text.rstrip()), 1) or 1.0
    left = min(ln.bbox[0] for ln in lines)
    steps = [b.bbox[1] - a.bbox[1] for a, b in pairwise(lines)]
    # the pitch of consecutive lines, unless all are a blank line apart (code is set
    # with its lines ~1.2 sizes apart)
    size = max(ln.size for ln in lines) or _height(widest)
    pitch = min((s for s in steps if s > LISTING_MIN_STEP * size), default=0.0)
    if not pitch or pitch > LISTING_MAX_PITCH * size:
        pitch = LISTING_PITCH * size
    out = []
    for i, ln in enumerate(lines):
        if i:
            out += [""] * min(LISTING_MAX_BLANKS, max(0, round(steps[i - 1] / pitch) - 1))
        out.append(" " * round((ln.bbox[0] - left) / width) + ln.text.rstrip())
    return "\n".join(out)
