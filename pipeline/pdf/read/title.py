"""A PDF's title: its metadata title unless that names the producing file or template, else
the title page 1 shows in display type, else page 1's first line (in words: not a page
number, not the start of a paragraph), else the file's name.

The metadata title is often missing or a producer's placeholder ("Microsoft Word -
draft.docx", "Slide 1", "paper.dvi"), and page 1's first line is often a running header, a
journal name or a date. A title is set in the largest type on page 1 (how pdftitle and
GROBID's header model read it): the lines in that size, one block, when it is clearly larger
than the page's body text, in the page's upper half when there is such type there (a cover's
brand at the foot, "Redpaper" over a report's title, and a title page's author lines are
lower down); vertical text (arXiv's margin stamp) is no title.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pipeline.pdf.thresholds import (
    COVER_CHARS,
    DISPLAY_TITLE_RATIO,
    MAX_FIRST_LINE_CHARS,
    MAX_TITLE_CHARS,
    SENTENCE_WORDS,
    TITLE_LINE_GAP,
    TITLE_MAX_SLOPE,
    TITLE_MIN_LETTERS,
    TITLE_SIZE_SLACK,
    TITLE_SPACE,
)

# a word of three letters or more ending a sentence and another beginning ("Dr. Ames" and
# "U.S. Navy" do not)
_SENTENCE_END = re.compile(r"\b[a-z]{3,}[.!?]\s+[A-Z]")
_PLACEHOLDER = re.compile(
    r"^(?:microsoft (?:word|powerpoint|excel) - .*|untitled(?:[ -]?\d+)?|slide \d+"
    r"|powerpoint presentation|(?:new )?document\s*\d*"
    r"|about:blank|.*\.(?:docx?|pptx?|xlsx?|odt|odp|rtf|tex|dvi|ps|pdf|indd|qxd"
    r"|x?html?|md|txt|xml|epub|png|jpe?g|tiff?))$",  # a browser's or a scanner's file name
    re.IGNORECASE,
)


def is_placeholder(title: str) -> bool:
    """A metadata title that names a file or a template, not the document."""
    return bool(_PLACEHOLDER.match(title.strip()))


def _size(points: float) -> float:
    return round(points * 2) / 2  # half points: one style's spans differ by rounding only


def _line_text(spans: list[dict[str, Any]]) -> str:
    """A line's spans joined, with a space where the PDF leaves a gap but draws none."""
    text = spans[0]["text"]
    for a, b in zip(spans, spans[1:], strict=False):
        gap = b["bbox"][0] - a["bbox"][2]
        text += (" " if gap > TITLE_SPACE * b["size"] else "") + b["text"]
    return " ".join(text.split())


def display_title(page_dict: dict[str, Any]) -> str | None:
    """The title set in display type on a page (pymupdf's `get_text("dict")`), or None."""
    lines = []  # (top, left, bottom, size, text)
    chars: Counter[float] = Counter()
    for block in page_dict.get("blocks", []):
        for line in block.get("lines", []):
            spans = [s for s in line["spans"] if s["text"].strip()]
            if not spans or abs(line["dir"][1]) > TITLE_MAX_SLOPE:  # empty, or not horizontal
                continue
            for s in spans:
                chars[_size(s["size"])] += len(s["text"].strip())
            size = _size(max(s["size"] for s in spans))
            x0, y0, _, y1 = line["bbox"]
            lines.append((y0, x0, y1, size, _line_text(spans)))
    body = chars.most_common(1)[0][0] if chars else 0.0
    if body == max(chars, default=0.0) and chars[body] <= COVER_CHARS and len(chars) > 1:
        body = max(size for size in chars if size < body)  # a cover: its title is most of it
    big = [
        ln
        for ln in lines
        if ln[3] >= DISPLAY_TITLE_RATIO * body and _letters(ln[4]) >= TITLE_MIN_LETTERS
    ]
    upper = [ln for ln in big if ln[0] < page_dict.get("height", 0) / 2]
    big = upper or big  # a cover's brand or a title page's authors sit lower down
    if not big:
        return None
    top = max(ln[3] for ln in big)
    picked = sorted(
        (ln for ln in big if ln[3] >= top - TITLE_SIZE_SLACK), key=lambda ln: (ln[0], ln[1])
    )
    title, bottom = [picked[0][4]], picked[0][2]
    for y0, _, y1, _, text in picked[1:]:  # the block's next lines: a title over lines
        if y0 - bottom > TITLE_LINE_GAP * top:
            break
        title.append(text)
        bottom = max(bottom, y1)
    joined = " ".join(title)
    return joined if len(joined) <= MAX_TITLE_CHARS else None


def _letters(text: str) -> int:
    return sum(c.isalpha() for c in text)


def first_line(text: str) -> str | None:
    """A page's first line, unless it is long, names nothing in words (a page number) or is
    the start of a paragraph: a sentence ends within it, or it is a line of eight words or
    more that runs on into the next (which goes on in lower case)."""
    lines = [ln.strip() for ln in text.split("\n") if ln.strip()][:2]
    line = lines[0] if lines else ""
    if (
        _letters(line) < TITLE_MIN_LETTERS
        or len(line) > MAX_FIRST_LINE_CHARS
        or _SENTENCE_END.search(line)
    ):
        return None
    runs_on = (
        len(line.split()) >= SENTENCE_WORDS
        and line[-1].isalpha()
        and len(lines) > 1
        and lines[1][0].islower()
    )
    return None if runs_on else line
