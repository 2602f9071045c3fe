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

Re-runs (`previous`, the last run's table): after a small change (at most
`incremental_max_change` of the clustered entities new or gone) the previous hierarchy is
carried over instead of recomputed, so that communities, their numbers and their cached LLM
reports survive one added document; see `_update_hierarchy`. A larger change recomputes.

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


def _propagate(
    lab: np.ndarray,
    todo: np.ndarray,
    eu: np.ndarray,
    ev: np.ndarray,
    ew: np.ndarray,
    scope: np.ndarray | None = None,
) -> None:
    """In place: every `todo` vertex still unlabelled (-1) takes the label with the largest
    summed edge weight among its labelled neighbours (ties: the smallest label), round after
    round, so chains of new vertices follow their labelled end. With `scope`, only edges whose
    ends share a scope value count (a child community is chosen inside its parent)."""
    a, b, w = np.concatenate([eu, ev]), np.concatenate([ev, eu]), np.concatenate([ew, ew])
    keep = todo[a] if scope is None else todo[a] & (scope[a] == scope[b])
    a, b, w = a[keep], b[keep], w[keep]
    while True:
        m = (lab[a] < 0) & (lab[b] >= 0)
        if not m.any():
            return
        best = (
            pl.DataFrame({"v": a[m], "c": lab[b[m]], "w": w[m]})
            .group_by("v", "c")
            .agg(pl.col("w").sum().round(9))  # summation order must not break ties
            .sort(["v", "w", "c"], descending=[False, True, False])
            .unique("v", keep="first", maintain_order=True)
        )
        lab[best["v"].to_numpy()] = best["c"].to_numpy()


def _frames_of(comms: list[_Community], offset: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
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


def _update_hierarchy(
    ids: pl.Series,
    eu: np.ndarray,
    ev: np.ndarray,
    ew: np.ndarray,
    previous: pl.DataFrame,
    settings: GraphSettings,
) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The previous hierarchy carried over to the current graph, or None (recompute) when there
    is none, it is deeper than `max_levels` allows, or more than `incremental_max_change` of
    its entities are new or gone.

    Why: Leiden from scratch reshuffles large communities after a small addition, and every
    reshuffled community costs a new LLM report. Kept entities keep their community at every
    level (so do the community numbers); a new entity joins, level by level, the community of
    its most strongly linked neighbour (inside its parent below level 0); new entities linked
    only to each other form new communities (Leiden on their subgraph), numbered after the
    previous ones; gone entities leave, and communities left empty vanish."""
    n = len(ids)
    if len(eu) == 0 or previous.is_empty():
        return None
    max_level = int(previous["level"].max())
    if max_level >= max(settings.max_levels, 1):
        return None
    linked = np.zeros(n, dtype=bool)
    linked[eu] = True
    linked[ev] = True
    index = pl.DataFrame({"entity_id": ids, "v": np.arange(n, dtype=np.int64), "linked": linked})
    prev = previous.select(
        pl.col("community").cast(pl.Int64),
        pl.col("level").cast(pl.Int64),
        pl.col("parent").cast(pl.Int64),
        pl.col("children").cast(pl.List(pl.Int64)),
        pl.col("entity_ids").cast(pl.List(pl.Utf8)),
    )
    pm = (
        prev.select("community", "level", pl.col("entity_ids").alias("entity_id"))
        .explode("entity_id")
        .drop_nulls("entity_id")
    )
    n_prev = pm.filter(pl.col("level") == 0)["entity_id"].n_unique()
    kept = pm.join(index, on="entity_id").filter(pl.col("linked"))
    kept0 = kept.filter(pl.col("level") == 0)["v"].unique().to_numpy()
    was = np.zeros(n, dtype=bool)
    was[kept0] = True
    new = linked & ~was
    n_changed = int(new.sum()) + (n_prev - len(kept0))
    if n_prev == 0 or n_changed > settings.incremental_max_change * n_prev:
        return None

    top = int(prev["community"].max())
    lab = np.full((max_level + 1, n), -1, dtype=np.int64)
    lab[kept["level"].to_numpy(), kept["v"].to_numpy()] = kept["community"].to_numpy()
    _propagate(lab[0], new, eu, ev, ew)
    has_kids = np.zeros(top + 1, dtype=bool)
    with_kids = prev.filter(pl.col("children").list.len() > 0)
    has_kids[with_kids["community"].to_numpy()] = True
    for level in range(1, max_level + 1):
        up = lab[level - 1]
        todo = (up >= 0) & has_kids[np.maximum(up, 0)] & (lab[level] < 0)
        _propagate(lab[level], todo, eu, ev, ew, scope=up)
        left = np.flatnonzero(todo & (lab[level] < 0))
        if len(left):  # no link to any child: the parent's largest child (then smallest number)
            counts = (
                pl.DataFrame({"parent": up[lab[level] >= 0], "c": lab[level][lab[level] >= 0]})
                .group_by("parent", "c")
                .len()
                .sort(["parent", "len", "c"], descending=[False, True, False])
                .unique("parent", keep="first", maintain_order=True)
            )
            fallback = dict(counts.select("parent", "c").iter_rows())
            for v in left.tolist():
                lab[level, v] = fallback.get(int(up[v]), -1)

    rest = new & (lab[0] < 0)  # only linked to other such vertices: a graph of their own
    sub = rest[eu] & rest[ev]
    fresh = _build_hierarchy(n, eu[sub], ev[sub], ew[sub], settings) if sub.any() else []
    new_head, new_members = _frames_of(fresh, offset=top + 1)

    lv, vv = np.nonzero(lab >= 0)
    membership = pl.concat(
        [pl.DataFrame({"community": lab[lv, vv], "v": vv.astype(np.int64)}), new_members]
    )
    alive = membership["community"].unique()
    head = pl.concat(
        [
            prev.filter(pl.col("community").is_in(alive.implode()))
            .select("community", "level", "parent", "children")
            .with_columns(
                pl.col("children").list.eval(pl.element().filter(pl.element().is_in(alive)))
            ),
            new_head,
        ]
    )
    return head, membership


def hierarchical_leiden(
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    settings: GraphSettings,
    previous: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """communities frame with exactly schemas.COMMUNITIES columns.

    `previous` (the last run's communities table, if any) makes a re-run incremental: see
    `_update_hierarchy`; without it, or after a large change, Leiden runs from scratch."""
    ids = entities["id"].cast(pl.Utf8).unique().sort()
    eu, ev, ew = _edge_arrays(ids, relationships)
    update = (
        _update_hierarchy(ids, eu, ev, ew, previous, settings) if previous is not None else None
    )
    if update is None:
        comms = _build_hierarchy(len(ids), eu, ev, ew, settings)
        if not comms:
            return empty("communities")
        head, vmembers = _frames_of(comms)
    else:
        head, vmembers = update

    membership = vmembers.with_columns(
        pl.Series("entity_id", ids.to_numpy()[vmembers["v"].to_numpy()], dtype=pl.Utf8)
    ).select("community", "entity_id")
    members = membership.group_by("community").agg(
        pl.col("entity_id").sort().alias("entity_ids"), pl.len().cast(pl.Int64).alias("size")
    )

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
        head.join(members, on="community", how="inner")
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
