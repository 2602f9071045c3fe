"""SimpleChunker: token-bounded, sentence-aligned, content-anchored text units.

Why content-anchored: text unit ids hash their text, and every LLM call and embedding is
cached by that hash. If cut points were fixed offsets from the document start, editing one
line would shift every later chunk and re-bill the whole document. Here a cut point is chosen
by the text around it, not by its distance from the start, so an edit changes only the chunks
near it.

How:
1. Segment the text into sentences. Paragraph breaks, page breaks ("\\f"), Markdown headings
   and fenced code blocks are always boundaries; each boundary gets a level (sentence <
   paragraph < page < heading) that says how good a cut it is.
2. Score every boundary `level + u`, where u in [0, 1) is a stable hash of the sentence that
   ends there (blake2b). A boundary is an anchor when its score beats every other boundary
   within `min_size` tokens on either side (a local maximum, as in LMC/AE content-defined
   chunking). Whether a boundary is an anchor depends only on the text within `min_size` tokens
   of it, so anchors far from an edit never move, and anchors are at least `min_size` apart.
   Sentence ends inside a paragraph are full candidates only when their hash is divisible by
   `cut_divisor`; the others rank below every candidate (paragraph ends win where they exist).
3. A span between anchors that does not fit `chunk_size` (with its overlap) is split at its
   best-scoring inner boundary, recursively: again a choice made by the span's own content.
4. Each chunk after the first starts with the previous chunk's trailing whole sentences
   totalling <= `overlap` tokens (not across a heading).
A sentence longer than the budget is split at whitespace near token limits as a fallback.

Memory: whether a boundary is an anchor depends only on the boundaries within `min_size`
tokens of it, and the spans between anchors are cut on their own, so a text is cut a window of
sentences at a time (WINDOW_SENTENCES): cuts are made up to the last anchor that the window
decides, and only the sentences a later decision can reach (`min_size` tokens back, and the
overlap) are kept. The cuts are the same as over the whole text at once; a huge document is
chunked in memory bounded by the window, not by its length.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

from pipeline.chunking.segments import HEADING, PIECE, SENTENCE, Span
from pipeline.chunking.sources import (
    PIECE_SEPARATOR,
    Piece,
    PieceSource,
    Segment,
    Source,
    Text,
    TextSource,
    Window,
    page_breaks,
    pages,
    placed,
)
from pipeline.config import ChunkingSettings
from pipeline.tokens import count_tokens, count_tokens_batch, token_starts

# An atomic span (a table, code) is never split unless longer than this many chunks (a 1 MB
# listing): then it is cut at line ends like an over-long sentence, so no unit is unbounded.
ATOMIC_MAX_UNITS = 16
# Sentences read per round of cut selection: what a window holds beyond the few sentences a
# later decision can still reach. 4,096 sentences are ~100k tokens (~400 KB of text): rounds
# cost little next to their sentences' token counts, and memory stays a few MB per document.
WINDOW_SENTENCES = 4096
# A run without an anchor longer than this many chunks is cut at its best boundary of its
# second half, so the window stays bounded. Only a text repeating one sentence (equal scores:
# no local maximum) has such a run: anchors are local maxima of hashed scores, at most a few
# `min_size` windows apart in any other text, so ordinary texts never reach this.
FORCED_CUT_CHUNKS = 64
# The longest o200k_base token, in bytes (so in characters): a text of more than
# chunk_size * 128 characters has more than chunk_size tokens without counting them
# (max of the byte lengths in the wheel's rank file; tests/test_chunk_windows.py checks it).
MAX_TOKEN_CHARS = 128


@dataclass(frozen=True)
class Chunk:
    text: str
    n_tokens: int
    pages: list[int]
    start: int  # char offsets into the document text: text == doc_text[start:end]
    end: int


@dataclass
class _Cuts:
    """Where cutting a text stands: the last cut (after sentence `last`), the first body
    sentence of the last chunk (overlap never reaches before it), and the first boundary
    whose anchor status is not decided yet; all indices of the whole text's sentences."""

    last: int = -1
    prev: int = 0
    decided: int = 0


def _stable_hash(text: str) -> int:
    """64-bit hash of the whitespace-normalised text, the same on every run and machine."""
    key = " ".join(text.split()).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def _split_long(text: Text, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """Spans of at most `limit` tokens covering text[start:end]: cut at the last newline or
    space before each token limit, else at the token boundary itself."""
    piece = text[start:end]
    offsets = token_starts(piece)
    out: list[tuple[int, int]] = []
    first_tok = 0
    while len(offsets) - first_tok > limit:
        lo = offsets[first_tok]
        hard = offsets[first_tok + limit]
        cut = piece.rfind("\n", lo + 1, hard)
        if cut <= lo + (hard - lo) // 2:
            cut = max(piece.rfind(" ", lo + 1, hard), piece.rfind("\t", lo + 1, hard))
        if cut <= lo + (hard - lo) // 4:
            cut = hard
        out.append((start + lo, start + cut))
        first_tok = bisect_right(offsets, cut) - 1
        if offsets[first_tok] < cut:
            first_tok += 1
    out.append((start + offsets[first_tok], end))
    trimmed = []
    for a, b in out:  # pieces start at the space a cut left behind: trim like sentences
        part = text[a:b]
        a += len(part) - len(part.lstrip())
        trimmed.append((a, a + len(part.strip())))
    return [(a, b) for a, b in trimmed if b > a]


def _stripped(text: str) -> tuple[int, int]:
    """text.strip()'s bounds in `text`, without copying a huge text to find them."""
    a, b = 0, len(text)
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


class SimpleChunker:
    """Sentence-aligned chunks of at most `chunk_size` tokens with content-anchored cuts."""

    fast_path = True  # a text that fits is one chunk without segmentation
    windowed = True  # cuts are decided a window at a time (scores local to a sentence)

    def __init__(self, settings: ChunkingSettings):
        if settings.chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        self.size = settings.chunk_size
        self.overlap = max(0, min(settings.overlap, settings.chunk_size // 2))
        self.window = max(1, min(settings.min_size, settings.chunk_size // 2))
        self.divisor = max(1, settings.cut_divisor)

    # -- segmentation with token counts -------------------------------------------------------
    def _sentences(
        self, text: str, spans: Sequence[Span] | None = None
    ) -> tuple[list[int], list[int], list[float], list[int]]:
        """(starts, ends, levels, tokens) of all the sentences of `text`, as cut selection
        sees them (over-long sentences split)."""
        source = TextSource(text, spans)
        win = Window()
        for batch in _batches(source.segments()):
            self._measure(text, batch, win)
        return win.starts, win.ends, win.levels, win.toks

    def _measure(self, text: Text, batch: list[Segment], win: Window) -> None:
        """Add sentences to the window with their tokens, over-long ones split in pieces."""
        # Tokens of each sentence with the whitespace before it: the sum over a run of sentences
        # is (within a token or two, from above) the count of the joined text.
        pieces = []
        prev = win.raw_end
        for a, b, _, _ in batch:
            pieces.append(text[a if prev is None else prev : b])
            prev = b
        win.raw_end = prev
        limit = self.size - self.overlap
        for (a, b, level, atomic), n in zip(batch, count_tokens_batch(pieces), strict=True):
            if n <= limit or (atomic and n <= self.size * ATOMIC_MAX_UNITS):  # a table stays whole
                win.add(a, b, level, n)
                continue
            parts = _split_long(text, a, b, limit)
            counts = count_tokens_batch([text[x:y] for x, y in parts])
            for j, ((x, y), m) in enumerate(zip(parts, counts, strict=True)):
                win.add(x, y, level if j == len(parts) - 1 else PIECE, m)

    # -- cut selection -------------------------------------------------------------------------
    def _scores(self, text: Text, starts: list[int], ends: list[int], levels: list[float]):
        scores = []
        for a, b, lvl in zip(starts, ends, levels, strict=True):
            h = _stable_hash(text[a:b])
            if lvl == SENTENCE and h % self.divisor:
                lvl = -1.0  # an ordinary sentence end: an anchor only when nothing better is near
            scores.append(lvl + (h >> 11) / 2.0**53)  # high bits: a rank in [0, 1)
        return scores

    def _anchors(self, cum: list[int], scores: list[float], first: int, stop: int) -> list[int]:
        """Indices i in first..stop-1 whose boundary (after sentence i) is a local score maximum
        within `window` tokens; the text's start and end count as unbeatable anchors. cum[-1]
        is the text's total only in its last window: a boundary the caller asks about here
        has every boundary within `window` tokens of it in the window, and the window's end
        more than `window` tokens after it."""
        n = len(scores)
        w = self.window
        total = cum[-1]
        out = []
        lo = 0
        for i in range(first, stop):
            p = cum[i + 1]  # token position of the boundary after sentence i
            if p < w or total - p < w:
                continue
            while cum[lo + 1] < p - w:
                lo += 1
            s = scores[i]
            j = lo
            ok = True
            while j < n - 1 and cum[j + 1] <= p + w:
                if j != i and (scores[j] > s or (scores[j] == s and j < i)):
                    ok = False
                    break
                j += 1
            if ok:
                out.append(i)
        return out

    def _overlap_start(self, k: int, toks: list[int], levels: list[float]) -> int:
        """First sentence of the overlap before body sentence k (k when none fits)."""
        j, used = k, 0
        while j > 0 and levels[j - 1] < HEADING and used + toks[j - 1] <= self.overlap:
            used += toks[j - 1]
            j -= 1
        return j

    def _best_split(self, a: int, b: int, cum: list[int], scores: list[float]) -> int:
        """The best-scoring boundary inside sentences a..b-1 that leaves both sides a fair size
        (>= min_size each when possible): a choice made by the span's own content."""
        body = cum[b] - cum[a]
        inner = range(a, b - 1)
        for lo_tok in (min(self.window, body // 2), body // 4, 0):
            fair = [i for i in inner if lo_tok <= cum[i + 1] - cum[a] <= body - lo_tok]
            if fair:
                return max(fair, key=lambda i: (scores[i], -i))
        return a

    def _fit(self, a: int, b: int, cum, scores, toks, levels) -> list[tuple[int, int]]:
        """Body sentences a..b-1 as spans that fit `chunk_size` with their overlap."""
        out: list[tuple[int, int]] = []
        stack = [(a, b)]
        while stack:
            a, b = stack.pop()
            ov = cum[a] - cum[self._overlap_start(a, toks, levels)]
            if b - a == 1 or cum[b] - cum[a] + ov <= self.size:
                out.append((a, b))
                continue
            i = self._best_split(a, b, cum, scores)
            stack += [(i + 1, b), (a, i + 1)]
        return out

    # -- chunking ------------------------------------------------------------------------------
    def chunk(self, text: str, spans: Sequence[Span] | None = None) -> list[Chunk]:
        """Chunks of `text`. `spans`, when given, are the text's pieces (content nodes joined
        by blank lines), each segmented on its own; an atomic piece (a table, code) is one
        segment that is not split up to ATOMIC_MAX_UNITS x `chunk_size` tokens, so its chunk
        may exceed `chunk_size`."""
        return list(self.iter_chunks(text, spans))

    def iter_chunks(self, text: str, spans: Sequence[Span] | None = None) -> Iterator[Chunk]:
        """`chunk`, one chunk at a time: a huge text's chunks are not all held at once."""
        a, b = _stripped(text)
        if a == b:
            return
        if self.fast_path and b - a <= self.size * MAX_TOKEN_CHARS:
            whole = count_tokens(text[a:b])
            if whole <= self.size:  # the common short case: one chunk
                yield Chunk(text[a:b], whole, pages(page_breaks(text), a, b), a, b)
                return
        yield from self._cut(TextSource(text, spans))

    def chunk_pieces(
        self, pieces: Iterable[Piece], on_piece: Callable[[Span, Any], None]
    ) -> Iterator[Chunk]:
        """Chunks of the text that `pieces` (text, Span kind, payload) make joined by blank
        lines, as `chunk(text, spans)` gives them, reading the pieces as cutting needs them:
        a huge group of content nodes is never joined into one string. `on_piece(span,
        payload)` is called for each non-empty piece before any chunk that covers it."""
        head: list[Piece] = []
        chars = 0  # at most the stripped joined text's length
        rest = iter(pieces)
        for piece in rest:
            head.append(piece)
            chars += len(piece[0].strip())
            if chars > self.size * MAX_TOKEN_CHARS:  # more than chunk_size tokens: no fast path
                yield from self._cut(PieceSource(chain(head, rest), on_piece))
                return
        spans = []
        for span, _, payload in placed(head):
            on_piece(span, payload)
            spans.append(span)
        yield from self.iter_chunks(PIECE_SEPARATOR.join(p[0] for p in head if p[0]), spans)

    def _cut(self, source: Source) -> Iterator[Chunk]:
        """Chunks of the source's text, decided a window of sentences at a time."""
        win = Window()
        cuts = _Cuts()
        for batch in _batches(source.segments()):
            self._measure(source.text, batch, win)
            if self.windowed:
                yield from self._advance(source, win, cuts, final=False)
        yield from self._advance(source, win, cuts, final=True)

    def _advance(self, source: Source, win: Window, cuts: _Cuts, final: bool) -> Iterator[Chunk]:
        """Chunks up to the last anchor the window decides (to the text's end when `final`),
        then forget the sentences no later decision reaches."""
        m = len(win)
        if not m:
            return
        g = win.first
        k = len(win.scores)
        win.scores += self._scores(source.text, win.starts[k:], win.ends[k:], win.levels[k:])
        d = cuts.decided - g
        stop = m - 1 if final else self._decidable(win, d)
        bounds = self._anchors(win.cum, win.scores, d, stop)
        if final:
            bounds.append(m - 1)
        elif not bounds:
            bounds = self._forced(win, cuts.last - g, stop)
        for y in bounds:
            yield from self._emit(source, win, cuts, cuts.last - g + 1, y + 1)
            cuts.last = y + g
        cuts.decided = stop + g
        if not final:
            self._forget(source, win, cuts, stop)

    def _decidable(self, win: Window, d: int) -> int:
        """End of the boundaries from d on whose anchor test the window can make (before the
        text's last window): those with every boundary within `window` tokens after them
        read, the last one read being more than `window` tokens on."""
        return max(d, bisect_left(win.cum, win.cum[-1] - self.window, d + 1) - 1)

    def _forced(self, win: Window, last: int, stop: int) -> list[int]:
        """A cut in an anchor-free run of more than FORCED_CUT_CHUNKS chunks (sentences
        last+1..stop-1 decided): its best boundary (highest score, then earliest) of its
        second half in tokens, so a forced cut leaves at most half the run undecided."""
        a, cum = last + 1, win.cum
        if stop <= a or cum[stop] - cum[a] <= FORCED_CUT_CHUNKS * self.size:
            return []
        half = (cum[stop] - cum[a]) // 2
        inner = [i for i in range(a, stop) if cum[i + 1] - cum[a] >= half]
        return [max(inner, key=lambda i: (win.scores[i], -i))]

    def _forget(self, source: Source, win: Window, cuts: _Cuts, stop: int) -> None:
        """Drop the sentences before both the next chunk's overlap and the first boundary
        within `window` tokens of the first undecided one (what its anchor test reads)."""
        reach = bisect_left(win.cum, win.cum[stop + 1] - self.window, 1) - 1
        keep = min(self._overlap_start(cuts.last - win.first + 1, win.toks, win.levels), reach)
        win.drop(keep)
        source.release(win.starts[0])

    def _emit(self, source: Source, win: Window, cuts: _Cuts, a: int, b: int) -> Iterator[Chunk]:
        """Chunks of body sentences a..b-1 (window indices), between two cuts."""
        cum, toks, levels, scores = win.cum, win.toks, win.levels, win.scores
        text = source.text
        todo = self._fit(a, b, cum, scores, toks, levels)
        todo.reverse()
        while todo:
            a, b = todo.pop()
            # Overlap: the previous chunk's trailing sentences (its own, not its overlap).
            first = max(self._overlap_start(a, toks, levels), cuts.prev - win.first)
            s, e = win.starts[first], win.ends[b - 1]
            n = count_tokens(text[s:e])
            while n > self.size and first < a:  # the estimate was low: give up overlap first
                first += 1
                s = win.starts[first]
                n = count_tokens(text[s:e])
            if n > self.size and b - a > 1:  # still too long: split it further
                i = self._best_split(a, b, cum, scores)
                todo += [(i + 1, b), (a, i + 1)]
                continue
            cuts.prev = a + win.first
            yield Chunk(text[s:e], n, source.pages(s, e), s, e)


def _batches(segments: Iterator[Segment]) -> Iterator[list[Segment]]:
    while batch := list(islice(segments, WINDOW_SENTENCES)):
        yield batch
