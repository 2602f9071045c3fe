"""The note graph focus context reads: sections as notes, with tree, objects, referrers, details.

Built once per index with polars from sections / content_nodes / structure_edges and kept on
it (`note_graph`); a query is then dict lookups.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


FOCUS_DETAILS_TOKENS = 600  # the focus note's details (shortened further to fit a budget)
DETAIL_NODE_TYPES = ("PARAGRAPH", "LIST_ITEM", "BLOCK_QUOTATION")
DETAIL_NODES = 4  # a section's details: its first text nodes
DETAILS_CHAR_CAP = 8 * FOCUS_DETAILS_TOKENS  # kept per section (token cuts need no more)
# see "Which edges refer" in the package docstring; REFERENCES_NOTE / REFERENCES_CITATION
# deliberately not
REFERRING_EDGES = ("REIFIES", "REFERS_TO", "CROSS_REFERENCES")


@dataclass
class NoteGraph:
    """Sections as rows with the lookups a focus query needs (built once per index)."""

    ids: list[str]
    uris: list[str]
    titles: list[str]
    documents: list[str]
    parent: list[int]  # row of the parent, -1 for a document root
    row_of_uri: dict[str, int]
    children: dict[int, list[int]]  # rows by seq
    object: dict[int, int]  # reification row -> object row
    referrers: dict[int, list[int]]  # row -> rows of the sections referring to it
    details: dict[int, str]
    units: dict[str, list[str]]  # section id -> text unit ids
    _link_cache: dict[int, str] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.ids)

    def link(self, row: int | None) -> str | None:
        """uri_and_title: the Markdown inline link `[title](uri)`."""
        if row is None or row < 0:
            return None
        out = self._link_cache.get(row)
        if out is None:
            out = f"[{self.titles[row]}]({self.uris[row]})"
            self._link_cache[row] = out
        return out

    def ancestors(self, row: int | None) -> list[int]:
        """Parent, grandparent, ... up to the document root (nearest first)."""
        out: list[int] = []
        cur = self.parent[row] if row is not None and row >= 0 else -1
        while cur >= 0 and len(out) < 256:  # depth guard against a malformed cycle
            out.append(cur)
            cur = self.parent[cur]
        return out

    def siblings(self, row: int | None) -> list[int]:
        """The other children of `row`'s parent, in sibling order."""
        if row is None or row < 0 or self.parent[row] < 0:
            return []
        return [r for r in self.children.get(self.parent[row], []) if r != row]


def note_graph(index: IndexTables) -> NoteGraph:
    """The index's NoteGraph, built on first use and cached on the index object."""
    cached = getattr(index, "_focus_graph", None)
    if cached is None:
        cached = build_graph(
            index.table("sections"),
            index.table("content_nodes"),
            index.table("structure_edges"),
            index.table("text_units"),
        )
        index._focus_graph = cached  # type: ignore[attr-defined]
    return cached


def build_graph(
    sections: pl.DataFrame,
    content_nodes: pl.DataFrame,
    edges: pl.DataFrame,
    text_units: pl.DataFrame | None = None,
) -> NoteGraph:
    """Vectorised build of every lookup; only the final dicts are made in Python."""
    s = sections.select(
        "id",
        "document_id",
        "parent_id",
        "title",
        "seq",
        pl.col("uri").fill_null(pl.col("id")),
    ).with_row_index("row")
    rows = s.select(pl.col("id"), pl.col("row").cast(pl.Int64))
    s = s.join(
        rows.rename({"id": "parent_id", "row": "parent_row"}),
        on="parent_id",
        how="left",
        maintain_order="left",
    ).with_columns(pl.col("parent_row").fill_null(-1))
    kids = (
        s.filter(pl.col("parent_row") >= 0)
        .sort("parent_row", "seq", "row")
        .group_by("parent_row", maintain_order=True)
        .agg(pl.col("row").cast(pl.Int64))
    )
    # the first row with a uri owns it (uris are unique in practice)
    firsts = s.select("uri", "row").unique("uri", keep="first", maintain_order=True)

    # edge endpoints as section rows: a content node maps to its section (a cross-reference
    # may point at a figure or heading node; a link sits in a paragraph)
    node_sec = content_nodes.select(pl.col("id"), pl.col("section_id")).join(
        rows.rename({"id": "section_id"}), on="section_id", how="inner"
    )
    where = pl.concat([rows, node_sec.select("id", "row")]).unique("id", keep="first")
    e = (
        edges.filter(pl.col("type").is_in(REFERRING_EDGES) & pl.col("target_id").is_not_null())
        .select("source_id", "target_id", "type")
        .with_row_index("edge")
        .join(where.rename({"id": "source_id", "row": "src"}), on="source_id", how="inner")
        .join(where.rename({"id": "target_id", "row": "dst"}), on="target_id", how="inner")
        .filter(pl.col("src") != pl.col("dst"))
    )
    sec_ids = rows["id"].implode()
    objs = (  # a reification is a section about a section: both ends are sections
        e.filter(
            (pl.col("type") == "REIFIES")
            & pl.col("source_id").is_in(sec_ids)
            & pl.col("target_id").is_in(sec_ids)
        )
        .sort("edge")
        .unique("src", keep="first", maintain_order=True)
    )
    refs = (
        e.select("dst", "src")
        .unique()
        .sort("dst", "src")
        .group_by("dst", maintain_order=True)
        .agg("src")
    )
    det = (
        content_nodes.filter(
            pl.col("node_type").is_in(DETAIL_NODE_TYPES) & pl.col("text").str.strip_chars().ne("")
        )
        .select("section_id", "seq_major", "seq_minor", "text")
        .sort("section_id", "seq_major", "seq_minor")
        .group_by("section_id", maintain_order=True)
        .agg(pl.col("text").head(DETAIL_NODES).str.join("\n\n").str.slice(0, DETAILS_CHAR_CAP))
        .join(rows.rename({"id": "section_id"}), on="section_id", how="inner")
    )
    units: dict[str, list[str]] = {}
    if text_units is not None and text_units.height:
        held = (
            text_units.select("section_id", "id")
            .with_row_index("r")
            .drop_nulls("section_id")
            .group_by("section_id", maintain_order=True)
            .agg(pl.col("id").sort_by("r"))
        )
        units = dict(zip(held["section_id"].to_list(), held["id"].to_list(), strict=True))
    return NoteGraph(
        ids=s["id"].to_list(),
        uris=s["uri"].to_list(),
        titles=s["title"].fill_null("").to_list(),
        documents=s["document_id"].to_list(),
        parent=s["parent_row"].to_list(),
        row_of_uri=dict(zip(firsts["uri"].to_list(), firsts["row"].to_list(), strict=True)),
        children=dict(zip(kids["parent_row"].to_list(), kids["row"].to_list(), strict=True)),
        object=dict(zip(objs["src"].to_list(), objs["dst"].to_list(), strict=True)),
        referrers=dict(zip(refs["dst"].to_list(), refs["src"].to_list(), strict=True)),
        details=dict(zip(det["row"].to_list(), det["text"].to_list(), strict=True)),
        units=units,
    )
