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
from dataclasses import dataclass
from itertools import accumulate

import polars as pl

from pipeline import schemas
from pipeline.config import ChunkingSettings
from pipeline.ids import stable_id_expr
from pipeline.tokens import _encoding, count_tokens, count_tokens_batch

PAGE_BREAK = "\f"

# Boundary levels: how good a place to cut a boundary is (higher is better).
_PIECE = -2.0  # inside an over-long sentence or right after a heading: cut only if forced
_SENTENCE = 0.0
_PARAGRAPH = 1.0
_PAGE = 2.0
_HEADING = 3.0  # the boundary before a heading: overlap never crosses it

# Structural blocks, scanned once over the text; prose between them is split into sentences.
_BLOCKS = re.compile(
    r"(?P<fence>^[ \t]{0,3}(?P<fch>```|~~~)[^\n]*\n.*?(?:^[ \t]{0,3}(?P=fch)[ \t\r]*$|\Z))"
    r"|(?P<head>^[ \t]{0,3}#{1,6}[ \t]+[^\n]*?[ \t\r]*$)"
    r"|(?P<page>[ \t\r\n]*\f[\s]*)"
    r"|(?P<para>\n[ \t\r]*\n[ \t\r\n]*)",
    re.MULTILINE | re.DOTALL,
)
# A sentence end: terminal punctuation, optional closing quotes/brackets, whitespace. The word
# before it is captured to recognise abbreviations; the next character is checked in code.
_SENT_END = re.compile(r"([.!?…]+)[\"'”’»)\]_*]*\s+")
# A list item starting a line is a (sentence-level) boundary too.
_LIST_ITEM = re.compile(r"\n(?=[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]+\S)")
# No dashes: in Russian prose «...?» — сказал он continues the sentence.
_OPENERS = frozenset("\"'“‘«„([{¿¡*_")
_ABBREVIATIONS = frozenset(
    [
        "Mr",
        "Mrs",
        "Ms",
        "Mx",
        "Dr",
        "St",
        "Sr",
        "Jr",
        "Prof",
        "Rev",
        "Gen",
        "Col",
        "Capt",
        "Lt",
        "Sgt",
        "Hon",
        "Mt",
        "Ft",
        "vs",
        "Vs",
        "cf",
        "Cf",
        "Inc",
        "Ltd",
        "Co",
        "Corp",
        "approx",
        "e.g",
        "E.g",
        "i.e",
        "I.e",
        "a.m",
        "p.m",
        "viz",
        "al",
        "Jan",
        "Feb",
        "Apr",
        "Aug",
        "Sept",
        "Oct",
        "Nov",
        "Dec",
        "т.е",
        "т.к",
        "т.н",
        "напр",
        "ул",
        "им",
        "проф",
        "акад",
        "тов",
        "гр",
        "ср",
    ]
)
# Abbreviations only when a number follows ("No. 5", "Fig. 3", "рис. 2").
_NUM_ABBREVIATIONS = frozenset(
    [
        "No",
        "Nos",
        "Vol",
        "vol",
        "pp",
        "Ch",
        "ch",
        "Sec",
        "sec",
        "Fig",
        "fig",
        "Art",
        "art",
        "Eq",
        "eq",
        "рис",
        "стр",
        "см",
        "гл",
        "п",
    ]
)


@dataclass(frozen=True)
class Chunk:
    text: str
    n_tokens: int
    pages: list[int]
    start: int  # char offsets into the document text: text == doc_text[start:end]
    end: int


def _is_sentence_end(m: re.Match[str], text: str) -> bool:
    nxt = m.end()
    if nxt >= len(text):
        return True
    c = text[nxt]
    if not (c.isupper() or c.isdigit() or c in _OPENERS):
        return False
    if m.group(1) == ".":
        before = text[max(0, m.start() - 24) : m.start()].split()
        word = before[-1].lstrip("\"'“‘«([_*") if before else ""
        if word in _ABBREVIATIONS or (len(word) == 1 and word.isupper() and word != "I"):
            return False
        if word in _NUM_ABBREVIATIONS and c.isdigit():
            return False
    return True


def _stable_hash(text: str) -> int:
    """64-bit hash of the whitespace-normalised text, the same on every run and machine."""
    key = " ".join(text.split()).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


class _Segments:
    """Sentences of one text: trimmed char spans, the level of the boundary after each."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.levels: list[float] = []
        self._pending = _SENTENCE
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
        self.levels.append(_SENTENCE)
        self._pending = _SENTENCE
        self._glued = False

    def boundary(self, level: float) -> None:
        """A boundary of at least `level` before the next segment."""
        self._pending = max(self._pending, level)

    def glue_last(self) -> None:
        """Discourage a cut right after the last segment (a heading belongs with its body)."""
        if self.levels:
            self.levels[-1] = _PIECE
            self._glued = True

    def add_prose(self, text: str, start: int, end: int) -> None:
        block = text[start:end]
        cut = 0
        bounds = [m.end() for m in _SENT_END.finditer(block) if _is_sentence_end(m, block)]
        bounds += [m.start() for m in _LIST_ITEM.finditer(block)]
        for b in sorted(bounds):
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
            seg.boundary(_PARAGRAPH)
            seg.add(text, m.start(), m.end())
            seg.boundary(_PARAGRAPH)
        elif kind == "head":
            seg.boundary(_HEADING)
            seg.add(text, m.start(), m.end())
            seg.glue_last()
        elif kind == "page":
            seg.boundary(_PAGE)
        else:
            seg.boundary(_PARAGRAPH)
        pos = m.end()
    if pos < len(text):
        seg.add_prose(text, pos, len(text))
    return seg.starts, seg.ends, seg.levels


def _split_long(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    """Spans of at most `limit` tokens covering text[start:end]: cut at the last newline or
    space before each token limit, else at the token boundary itself."""
    enc = _encoding()
    piece = text[start:end]
    _, offsets = enc.decode_with_offsets(enc.encode_ordinary(piece))
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


class SimpleChunker:
    """Sentence-aligned chunks of at most `chunk_size` tokens with content-anchored cuts."""

    def __init__(self, settings: ChunkingSettings):
        if settings.chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        self.size = settings.chunk_size
        self.overlap = max(0, min(settings.overlap, settings.chunk_size // 2))
        self.window = max(1, min(settings.min_size, settings.chunk_size // 2))
        self.divisor = max(1, settings.cut_divisor)

    # -- segmentation with token counts -------------------------------------------------------
    def _sentences(self, text: str) -> tuple[list[int], list[int], list[float], list[int]]:
        starts, ends, levels = segment(text)
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
            if n <= self.size - self.overlap:
                s2.append(starts[i])
                e2.append(ends[i])
                l2.append(levels[i])
                t2.append(n)
                continue
            parts = _split_long(text, starts[i], ends[i], self.size - self.overlap)
            for j, (a, b) in enumerate(parts):
                s2.append(a)
                e2.append(b)
                l2.append(levels[i] if j == len(parts) - 1 else _PIECE)
            t2.extend(count_tokens_batch([text[a:b] for a, b in parts]))
        return s2, e2, l2, t2

    # -- cut selection -------------------------------------------------------------------------
    def _scores(self, text: str, starts: list[int], ends: list[int], levels: list[float]):
        scores = []
        for a, b, lvl in zip(starts, ends, levels, strict=True):
            h = _stable_hash(text[a:b])
            if lvl == _SENTENCE and h % self.divisor:
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
        while j > 0 and levels[j - 1] < _HEADING and used + toks[j - 1] <= self.overlap:
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

    def chunk(self, text: str) -> list[Chunk]:
        if not text.strip():
            return []
        whole = count_tokens(text.strip())
        if whole <= self.size:  # the common short-document case: one chunk, no segmentation
            a = len(text) - len(text.lstrip())
            b = len(text.rstrip())
            return [Chunk(text[a:b], whole, _pages(_page_breaks(text), a, b), a, b)]
        starts, ends, levels, toks = self._sentences(text)
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


def chunk_documents(documents: pl.DataFrame, settings: ChunkingSettings) -> pl.DataFrame:
    """text_units frame with exactly schemas.TEXT_UNITS columns; id = stable_id(document_id,
    text); human_readable_id 0..n-1 in (document human_readable_id, seq) order."""
    chunker = SimpleChunker(settings)
    docs = documents.select("id", "human_readable_id", "text").sort("human_readable_id")
    doc_ids: list[str] = []
    texts: list[str] = []
    n_tokens: list[int] = []
    pages: list[list[int]] = []
    seqs: list[int] = []
    for doc_id, _, text in docs.iter_rows():
        for seq, c in enumerate(chunker.chunk(text or "")):
            doc_ids.append(doc_id)
            texts.append(c.text)
            n_tokens.append(c.n_tokens)
            pages.append(c.pages)
            seqs.append(seq)
    if not texts:
        return schemas.empty("text_units")
    df = pl.DataFrame(
        {
            "document_id": doc_ids,
            "text": texts,
            "n_tokens": n_tokens,
            "pages": pages,
            "seq": seqs,
        },
        schema_overrides={"pages": pl.List(pl.Int64), "n_tokens": pl.Int64, "seq": pl.Int64},
    )
    # A text repeated verbatim inside one document (boilerplate) would repeat its id: keep the
    # first occurrence; seq stays the position among the kept units.
    df = df.unique(subset=["document_id", "text"], keep="first", maintain_order=True)
    df = df.with_columns(
        seq=pl.int_range(pl.len(), dtype=pl.Int64).over("document_id"),
        id=stable_id_expr("document_id", "text"),
        human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64),
        section_id=pl.lit(None, dtype=pl.Utf8),
        content_node_ids=pl.lit([], dtype=pl.List(pl.Utf8)),
        entity_ids=pl.lit([], dtype=pl.List(pl.Utf8)),
        relationship_ids=pl.lit([], dtype=pl.List(pl.Utf8)),
    )
    return pl.from_arrow(schemas.conform(df, "text_units"))  # type: ignore[return-value]
