"""The expansion graph: one node space of sections, text units and entities, typed edges.

Built once per index and kept on it (`expand_graph`): PARENT / CHILD / SIBLING from the
section tree, CONTAINS, the stored structure and same-topic edges, MENTIONS weighted by the
entity's rarity, RELATED through relationships; with the per-type default weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import scipy.sparse as sp

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


# Per edge-type weights (the type's share of a path score). Declared once; a call's
# `weights` overrides some of them. Stored types not listed here get UNLISTED_WEIGHT.
DEFAULT_WEIGHTS: dict[str, float] = {
    "CONTAINS": 0.9,  # section <-> its own units (free hop)
    "PARENT": 0.6,
    "CHILD": 0.6,
    "SIBLING": 0.5,
    "REFERS_TO": 0.8,
    "CROSS_REFERENCES": 0.8,
    "REFERENCES_NOTE": 0.7,
    "REFERENCES_CITATION": 0.6,
    "IS_CAPTIONED_BY": 0.9,
    "CONTINUES": 0.9,
    "NEXT_SIBLING": 0.5,
    "REIFIES": 0.8,
    "SAME_TOPIC": 0.6,
    "MENTIONS": 0.9,
    "RELATED": 0.6,
}


UNLISTED_WEIGHT = 0.5
KINDS = ("section", "text_unit", "entity")


@dataclass
class ExpandGraph:
    """Typed adjacency over sections + units + entities, built once per index."""

    n_sections: int
    n_units: int
    n_entities: int
    adj: dict[str, sp.csr_matrix]  # type -> N x N, rows = source, value = edge weight
    section_vectors: np.ndarray  # mean of a section's own unit vectors, L2-normalised,
    section_rows: np.ndarray  # for the sections that hold units (the rest have no vector)
    unit_section: np.ndarray  # unit row -> section row (-1 when unknown)
    section_info: pl.DataFrame  # row order: id, title, path, uri, document_id, seq
    entity_df: np.ndarray
    node_units: sp.csr_matrix | None = None  # content nodes x units (for node seeds)
    node_vectors: np.ndarray | None = None
    stored_types: tuple[str, ...] = field(default_factory=tuple)

    @property
    def n(self) -> int:
        return self.n_sections + self.n_units + self.n_entities

    def kind(self, g: int) -> str:
        if g < self.n_sections:
            return "section"
        return "text_unit" if g < self.n_sections + self.n_units else "entity"


def expand_graph(index: IndexTables) -> ExpandGraph:
    """The index's expansion graph, built on first use and kept on the index object."""
    cached = getattr(index, "_expand_graph", None)
    if cached is None:
        cached = _build(index)
        index._expand_graph = cached  # type: ignore[attr-defined]
    return cached


def _edge(frame: pl.DataFrame, type_: str) -> pl.DataFrame:
    """One edge type's rows in the common shape: src, dst (global rows), type, w."""
    return frame.select(
        pl.col("src").cast(pl.Int64),
        pl.col("dst").cast(pl.Int64),
        pl.lit(type_).alias("type"),
        pl.col("w").cast(pl.Float64),
    )


def _both_ways(frame: pl.DataFrame, type_: str) -> list[pl.DataFrame]:
    """`frame` (src, dst, w) as edges of `type_`, then the same edges reversed."""
    back = frame.select(pl.col("dst").alias("src"), pl.col("src").alias("dst"), "w")
    return [_edge(frame, type_), _edge(back, type_)]


def _build(index: IndexTables) -> ExpandGraph:
    sections = index.table("sections").with_row_index("srow")
    n_s, n_u, n_e = sections.height, index.text_units.height, index.entities.height
    off_u = n_s
    sid = sections.select(pl.col("id").alias("sec"), pl.col("srow").cast(pl.Int64))
    edges = _hierarchy_edges(sections, sid)  # columns src, dst (global rows), type, w
    contained, cont, unit_section = _containment_edges(index, sid, off_u)
    stored, node_unit, stored_types = _stored_edges(index, sid, off_u)
    related, df = _entity_edges(index, n_e, off_u, n_s + n_u)
    adj = _adjacency([*edges, *contained, *stored, *related], n_s + n_u + n_e)
    sv, section_rows = _section_vectors(index, cont, n_s, n_u, off_u)
    node_units, node_vectors = _node_vectors(index, node_unit, n_u, off_u)
    info = sections.select(
        "id",
        "title",
        "path",
        "uri",
        "document_id",
        "seq",
        "level",
        "component_type",
        "human_readable_id",
    )
    return ExpandGraph(
        n_s,
        n_u,
        n_e,
        adj,
        sv,
        section_rows,
        unit_section,
        info,
        df,
        node_units,
        node_vectors,
        stored_types,
    )


def _hierarchy_edges(sections: pl.DataFrame, sid: pl.DataFrame) -> list[pl.DataFrame]:
    """PARENT / CHILD / SIBLING, derived from the section tree."""
    par = sections.select(pl.col("srow").cast(pl.Int64).alias("src"), "parent_id", "seq", "id")
    par = par.join(sid.rename({"sec": "parent_id", "srow": "dst"}), on="parent_id", how="inner")
    edges = [_edge(par.with_columns(w=pl.lit(1.0)), "PARENT")]
    edges.append(
        _edge(
            par.select(pl.col("dst").alias("src"), pl.col("src").alias("dst"), w=pl.lit(1.0)),
            "CHILD",
        )
    )
    sib = (
        par.sort("parent_id", "seq", "id")
        .with_columns(nxt=pl.col("src").shift(-1), same=pl.col("parent_id").shift(-1))
        .filter(pl.col("same") == pl.col("parent_id"))
    )
    edges.append(_edge(sib.select("src", pl.col("nxt").alias("dst"), w=pl.lit(1.0)), "SIBLING"))
    edges.append(
        _edge(
            sib.select(pl.col("nxt").alias("src"), pl.col("src").alias("dst"), w=pl.lit(1.0)),
            "SIBLING",
        )
    )
    return edges


def _containment_edges(
    index: IndexTables, sid: pl.DataFrame, off_u: int
) -> tuple[list[pl.DataFrame], pl.DataFrame, np.ndarray]:
    """CONTAINS both ways between a section and its own units; also the (section row, unit
    global row) pairs and each unit's section row (-1 when unknown)."""
    units = index.text_units.select(pl.col("id").alias("uid"), pl.col("section_id").alias("sec"))
    units = units.with_row_index("urow").with_columns(pl.col("urow").cast(pl.Int64))
    us = units.join(sid, on="sec", how="left", maintain_order="left")
    unit_section = us["srow"].fill_null(-1).to_numpy().astype(np.int64)
    cont = us.drop_nulls("srow").select(
        pl.col("srow").alias("src"), (pl.col("urow") + off_u).alias("dst")
    )
    return _both_ways(cont.with_columns(w=pl.lit(1.0)), "CONTAINS"), cont, unit_section


def _stored_edges(
    index: IndexTables, sid: pl.DataFrame, off_u: int
) -> tuple[list[pl.DataFrame], pl.DataFrame, tuple[str, ...]]:
    """The stored structure and same-topic edges, both ways, content-node endpoints lifted to
    their units (or their section where no unit holds them); also the node id -> unit global
    row pairs and the stored types."""
    node_unit = (
        index.text_units.select(pl.col("content_node_ids").alias("id"))
        .with_row_index("urow")
        .explode("id")
        .drop_nulls("id")
        .select("id", (pl.col("urow").cast(pl.Int64) + off_u).alias("g"))
    )
    nodes = index.table("content_nodes").select("id", pl.col("section_id").alias("sec"))
    node_sec = (
        nodes.join(node_unit, on="id", how="anti")
        .join(sid, on="sec", how="inner")
        .select("id", pl.col("srow").alias("g"))
    )
    ends = pl.concat(
        [sid.select(pl.col("sec").alias("id"), pl.col("srow").alias("g")), node_unit, node_sec]
    ).unique()
    stored = pl.concat(
        [index.table("structure_edges"), index.table("same_topic_edges")], how="vertical_relaxed"
    ).select("source_id", "target_id", pl.col("type").str.to_uppercase(), "weight")
    stored = (
        stored.drop_nulls(["source_id", "target_id", "type"])
        .join(ends.rename({"id": "source_id", "g": "src"}), on="source_id", how="inner")
        .join(ends.rename({"id": "target_id", "g": "dst"}), on="target_id", how="inner")
        .filter(pl.col("src") != pl.col("dst"))
        .with_columns(w=pl.col("weight").fill_null(1.0).clip(1e-3, 1.0))
    )
    stored_types = tuple(sorted(set(stored["type"].to_list())))
    edges: list[pl.DataFrame] = []
    for t in stored_types:
        edges += _both_ways(stored.filter(pl.col("type") == t), t)
    return edges, node_unit, stored_types


def _entity_edges(
    index: IndexTables, n_e: int, off_u: int, off_e: int
) -> tuple[list[pl.DataFrame], np.ndarray]:
    """MENTIONS both ways, weighted by the entity's rarity, and RELATED both ways through
    relationships; also each entity's unit count (df)."""
    eu = index.entity_units  # entity_row, unit_row
    df = np.bincount(eu["entity_row"].to_numpy(), minlength=n_e).astype(np.float64)
    spec = math.log(2.0) / np.log1p(np.maximum(df, 1.0))
    ment = eu.select(
        (pl.col("unit_row").cast(pl.Int64) + off_u).alias("src"),
        (pl.col("entity_row").cast(pl.Int64) + off_e).alias("dst"),
    )
    w_ment = pl.Series(np.sqrt(spec)[eu["entity_row"].to_numpy()]) if n_e else pl.lit(1.0)
    edges = [
        _edge(ment.with_columns(w=w_ment), "MENTIONS"),
        _edge(
            ment.select(pl.col("dst").alias("src"), pl.col("src").alias("dst"), w=w_ment),
            "MENTIONS",
        ),
    ]
    rels = index.relationships
    if rels.height and n_e:
        erow = index.entities.select(pl.col("id").alias("eid")).with_row_index("e")
        r = (
            rels.select("source_id", "target_id", pl.col("weight").fill_null(1.0))
            .join(erow.rename({"eid": "source_id", "e": "src"}), on="source_id", how="inner")
            .join(erow.rename({"eid": "target_id", "e": "dst"}), on="target_id", how="inner")
            .filter(pl.col("src") != pl.col("dst"))
        )
        top = float(r["weight"].max() or 1.0) if r.height else 1.0
        r = r.select(
            pl.col("src").cast(pl.Int64) + off_e,
            pl.col("dst").cast(pl.Int64) + off_e,
            w=(pl.col("weight") / (top if top > 0 else 1.0)).clip(1e-3, 1.0),
        )
        edges += _both_ways(r, "RELATED")
    return edges, df


def _adjacency(edges: list[pl.DataFrame], n: int) -> dict[str, sp.csr_matrix]:
    """Per type an n x n matrix (rows = source), the highest weight of duplicate edges."""
    all_edges = pl.concat(edges).group_by("type", "src", "dst").agg(pl.col("w").max())
    adj: dict[str, sp.csr_matrix] = {}
    for t in sorted(set(all_edges["type"].to_list())):
        e = all_edges.filter(pl.col("type") == t)
        m = sp.csr_matrix(
            (e["w"].to_numpy(), (e["src"].to_numpy(), e["dst"].to_numpy())), shape=(n, n)
        )
        m.sort_indices()
        adj[t] = m
    return adj


def _section_vectors(
    index: IndexTables, cont: pl.DataFrame, n_s: int, n_u: int, off_u: int
) -> tuple[np.ndarray, np.ndarray]:
    """Section vectors (mean of own units' vectors, L2-normalised) for the sections that
    hold units, and those sections' rows."""
    uv = index.unit_vectors
    if n_s and cont.height:
        member = sp.csr_matrix(
            (np.ones(cont.height), (cont["src"].to_numpy(), cont["dst"].to_numpy() - off_u)),
            shape=(n_s, n_u),
        )
        sv = np.asarray(member @ uv, dtype=np.float32)
        norm = np.linalg.norm(sv, axis=1, keepdims=True)
        sv = np.divide(sv, norm, out=np.zeros_like(sv), where=norm > 0)
    else:
        sv = np.zeros((n_s, uv.shape[1] if uv.ndim == 2 else 0), dtype=np.float32)
    section_rows = np.flatnonzero(np.abs(sv).sum(axis=1) > 0) if sv.size else np.zeros(0, int)
    return np.ascontiguousarray(sv[section_rows]), section_rows


def _node_vectors(
    index: IndexTables, node_unit: pl.DataFrame, n_u: int, off_u: int
) -> tuple[sp.csr_matrix | None, np.ndarray | None]:
    """Content-node vectors (node seeds) and the nodes x units matrix, only where the index
    stores them."""
    node_units = node_vectors = None
    from pipeline.vectors import lance as vectors

    ids, mat = vectors.read_vectors(index.root, "content_nodes")
    # A paragraph's vector is its text unit's (pipeline/vectors/lance.py), so only the other node
    # types (headings, tables, captions, ...) can seed anything the unit vectors do not.
    types = index.table("content_nodes").select("id", "node_type")
    own_vec = (
        pl.DataFrame({"id": ids}, schema={"id": pl.String})
        .join(types, on="id", how="left")["node_type"]
        .ne_missing("PARAGRAPH")
        .to_numpy()
    )
    ids, mat = [i for i, k in zip(ids, own_vec, strict=True) if k], mat[own_vec]
    if ids and node_unit.height:
        nv = pl.DataFrame({"id": ids}).with_row_index("v").join(node_unit, on="id", how="inner")
        node_units = sp.csr_matrix(
            (np.ones(nv.height), (nv["v"].to_numpy(), nv["g"].to_numpy() - off_u)),
            shape=(len(ids), n_u),
        )
        node_vectors = mat
    return node_units, node_vectors


def valid_types(graph: ExpandGraph) -> list[str]:
    return sorted(set(DEFAULT_WEIGHTS) | set(graph.stored_types))


def check_types(names, graph: ExpandGraph, what: str) -> None:
    valid = valid_types(graph)
    bad = sorted({str(t) for t in names} - set(valid))
    if bad:
        raise ValueError(f"unknown edge type(s) in {what}: {bad}; valid: {', '.join(valid)}")
