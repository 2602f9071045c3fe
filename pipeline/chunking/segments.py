"""Segmentation: a text in, its sentences out, each with the grade of the cut after it.

Paragraph breaks, page breaks ("\\f"), Markdown headings and fenced code blocks are always
boundaries; prose between them is cut at `pipeline.sentences.sentence_ends`. Each boundary gets
a level (sentence < paragraph < page < heading) that says how good a cut it is; the chunkers
choose among them. Structured texts (content nodes joined by blank lines) are segmented one
`Span` at a time, so a table or a heading stays one segment."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.sentences import sentence_ends

# Boundary levels: how good a place to cut a boundary is (higher is better).
PIECE = -2.0  # inside an over-long sentence or right after a heading: cut only if forced
SENTENCE = 0.0
PARAGRAPH = 1.0
PAGE = 2.0
HEADING = 3.0  # the boundary before a heading: overlap never crosses it

# Structural blocks, scanned once over the text; prose between them is split into sentences.
_BLOCKS = re.compile(
    r"(?P<fence>^[ \t]{0,3}(?P<fch>```|~~~)[^\n]*\n.*?(?:^[ \t]{0,3}(?P=fch)[ \t\r]*$|\Z))"
    r"|(?P<head>^[ \t]{0,3}#{1,6}[ \t]+[^\n]*?[ \t\r]*$)"
    r"|(?P<page>[ \t\r\n]*\f[\s]*)"
    r"|(?P<para>\n[ \t\r]*\n[ \t\r\n]*)",
    re.MULTILINE | re.DOTALL,
)


class _Segments:
    """Sentences of one text: trimmed char spans, the level of the boundary after each."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.levels: list[float] = []
        self._pending = SENTENCE
        self._glued = False

    def add(self, text: str, start: int, end: int) -> None:
        piece = text[start:end]
        stripped = piece.strip()
        if not stripped:
            return
        start += len(piece) - len(piece.lstrip())
        end = start + len(stripped)
        if self.levels and not self._glued:
            self.levels[-1] = max(self.levels[-1], self._pending)
        self.starts.append(start)
        self.ends.append(end)
        self.levels.append(SENTENCE)
        self._pending = SENTENCE
        self._glued = False

    def boundary(self, level: float) -> None:
        """A boundary of at least `level` before the next segment."""
        self._pending = max(self._pending, level)

    def glue_last(self) -> None:
        """Discourage a cut right after the last segment (a heading belongs with its body)."""
        if self.levels:
            self.levels[-1] = PIECE
            self._glued = True

    def add_prose(self, text: str, start: int, end: int) -> None:
        block = text[start:end]
        cut = 0
        for b in sentence_ends(block):
            if b > cut:
                self.add(text, start + cut, start + b)
                cut = b
        self.add(text, start + cut, end)


def segment(text: str) -> tuple[list[int], list[int], list[float]]:
    """(starts, ends, levels) of the sentences of `text`; levels[i] grades the cut after i."""
    seg = _Segments()
    pos = 0
    for m in _BLOCKS.finditer(text):
        if m.start() > pos:
            seg.add_prose(text, pos, m.start())
        kind = m.lastgroup if m.lastgroup != "fch" else "fence"
        if kind == "fence":
            seg.boundary(PARAGRAPH)
            seg.add(text, m.start(), m.end())
            seg.boundary(PARAGRAPH)
        elif kind == "head":
            seg.boundary(HEADING)
            seg.add(text, m.start(), m.end())
            seg.glue_last()
        elif kind == "page":
            seg.boundary(PAGE)
        else:
            seg.boundary(PARAGRAPH)
        pos = m.end()
    if pos < len(text):
        seg.add_prose(text, pos, len(text))
    return seg.starts, seg.ends, seg.levels


@dataclass(frozen=True)
class Span:
    """A piece of a text to chunk: text[start:end] is one content node.
    kind: "text" (segmented into sentences), "atomic" (one unsplittable segment: a table,
    code), "heading" (one segment; the boundary before it is a heading boundary and a cut
    right after it is discouraged)."""

    start: int
    end: int
    kind: str = "text"


def segment_spans(text: str, spans: Sequence[Span]) -> tuple[list[int], list[int], list[float]]:
    """`segment` of each span on its own (offsets into `text`); boundaries between spans are
    at least paragraph boundaries, before a heading span a heading boundary."""
    starts: list[int] = []
    ends: list[int] = []
    levels: list[float] = []
    for sp in spans:
        if not text[sp.start : sp.end].strip():
            continue
        if levels:
            before = HEADING if sp.kind == "heading" else PARAGRAPH
            levels[-1] = max(levels[-1], before) if levels[-1] != PIECE else PIECE
        if sp.kind in ("atomic", "heading"):
            piece = text[sp.start : sp.end]
            a = sp.start + len(piece) - len(piece.lstrip())
            starts.append(a)
            ends.append(a + len(piece.strip()))
            levels.append(PIECE if sp.kind == "heading" else PARAGRAPH)
            continue
        s, e, lv = segment(text[sp.start : sp.end])
        starts += [x + sp.start for x in s]
        ends += [x + sp.start for x in e]
        levels += lv
    return starts, ends, levels
