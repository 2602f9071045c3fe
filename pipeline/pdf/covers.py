"""Front and back covers, on either PDF path: a cover page's display type is no heading,
only its largest multi-word line is (the title, on the first page). Both the rule path and
the layout path run it over their classified items."""

from __future__ import annotations

import re
from typing import Any

from pipeline.pdf.read.page_units import Unit
from pipeline.pdf.thresholds import (
    COVER_ALIGN,
    COVER_BODY_SHARE,
    COVER_HEADING_WORDS,
    COVER_SIZE_SLACK,
    COVER_TEXT_GAP,
    COVER_TEXT_LINES,
)


def cover_pages(items: list[dict[str, Any]], n_pages: int, body: float) -> None:
    """Front/back covers (first/last page with little body-size text): only the largest
    multi-word heading there is one; the rest is display type."""
    for pno in {0, n_pages - 1}:
        on = [it for it in items if it["unit"].page == pno and not it["unit"].image]
        chars = sum(len(it["text"]) for it in on)
        body_chars = sum(
            len(it["text"]) for it in on if abs(it["unit"].size - body) <= COVER_SIZE_SLACK
        )
        cover = bool(on) and re.match(r"^(front |back )?cover$", on[0]["text"].strip(), re.I)
        if not on or body_chars > COVER_BODY_SHARE * chars and not cover:
            continue
        heads = [it for it in on if it["kind"] in ("HEADING", "TITLE")]
        multi = [it for it in heads if len(it["text"].split()) >= COVER_HEADING_WORDS]
        keep = max(multi, key=lambda it: it["unit"].size) if multi else None
        units = [it["unit"] for it in on]
        for it in heads:
            if it is not keep and not _over_text(it["unit"], units):
                it["kind"] = "PARAGRAPH"
        if keep is not None and pno == 0:
            keep["kind"] = "TITLE"


def _over_text(u: Unit, units: list[Unit]) -> bool:
    """A multi-word display line set right over a block of smaller running text (a cover's
    blurb heading), as opposed to a free-standing slogan."""
    b = below(u, units)
    if b is None or len(u.text.split()) < COVER_HEADING_WORDS or len(b.lines) < COVER_TEXT_LINES:
        return False
    return (
        b.bbox[1] - u.bbox[3] < COVER_TEXT_GAP * u.size
        and b.size < u.size
        and abs(b.bbox[0] - u.bbox[0]) < COVER_ALIGN
    )


def below(u: Unit, units: list[Unit]) -> Unit | None:
    """The unit right under `u` in its column (nearest top edge below it, overlapping it
    horizontally): what a heading is compared with. Reading order is no substitute: a
    heading with a tiny gap under it is cut off as its own band by the XY-cut."""
    cands = [
        v
        for v in units
        if v is not u
        and v.bbox[1] >= u.bbox[3] - 1
        and v.bbox[0] < u.bbox[2]
        and v.bbox[2] > u.bbox[0]
    ]
    return min(cands, key=lambda v: (v.bbox[1], v.bbox[0])) if cands else None
