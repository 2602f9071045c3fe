"""Page layout for the PDF parser: pymupdf text blocks -> visual lines (font measures, note
markers, right-to-left rows) -> units (split by pipeline.pdf.read.page_units, which also holds
the reading order by XY-cut), and the tests on them: body size, captions, running
headers/footers and printed page numbers."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pymupdf

from pipeline.pdf.read.bullets import mark_bullets
from pipeline.pdf.read.listings import mark_monospace, row_gap
from pipeline.pdf.read.page_units import Line, Unit, split_block
from pipeline.pdf.read.rtl import RTL, fix_rtl_ligatures
from pipeline.pdf.read.tex import decode_spans
from pipeline.pdf.thresholds import (
    BOLD_SHARE,
    CAPTION_SMALL_RATIO,
    DEFAULT_BODY_SIZE,
    MARKER_ABOVE,
    MARKER_LOW,
    MARKER_MAX_CHARS,
    MARKER_RAISE,
    MARKER_RATIO,
    MARKER_REACH,
    MIN_FIGURE_AREA,
    PAGE_NUMBER_DIGITS,
    ROMAN_CHARS,
    RTL_SHARE,
    SAME_ROW,
)

# No TEXT_PRESERVE_LIGATURES: "ﬁ" comes out as "fi", which search and matching need.
TEXT_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_LIGATURES
MATH_FONT = re.compile(r"CMMI|CMSY|CMEX|Math|Symbol|MSAM|MSBM", re.I)
MARKER = re.compile(r"^(\d{1,3}|[*∗†‡§¶#]+|[a-z])$")
ROMAN = re.compile(r"^[ivxlcdm]+$", re.I)
CAPTION = re.compile(r"^(figure|fig\.|table|tab\.|example|listing|chart|exhibit)\s*[\dIVX]+", re.I)
# A caption's leading label ("Figure 3", "Fig. 3a", "Table 2-1", "TABLE IV") and what follows.
CAPTION_LABEL = re.compile(
    r"^(?i:figure|fig\.|table|tab\.|example|listing|chart|exhibit)\s*"
    r"(?:\d{1,3}(?:[.\-–]\d{1,3})*[a-z]?|[IVXLC]{1,6})(?!\w)"
)
NOTE_START = re.compile(r"^(\d{1,3}|[*∗†‡§¶]+)\s?(?=\S)")
_NUMBER_START = re.compile(r"^\d+\s*[.,%]")  # "12.5 %", "3, 4", "1. Introduction"
PAGE_NO = re.compile(r"^(?:page\s+)?(\d{1,4}|[ivxlcdm]{1,7})(?:\s*(?:/|of)\s*\d+)?$", re.I)


def note_start(text: str) -> re.Match | None:
    """The note marker opening `text` ("1 The ...", "* ...", "† ..."), None when there is
    none or the text opens with a number that is not one ("12.5 %", "1. Introduction")."""
    m = NOTE_START.match(text)
    return None if m is None or _NUMBER_START.match(text) else m


def make_line(all_spans: list[dict[str, Any]]) -> Line | None:
    spans = [s for s in all_spans if s["text"].strip()]  # blank spans: text only, no metrics
    if not spans:
        return None
    sizes: Counter[float] = Counter()
    bold = math = mono = total = 0
    for s in spans:
        n = len(s["text"].strip()) or 1
        sizes[round(s["size"] * 2) / 2] += n
        total += n
        bold += n if s["flags"] & 16 or "Bold" in s["font"] or ".B" in s["font"] else 0
        math += n if MATH_FONT.search(s["font"]) else 0
        mono += n if s.get("mono") else 0  # listings.mark_monospace
    size = sizes.most_common(1)[0][0]
    x0 = min(s["bbox"][0] for s in spans)
    y0 = min(s["bbox"][1] for s in spans)
    x1 = max(s["bbox"][2] for s in spans)
    y1 = max(s["bbox"][3] for s in spans)
    markers: list[str] = []
    parts: list[str] = []
    first_small = ""
    code: bool | None = None  # whether the last span with text was monospaced
    for s in all_spans:
        t = s["text"]
        small = s["size"] < MARKER_RATIO * size and (
            s["flags"] & 1 or s["bbox"][3] < y1 - MARKER_RAISE * size
        )
        tok = t.strip()
        if tok and small and MARKER.match(tok) and not tok.isalpha():
            if not "".join(p for p in parts).strip():
                first_small = tok
            else:
                markers.append(tok)
        if tok:
            if code is not None and bool(s.get("mono")) != code:
                t = _unpad(parts, t, not code)
            code = bool(s.get("mono"))
        parts.append(t)
    text = "".join(parts)
    return Line(
        text, (x0, y0, x1, y1), size, bold / total, math / total, markers, first_small, mono / total
    )


_CLOSING = re.compile(r"\s*[,.;:!?)\]’”]")
_OPENING = ("(", "[", "‘", "“")


def _unpad(parts: list[str], t: str, code: bool) -> str:
    """`t`, the span after `parts` where inline code starts (`code`) or ends: a browser pads
    code with a box pymupdf reads as a space ("cargo )", "( MIT"): none is kept before
    closing punctuation after code, nor after an opening bracket before it."""
    before = "".join(parts)
    if before.rstrip().endswith(_OPENING) if code else _CLOSING.match(t):
        parts[:] = [before.rstrip()]
        return t.lstrip()
    return t


def _rtl(text: str) -> bool:
    """Mostly right-to-left letters (Arabic, Hebrew, ...)."""
    letters = [c for c in text if c.isalpha()]
    return len(RTL.findall(text)) > RTL_SHARE * len(letters) if letters else False


def merge_same_row(lines: list[Line]) -> list[Line]:
    """pymupdf splits '5.1' and 'Hyper Parameter Optimization' into two lines on one baseline:
    join lines of a block that share a row (right to left in right-to-left script)."""
    out: list[Line] = []
    for ln in sorted(lines, key=lambda ln: (round(ln.bbox[3]), ln.bbox[0])):
        prev = out[-1] if out else None
        if prev is not None:
            h = min(prev.bbox[3] - prev.bbox[1], ln.bbox[3] - ln.bbox[1])
            same_row = (
                abs(prev.bbox[3] - ln.bbox[3]) < SAME_ROW * h and ln.bbox[0] >= prev.bbox[2] - 1
            )
            if same_row:
                n1, n2 = len(prev.text), len(ln.text)
                total = n1 + n2 or 1
                # right to left: the line on the right is read first
                a, b = (ln, prev) if _rtl(prev.text) and _rtl(ln.text) else (prev, ln)
                out[-1] = Line(
                    a.text.rstrip() + row_gap(prev, ln) + b.text.lstrip(),
                    (
                        prev.bbox[0],
                        min(prev.bbox[1], ln.bbox[1]),
                        ln.bbox[2],
                        max(prev.bbox[3], ln.bbox[3]),
                    ),
                    prev.size if n1 >= n2 else ln.size,
                    (prev.bold * n1 + ln.bold * n2) / total,
                    (prev.math * n1 + ln.math * n2) / total,
                    prev.markers + ln.markers,
                    prev.first_small,
                    (prev.mono * n1 + ln.mono * n2) / total,
                )
                continue
        out.append(ln)
    return out


def page_dict(page: pymupdf.Page) -> dict[str, Any]:
    """The page's text as pymupdf's "dict", ready for `make_line`: TeX bitmap fonts' slots
    read as text (tex), right-to-left ligatures mended, spans flagged monospaced
    (listings), drawn bullets made spans (bullets)."""
    d = page.get_text("dict", flags=TEXT_FLAGS, sort=False)
    decode_spans(d)
    fix_rtl_ligatures(page, d, TEXT_FLAGS)
    mark_monospace(page, d)
    mark_bullets(page, d)
    return d


def page_units(page: pymupdf.Page, pno: int) -> list[Unit]:
    """Text and image units of one page, duplicates (text drawn twice) dropped."""
    d = page_dict(page)
    units: list[Unit] = []
    seen: set[tuple[str, int, int]] = set()
    blocks: list[list[Line]] = []
    for b in d["blocks"]:
        if b["type"] == 1:
            x0, y0, x1, y1 = b["bbox"]
            if (x1 - x0) * (y1 - y0) > MIN_FIGURE_AREA:
                units.append(Unit([Line("", tuple(b["bbox"]), 0.0, 0.0, 0.0)], pno, image=True))
            continue
        lines: list[Line] = []
        for raw in b["lines"]:
            ln = make_line(raw["spans"])
            if ln is None:
                continue
            key = (ln.text, round(ln.bbox[0]), round(ln.bbox[1]))
            if key in seen:
                continue
            seen.add(key)
            lines.append(ln)
        blocks.append(lines)
    blocks = attach_markers(blocks)
    for lines in blocks:
        if lines:
            units.extend(split_block(merge_same_row(lines), pno))
    return units


def _marker_host(m: Line, lines: list[Line]) -> tuple[Line, bool] | None:
    """The line a lone small raised token belongs to, and whether the token follows it (a
    reference marker) rather than leads it (a footnote's own marker)."""
    tok = m.text.strip()
    if not MARKER.match(tok) or tok.isalpha():
        return None
    for ln in lines:
        h = ln.bbox[3] - ln.bbox[1]
        if (
            ln is m
            or not ln.text.strip()
            or m.size >= MARKER_RATIO * ln.size
            or h >= ln.bbox[2] - ln.bbox[0]
        ):
            continue  # vertical text (a chart's axis label) carries no markers
        raised = (
            m.bbox[1] >= ln.bbox[1] - MARKER_ABOVE * h
            and (m.bbox[1] + m.bbox[3]) / 2 < (ln.bbox[1] + ln.bbox[3]) / 2 + MARKER_LOW * h
        )
        if not raised:
            continue
        tol = MARKER_REACH * ln.size
        if -1 <= m.bbox[0] - ln.bbox[2] <= tol:
            return ln, True
        if -1 <= ln.bbox[0] - m.bbox[2] <= tol:
            return ln, False
    return None


def attach_markers(blocks: list[list[Line]]) -> list[list[Line]]:
    """A superscript marker drawn as its own text object (pymupdf gives it its own line,
    sometimes its own block) joins its host line: after it as a note reference, or before
    it as a footnote's own marker. Checked across blocks of the page."""
    lines = [ln for b in blocks for ln in b]
    used: set[int] = set()
    for m in lines:
        if len(m.text.strip()) > MARKER_MAX_CHARS:
            continue
        found = _marker_host(m, [ln for ln in lines if id(ln) not in used])
        if found is None:
            continue
        host, after = found
        tok = m.text.strip()
        if after:
            host.markers.append(tok)
            host.text = host.text.rstrip() + tok
        elif not host.first_small:
            host.first_small = tok
            host.text = f"{tok} {host.text.lstrip()}"
        else:
            continue
        x0, y0, x1, y1 = host.bbox
        host.bbox = (min(x0, m.bbox[0]), min(y0, m.bbox[1]), max(x1, m.bbox[2]), max(y1, m.bbox[3]))
        used.add(id(m))
    return [[ln for ln in b if id(ln) not in used] for b in blocks]


def body_size(units: list[Unit]) -> float:
    c: Counter[float] = Counter()
    for u in units:
        for ln in u.lines:
            c[ln.size] += len(ln.text)
    return c.most_common(1)[0][0] if c else DEFAULT_BODY_SIZE


def is_caption(u: Unit, text: str, body: float) -> bool:
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
    return u.size < CAPTION_SMALL_RATIO * body or u.bold > BOLD_SHARE


def page_number_token(text: str) -> str | None:
    """The printed page number at either end of a header/footer line ('2 Title', 'iii')."""
    t = text.strip()
    m = PAGE_NO.match(t)
    if m:
        return m.group(1)
    words = t.split()
    if len(words) >= 2:
        for w in (words[0], words[-1]):
            if (
                w.isdigit()
                and len(w) <= PAGE_NUMBER_DIGITS
                or (ROMAN.match(w) and len(w) <= ROMAN_CHARS and w.islower())
            ):
                return w
    return None


def normalise_margin_text(text: str) -> str:
    return re.sub(r"\d+", "#", " ".join(text.lower().split()))
