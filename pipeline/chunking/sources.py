"""Where SimpleChunker reads a text's sentences from, and the window of them it holds.

A text is either in memory (a document, a small group of content nodes) or a stream of
content nodes joined by blank lines (one huge document's group): then only the part of the
joined text not cut yet is held (`RollingText`), so chunking a 150 MB document holds a few
hundred kilobytes of it. Both hand out sentences (`segments`) whose cut levels are final and
slice by offsets into the whole text."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from pipeline.chunking.segments import Span, iter_segment_pieces, iter_segments

PAGE_BREAK = "\f"
# What joins the content nodes of a group into one text (SmartChunker.group_text too).
PIECE_SEPARATOR = "\n\n"

# (start, end, level of the cut after it, atomic: a table or code that is never split)
Segment = tuple[int, int, float, bool]
# a piece of a joined text: its text, its Span kind, and what the caller keeps with it
Piece = tuple[str, str, Any]


def page_breaks(text: str) -> list[int]:
    return [m.start() for m in re.finditer(PAGE_BREAK, text)] if PAGE_BREAK in text else []


def pages(breaks: list[int], start: int, end: int, before: int = 0) -> list[int]:
    """1-based pages (separated by "\\f" at offsets `breaks`, after `before` earlier breaks)
    that text[start:end] touches."""
    first = bisect_right(breaks, start) + before + 1
    return list(range(first, bisect_right(breaks, end - 1) + before + 2))


def placed(pieces: Iterable[Piece]) -> Iterator[tuple[Span, str, Any]]:
    """Each non-empty piece with its Span in the text the pieces make joined by
    PIECE_SEPARATOR (empty ones are left out of the text, as SmartChunker.group_text does)."""
    pos = -len(PIECE_SEPARATOR)
    for text, kind, payload in pieces:
        if not text:
            continue
        start = pos + len(PIECE_SEPARATOR)
        pos = start + len(text)
        yield Span(start, pos, kind), text, payload


class TextSource:
    """A text in memory, with its spans (content nodes) when it has them."""

    def __init__(self, text: str, spans: Sequence[Span] | None = None):
        self.text = text
        self.spans = spans
        self._breaks = page_breaks(text)

    def segments(self) -> Iterator[Segment]:
        if self.spans is None:
            return ((a, b, level, False) for a, b, level in iter_segments(self.text))
        pieces = ((sp.start, self.text[sp.start : sp.end], sp.kind) for sp in self.spans)
        return iter_segment_pieces(pieces)

    def release(self, pos: int) -> None:
        """Nothing to drop: the caller holds the text anyway."""

    def pages(self, start: int, end: int) -> list[int]:
        return pages(self._breaks, start, end)


class RollingText:
    """A text read piece by piece: what is before `base` is dropped once it is cut. Sliced
    with offsets into the whole text; page breaks are counted over the whole text."""

    def __init__(self) -> None:
        self.base = 0
        self._text = ""
        self._parts: list[str] = []
        self._end = 0
        self._breaks: list[int] = []  # offsets of the "\f"s at or after `base`
        self._dropped = 0  # "\f"s before `base`

    def append(self, part: str) -> None:
        self._breaks += [self._end + b for b in page_breaks(part)]
        self._parts.append(part)
        self._end += len(part)

    def _join(self) -> None:
        if self._parts:  # joined once per batch of pieces, not once per append
            self._text += "".join(self._parts)
            self._parts = []

    def __getitem__(self, key: slice) -> str:
        self._join()
        return self._text[key.start - self.base : key.stop - self.base]

    def release(self, pos: int) -> None:
        """Drop the text before `pos`: no sentence still to cut starts there."""
        self._join()
        self._text = self._text[pos - self.base :]
        self.base = pos
        gone = bisect_right(self._breaks, pos - 1)
        self._dropped += gone
        del self._breaks[:gone]

    def pages(self, start: int, end: int) -> list[int]:
        return pages(self._breaks, start, end, self._dropped)


class PieceSource:
    """Pieces (content nodes) joined by PIECE_SEPARATOR, read as the chunker asks for more;
    `on_piece(span, payload)` is told each piece's place before any of its sentences is cut."""

    def __init__(self, pieces: Iterable[Piece], on_piece: Callable[[Span, Any], None]):
        self.text = RollingText()
        self._pieces = pieces
        self._on_piece = on_piece

    def _read(self) -> Iterator[tuple[int, str, str]]:
        for span, text, payload in placed(self._pieces):
            if span.start:
                self.text.append(PIECE_SEPARATOR)
            self.text.append(text)
            self._on_piece(span, payload)
            yield span.start, text, span.kind

    def segments(self) -> Iterator[Segment]:
        return iter_segment_pieces(self._read())

    def release(self, pos: int) -> None:
        self.text.release(pos)

    def pages(self, start: int, end: int) -> list[int]:
        return self.text.pages(start, end)


# What the chunker slices sentences from, with offsets into the whole text.
Text = str | RollingText
Source = TextSource | PieceSource


class Window:
    """Sentences of a text not cut yet (the first is the text's sentence `first`): offsets
    into the text, the level of the cut after each, tokens (with the whitespace before it),
    scores; cum[k] counts the tokens before sentence k from the text's start."""

    def __init__(self) -> None:
        self.first = 0
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.levels: list[float] = []
        self.toks: list[int] = []
        self.scores: list[float] = []
        self.cum: list[int] = [0]
        self.raw_end: int | None = None  # end of the last sentence read, before any split

    def __len__(self) -> int:
        return len(self.starts)

    def add(self, start: int, end: int, level: float, tokens: int) -> None:
        self.starts.append(start)
        self.ends.append(end)
        self.levels.append(level)
        self.toks.append(tokens)
        self.cum.append(self.cum[-1] + tokens)

    def drop(self, k: int) -> None:
        """Forget the first k sentences (cut, and out of reach of any later decision)."""
        for column in (self.starts, self.ends, self.levels, self.toks, self.scores, self.cum):
            del column[:k]
        self.first += k
