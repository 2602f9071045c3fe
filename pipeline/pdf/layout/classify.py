"""Node types for the layout model's regions: the model's class, checked against what the
text says where the class alone misleads (a "section-header" that is a caption label or an
equation, a "caption" that is a sentence about a table, a small "text" block led by a
superscript marker that is a footnote)."""

from __future__ import annotations

import re
from typing import Any

from pipeline.pdf.build.sections import SENT_END, dedupe_headings, join_text
from pipeline.pdf.covers import cover_pages
from pipeline.pdf.read.lines import CAPTION_LABEL, is_caption, note_start
from pipeline.pdf.read.page_units import Unit
from pipeline.pdf.thresholds import (
    CLASSED_CHAPTER_RATIO,
    HALF_BOLD,
    HEADING_ALIGN,
    HEADING_CENTRE,
    HEADING_RATIO,
    HEADING_SIZE_SLACK,
    HEADING_WRAP_GAP,
    LIST_HEADING_WORDS,
    MATH_SHARE,
    NOTE_RATIO,
    NOTE_TOP_SLACK,
    SHORT_HEADING_LINES,
    SHORT_HEADING_WORDS,
)

WORD = re.compile(r"[^\W\d_]{2,}")
MATH_SIGN = re.compile(r"[=<>≤≥∑∫√±×÷∈]")
NUMBERED = re.compile(r"^(\d+(\.\d+)*|[IVXLC]+|[A-Z])[.)]?\s")  # "2.1 Data", "IV. Results"


def _item(kind: str, u: Unit, text: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "unit": u, "text": text, "marker": None, **extra}


def _kind(cls: str, u: Unit, text: str, body: float, max_words: int) -> str:
    labelled = CAPTION_LABEL.match(text) is not None
    if cls in ("section-header", "title") and len(text.split()) > max_words:
        return "PARAGRAPH"  # a paragraph set in display type is no heading
    if cls in ("section-header", "title"):
        if labelled and is_caption(u, text, body):
            return "CAPTION"
        if re.fullmatch(r"\d{1,3}|[IVX]{1,5}", text.strip()):  # a chapter number set large
            return "HEADING" if u.size >= CLASSED_CHAPTER_RATIO * body else "PARAGRAPH"
        if not WORD.search(text) or u.math > MATH_SHARE:  # "a2 + 8 = 12" set large: an equation
            return "FORMULA" if MATH_SIGN.search(text) or u.math > MATH_SHARE else "PARAGRAPH"
        return "TITLE" if cls == "title" else "HEADING"
    if cls == "caption":
        return "PARAGRAPH" if labelled and not is_caption(u, text, body) else "CAPTION"
    if cls == "list-item":  # "8 List of veterans" set larger than the text: a heading
        titled = text[:1].isalnum() and len(WORD.findall(text)) >= 2  # no bullet or box
        short = len(text.split()) <= max_words and not SENT_END.search(text)
        return "HEADING" if titled and short and u.size >= HEADING_RATIO * body else "LIST_ITEM"
    if cls == "formula":
        return "FORMULA"
    return "CAPTION" if labelled and is_caption(u, text, body) else "PARAGRAPH"


def _marker(u: Unit) -> str:
    first = u.lines[0]
    if first.first_small:
        return first.first_small
    m = note_start(first.text.strip())
    return m.group(1) if m else ""


def _notes(u: Unit) -> list[dict[str, Any]]:
    """A footnote region split into its notes: a new note at a line led by a superscript
    marker, or by a number or symbol right after a line that ended a sentence."""
    groups: list[list[Any]] = []
    for ln in u.lines:
        t = ln.text.strip()
        starts = bool(ln.first_small) or (
            note_start(t) is not None
            and bool(groups)
            and bool(SENT_END.search(groups[-1][-1].text.strip()))
        )
        if not groups or starts:
            groups.append([ln])
        else:
            groups[-1].append(ln)
    out = []
    for lines in groups:
        part = Unit(lines, u.page, kind="NOTE")
        marker = _marker(part)
        text = part.text
        if marker and text.startswith(marker):
            text = text[len(marker) :].lstrip()
        out.append(_item("NOTE", part, text, marker=marker))
    return out


def _continues_note(u: Unit, text: str, notes: list[dict[str, Any]]) -> bool:
    """Small text in the footnote band (not above the page's first note) that starts in
    lower case right after a note ending mid-sentence: the note run over into the next
    column, which the model took for text."""
    top = min(n["unit"].bbox[1] for n in notes)
    unfinished = not SENT_END.search(notes[-1]["text"])
    return unfinished and text[:1].islower() and u.bbox[1] >= top - NOTE_TOP_SLACK


def classify_page(
    units: list[Unit],
    cls_of: dict[int, str],
    tables: dict[int, tuple[str, dict[str, Any]]],
    body: float,
    max_words: int = LIST_HEADING_WORDS,
) -> list[dict[str, Any]]:
    """Items of one page: the flow in reading order, then its footnotes (a footnote region
    with no marker, or `_continues_note` text, after a note that ends mid-sentence continues
    that note: a note run over into the next column)."""
    flow: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for u in units:
        cls = cls_of.get(id(u), "text")
        if id(u) in tables:
            text, meta = tables[id(u)]
            flow.append(_item("TABLE", u, text, meta=meta))
            continue
        if u.image:
            flow.append(_item("FIGURE", u, ""))
            continue
        text = u.text
        if not text.strip():
            continue
        small = u.size <= NOTE_RATIO * body
        if cls == "text" and small and notes and _continues_note(u, text, notes):
            prev = notes[-1]
            prev["unit"] = Unit(prev["unit"].lines + u.lines, u.page, "NOTE")
            prev["text"] = join_text(prev["text"], text)
            continue
        if cls == "footnote" or cls == "text" and small and u.lines[0].first_small:
            for part in _notes(u):
                prev = notes[-1] if notes else None
                if prev and not part["marker"] and not SENT_END.search(prev["text"]):
                    prev["unit"] = Unit(prev["unit"].lines + part["unit"].lines, u.page, "NOTE")
                    prev["text"] = join_text(prev["text"], part["text"])
                else:
                    notes.append(part)
            continue
        flow.append(_item(_kind(cls, u, text, body, max_words), u, text))
    return flow + notes


def title_and_headings(items: list[dict[str, Any]], n_pages: int, body: float) -> None:
    """One TITLE: the largest model "title" on the first page that has one (the smaller
    ones there are author lines); later titles head sections. On a cover (first or last
    page, mostly display type) only the largest heading heads. The same heading text twice
    on one page (a masthead over the display heading): only the larger one heads."""
    cover_pages(items, n_pages, body)
    titles = [it for it in items if it["kind"] == "TITLE"]
    if titles:
        page = titles[0]["unit"].page
        first = [it for it in titles if it["unit"].page == page]
        top = max(first, key=lambda it: it["unit"].size)
        for it in titles:
            if it is top:
                continue
            it["kind"] = "PARAGRAPH" if it["unit"].page == page else "HEADING"
    join_wrapped_headings(items)
    dedupe_headings(items, ("HEADING", "TITLE"))


def join_wrapped_headings(items: list[dict[str, Any]]) -> None:
    """A heading the model drew as two regions, one per line ("Jackson County Courthouse" /
    "(Jacksonville, Oregon)" in a narrow column), is one: two headings in a row on a page,
    aligned (left edges or centres), in one size and weight, the second right under the
    first (less than a line apart), the first ending no sentence and the second unnumbered
    (not a subsection: "2 Methods" / "2.1 Data")."""
    out: list[dict[str, Any]] = []
    for it in items:
        prev = out[-1] if out else None
        if prev and prev["kind"] in ("HEADING", "TITLE") and it["kind"] == prev["kind"]:
            a, b = prev["unit"], it["unit"]
            if (
                _wrapped(a, b)
                and not SENT_END.search(prev["text"])
                and not NUMBERED.match(it["text"])
            ):
                prev["unit"] = Unit(a.lines + b.lines, a.page)
                prev["text"] = join_text(prev["text"], it["text"])
                continue
        out.append(it)
    items[:] = out


def _wrapped(a: Unit, b: Unit) -> bool:
    (ax0, _, ax1, ay1), (bx0, by0, bx1, _) = a.bbox, b.bbox
    aligned = abs(ax0 - bx0) <= HEADING_ALIGN or abs((ax0 + ax1) - (bx0 + bx1)) <= HEADING_CENTRE
    alike = abs(a.size - b.size) <= HEADING_SIZE_SLACK and (a.bold > HALF_BOLD) == (
        b.bold > HALF_BOLD
    )
    return a.page == b.page and aligned and alike and -1 <= by0 - ay1 <= HEADING_WRAP_GAP * a.size


def heading_classes(units: list[Unit], body: float) -> dict[int, str]:
    """Layout-path classes of an OCR'd page's units (the model saw no text there): a short
    line clearly larger than the body text and not a sentence is a section header."""
    out = {}
    for u in units:
        text = u.text.strip()
        words = text.split()
        short = 0 < len(words) <= SHORT_HEADING_WORDS and len(u.lines) <= SHORT_HEADING_LINES
        if short and not SENT_END.search(text) and u.size >= HEADING_RATIO * body:
            out[id(u)] = "section-header"
    return out
