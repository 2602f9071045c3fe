"""SmartChunker: structure-aware text units of one document (sections, content nodes).

Holds the document's section tree (parents, paths, the "# A > B" prefix a unit gets), the
content nodes in reading order, and the grouping of tiny sections with related neighbours;
each group's text is cut by a SimpleChunker (or a subclass) with nodes as spans."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from pipeline.chunking.segments import Span
from pipeline.chunking.simple import SimpleChunker
from pipeline.chunking.units import Unit
from pipeline.config import ChunkingSettings
from pipeline.tokens import count_tokens, count_tokens_batch

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


@dataclass
class _Block:
    """A run of consecutive nodes (reading order) of one section."""

    section_id: str
    nodes: list[Node]
    tokens: int


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
    def groups(self, tree: Tree, nodes: list[Node]) -> list[list[_Block]]:
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

    def _prefix_tokens(self, tree: Tree, sid: str) -> int:
        return count_tokens(tree.prefix(sid))

    @staticmethod
    def group_text(group: list[_Block]) -> tuple[str, list[Span], list[Node]]:
        parts: list[str] = []
        spans: list[Span] = []
        nodes: list[Node] = []
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
    def chunk_document(self, document_id: str, tree: Tree, nodes: list[Node]) -> list[Unit]:
        units: list[Unit] = []
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
                    Unit(
                        document_id,
                        body,
                        count_tokens(body),
                        pages,
                        sid,
                        tuple(n.id for n in covered),
                    )
                )
        return units
