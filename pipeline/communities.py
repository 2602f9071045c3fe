"""Hierarchical Leiden communities over the entity graph (igraph + leidenalg), deterministic.

The hierarchy follows GraphRAG's `hierarchical_leiden` with `max_cluster_size`:

- level 0: Leiden (modularity) on every connected component with >= 2 entities. GraphRAG
  keeps only the largest connected component; we keep them all so that small documents still
  get communities. Entities without any relationship get no community.
- level L+1: every level-L community with more than `max_cluster_size` members is
  re-partitioned on its induced subgraph; its parts become its children at level L+1.
  A re-partition that returns a single part stops the recursion there (the community cannot
  be split), and at most `max_levels` levels (0 .. max_levels-1) are built.
- As in GraphRAG, a community that is small enough has no children, so its members do not
  appear at deeper levels: the deepest ("leaf") level of an entity varies.

Determinism: vertices are numbered by sorted entity id, parallel/reversed edges are merged and
sorted, every Leiden call uses `settings.seed`, and community numbers are assigned by
(level, smallest member id). `period` is "" because the run date would make the output
differ between runs; the id is a hash of (level, member ids), so it is stable across runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import igraph as ig
import leidenalg
import numpy as np
import polars as pl

from pipeline.config import GraphSettings
from pipeline.ids import stable_id_expr
from pipeline.schemas import TABLES, empty


@dataclass
class _Community:
    level: int
    members: np.ndarray  # sorted vertex indices (= sorted by entity id)
    parent: _Community | None = None
    children: list[_Community] = field(default_factory=list)
    splittable: bool = True
    number: int = -1


def _edge_arrays(
    ids: pl.Series, relationships: pl.DataFrame
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected, merged (summed weight), sorted edges as vertex-index arrays."""
    index = pl.DataFrame({"id": ids, "idx": np.arange(len(ids), dtype=np.int64)})
    rels = relationships.select(
        pl.col("source_id").cast(pl.Utf8),
        pl.col("target_id").cast(pl.Utf8),
        pl.col("weight").cast(pl.Float64).fill_null(1.0).fill_nan(1.0).clip(lower_bound=0.0),
    )
    rels = (
        rels.join(index.rename({"id": "source_id", "idx": "a"}), on="source_id", how="inner")
        .join(index.rename({"id": "target_id", "idx": "b"}), on="target_id", how="inner")
        .filter(pl.col("a") != pl.col("b"))
        .select(
            pl.min_horizontal("a", "b").alias("u"),
            pl.max_horizontal("a", "b").alias("v"),
            "weight",
        )
        .group_by("u", "v")
        .agg(pl.col("weight").sum())
        # zero-weight edges carry no signal and would give Leiden a zero total weight
        .filter(pl.col("weight") > 0)
        .sort("u", "v")
    )
    return rels["u"].to_numpy(), rels["v"].to_numpy(), rels["weight"].to_numpy()


def _split_groups(
    labels: np.ndarray,
    n_groups: int,
    eu: np.ndarray,
    ev: np.ndarray,
    ew: np.ndarray,
    seed: int,
) -> list[list[np.ndarray]]:
    """Leiden on the induced subgraph of every group; parts as sorted vertex-index arrays.

    `labels[v]` is v's group in 0..n_groups-1, or -1 for vertices not to partition. The edges
    of all groups are bucketed at once (one sort), so the cost is O(E log E) per level plus
    one Leiden call per group.
    """
    lu = labels[eu]
    inside = (lu >= 0) & (lu == labels[ev])
    geu, gev, gew, gl = eu[inside], ev[inside], ew[inside], lu[inside]
    e_order = np.argsort(gl, kind="stable")  # keeps the (u, v) order inside each group
    geu, gev, gew, gl = geu[e_order], gev[e_order], gew[e_order], gl[e_order]
    e_bounds = np.searchsorted(gl, np.arange(n_groups + 1))

    verts = np.flatnonzero(labels >= 0)
    vl = labels[verts]
    v_order = np.argsort(vl, kind="stable")  # ascending vertex index inside each group
    verts, vl = verts[v_order], vl[v_order]
    v_bounds = np.searchsorted(vl, np.arange(n_groups + 1))

    local = np.empty(len(labels), dtype=np.int64)
    out: list[list[np.ndarray]] = []
    for gi in range(n_groups):
        members = verts[v_bounds[gi] : v_bounds[gi + 1]]
        lo, hi = e_bounds[gi], e_bounds[gi + 1]
        if len(members) <= 2 or hi - lo == 0:
            out.append([members])  # a pair (or edgeless group) cannot be split by modularity
            continue
        local[members] = np.arange(len(members))
        edges = np.column_stack((local[geu[lo:hi]], local[gev[lo:hi]]))
        g = ig.Graph(n=len(members), edges=edges.tolist())
        part = leidenalg.find_partition(
            g, leidenalg.ModularityVertexPartition, weights=gew[lo:hi].tolist(), seed=seed
        )
        membership = np.asarray(part.membership, dtype=np.int64)
        # order parts by their smallest member so the result never depends on Leiden's labels
        parts = [members[membership == k] for k in range(membership.max() + 1)]
        parts.sort(key=lambda p: int(p[0]))
        out.append(parts)
    return out


def _build_hierarchy(
    n: int, eu: np.ndarray, ev: np.ndarray, ew: np.ndarray, settings: GraphSettings
) -> list[_Community]:
    if len(eu) == 0:
        return []
    g = ig.Graph(n=n, edges=np.column_stack((eu, ev)).tolist())
    comp = np.asarray(g.connected_components().membership, dtype=np.int64)
    comp_sizes = np.bincount(comp)
    # renumber components with >= 2 vertices to 0..k-1 (by smallest vertex: bincount order
    # of igraph's component labels already follows first appearance in vertex order)
    keep = comp_sizes >= 2
    remap = np.full(len(comp_sizes), -1, dtype=np.int64)
    remap[keep] = np.arange(int(keep.sum()))
    labels = remap[comp]

    everything: list[_Community] = []
    level0_parts = _split_groups(labels, int(keep.sum()), eu, ev, ew, settings.seed)
    current: list[_Community] = []
    for parts in level0_parts:
        for p in parts:
            # a component Leiden leaves whole would give the same single part again
            current.append(_Community(0, p, splittable=len(parts) > 1))
    everything.extend(current)

    for level in range(1, max(settings.max_levels, 1)):
        to_split = [
            c for c in current if c.splittable and len(c.members) > settings.max_cluster_size
        ]
        if not to_split:
            break
        labels = np.full(n, -1, dtype=np.int64)
        for gi, c in enumerate(to_split):
            labels[c.members] = gi
        current = []
        for c, parts in zip(
            to_split, _split_groups(labels, len(to_split), eu, ev, ew, settings.seed), strict=True
        ):
            if len(parts) < 2:
                c.splittable = False
                continue
            for p in parts:
                child = _Community(level, p, parent=c)
                c.children.append(child)
                current.append(child)
        everything.extend(current)

    everything.sort(key=lambda c: (c.level, int(c.members[0])))
    for i, c in enumerate(everything):
        c.number = i
    return everything


def hierarchical_leiden(
    entities: pl.DataFrame, relationships: pl.DataFrame, settings: GraphSettings
) -> pl.DataFrame:
    """communities frame with exactly schemas.COMMUNITIES columns."""
    ids = entities["id"].cast(pl.Utf8).unique().sort()
    eu, ev, ew = _edge_arrays(ids, relationships)
    comms = _build_hierarchy(len(ids), eu, ev, ew, settings)
    if not comms:
        return empty("communities")

    sizes = np.array([len(c.members) for c in comms], dtype=np.int64)
    head = pl.DataFrame(
        {
            "community": np.arange(len(comms), dtype=np.int64),
            "level": np.array([c.level for c in comms], dtype=np.int64),
            "parent": np.array(
                [c.parent.number if c.parent else -1 for c in comms], dtype=np.int64
            ),
            "children": pl.Series(
                [[ch.number for ch in c.children] for c in comms], dtype=pl.List(pl.Int64)
            ),
            "size": sizes,
        }
    )
    ids_np = ids.to_numpy()
    membership = pl.DataFrame(
        {
            "community": np.repeat(np.arange(len(comms), dtype=np.int64), sizes),
            "entity_id": ids_np[np.concatenate([c.members for c in comms])],
        }
    )
    members = membership.group_by("community").agg(pl.col("entity_id").sort().alias("entity_ids"))

    rels = relationships.select(pl.col("id", "source_id", "target_id").cast(pl.Utf8))
    src = rels.join(membership, left_on="source_id", right_on="entity_id").select("id", "community")
    tgt = rels.join(membership, left_on="target_id", right_on="entity_id").select("id", "community")
    rel_ids = (
        src.join(tgt, on=["id", "community"], how="inner")
        .unique()
        .group_by("community")
        .agg(pl.col("id").sort().alias("relationship_ids"))
    )

    units = (
        entities.select(pl.col("id").alias("entity_id"), "text_unit_ids")
        .explode("text_unit_ids")
        .drop_nulls("text_unit_ids")
        .join(membership, on="entity_id")
        .select("community", pl.col("text_unit_ids").alias("unit"))
        .unique()
        .group_by("community")
        .agg(pl.col("unit").sort().alias("text_unit_ids"))
    )

    out = (
        head.join(members, on="community", how="left")
        .join(rel_ids, on="community", how="left")
        .join(units, on="community", how="left")
        .with_columns(
            pl.col("relationship_ids").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))),
            pl.col("text_unit_ids").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))),
        )
        .with_columns(
            stable_id_expr(
                pl.lit("community"), pl.col("level"), pl.col("entity_ids").list.join(",")
            ).alias("id"),
            pl.col("community").alias("human_readable_id"),
            pl.format("Community {}", pl.col("community")).alias("title"),
            pl.lit("").alias("period"),
        )
        .sort("community")
    )
    return pl.from_arrow(  # type: ignore[return-value]
        out.select(TABLES["communities"].names).to_arrow().cast(TABLES["communities"])
    )
