"""List bullets that are no text: a browser's "Save as PDF" (Chrome's Skia, and the Notion
and Confluence exports made with it) paints a list item's disc as a small filled circle and
its level-2 circle as a stroked one; Word's Symbol and Wingdings bullets come out as
private-use characters. Either way the item's text starts with no marker, so the lists read
as one paragraph. Here the drawn ones become a "•" / "◦" span in front of their line and
the private-use ones their Unicode look-alikes, so lists split and classify as if typeset
in text (page_units.BULLET). (A control character a font without a Unicode map gives its
bullet stays: Dingbats' check marks in a table read the same.)
"""

from __future__ import annotations

import re
from typing import Any

import pymupdf

from pipeline.pdf.thresholds import (
    BULLET_COLOUR,
    BULLET_EDGE,
    BULLET_GAP,
    BULLET_SIZE,
    BULLET_SQUARE,
)

# Word's bullets in the Symbol and Wingdings fonts, as extracted without a ToUnicode map
_PRIVATE_USE = str.maketrans(
    {"\uf0b7": "•", "\uf0a7": "▪", "\uf06e": "▪", "\uf0d8": "➢", "\uf076": "❖", "\uf0fc": "✓"}
)
# a line led by a bullet glyph: a list item whatever a layout model calls its block
LIST_GLYPH = re.compile(r"[•◦▪‣●○■□➢❖✓]\s")


def mark_bullets(page: pymupdf.Page, d: dict[str, Any]) -> None:
    """Give each line of `d` (page.get_text("dict")) led by a drawn bullet a marker span,
    and every span its private-use bullets' look-alikes."""
    lines = [ln for b in d["blocks"] for ln in b.get("lines", ())]
    for ln in lines:
        for s in ln["spans"]:
            if any("\uf000" <= c <= "\uf0ff" for c in s["text"]):
                s["text"] = s["text"].translate(_PRIVATE_USE)
    for rect, filled, rgb in _dots(page) if lines else []:
        line = _led_by(lines, rect)
        if line is None or line["spans"][0].get("bullet"):
            continue  # no text beside it, or a bullet drawn twice (filled, then outlined)
        # in the colour of its item's text (the item may open with a word in another)
        if any(_same_colour(rgb, s.get("color", 0)) for s in line["spans"]):
            first = line["spans"][0]
            _, y0, _, y1 = first["bbox"]
            marker = {**first, "text": "• " if filled else "◦ ", "mono": False, "bullet": True}
            marker["bbox"] = (rect[0], y0, rect[2], y1)
            line["spans"].insert(0, marker)
            line["bbox"] = (rect[0], *line["bbox"][1:])


def _dots(page: pymupdf.Page) -> list[tuple[tuple[float, ...], bool, tuple[float, ...]]]:
    """Small round or square shapes: (rect, filled, colour)."""
    out = []
    try:
        drawings = page.get_cdrawings()
    except (RuntimeError, ValueError):  # a broken content stream: its text still counts
        return []
    for dr in drawings:
        x0, y0, x1, y1 = dr["rect"]
        w, h = x1 - x0, y1 - y0
        if not (BULLET_SIZE[0] <= w <= BULLET_SIZE[1] and BULLET_SIZE[0] <= h <= BULLET_SIZE[1]):
            continue
        if abs(w - h) > BULLET_SQUARE * max(w, h):
            continue
        filled = "f" in dr.get("type", "")
        rgb = dr.get("fill") if filled else dr.get("color")
        out.append(((x0, y0, x1, y1), filled, tuple(rgb or (0.0, 0.0, 0.0))))
    return out


def _same_colour(rgb: tuple[float, ...], srgb: int) -> bool:
    """A bullet is painted in its text's colour; a chart legend's marker, beside its label
    just the same, in its series' colour."""
    text = ((srgb >> 16) & 255, (srgb >> 8) & 255, srgb & 255)
    return len(rgb) == 3 and all(
        abs(c * 255 - t) <= BULLET_COLOUR for c, t in zip(rgb, text, strict=True)
    )


def _led_by(lines: list[dict[str, Any]], rect: tuple[float, float, float, float]):
    """The line a bullet at `rect` leads: its vertical centre within the line, the line
    starting just right of it, no text on the row between them (nor over it)."""
    cy = (rect[1] + rect[3]) / 2
    best, best_x = None, None
    for ln in lines:
        x0, y0, x1, y1 = ln["bbox"]
        if not (y0 <= cy <= y1) or not ln["spans"]:
            continue
        if x0 < rect[2] - BULLET_EDGE and x1 > rect[0]:
            return None  # text over the shape or around it: a glyph's part, a table rule
        size = ln["spans"][0]["size"]
        if (
            x0 >= rect[2] - BULLET_EDGE
            and x0 - rect[2] <= BULLET_GAP * size
            and (best_x is None or x0 < best_x)
        ):
            best, best_x = ln, x0
    return best
