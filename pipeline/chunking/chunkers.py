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

import numpy as np
import polars as pl

from pipeline import schemas
from pipeline.config import ChunkingSettings
from pipeline.failures import failure_row
from pipeline.ids import stable_id_expr
from pipeline.sentences import sentence_ends
from pipeline.tokens import count_tokens, count_tokens_batch, token_starts

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
            before = _HEADING if sp.kind == "heading" else _PARAGRAPH
            levels[-1] = max(levels[-1], before) if levels[-1] != _PIECE else _PIECE
        if sp.kind in ("atomic", "heading"):
            piece = text[sp.start : sp.end]
            a = sp.start + len(piece) - len(piece.lstrip())
            starts.append(a)
            ends.append(a + len(piece.strip()))
            levels.append(_PIECE if sp.kind == "heading" else _PARAGRAPH)
            continue
        s, e, lv = segment(text[sp.start : sp.end])
        starts += [x + sp.start for x in s]
        ends += [x + sp.start for x in e]
        levels += lv
    return starts, ends, levels


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


def chunk_documents(documents: pl.DataFrame, settings: ChunkingSettings) -> pl.DataFrame:
    """text_units frame with exactly schemas.TEXT_UNITS columns, ids as in `_units_frame`;
    human_readable_id 0..n-1 in (document human_readable_id, seq) order."""
    chunker = SimpleChunker(settings)
    docs = documents.select("id", "human_readable_id", "text").sort("human_readable_id")
    units: list[_Unit] = []
    for doc_id, _, text in docs.iter_rows():
        units += [_Unit(doc_id, c.text, c.n_tokens, c.pages) for c in chunker.chunk(text or "")]
    return _units_frame(units, _anchors(documents))


def _anchors(documents: pl.DataFrame) -> dict[str, str]:
    """document id -> what its unit ids are anchored to: its relative path, which an edit
    keeps (the id, the hash of its bytes, changes), or the id when there is no path."""
    path = _source_path(documents)
    rows = documents.select("id", pl.coalesce(path, pl.col("id")).alias("anchor")).iter_rows()
    return dict(rows)


@dataclass(frozen=True)
class _Unit:
    document_id: str
    text: str
    n_tokens: int
    pages: list[int]
    section_id: str | None = None
    content_node_ids: tuple[str, ...] = ()


def _units_frame(units: list[_Unit], anchors: dict[str, str]) -> pl.DataFrame:
    """Units (in document, then reading order) as a text_units frame: id = stable_id(anchor
    of the document (`_anchors`), text, occurrence of that text in the document), so a unit
    whose text an edit left alone keeps its id; seq per document, human_readable_id in the
    given order."""
    if not units:
        return schemas.empty("text_units")
    df = pl.DataFrame(
        {
            "document_id": [u.document_id for u in units],
            "anchor": [anchors.get(u.document_id, u.document_id) for u in units],
            "text": [u.text for u in units],
            "n_tokens": [u.n_tokens for u in units],
            "pages": [u.pages for u in units],
            "section_id": [u.section_id for u in units],
            "content_node_ids": [list(u.content_node_ids) for u in units],
        },
        schema_overrides={
            "pages": pl.List(pl.Int64),
            "n_tokens": pl.Int64,
            "section_id": pl.Utf8,
            "content_node_ids": pl.List(pl.Utf8),
        },
    )
    # A text repeated verbatim inside one document (boilerplate, a book pasted twice) is kept
    # every time: its occurrence number keeps the ids unique.
    occurrence = pl.int_range(pl.len(), dtype=pl.Int64).over("document_id", "text")
    df = df.with_columns(
        seq=pl.int_range(pl.len(), dtype=pl.Int64).over("document_id"),
        id=stable_id_expr("anchor", "text", occurrence),
        human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64),
        entity_ids=pl.lit([], dtype=pl.List(pl.Utf8)),
        relationship_ids=pl.lit([], dtype=pl.List(pl.Utf8)),
    )
    return pl.from_arrow(schemas.conform(df, "text_units"))  # type: ignore[return-value]


# ---- structure-aware chunking ----------------------------------------------------------------

# Node types that are never split (a chunk holds all of one or none of it) ...
ATOMIC_TYPES = frozenset({"TABLE", "CODE", "FORMULA"})
# ... unless longer than this many chunks (a 1 MB listing): then it is cut at line ends like
# an over-long sentence, so no unit is unbounded.
ATOMIC_MAX_UNITS = 16
# Node types that open a section: a boundary before them is a heading boundary.
HEADING_TYPES = frozenset({"HEADING", "TITLE"})


@dataclass
class _Node:
    id: str
    section_id: str
    node_type: str
    text: str
    pages: list[int]


@dataclass
class _Block:
    """A run of consecutive nodes (reading order) of one section."""

    section_id: str
    nodes: list[_Node]
    tokens: int


class _Tree:
    """One document's sections: parents, paths, and the prefix a unit of a section gets."""

    def __init__(self, rows: list[dict], settings: ChunkingSettings):
        self.parent = {r["id"]: r["parent_id"] for r in rows}
        self.title = {r["id"]: r["title"] or "" for r in rows}
        self.path = {r["id"]: [t or "" for t in (r["path"] or [])] for r in rows}
        self.enabled = settings.heading_prefix

    def chain(self, sid: str) -> list[str]:
        """sid and its ancestors, nearest first."""
        out = []
        while sid is not None and sid not in out:
            out.append(sid)
            sid = self.parent.get(sid)
        return out

    def common(self, ids: Sequence[str]) -> str:
        """Nearest common ancestor of sections `ids`."""
        first = self.chain(ids[0])
        others = [set(self.chain(i)) for i in set(ids[1:])]
        return next((s for s in first if all(s in o for o in others)), first[-1])

    def related(self, a: str, b: str) -> bool:
        """Same section, siblings, or one inside the other: sections a tiny one may join."""
        return (
            a == b
            or self.parent.get(a) == self.parent.get(b)
            or a in self.chain(b)
            or b in self.chain(a)
        )

    def prefix(self, sid: str, first_text: str | None = None) -> str:
        """'# A > B > C' + blank line for a unit of section `sid`: the section path below the
        document. The document title is left out: every unit of the document would repeat
        it, so editing the title (a book's first line) would change every unit and re-bill
        the whole document in LLM mode; units cite their document anyway. A unit that starts
        with its section's own heading leaves that title out rather than say it twice."""
        if not self.enabled:
            return ""
        path = list(self.path.get(sid) or [])[1:]
        if path and first_text is not None:
            line = first_text.lstrip().split("\n", 1)[0].strip().lstrip("#").strip()
            if line.casefold() == path[-1].strip().casefold():
                path = path[:-1]
        path = [p.strip() for p in path if p and p.strip()]
        return f"# {' > '.join(path)}\n\n" if path else ""


def _node_rows(content_nodes: pl.DataFrame) -> pl.DataFrame:
    """Nodes in reading order with their pages (sorted unique pages of their positions)."""
    pages = (
        pl.col("positions")
        .list.eval(pl.element().struct.field("page"))
        .list.drop_nulls()
        .list.unique()
        .list.sort()
    )
    return content_nodes.select(
        "document_id",
        "id",
        "section_id",
        pl.col("node_type").fill_null("PARAGRAPH"),
        pl.col("text").fill_null("").str.strip_chars(),
        pages.alias("pages"),
        "seq_major",
        "seq_minor",
    ).sort("document_id", "seq_major", "seq_minor", "id")


class SmartChunker:
    """Structure-aware text units of one document: chunks never straddle sections (a merged
    unit of tiny sections belongs to their nearest common ancestor), tables and code stay
    whole, and each unit starts with its section path.

    How: the nodes (reading order) form blocks, one per run of a section's own nodes. A
    tiny block (< min_size tokens) is glued to a related neighbour (same parent, or one inside
    the other) when the two fit chunk_size together; each run of glued blocks is one text
    (nodes joined by blank lines) cut by the content-anchored SimpleChunker, with headings as
    its strongest boundaries and atomic nodes unsplittable. Glue depends only on the two
    blocks' sizes, so an edit changes the units of its own section (and a glued neighbour).
    The prefix counts toward chunk_size: the run is cut to chunk_size minus its longest
    prefix. An atomic node longer than that is a unit of its own, over the limit.
    """

    def __init__(self, settings: ChunkingSettings, chunker_cls: type[SimpleChunker] | None = None):
        self.settings = settings
        self.chunker_cls = chunker_cls or SimpleChunker
        self._chunkers: dict[int, SimpleChunker] = {}

    def chunker(self, budget: int) -> SimpleChunker:
        budget = max(budget, max(1, self.settings.chunk_size // 2))
        if budget not in self._chunkers:
            self._chunkers[budget] = self._make(
                self.settings.model_copy(update={"chunk_size": budget})
            )
        return self._chunkers[budget]

    def _make(self, settings: ChunkingSettings) -> SimpleChunker:
        return self.chunker_cls(settings)

    # -- grouping ------------------------------------------------------------------------------
    def groups(self, tree: _Tree, nodes: list[_Node]) -> list[list[_Block]]:
        blocks: list[_Block] = []
        for n in nodes:
            if blocks and blocks[-1].section_id == n.section_id:
                blocks[-1].nodes.append(n)
            else:
                blocks.append(_Block(n.section_id, [n], 0))
        toks = count_tokens_batch([n.text for n in nodes])
        k = 0
        for b in blocks:
            b.tokens = sum(toks[k : k + len(b.nodes)]) + 2 * (len(b.nodes) - 1)
            k += len(b.nodes)
        small, size = self.settings.min_size, self.settings.chunk_size
        out: list[list[_Block]] = []
        for i, b in enumerate(blocks):
            prev = blocks[i - 1] if i else None
            glue = (
                prev is not None
                and (prev.tokens < small or b.tokens < small)
                and prev.tokens + b.tokens + self._prefix_tokens(tree, b.section_id) <= size
                and tree.related(prev.section_id, b.section_id)
            )
            if glue:
                out[-1].append(b)
            else:
                out.append([b])
        return out

    def _prefix_tokens(self, tree: _Tree, sid: str) -> int:
        return count_tokens(tree.prefix(sid))

    @staticmethod
    def group_text(group: list[_Block]) -> tuple[str, list[Span], list[_Node]]:
        parts: list[str] = []
        spans: list[Span] = []
        nodes: list[_Node] = []
        pos = 0
        for b in group:
            for n in b.nodes:
                if not n.text:
                    continue
                if parts:
                    parts.append("\n\n")
                    pos += 2
                kind = (
                    "atomic"
                    if n.node_type in ATOMIC_TYPES
                    else "heading"
                    if n.node_type in HEADING_TYPES
                    else "text"
                )
                spans.append(Span(pos, pos + len(n.text), kind))
                nodes.append(n)
                parts.append(n.text)
                pos += len(n.text)
        return "".join(parts), spans, nodes

    # -- chunking -----------------------------------------------------------------------------
    def chunk_document(self, document_id: str, tree: _Tree, nodes: list[_Node]) -> list[_Unit]:
        units: list[_Unit] = []
        for group in self.groups(tree, nodes):
            text, spans, gnodes = self.group_text(group)
            if not gnodes:
                continue
            longest = max(self._prefix_tokens(tree, b.section_id) for b in group)
            chunker = self.chunker(self.settings.chunk_size - longest)
            starts = [sp.start for sp in spans]
            for c in chunker.chunk(text, spans):
                lo = max(0, bisect_right(starts, c.start) - 1)
                hi = bisect_right(starts, c.end - 1)
                covered = [
                    gnodes[j]
                    for j in range(lo, hi)
                    if spans[j].end > c.start and spans[j].start < c.end
                ]
                sid = tree.common([n.section_id for n in covered])
                first = covered[0]
                first_text = first.text if first.text and c.start <= spans[lo].start else None
                body = tree.prefix(sid, first_text) + c.text
                pages = sorted({p for n in covered for p in n.pages})
                units.append(
                    _Unit(
                        document_id,
                        body,
                        count_tokens(body),
                        pages,
                        sid,
                        tuple(n.id for n in covered),
                    )
                )
        return units


def chunk_structured(
    documents: pl.DataFrame,
    sections: pl.DataFrame,
    content_nodes: pl.DataFrame,
    settings: ChunkingSettings,
    embedder=None,
    failures: list[dict] | None = None,
) -> pl.DataFrame:
    """Text units of the documents by `settings.method`: "smart" (default; SmartChunker),
    "semantic" (SmartChunker's structure with SemanticChunker cuts; needs `embedder`) or
    "simple" (chunk_documents: the document text alone, no sections).

    A document without content nodes (no structure parsed) falls back to the SimpleChunker
    over its text, with section_id its root section when it has one; so does a document
    whose structured chunking raises, recorded in `failures` (DOCUMENT_FAILURES rows; when
    even its text cannot be chunked it has no units). Output: schemas TEXT_UNITS columns,
    entity/relationship ids empty, ids as in `_units_frame`."""
    method = settings.method
    if method == "simple":
        units = chunk_documents(documents, settings)
        if sections.height == 0 or units.height == 0:
            return units
        roots = (
            sections.filter(pl.col("parent_id").is_null())
            .select(pl.col("document_id"), pl.col("id").alias("_root"))
            .unique("document_id", keep="first")
        )
        units = units.join(roots, on="document_id", how="left", maintain_order="left")
        units = units.with_columns(section_id=pl.col("_root"))
        return pl.from_arrow(schemas.conform(units, "text_units"))  # type: ignore[return-value]
    if method == "semantic":
        if embedder is None:
            raise ValueError("chunking method 'semantic' needs an embedder")
        smart: SmartChunker = _SemanticSmart(settings, embedder)
    elif method == "smart":
        smart = SmartChunker(settings)
    else:
        raise ValueError(f"unknown chunking method {method!r}")

    docs = documents.sort("human_readable_id")
    nodes_by_doc = (
        {
            k[0]: g
            for k, g in _node_rows(content_nodes).partition_by("document_id", as_dict=True).items()
        }
        if content_nodes.height
        else {}
    )
    secs_by_doc = (
        {k[0]: g for k, g in sections.partition_by("document_id", as_dict=True).items()}
        if sections.height
        else {}
    )
    simple = SimpleChunker(settings)
    work: list[tuple[dict, _Tree | None, list[_Node] | None]] = []
    for doc in docs.select(pl.col("id", "text"), _source_path(docs)).iter_rows(named=True):
        secs = secs_by_doc.get(doc["id"])
        nodes = nodes_by_doc.get(doc["id"])
        if nodes is None or nodes.height == 0 or secs is None:
            work.append((doc, None, None))
            continue
        tree = _Tree(secs.sort("level", "seq").to_dicts(), settings)
        rows = nodes.select("id", "section_id", "node_type", "text", "pages").iter_rows()
        work.append((doc, tree, [_Node(*r) for r in rows]))
    if isinstance(smart, _SemanticSmart):
        smart.prepare([(t, n) for _, t, n in work if t is not None])  # type: ignore[misc]
    units: list[_Unit] = []
    for doc, tree, nodes in work:
        root = _root_id(secs_by_doc.get(doc["id"]))
        try:
            if tree is None or nodes is None:
                units += _plain_units(simple, doc, root)
            else:
                units += smart.chunk_document(doc["id"], tree, nodes)
            continue
        except Exception as exc:  # noqa: BLE001 - this document falls back, the run goes on
            row = failure_row(doc, "chunking", exc, "plain paragraphs", f"{method} chunking")
        try:
            units += _plain_units(simple, doc, root)
        except Exception as exc:  # noqa: BLE001 - recorded; the document has no units
            row = failure_row(doc, "chunking", exc, "none", "plain chunking")
        if failures is not None:
            failures.append(row)
    return _units_frame(units, _anchors(documents))


def _source_path(docs: pl.DataFrame) -> pl.Expr:
    return pl.col("source_path") if "source_path" in docs.columns else pl.lit(None, pl.Utf8)


def _root_id(sections: pl.DataFrame | None) -> str | None:
    if sections is None:
        return None
    return sections.filter(pl.col("parent_id").is_null())["id"].first()  # type: ignore[return-value]


def _plain_units(chunker: SimpleChunker, doc: dict, root_id: str | None) -> list[_Unit]:
    """The document's text alone (paragraph/sentence cuts), its units in its root section."""
    chunks = chunker.chunk(doc["text"] or "")
    return [_Unit(doc["id"], c.text, c.n_tokens, c.pages, root_id) for c in chunks]


# ---- semantic chunking -----------------------------------------------------------------------


class SemanticChunker(SimpleChunker):
    """Cuts where the topic changes: the cosine between the mean embeddings of the
    `semantic_window` sentences before and after a boundary; boundaries at or below the
    `semantic_percentile` of a text's boundaries (and heading boundaries) are the cut
    candidates, and the content-anchored machinery of SimpleChunker picks among them (the
    local minimum of similarity within `min_size` tokens) and splits over-long spans at their
    least similar boundary. A text that fits chunk_size is still cut at a topic change.

    Cost: it embeds every sentence (about 15-25 per 300-token unit), so indexing embeds
    ~20x more (shorter) texts than chunk-level embedding: minutes per thousand pages on a CPU.
    Sentence vectors are looked up in `vectors` (text -> L2-normalised vector), filled in
    one batched call before chunking (see `_SemanticSmart.prepare`).
    """

    fast_path = False
    CANDIDATE = 4.0

    def __init__(self, settings: ChunkingSettings, vectors: dict[str, np.ndarray] | None = None):
        super().__init__(settings)
        self.vectors: dict[str, np.ndarray] = vectors if vectors is not None else {}
        self.percentile = settings.semantic_percentile
        self.sim_window = max(1, settings.semantic_window)

    def sentences(self, text: str, spans: Sequence[Span] | None = None) -> list[str]:
        starts, ends, _, _ = self._sentences(text, spans)
        return [text[a:b] for a, b in zip(starts, ends, strict=True)]

    def similarities(self, text: str, starts: list[int], ends: list[int]) -> np.ndarray:
        """Cosine across each boundary i (after sentence i) of the windows around it."""
        n = len(starts)
        if n < 2:
            return np.ones(max(n, 0), dtype=np.float32)
        vecs = np.stack([self.vectors[text[a:b]] for a, b in zip(starts, ends, strict=True)])
        cs = np.vstack([np.zeros((1, vecs.shape[1]), dtype=np.float64), np.cumsum(vecs, axis=0)])
        idx = np.arange(1, n)  # boundary after sentence idx-1 sits at cumulative index idx
        w = self.sim_window
        before = cs[idx] - cs[np.maximum(idx - w, 0)]
        after = cs[np.minimum(idx + w, n)] - cs[idx]
        num = (before * after).sum(axis=1)
        den = np.linalg.norm(before, axis=1) * np.linalg.norm(after, axis=1)
        sims = np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0)
        return np.append(sims, 1.0).astype(np.float64)  # the text's end: not a cut

    def _scores(self, text: str, starts: list[int], ends: list[int], levels: list[float]):
        sims = self.similarities(text, starts, ends)
        lv = np.asarray(levels, dtype=np.float64)
        inner = sims[:-1]
        thr = np.percentile(inner, self.percentile) if inner.size else -1.0
        cand = (sims <= thr) | (lv >= _HEADING)
        cand[-1] = False
        scores = np.where(cand, self.CANDIDATE, 0.0) + 0.25 * np.maximum(lv, -2.0) + (1 - sims) / 2
        return scores.tolist()

    def _anchors(self, cum: list[int], scores: list[float]) -> list[int]:
        return [i for i in super()._anchors(cum, scores) if scores[i] >= self.CANDIDATE - 0.5]


class _SemanticSmart(SmartChunker):
    """SmartChunker whose cuts are SemanticChunker's; sentence vectors embedded up front."""

    def __init__(self, settings: ChunkingSettings, embedder) -> None:
        super().__init__(settings, SemanticChunker)
        self.embedder = embedder
        self.vectors: dict[str, np.ndarray] = {}

    def _make(self, settings: ChunkingSettings) -> SimpleChunker:
        return SemanticChunker(settings, self.vectors)

    def prepare(self, docs: list[tuple[_Tree, list[_Node]]]) -> None:
        """Embed every sentence of every group once, in one batched call."""
        todo: dict[str, None] = {}
        for tree, nodes in docs:
            for group in self.groups(tree, nodes):
                text, spans, gnodes = self.group_text(group)
                if not gnodes:
                    continue
                longest = max(self._prefix_tokens(tree, b.section_id) for b in group)
                chunker = self.chunker(self.settings.chunk_size - longest)
                for s in chunker.sentences(text, spans):  # type: ignore[attr-defined]
                    if s not in self.vectors:
                        todo[s] = None
        texts = list(todo)
        if texts:
            vecs = np.asarray(self.embedder.embed(texts), dtype=np.float64)
            norms = np.linalg.norm(vecs, axis=1, keepdims=True)
            vecs = vecs / np.where(norms == 0, 1.0, norms)
            self.vectors.update(zip(texts, vecs, strict=True))
