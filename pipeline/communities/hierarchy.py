"""Hierarchical Leiden communities over the entity graph, from scratch (igraph's Leiden).

Why its own module: the clustering itself, shared by a full build and by the carry-over of
a previous run (pipeline.communities.carry_over), which splits a grown leaf the same way.
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
sorted, every Leiden call draws from its own generator seeded with `settings.seed`, and
community numbers are assigned by (level, smallest member id).

The Leiden is igraph's own (its C core; the algorithm's authors wrote both it and
leidenalg): on MuSiQue's giant component (16.5k entities, 31.7k edges) 0.05 s against
leidenalg's 0.87 s, at a higher modularity (0.766 against 0.762), and ~0.1 ms instead of
~1.2 ms per small component; the whole hierarchy 3.3 s -> 0.3 s.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import igraph as ig
import numpy as np
import polars as pl

from pipeline.config import GraphSettings


@dataclass
class Community:
    level: int
    members: np.ndarray  # sorted vertex indices (= sorted by entity id)
    parent: Community | None = None
    children: list[Community] = field(default_factory=list)
    splittable: bool = True
    number: int = -1


def edge_arrays(
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


def leiden_membership(g: ig.Graph, weights: np.ndarray, seed: int) -> np.ndarray:
    """Modularity Leiden on `g` (2 iterations, as leidenalg's default), each vertex's part.

    igraph draws from Python's `random` by default; a generator of its own per call keeps the
    result independent of what else drew from it, and `random` is put back after."""
    ig.set_random_number_generator(random.Random(seed))
    try:
        part = g.community_leiden(
            objective_function="modularity", weights=weights.tolist(), n_iterations=2
        )
    finally:
        ig.set_random_number_generator(random)
    return np.asarray(part.membership, dtype=np.int64)


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
        membership = leiden_membership(g, gew[lo:hi], seed)
        # order parts by their smallest member so the result never depends on Leiden's labels
        parts = [members[membership == k] for k in range(membership.max() + 1)]
        parts.sort(key=lambda p: int(p[0]))
        out.append(parts)
    return out


def split_deeper(
    current: list[Community],
    n: int,
    eu: np.ndarray,
    ev: np.ndarray,
    ew: np.ndarray,
    settings: GraphSettings,
) -> list[Community]:
    """The descendants created by splitting, level after level, every community (of `current`,
    then of its children) larger than `max_cluster_size`, down to `max_levels`.

    One code path for the full build and for carried-over leaves that grew too large, so a
    grown leaf is split exactly as a from-scratch run would split a community of those members.
    `current` must hold disjoint member sets (one level, or leaves)."""
    created: list[Community] = []
    depth = max(settings.max_levels, 1)
    while True:
        to_split = [
            c
            for c in current
            if c.splittable and len(c.members) > settings.max_cluster_size and c.level + 1 < depth
        ]
        if not to_split:
            return created
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
                child = Community(c.level + 1, p, parent=c)
                c.children.append(child)
                current.append(child)
        created.extend(current)


def build_hierarchy(
    n: int, eu: np.ndarray, ev: np.ndarray, ew: np.ndarray, settings: GraphSettings
) -> list[Community]:
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

    everything: list[Community] = []
    level0_parts = _split_groups(labels, int(keep.sum()), eu, ev, ew, settings.seed)
    current: list[Community] = []
    for parts in level0_parts:
        for p in parts:
            # a component Leiden leaves whole would give the same single part again
            current.append(Community(0, p, splittable=len(parts) > 1))
    everything.extend(current)

    everything.extend(split_deeper(current, n, eu, ev, ew, settings))

    everything.sort(key=lambda c: (c.level, int(c.members[0])))
    for i, c in enumerate(everything):
        c.number = i
    return everything


def frames_of(comms: list[Community], offset: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(head: community, level, parent, children; membership: community, v) of a hierarchy."""
    head = pl.DataFrame(
        {
            "community": np.array([c.number + offset for c in comms], dtype=np.int64),
            "level": np.array([c.level for c in comms], dtype=np.int64),
            "parent": np.array(
                [c.parent.number + offset if c.parent else -1 for c in comms], dtype=np.int64
            ),
            "children": pl.Series(
                [[ch.number + offset for ch in c.children] for c in comms], dtype=pl.List(pl.Int64)
            ),
        },
        schema={
            "community": pl.Int64,
            "level": pl.Int64,
            "parent": pl.Int64,
            "children": pl.List(pl.Int64),
        },
    )
    sizes = [len(c.members) for c in comms]
    membership = pl.DataFrame(
        {
            "community": np.repeat(head["community"].to_numpy(), sizes).astype(np.int64),
            "v": (
                np.concatenate([c.members for c in comms]).astype(np.int64)
                if comms
                else np.zeros(0, dtype=np.int64)
            ),
        },
        schema={"community": pl.Int64, "v": pl.Int64},
    )
    return head, membership
