"""Segmentation: a text in, its sentences out, each with the grade of the cut after it.

Paragraph breaks, page breaks ("\\f"), Markdown headings and fenced code blocks are always
boundaries; prose between them is cut at `pipeline.sentences.sentence_ends`. Each boundary gets
a level (sentence < paragraph < page < heading) that says how good a cut it is; the chunkers
choose among them. Structured texts (content nodes joined by blank lines) are segmented one
`Span` at a time, so a table or a heading stays one segment."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
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

    def flush(self, last: bool = False) -> Iterator[tuple[int, int, float]]:
        """The segments whose level is final (all but the last, which a later boundary or
        heading may still change; that one too when `last`), dropped from here."""
        keep = 0 if last else min(1, len(self.starts))
        done = len(self.starts) - keep
        yield from zip(self.starts[:done], self.ends[:done], self.levels[:done], strict=True)
        del self.starts[:done], self.ends[:done], self.levels[:done]

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
    starts: list[int] = []
    ends: list[int] = []
    levels: list[float] = []
    for a, b, level in iter_segments(text):
        starts.append(a)
        ends.append(b)
        levels.append(level)
    return starts, ends, levels


# Segments held before they are handed on: a long text is segmented in bounded memory.
_FLUSH_SEGMENTS = 1024


def iter_segments(text: str) -> Iterator[tuple[int, int, float]]:
    """`segment` as a stream of (start, end, level): a huge text without structure never
    holds all its sentences at once."""
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
        if len(seg.starts) > _FLUSH_SEGMENTS:
            yield from seg.flush()
    if pos < len(text):
        seg.add_prose(text, pos, len(text))
    yield from seg.flush(last=True)


@dataclass(frozen=True)
class Span:
    """A piece of a text to chunk: text[start:end] is one content node.
    kind: "text" (segmented into sentences), "atomic" (one unsplittable segment: a table,
    code), "heading" (one segment; the boundary before it is a heading boundary and a cut
    right after it is discouraged)."""

    start: int
    end: int
    kind: str = "text"


def iter_segment_pieces(
    pieces: Iterable[tuple[int, str, str]],
) -> Iterator[tuple[int, int, float, bool]]:
    """`segment` of each piece (offset, text, kind) on its own, as a stream: (start, end,
    level, atomic) with offsets into the text the pieces are parts of, each once its level
    is final (once the next piece is seen). Boundaries between pieces are at least paragraph
    boundaries, before a heading piece a heading boundary; an atomic or heading piece is one
    segment."""
    held: tuple[int, int, float, bool] | None = None
    for offset, piece, kind in pieces:
        if not piece.strip():
            continue
        if held is not None:
            level = held[2]
            if level != PIECE:
                level = max(level, HEADING if kind == "heading" else PARAGRAPH)
            yield held[0], held[1], level, held[3]
            held = None
        if kind in ("atomic", "heading"):
            a = offset + len(piece) - len(piece.lstrip())
            level = PIECE if kind == "heading" else PARAGRAPH
            held = (a, a + len(piece.strip()), level, kind == "atomic")
            continue
        for a, b, level in iter_segments(piece):
            if held is not None:
                yield held
            held = (a + offset, b + offset, level, False)
    if held is not None:
        yield held
