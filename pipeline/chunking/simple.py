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
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from pipeline.chunking.segments import HEADING, PIECE, SENTENCE, Span, segment, segment_spans
from pipeline.config import ChunkingSettings
from pipeline.tokens import count_tokens, count_tokens_batch, token_starts

PAGE_BREAK = "\f"
# An atomic span (a table, code) is never split unless longer than this many chunks (a 1 MB
# listing): then it is cut at line ends like an over-long sentence, so no unit is unbounded.
ATOMIC_MAX_UNITS = 16


@dataclass(frozen=True)
class Chunk:
    text: str
    n_tokens: int
    pages: list[int]
    start: int  # char offsets into the document text: text == doc_text[start:end]
    end: int


def _stable_hash(text: str) -> int:
    """64-bit hash of the whitespace-normalised text, the same on every run and machine."""
    key = " ".join(text.split()).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def _split_long(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
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


def _atomic_starts(text: str, spans: Sequence[Span] | None) -> set[int]:
    """Char offsets where an atomic span's (trimmed) text starts: those segments never split."""
    out = set()
    for sp in spans or ():
        if sp.kind == "atomic":
            piece = text[sp.start : sp.end]
            out.add(sp.start + len(piece) - len(piece.lstrip()))
    return out


class SimpleChunker:
    """Sentence-aligned chunks of at most `chunk_size` tokens with content-anchored cuts."""

    fast_path = True  # a text that fits is one chunk without segmentation

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
        starts, ends, levels = segment(text) if spans is None else segment_spans(text, spans)
        keep = _atomic_starts(text, spans)
        # Tokens of each sentence with the whitespace before it: the sum over a run of sentences
        # is (within a token or two, from above) the count of the joined text.
        pieces = [text[(ends[i - 1] if i else starts[0]) : ends[i]] for i in range(len(starts))]
        toks = count_tokens_batch(pieces)
        if max(toks, default=0) <= self.size - self.overlap:
            return starts, ends, levels, toks
        s2: list[int] = []
        e2: list[int] = []
        l2: list[float] = []
        t2: list[int] = []
        for i, n in enumerate(toks):
            whole = starts[i] in keep and n <= self.size * ATOMIC_MAX_UNITS  # a table stays whole
            if n <= self.size - self.overlap or whole:
                s2.append(starts[i])
                e2.append(ends[i])
                l2.append(levels[i])
                t2.append(n)
                continue
            parts = _split_long(text, starts[i], ends[i], self.size - self.overlap)
            for j, (a, b) in enumerate(parts):
                s2.append(a)
                e2.append(b)
                l2.append(levels[i] if j == len(parts) - 1 else PIECE)
            t2.extend(count_tokens_batch([text[a:b] for a, b in parts]))
        return s2, e2, l2, t2

    # -- cut selection -------------------------------------------------------------------------
    def _scores(self, text: str, starts: list[int], ends: list[int], levels: list[float]):
        scores = []
        for a, b, lvl in zip(starts, ends, levels, strict=True):
            h = _stable_hash(text[a:b])
            if lvl == SENTENCE and h % self.divisor:
                lvl = -1.0  # an ordinary sentence end: an anchor only when nothing better is near
            scores.append(lvl + (h >> 11) / 2.0**53)  # high bits: a rank in [0, 1)
        return scores

    def _anchors(self, cum: list[int], scores: list[float]) -> list[int]:
        """Indices i whose boundary (after sentence i) is a local score maximum within
        `window` tokens; the text's start and end count as unbeatable anchors."""
        n = len(scores)
        w = self.window
        total = cum[-1]
        out = []
        lo = 0
        for i in range(n - 1):
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

    def chunk(self, text: str, spans: Sequence[Span] | None = None) -> list[Chunk]:
        """Chunks of `text`. `spans`, when given, are the text's pieces (content nodes joined
        by blank lines), each segmented on its own; an atomic piece (a table, code) is one
        segment that is not split up to ATOMIC_MAX_UNITS x `chunk_size` tokens, so its chunk
        may exceed `chunk_size`."""
        if not text.strip():
            return []
        whole = count_tokens(text.strip())
        if whole <= self.size and self.fast_path:  # the common short case: one chunk
            a = len(text) - len(text.lstrip())
            b = len(text.rstrip())
            return [Chunk(text[a:b], whole, _pages(_page_breaks(text), a, b), a, b)]
        starts, ends, levels, toks = self._sentences(text, spans)
        cum = [0, *accumulate(toks)]
        scores = self._scores(text, starts, ends, levels)
        bounds = [-1, *self._anchors(cum, scores), len(starts) - 1]
        todo: list[tuple[int, int]] = []
        for x, y in zip(bounds, bounds[1:], strict=False):
            todo += self._fit(x + 1, y + 1, cum, scores, toks, levels)
        todo.reverse()
        breaks = _page_breaks(text)
        chunks: list[Chunk] = []
        prev = 0
        while todo:
            a, b = todo.pop()
            # Overlap: the previous chunk's trailing sentences (its own, not its overlap).
            first = max(self._overlap_start(a, toks, levels), prev)
            s, e = starts[first], ends[b - 1]
            n = count_tokens(text[s:e])
            while n > self.size and first < a:  # the estimate was low: give up overlap first
                first += 1
                s = starts[first]
                n = count_tokens(text[s:e])
            if n > self.size and b - a > 1:  # still too long: split it further
                i = self._best_split(a, b, cum, scores)
                todo += [(i + 1, b), (a, i + 1)]
                continue
            prev = a
            chunks.append(Chunk(text[s:e], n, _pages(breaks, s, e), s, e))
        return chunks


def _page_breaks(text: str) -> list[int]:
    return [m.start() for m in re.finditer(PAGE_BREAK, text)] if PAGE_BREAK in text else []


def _pages(breaks: list[int], start: int, end: int) -> list[int]:
    """1-based pages (separated by "\\f" at offsets `breaks`) that text[start:end] touches."""
    return list(range(bisect_right(breaks, start) + 1, bisect_right(breaks, end - 1) + 2))
