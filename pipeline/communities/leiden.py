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
reports survive one added document; see `_update_hierarchy`. A larger change recomputes, and
so does a change accumulated over many small runs: `plan_communities` decides from a small
state (`next_state`: counts since the last full recompute, a hash of the partition settings)
that the caller keeps beside the table. A carried-over leaf that grows past
`max_cluster_size` is split the way the full build splits (`_split_deeper`).

Determinism: vertices are numbered by sorted entity id, parallel/reversed edges are merged and
sorted, every Leiden call uses `settings.seed`, and community numbers are assigned by
(level, smallest member id). `period` is "" here: the run date would make the output
differ between runs; the communities asset stamps it (pipeline.compat.columns.stamp_period,
GraphRAG's date of ingest, kept while a community is unchanged). The id is a hash of
(level, member ids), so it is stable across runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import igraph as ig
import leidenalg
import numpy as np
import polars as pl

from pipeline.config import GraphSettings
from pipeline.ids import sha256_hex, stable_id_expr
from pipeline.schemas import TABLES, empty

# The columns of each input table this stage reads (incremental carry-over included): its
# Dagster asset loads only these (resources.parquet_io); tests/test_stage_inputs.py checks it.
INPUT_COLUMNS = {
    "entities": ["id", "text_unit_ids"],
    "relationships": ["id", "source_id", "target_id", "weight"],
}


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


def _split_deeper(
    current: list[_Community],
    n: int,
    eu: np.ndarray,
    ev: np.ndarray,
    ew: np.ndarray,
    settings: GraphSettings,
) -> list[_Community]:
    """The descendants created by splitting, level after level, every community (of `current`,
    then of its children) larger than `max_cluster_size`, down to `max_levels`.

    One code path for the full build and for carried-over leaves that grew too large, so a
    grown leaf is split exactly as a from-scratch run would split a community of those members.
    `current` must hold disjoint member sets (one level, or leaves)."""
    created: list[_Community] = []
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
                child = _Community(c.level + 1, p, parent=c)
                c.children.append(child)
                current.append(child)
        created.extend(current)


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

    everything.extend(_split_deeper(current, n, eu, ev, ew, settings))

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


@dataclass
class _Diff:
    """The previous table against the current graph (vertex = index into sorted entity ids)."""

    prev: pl.DataFrame  # community, level, parent, children, entity_ids (typed)
    kept: pl.DataFrame  # (community, level, v) of previous members still linked
    new: np.ndarray  # bool per vertex: linked now, not clustered before
    n_prev: int  # entities clustered (level 0) in the previous table
    added: int
    removed: int
    max_level: int


def _diff(ids: pl.Series, eu: np.ndarray, ev: np.ndarray, previous: pl.DataFrame) -> _Diff | None:
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
    return _Diff(
        prev=prev,
        kept=kept,
        new=new,
        n_prev=n_prev,
        added=int(new.sum()),
        removed=n_prev - len(kept0),
        max_level=int(prev["level"].max()),
    )


def _carry_blocker(diff: _Diff | None, n_edges: int, settings: GraphSettings) -> str | None:
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


def _update_hierarchy(
    n: int,
    eu: np.ndarray,
    ev: np.ndarray,
    ew: np.ndarray,
    diff: _Diff,
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
    (`_split_deeper`), its parts numbered after all others; nothing else changes."""
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
    fresh = _build_hierarchy(n, eu[sub], ev[sub], ew[sub], settings) if sub.any() else []
    new_head, new_members = _frames_of(fresh, offset=top + 1)

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
        _Community(level, np.asarray(members, dtype=np.int64), number=c)
        for c, level, members in grown.iter_rows()
    ]
    created = _split_deeper(leaves, n, eu, ev, ew, settings)
    if not created:
        return head, membership
    created.sort(key=lambda c: (c.level, int(c.members[0])))
    for i, c in enumerate(created):
        c.number = next_number + i
    split_head, split_members = _frames_of(created)
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


# Graph settings that shape the partition: a change to any of them recomputes. Bump
# PARTITION_VERSION when the algorithm itself changes in a way that should do the same.
PARTITION_SETTINGS = ("seed", "max_cluster_size", "max_levels")
PARTITION_VERSION = 1
STATE_VERSION = 1


def partition_hash(settings: GraphSettings) -> str:
    data = {"version": PARTITION_VERSION, **settings.model_dump(include=set(PARTITION_SETTINGS))}
    return sha256_hex(json.dumps(data, sort_keys=True).encode("utf-8"))


def table_hash(communities: pl.DataFrame) -> str:
    """Fingerprint of a communities table (numbers and member-derived ids): a state sidecar
    names the table it describes, so a sidecar left beside another table is not trusted."""
    lines = communities.sort("community").select(
        pl.format("{}:{}", pl.col("community"), pl.col("id"))
    )
    return sha256_hex("\n".join(lines.to_series().to_list()).encode("utf-8"))


def _valid_state(state: object) -> bool:
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        return False
    ints = ("base_entities", "added", "removed")
    return all(isinstance(state.get(k), str) for k in ("partition_hash", "table_hash")) and all(
        isinstance(state.get(k), int) and state[k] >= 0 for k in ints
    )


def plan_communities(
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    settings: GraphSettings,
    previous: pl.DataFrame | None,
    state: dict | None,
) -> dict:
    """Whether this run carries the previous communities over, as plain data.

    Why cumulative: a per-run threshold never fires for a corpus that grows 2 % a night, so
    the partition would drift from what Leiden finds without anyone noticing. `state` (the
    sidecar the last run wrote, see `next_state`) counts entities added and removed since the
    last full recompute; the run carries over only if this run's change and the accumulated
    one (over the entity count of that recompute) are both within `incremental_max_change`,
    the partition settings are unchanged and the state describes `previous`.
    `state=None` means "no sidecar" (an index written before it existed): the run carries
    over on its own change, as before, and starts counting. A state that is present but
    unreadable, stale (describes another table) or of other settings recomputes.

    Returns carry_over (bool), reason, run_change and change (fractions), base_entities,
    added, removed (cumulative, this run included) and partition_hash."""
    ids = entities["id"].cast(pl.Utf8).unique().sort()
    eu, ev, _ = _edge_arrays(ids, relationships)
    diff = _diff(ids, eu, ev, previous) if previous is not None else None
    phash = partition_hash(settings)
    plan = {
        "carry_over": False,
        "reason": "",
        "run_change": 0.0,
        "change": 0.0,
        "base_entities": 0,
        "added": 0,
        "removed": 0,
        "partition_hash": phash,
    }
    blocker = _carry_blocker(diff, len(eu), settings)
    if diff is not None:
        plan["run_change"] = (diff.added + diff.removed) / diff.n_prev
        if state is None:
            base, added, removed = diff.n_prev, diff.added, diff.removed
        elif _valid_state(state):
            base = state["base_entities"]
            added, removed = state["added"] + diff.added, state["removed"] + diff.removed
        else:
            base, added, removed = 0, 0, 0
        plan.update(base_entities=base, added=added, removed=removed)
        plan["change"] = (added + removed) / base if base else 1.0
    if blocker is None and state is not None:
        if not _valid_state(state):
            blocker = "state sidecar unreadable"
        elif state["partition_hash"] != phash:
            blocker = "partition settings changed"
        elif previous is not None and state["table_hash"] != table_hash(previous):
            blocker = "state sidecar describes another table"
        elif plan["change"] > settings.incremental_max_change:
            blocker = "cumulative change above incremental_max_change"
    plan["carry_over"] = blocker is None
    plan["reason"] = blocker or ("carried over" if state is not None else "carried over (no state)")
    return plan


def next_state(plan: dict, communities: pl.DataFrame) -> dict:
    """The sidecar to keep beside `communities` (the table this plan produced): the counts
    restart at a full recompute. No run date or mode in it, so an unchanged re-run writes the
    identical state."""
    if plan["carry_over"]:
        base, added, removed = plan["base_entities"], plan["added"], plan["removed"]
    else:
        level0 = communities.filter(pl.col("level") == 0)["entity_ids"].explode().drop_nulls()
        base, added, removed = level0.n_unique(), 0, 0
    return {
        "version": STATE_VERSION,
        "partition_hash": plan["partition_hash"],
        "table_hash": table_hash(communities),
        "base_entities": int(base),
        "added": int(added),
        "removed": int(removed),
    }


def _decode(frame: pl.DataFrame, column: str, names: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its list column `column` of integer codes turned into the ids `names`
    (code, id) gives them, in the same order."""
    return frame.with_columns(
        frame.select(pl.col(column).list.eval(pl.element().cast(pl.Int64)))
        .with_row_index("row")
        .explode(column)
        .join(names, left_on=column, right_on="code", how="left", maintain_order="left")
        .group_by("row", maintain_order=True)
        .agg(pl.col("id").drop_nulls())
        .get_column("id")
        .alias(column)
    )


def hierarchical_leiden(
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    settings: GraphSettings,
    previous: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """communities frame with exactly schemas.COMMUNITIES columns.

    `previous` (the last run's communities table, if any) makes a re-run incremental: see
    `_update_hierarchy`; without it, or after a large change, Leiden runs from scratch. This
    checks only this run's change: a caller that keeps state across runs asks
    `plan_communities` first and passes `previous` only when it says carry_over."""
    ids = entities["id"].cast(pl.Utf8).unique().sort()
    eu, ev, ew = _edge_arrays(ids, relationships)
    diff = _diff(ids, eu, ev, previous) if previous is not None else None
    if diff is not None and _carry_blocker(diff, len(eu), settings) is None:
        head, vmembers = _update_hierarchy(len(ids), eu, ev, ew, diff, settings)
    else:
        comms = _build_hierarchy(len(ids), eu, ev, ew, settings)
        if not comms:
            return empty("communities")
        head, vmembers = _frames_of(comms)

    # A community holds a relationship when it holds both ends, and a text unit when it
    # holds an entity the unit mentions. A vertex is in at most one community per level, so
    # a level is an array vertex -> community and both come from array lookups on integer
    # codes (a relationship's or text unit's rank among the sorted ids, so sorting codes
    # sorts ids), turned back into ids per community at the end. Joining the relationships
    # with every level's membership peaked at +0.4 GB at 40k documents; on strings, +1 GB.
    membership = vmembers.select("community", "v")
    members = membership.group_by("community").agg(
        pl.col("v").sort().alias("entity_ids"), pl.len().cast(pl.Int64).alias("size")
    )
    codes = pl.DataFrame({"id": ids}).with_row_index("v").with_columns(pl.col("v").cast(pl.Int64))
    rels = (
        relationships.select(pl.col("id", "source_id", "target_id").cast(pl.Utf8))
        .with_columns(pl.col("id").rank("dense").cast(pl.Int64).alias("r"))
        .join(codes.rename({"id": "source_id", "v": "su"}), on="source_id")
        .join(codes.rename({"id": "target_id", "v": "tu"}), on="target_id")
    )
    rel_names = rels.select("r", "id").unique("r")
    unit_of = (
        entities.select(pl.col("id").cast(pl.Utf8), "text_unit_ids")
        .join(codes, on="id")
        .select("v", pl.col("text_unit_ids").alias("unit"))
        .explode("unit")
        .drop_nulls("unit")
        .with_columns(pl.col("unit").rank("dense").cast(pl.Int64).alias("u"))
    )
    unit_names = unit_of.select("u", "unit").unique("u")
    su, tu, r = (rels.get_column(c).to_numpy() for c in ("su", "tu", "r"))
    del rels
    uv, uu = unit_of.get_column("v").to_numpy(), unit_of.get_column("u").to_numpy()
    del unit_of
    # a (community, code) pair as one sortable integer: distinct pairs by np.unique
    rw, uw = int(r.max(initial=0)) + 1, int(uu.max(initial=0)) + 1
    rel_keys, unit_keys = [], []
    levels = membership.join(head.select("community", "level"), on="community")
    for level in levels.partition_by("level"):
        if level.get_column("v").is_duplicated().any():
            raise ValueError("a vertex in two communities of one level")
        comm = np.full(len(ids), -1, dtype=np.int64)
        comm[level.get_column("v").to_numpy()] = level.get_column("community").to_numpy()
        cs, ct, cu = comm[su], comm[tu], comm[uv]
        inside, held = (cs >= 0) & (cs == ct), cu >= 0
        rel_keys.append(np.unique(cs[inside] * rw + r[inside]))
        unit_keys.append(np.unique(cu[held] * uw + uu[held]))
    del su, tu, r, uv, uu, levels

    def lists(keys: list[np.ndarray], width: int, name: str) -> pl.DataFrame:
        """community -> its codes (sorted: the keys are), as list column `name`."""
        key = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
        pairs = pl.DataFrame({"community": key // width, "code": key % width})
        return pairs.group_by("community", maintain_order=True).agg(pl.col("code").alias(name))

    rel_ids, units = lists(rel_keys, rw, "relationship_ids"), lists(unit_keys, uw, "text_unit_ids")
    del rel_keys, unit_keys
    members = _decode(members, "entity_ids", codes.select(pl.col("v").alias("code"), "id"))
    rel_ids = _decode(rel_ids, "relationship_ids", rel_names.rename({"r": "code"}))
    units = _decode(units, "text_unit_ids", unit_names.rename({"u": "code", "unit": "id"}))

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
