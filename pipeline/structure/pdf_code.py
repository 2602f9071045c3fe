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
from typing import Any

import pymupdf

from pipeline.ingest.pdf_units import Unit

CODE_SHARE = 0.8  # a paragraph with at least this share of monospaced characters is code
MONO_NAME = re.compile(r"Courier|Mono|Consol|Menlo|Monaco|Typewriter|CMS?L?TT|SFTT", re.I)
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
    if len(advances) < 3:  # a subset of a few glyphs says nothing
        return [base, font.name], by_name
    return [base, font.name], max(advances) - min(advances) < 0.02 and max(advances) > 0


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
    if sum(u.mono * n for u, n in chars) > 0.5 * total:  # typewritten: no listings in it
        return
    last: dict[str, Any] | None = None
    for it in items:
        if it["kind"] == "PARAGRAPH" and it["unit"].mono >= CODE_SHARE:
            text = code_text(it["unit"])
            if last is not None:  # the listing goes on
                last["text"] += "\n" + text
                last["unit"] = Unit(last["unit"].lines + it["unit"].lines, last["unit"].page)
                it["kind"] = "MERGED"
                continue
            it["kind"], it["text"], last = "CODE", text, it
        elif it["kind"] not in ("PAGE_NUMBER", "NOTE"):
            last = None
    items[:] = [it for it in items if it["kind"] != "MERGED"]


def code_text(u: Unit) -> str:
    """The unit's lines, one a line, indented by their offset from its leftmost line in
    character widths (a monospaced character is as wide as the line over its length) and
    by the spaces they start with."""
    lines = [ln for ln in u.lines if ln.text.strip()]
    if not lines:
        return ""
    widest = max(lines, key=lambda ln: len(ln.text))
    width = (widest.bbox[2] - widest.bbox[0]) / max(len(widest.text.rstrip()), 1) or 1.0
    left = min(ln.bbox[0] for ln in lines)
    return "\n".join(" " * round((ln.bbox[0] - left) / width) + ln.text.rstrip() for ln in lines)
