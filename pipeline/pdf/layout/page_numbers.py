"""Page furniture on the layout path: printed page numbers (logical page labels) and running
text repeated in the page margins.

A printed page number is a number in a page header or footer that advances with the pages:
of all numbers found there, those whose difference to the page index is the one most pages
agree on. A journal's "Vol. 85, No. 152" stays the same on every page, so it never wins;
front matter numbered i, ii, iii is found the same way among roman numerals."""

from __future__ import annotations

from collections import Counter

from pipeline.pdf.read.lines import PAGE_NO, ROMAN, normalise_margin_text
from pipeline.pdf.read.page_units import Unit
from pipeline.pdf.thresholds import (
    LAYOUT_MARGIN_LINES,
    MIN_REPEAT_PAGES,
    PAGE_NUMBER_DIGITS,
    RUNNING_PAGES,
)

_ROMAN_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}


def roman_value(text: str) -> int | None:
    """Value of a lower-case roman numeral, None when it is not a well-formed one."""
    total = 0
    vals = [_ROMAN_VALUES[c] for c in text]
    for i, v in enumerate(vals):
        total += -v if i + 1 < len(vals) and vals[i + 1] > v else v
    return total if _to_roman(total) == text else None


def _to_roman(n: int) -> str:
    out = ""
    for v, s in (
        (1000, "m"),
        (900, "cm"),
        (500, "d"),
        (400, "cd"),
        (100, "c"),
        (90, "xc"),
        (50, "l"),
        (40, "xl"),
        (10, "x"),
        (9, "ix"),
        (5, "v"),
        (4, "iv"),
        (1, "i"),
    ):
        while n >= v:
            out += s
            n -= v
    return out


def _candidates(units: list[Unit]) -> list[tuple[str, int, str, Unit, bool]]:
    """(kind 'arabic'/'roman', value, token, unit, alone) for each number that is a whole
    margin line ("12", "Page 12", "iii") or stands at either end of one ("2 Title")."""
    out = []
    for u in units:
        t = u.text.strip()
        m = PAGE_NO.match(t)
        words = t.split()
        toks = [m.group(1)] if m else list(dict.fromkeys([words[0], words[-1]])) if words else []
        for tok in toks:
            if tok.isdigit() and len(tok) <= PAGE_NUMBER_DIGITS:
                out.append(("arabic", int(tok), tok, u, m is not None))
            elif ROMAN.match(tok) and tok.islower() and (v := roman_value(tok)):
                out.append(("roman", v, tok, u, m is not None))
    return out


def printed_numbers(margins: list[list[Unit]]) -> dict[int, tuple[str, Unit]]:
    """Printed page number (token, the unit it is in) by 0-based page, from the header and
    footer units of each page. A margin line repeated with its number ("Vol. 85") has none; where
    pages agree on a difference between number and page index, the number that keeps it
    wins; else a number alone on its line before one at the end of a running title."""
    cands = [_candidates(units) for units in margins]

    def line(c: tuple[str, int, str, Unit, bool]) -> tuple[str, str]:
        return c[2], " ".join(c[3].text.lower().split())

    pages_with: Counter[tuple[str, str]] = Counter()
    for cs in cands:
        pages_with.update({line(c) for c in cs})
    if len(margins) > 1:  # the same line with the same number on several pages
        cands = [[c for c in cs if pages_with[line(c)] < 2] for cs in cands]
    offsets: Counter[tuple[str, int]] = Counter()
    for pno, cs in enumerate(cands):
        offsets.update({(c[0], c[1] - pno) for c in cs})
    agreed = {key for key, n in offsets.items() if n >= 2}
    out: dict[int, tuple[str, Unit]] = {}
    for pno, cs in enumerate(cands):
        ranked = sorted(cs, key=lambda c: ((c[0], c[1] - pno) not in agreed, not c[4]))
        if ranked:
            out[pno] = (ranked[0][2], ranked[0][3])
    return out


def running_text(
    pages: list[list[Unit]],
    heights: list[float],
    margin: float,
    repeat: float,
    furniture: list[list[Unit]] | None = None,
) -> set[int]:
    """Ids of units of at most three lines at the top or bottom `margin` of their page that
    are running headers and footers the model took for body text, their text (digits
    aside) coming back
    - on at least `repeat` of the pages (the document's running title),
    - at the same place on RUNNING_PAGES pages or more (a chapter's running title, a
      report's part heading on each of its pages), or
    - in a unit the model did class as a page header or footer on some page (`furniture`,
      each page's)."""
    n = len(pages)
    if n < 2:
        return set()
    furniture = furniture or [[] for _ in pages]
    model_said = {normalise_margin_text(u.text) for us in furniture for u in us}
    seen: Counter[str] = Counter()
    placed: Counter[tuple[str, int, int]] = Counter()
    band: list[tuple[str, tuple[str, int, int], Unit]] = []
    for units, h in zip(pages, heights, strict=True):
        keys, spots = set(), set()
        for u in units:
            if len(u.lines) <= LAYOUT_MARGIN_LINES and (
                u.bbox[3] <= margin * h or u.bbox[1] >= (1 - margin) * h
            ):
                key = normalise_margin_text(u.text)
                spot = (key, round(u.bbox[0]), round(u.bbox[1]))
                band.append((key, spot, u))
                keys.add(key)
                spots.add(spot)
        seen.update(keys)
        placed.update(spots)
    least = max(MIN_REPEAT_PAGES, repeat * n)
    return {
        id(u)
        for key, spot, u in band
        if seen[key] >= least or placed[spot] >= RUNNING_PAGES or key in model_said
    }
