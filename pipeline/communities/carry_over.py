"""Carry the previous run's community hierarchy over to the current graph.

Why: Leiden from scratch reshuffles large communities after a small addition, and every
reshuffled community costs a new LLM report. After a small change (at most
`incremental_max_change` of the clustered entities new or gone) the previous hierarchy is
carried over instead of recomputed, so that communities, their numbers and their cached LLM
reports survive one added document; see `update_hierarchy`. A carried-over leaf that grows
past `max_cluster_size` is split the way the full build splits
(pipeline.communities.hierarchy.split_deeper). Whether a run may carry over across many runs
is decided by pipeline.communities.leiden.plan_communities.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.communities.hierarchy import Community, build_hierarchy, frames_of, split_deeper
from pipeline.config import GraphSettings


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


@dataclass
class Diff:
    """The previous table against the current graph (vertex = index into sorted entity ids)."""

    prev: pl.DataFrame  # community, level, parent, children, entity_ids (typed)
    kept: pl.DataFrame  # (community, level, v) of previous members still linked
    new: np.ndarray  # bool per vertex: linked now, not clustered before
    n_prev: int  # entities clustered (level 0) in the previous table
    added: int
    removed: int
    max_level: int


def diff_previous(
    ids: pl.Series, eu: np.ndarray, ev: np.ndarray, previous: pl.DataFrame
) -> Diff | None:
    """None when there is no previous table (or it clusters nothing)."""
    if previous.is_empty():
        return None
    n = len(ids)
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
    if n_prev == 0:
        return None
    kept = pm.join(index, on="entity_id").filter(pl.col("linked")).select("community", "level", "v")
    kept0 = kept.filter(pl.col("level") == 0)["v"].unique().to_numpy()
    was = np.zeros(n, dtype=bool)
    was[kept0] = True
    new = linked & ~was
    return Diff(
        prev=prev,
        kept=kept,
        new=new,
        n_prev=n_prev,
        added=int(new.sum()),
        removed=n_prev - len(kept0),
        max_level=int(prev["level"].max()),
    )


def carry_blocker(diff: Diff | None, n_edges: int, settings: GraphSettings) -> str | None:
    """Why this run's change alone rules out a carry-over (None: it does not)."""
    if diff is None:
        return "no previous communities"
    if settings.incremental_max_change <= 0:
        return "incremental_max_change is 0"
    if n_edges == 0:
        return "no relationships"
    if diff.max_level >= max(settings.max_levels, 1):
        return "previous hierarchy deeper than max_levels"
    if diff.added + diff.removed > settings.incremental_max_change * diff.n_prev:
        return "this run's change above incremental_max_change"
    return None


def update_hierarchy(
    n: int,
    eu: np.ndarray,
    ev: np.ndarray,
    ew: np.ndarray,
    diff: Diff,
    settings: GraphSettings,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The previous hierarchy carried over to the current graph (the caller checked that the
    change is small enough).

    Why: Leiden from scratch reshuffles large communities after a small addition, and every
    reshuffled community costs a new LLM report. Kept entities keep their community at every
    level (so do the community numbers); a new entity joins, level by level, the community of
    its most strongly linked neighbour (inside its parent below level 0); new entities linked
    only to each other form new communities (Leiden on their subgraph), numbered after the
    previous ones; gone entities leave, and communities left empty vanish. A carried-over leaf
    that grew past `max_cluster_size` is split as the full build would split it
    (`split_deeper`), its parts numbered after all others; nothing else changes."""
    prev, kept, new, max_level = diff.prev, diff.kept, diff.new, diff.max_level
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
    fresh = build_hierarchy(n, eu[sub], ev[sub], ew[sub], settings) if sub.any() else []
    new_head, new_members = frames_of(fresh, offset=top + 1)

    lv, vv = np.nonzero(lab >= 0)
    membership = pl.concat(
        [pl.DataFrame({"community": lab[lv, vv], "v": vv.astype(np.int64)}), new_members]
    )
    alive = membership["community"].unique().implode()
    carried = prev.filter(pl.col("community").is_in(alive)).select(
        "community", "level", "parent", "children"
    )
    # children that are still alive, in their order; by exploding: a `list.eval` testing
    # each child against `alive` repeated `alive` per row (+0.8 GB at 10k communities)
    children = (
        carried.select("community", "children")
        .explode("children")
        .filter(pl.col("children").is_in(alive))
        .group_by("community", maintain_order=True)
        .agg("children")
    )
    carried = (
        carried.drop("children")
        .join(children, on="community", how="left", maintain_order="left")
        .with_columns(pl.col("children").fill_null(pl.lit([], dtype=pl.List(pl.Int64))))
    )
    head = pl.concat([carried, new_head])
    return _split_grown(head, membership, top, top + 1 + len(fresh), n, eu, ev, ew, settings)


def _split_grown(
    head: pl.DataFrame,
    membership: pl.DataFrame,
    top: int,
    next_number: int,
    n: int,
    eu: np.ndarray,
    ev: np.ndarray,
    ew: np.ndarray,
    settings: GraphSettings,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Carried-over leaves (numbers <= `top`) larger than `max_cluster_size` get children, as
    in the full build; new numbers start at `next_number`. Leaves that Leiden leaves whole (or
    that sit at the deepest level) stay as they are, so an unchanged graph stays unchanged."""
    grown = (
        head.filter(
            (pl.col("community") <= top)
            & (pl.col("children").list.len() == 0)
            & (pl.col("level") + 1 < max(settings.max_levels, 1))
        )
        .select("community", "level")
        .join(membership, on="community")
        .group_by("community", "level")
        .agg(pl.col("v").sort())
        .filter(pl.col("v").list.len() > settings.max_cluster_size)
        .sort("community")
    )
    if grown.is_empty():
        return head, membership
    leaves = [
        Community(level, np.asarray(members, dtype=np.int64), number=c)
        for c, level, members in grown.iter_rows()
    ]
    created = split_deeper(leaves, n, eu, ev, ew, settings)
    if not created:
        return head, membership
    created.sort(key=lambda c: (c.level, int(c.members[0])))
    for i, c in enumerate(created):
        c.number = next_number + i
    split_head, split_members = frames_of(created)
    kids = {c.number: [ch.number for ch in c.children] for c in leaves if c.children}
    split = pl.DataFrame(
        {"community": list(kids), "new_children": list(kids.values())},
        schema={"community": pl.Int64, "new_children": pl.List(pl.Int64)},
    )
    head = (
        head.join(split, on="community", how="left")
        .with_columns(pl.coalesce("new_children", "children").alias("children"))
        .drop("new_children")
    )
    return pl.concat([head, split_head]), pl.concat([membership, split_members])
