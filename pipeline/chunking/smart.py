"""SmartChunker: structure-aware text units of one document (sections, content nodes).

Holds the document's section tree (parents, paths, the "# A > B" prefix a unit gets), the
content nodes in reading order, and the grouping of tiny sections with related neighbours;
each group's text is cut by a SimpleChunker (or a subclass) with nodes as spans."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import polars as pl

from pipeline.chunking.segments import Span
from pipeline.chunking.simple import Chunk, SimpleChunker
from pipeline.chunking.sources import PIECE_SEPARATOR
from pipeline.chunking.units import Unit
from pipeline.config import ChunkingSettings
from pipeline.tokens import count_tokens

# Node types that are never split (a chunk holds all of one or none of it), up to
# simple.ATOMIC_MAX_UNITS chunks.
ATOMIC_TYPES = frozenset({"TABLE", "CODE", "FORMULA"})
# Node types that open a section: a boundary before them is a heading boundary.
HEADING_TYPES = frozenset({"HEADING", "TITLE"})


@dataclass
class Node:
    id: str
    section_id: str
    node_type: str
    text: str
    pages: list[int]


class Nodes(Protocol):
    """One document's content nodes in reading order, read twice: their sections and texts
    (to group them), then the nodes of each group. A list is one; chunk_structured reads a
    huge document's from its frame a batch at a time."""

    def sections_and_texts(self) -> Iterator[tuple[str, str]]: ...

    def read(self, start: int, stop: int) -> Iterator[Node]: ...


class ListNodes:
    """Nodes held in a list."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes

    def sections_and_texts(self) -> Iterator[tuple[str, str]]:
        return ((n.section_id, n.text) for n in self.nodes)

    def read(self, start: int, stop: int) -> Iterator[Node]:
        return iter(self.nodes[start:stop])


def as_nodes(nodes: list[Node] | Nodes) -> Nodes:
    return ListNodes(nodes) if isinstance(nodes, list) else nodes


@dataclass
class _Block:
    """A run of consecutive nodes (reading order) of one section: nodes start..stop-1, and
    its tokens (its nodes' and a blank line's between each two; once over chunk_size, only
    that it is)."""

    section_id: str
    start: int
    stop: int
    tokens: int


def _kind(node_type: str) -> str:
    """The Span kind of a node: tables and code are atomic, headings open a section."""
    if node_type in ATOMIC_TYPES:
        return "atomic"
    return "heading" if node_type in HEADING_TYPES else "text"


class _Placed:
    """The nodes of a group whose place in its text is known and that a later chunk may still
    cover (chunks start in order, so a node before the first one the last chunk covers is
    forgotten)."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.spans: list[Span] = []
        self.nodes: list[Node] = []

    def add(self, span: Span, node: Node) -> None:
        self.starts.append(span.start)
        self.spans.append(span)
        self.nodes.append(node)

    def covering(self, c: Chunk) -> tuple[list[Node], bool]:
        """The nodes chunk c overlaps, and whether c starts where the node it starts in does
        (then that node's heading line may stand for the last title of the unit's prefix)."""
        lo = max(0, bisect_right(self.starts, c.start) - 1)
        hi = bisect_right(self.starts, c.end - 1)
        covered = [
            node
            for span, node in zip(self.spans[lo:hi], self.nodes[lo:hi], strict=True)
            if span.end > c.start and span.start < c.end
        ]
        at_start = c.start <= self.spans[lo].start
        if lo > len(self.starts) // 2:  # forget in bulk: cheap per chunk
            for column in (self.starts, self.spans, self.nodes):
                del column[:lo]
        return covered, at_start


class Tree:
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


def node_rows(content_nodes: pl.DataFrame) -> pl.DataFrame:
    """Nodes in reading order with their pages (sorted unique pages of their positions)."""
    return node_columns(content_nodes).sort("document_id", "seq_major", "seq_minor", "id")


# The content_nodes columns a Node is made of.
NODE_INPUTS = ["document_id", "id", "section_id", "node_type", "text", "positions"]


def node_columns(content_nodes: pl.DataFrame) -> pl.DataFrame:
    """`node_rows` without the sort: the Node fields of the rows as they are."""
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
        node_text(),
        pages.alias("pages"),
        *(c for c in ("seq_major", "seq_minor") if c in content_nodes.columns),
    )


def node_text() -> pl.Expr:
    return pl.col("text").fill_null("").str.strip_chars()


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
    def groups(self, tree: Tree, nodes: list[Node] | Nodes) -> list[list[_Block]]:
        """The document's blocks, tiny ones glued to a related neighbour: each list is one
        text to cut (nodes group[0].start..group[-1].stop-1)."""
        small, size = self.settings.min_size, self.settings.chunk_size
        blocks: list[_Block] = []
        for i, (sid, text) in enumerate(as_nodes(nodes).sections_and_texts()):
            if blocks and blocks[-1].section_id == sid:
                b = blocks[-1]
                b.stop = i + 1
                # A block over chunk_size glues to nothing, whatever its size: its nodes are
                # not counted further (a one-section book is counted a few nodes in).
                if b.tokens <= size:
                    b.tokens += count_tokens(text) + len(PIECE_SEPARATOR)  # a blank line
            else:
                blocks.append(_Block(sid, i, i + 1, count_tokens(text)))
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

    def _prefix_tokens(self, tree: Tree, sid: str) -> int:
        return count_tokens(tree.prefix(sid))

    @staticmethod
    def group_text(nodes: list[Node]) -> tuple[str, list[Span], list[Node]]:
        """The group's text (its non-empty nodes joined by blank lines), their spans, them."""
        parts: list[str] = []
        spans: list[Span] = []
        kept: list[Node] = []
        pos = 0
        for n in nodes:
            if not n.text:
                continue
            if parts:
                parts.append(PIECE_SEPARATOR)
                pos += len(PIECE_SEPARATOR)
            spans.append(Span(pos, pos + len(n.text), _kind(n.node_type)))
            kept.append(n)
            parts.append(n.text)
            pos += len(n.text)
        return "".join(parts), spans, kept

    # -- chunking -----------------------------------------------------------------------------
    def chunk_document(
        self, document_id: str, tree: Tree, nodes: list[Node] | Nodes
    ) -> Iterator[Unit]:
        """The document's units in reading order, a group at a time; a group's nodes are read
        as its chunks need them, so a huge document is never held whole."""
        nodes = as_nodes(nodes)
        for group in self.groups(tree, nodes):
            longest = max(self._prefix_tokens(tree, b.section_id) for b in group)
            chunker = self.chunker(self.settings.chunk_size - longest)
            read = nodes.read(group[0].start, group[-1].stop)
            yield from self._units(document_id, tree, chunker, read)

    def _units(
        self, document_id: str, tree: Tree, chunker: SimpleChunker, nodes: Iterator[Node]
    ) -> Iterator[Unit]:
        placed = _Placed()
        pieces = ((n.text, _kind(n.node_type), n) for n in nodes)
        for c in chunker.chunk_pieces(pieces, placed.add):
            covered, at_start = placed.covering(c)
            sid = tree.common([n.section_id for n in covered])
            first = covered[0]
            prefix = tree.prefix(sid, first.text if first.text and at_start else None)
            body = prefix + c.text
            n_tokens = count_tokens(body) if prefix else c.n_tokens  # c.text's count
            pages = sorted({p for n in covered for p in n.pages})
            yield Unit(document_id, body, n_tokens, pages, sid, tuple(n.id for n in covered))
