"""Edges between the nodes of one PDF: note references to footnotes, numeric citations to
bibliography entries, and figures/tables to their captions."""

from __future__ import annotations

import re
from typing import Any

from pipeline.structure.model import DocStructure
from pipeline.pdf.thresholds import CAPTION_MAX_GAP, MAX_CITATION_RANGE, SIDE_PENALTY, WRONG_KIND_PENALTY

CITATION = re.compile(r"\[(\d+(?:\s*[,–-]\s*\d+)*)\]")


def note_edges(
    out: DocStructure, items: list[dict[str, Any]], notes: dict[int, dict[str, str]]
) -> None:
    """A superscript marker in running text -> the footnote with that marker on its page (or
    the next one: a note can be set overleaf)."""
    for it in items:
        if it["kind"] == "NOTE" or "id" not in it:
            continue
        for u in it["units"]:
            for m in u.markers:
                target = notes.get(u.page, {}).get(m) or notes.get(u.page + 1, {}).get(m)
                if target:
                    out.add_edge(it["id"], target, "REFERENCES_NOTE", marker_text=m)


def citation_edges(out: DocStructure, items: list[dict[str, Any]], bib: dict[str, str]) -> None:
    if not bib:
        return
    for it in items:
        if "id" not in it or it["kind"] in ("NOTE",):
            continue
        for m in CITATION.finditer(it["text"]):
            for num in _expand(m.group(1)):
                if num in bib:
                    out.add_edge(it["id"], bib[num], "REFERENCES_CITATION", marker_text=m.group(0))


def _expand(spec: str) -> list[str]:
    """'2, 5-7' -> ['2', '5', '6', '7']."""
    nums: list[str] = []
    for part in spec.split(","):
        part = part.strip()
        m = re.match(r"^(\d+)\s*[–-]\s*(\d+)$", part)
        if m and 0 < int(m.group(2)) - int(m.group(1)) < MAX_CITATION_RANGE:
            nums += [str(n) for n in range(int(m.group(1)), int(m.group(2)) + 1)]
        elif part.isdigit():
            nums.append(part)
    return nums


def _gap(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """Vertical distance between two boxes, plus a penalty when they share no x-range: a
    caption belongs to the figure above or below it, not to the one beside it."""
    v = max(0.0, b[1] - a[3], a[1] - b[3])
    overlap = min(a[2], b[2]) - max(a[0], b[0])
    return v if overlap > 0 else v + SIDE_PENALTY


def caption_edges(out: DocStructure, items: list[dict[str, Any]]) -> None:
    """Figure/table/listing -> caption (IS_CAPTIONED_BY): captions and figures of a page
    paired nearest first, each at most once, so two captions on one row go to their own
    figures."""
    by_page: dict[int, list[dict[str, Any]]] = {}
    for it in items:
        if "id" in it and it["kind"] in ("CAPTION", "FIGURE", "TABLE", "CODE"):
            by_page.setdefault(it["unit"].page, []).append(it)
    for on_page in by_page.values():
        caps = [it for it in on_page if it["kind"] == "CAPTION"]
        things = [it for it in on_page if it["kind"] != "CAPTION"]
        pairs = []
        for c in caps:
            want = "TABLE" if re.match(r"^tab", c["text"], re.I) else "FIGURE"
            want = "CODE" if re.match(r"^(?:listing|example)", c["text"], re.I) else want
            for t in things:
                d = _gap(c["unit"].bbox, t["unit"].bbox) + (0 if t["kind"] == want else WRONG_KIND_PENALTY)
                if d < CAPTION_MAX_GAP:
                    pairs.append((d, id(c), id(t), c, t))
        used: set[int] = set()
        for _, ci, ti, c, t in sorted(pairs, key=lambda p: p[0]):
            if ci in used or ti in used:
                continue
            used |= {ci, ti}
            out.add_edge(t["id"], c["id"], "IS_CAPTIONED_BY")
