"""Right-to-left text from PDFs: one glyph that stands for two letters (the Arabic lam-alef
ligatures "لا", "لإ", "لأ", "لآ") comes out of MuPDF's right-to-left reordering with its two
letters swapped ("ال" for "لا"), which breaks every word that has one. MuPDF gives the
glyph's second letter zero width at the glyph's edge; the pair is put back in order."""

from __future__ import annotations

import re
from typing import Any

import pymupdf

from pipeline.pdf.thresholds import RTL_EDGE, RTL_ZERO_WIDTH

RTL = re.compile(r"[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufeff]")


def _span_text(chars: list[dict[str, Any]]) -> str:
    cs = list(chars)
    i = 0
    while i + 1 < len(cs):
        z, c = cs[i], cs[i + 1]
        zx0, _, zx1, _ = z["bbox"]
        cx0, _, cx1, _ = c["bbox"]
        one_glyph = (
            zx1 - zx0 < RTL_ZERO_WIDTH and abs(cx1 - zx0) < RTL_EDGE and cx1 - cx0 > RTL_ZERO_WIDTH
        )
        if one_glyph and RTL.match(z["c"]) and RTL.match(c["c"]):
            cs[i], cs[i + 1] = c, z
            i += 2
        else:
            i += 1
    return "".join(ch["c"] for ch in cs)


def fix_rtl_ligatures(page: pymupdf.Page, d: dict[str, Any], flags: int) -> None:
    """Span texts of `d` (page.get_text("dict")) with ligature letter pairs of right-to-left
    text in order; pages without right-to-left letters are left as they are (no cost)."""
    spans = [s for b in d["blocks"] if b["type"] == 0 for ln in b["lines"] for s in ln["spans"]]
    if not any(RTL.search(s["text"]) for s in spans):
        return
    raw = page.get_text("rawdict", flags=flags, sort=False)
    raw_spans = [
        s for b in raw["blocks"] if b["type"] == 0 for ln in b["lines"] for s in ln["spans"]
    ]
    if len(raw_spans) != len(spans):
        return  # not the same extraction: leave the text alone
    for s, r in zip(spans, raw_spans, strict=True):
        if RTL.search(s["text"]):
            s["text"] = _span_text(r["chars"])
