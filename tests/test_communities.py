"""Hierarchical Leiden: tiny hand-made graphs, hierarchy invariants and recovery on SBM graphs."""

from __future__ import annotations

import random
import time

import igraph as ig
import numpy as np
import polars as pl
import pytest

from pipeline.communities.hierarchy import leiden_membership
from pipeline.communities.leiden import hierarchical_leiden
from pipeline.config import GraphSettings
from pipeline.ids import stable_id
from pipeline.schemas import TABLES, conform


def _frames(
    n: int, edges: list[tuple[int, int]], weights: list[float] | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Entities e000.. (one text unit per entity) and relationships r0.. over vertex indices."""
    ids = [stable_id("entity", f"e{i:05d}") for i in range(n)]
    entities = pl.DataFrame(
        {
            "id": ids,
            "human_readable_id": list(range(n)),
            "title": [f"E{i}" for i in range(n)],
            "type": ["THING"] * n,
            "description": [""] * n,
            "text_unit_ids": [[f"u{i // 2}"] for i in range(n)],
            "frequency": [1] * n,
            "degree": [0] * n,
        }
    )
    relationships = pl.DataFrame(
        {
            "id": [f"r{k}" for k in range(len(edges))],
            "human_readable_id": list(range(len(edges))),
            "source_id": [ids[a] for a, _ in edges],
            "target_id": [ids[b] for _, b in edges],
            "weight": weights if weights is not None else [1.0] * len(edges),
        },
        schema_overrides={"weight": pl.Float64},
    )
    return entities, relationships


def _sbm(n_blocks: int, block: int, deg: float, p_in: float, seed: int):
    random.seed(seed)  # igraph's generators draw from Python's `random`
    n = n_blocks * block
    p_out = (deg - p_in * (block - 1)) / (n - block)
    pref = [[p_in if i == j else p_out for j in range(n_blocks)] for i in range(n_blocks)]
    g = ig.Graph.SBM(pref, [block] * n_blocks)
    ents, rels = _frames(n, g.get_edgelist())
    return ents, rels, np.repeat(np.arange(n_blocks), block)


def _sets(df: pl.DataFrame) -> dict[int, set[str]]:
    return dict(zip(df["community"].to_list(), map(set, df["entity_ids"].to_list()), strict=True))


def test_two_triangles_joined_by_one_edge() -> None:
    ents, rels = _frames(7, [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (2, 3)])
    out = hierarchical_leiden(ents, rels, GraphSettings())
    assert out.columns == TABLES["communities"].names
    conform(out, "communities")  # types castable to the declared schema
    ids = ents["id"].to_list()
    assert out["level"].to_list() == [0, 0]
    assert out["parent"].to_list() == [-1, -1]
    assert out["children"].to_list() == [[], []]
    assert out["community"].to_list() == [0, 1]
    assert out["human_readable_id"].to_list() == [0, 1]
    assert set(map(frozenset, out["entity_ids"].to_list())) == {
        frozenset(ids[:3]),
        frozenset(ids[3:6]),
    }
    # numbered by smallest member id; lists sorted
    firsts = [m[0] for m in out["entity_ids"].to_list()]
    assert firsts == sorted(firsts)
    assert all(m == sorted(m) for m in out["entity_ids"].to_list())
    # internal relationships only: the bridge r6 belongs to neither community
    by_first = {
        tuple(m): set(r)
        for m, r in zip(out["entity_ids"].to_list(), out["relationship_ids"].to_list(), strict=True)
    }
    assert by_first[tuple(sorted(ids[:3]))] == {"r0", "r1", "r2"}
    assert by_first[tuple(sorted(ids[3:6]))] == {"r3", "r4", "r5"}
    units = dict(
        zip(map(tuple, out["entity_ids"].to_list()), out["text_unit_ids"].to_list(), strict=True)
    )
    assert units[tuple(sorted(ids[:3]))] == ["u0", "u1"]
    assert units[tuple(sorted(ids[3:6]))] == ["u1", "u2"]
    assert out["size"].to_list() == [3, 3]
    assert out["title"].to_list() == ["Community 0", "Community 1"]
    assert out["period"].to_list() == ["", ""]
    for row in out.iter_rows(named=True):
        want = stable_id("community", str(row["level"]), ",".join(row["entity_ids"]))
        assert row["id"] == want
    # entity 6 has no relationship: in no community
    assert ids[6] not in {e for m in out["entity_ids"] for e in m}


def test_isolated_entities_and_small_components() -> None:
    # a triangle, a separate pair, an isolated node, a self loop, and a dangling relationship
    ents, rels = _frames(7, [(0, 1), (1, 2), (0, 2), (3, 4), (5, 5)])
    rels = pl.concat(
        [
            rels,
            pl.DataFrame(
                {
                    "id": ["r_dangling"],
                    "human_readable_id": [99],
                    "source_id": [ents["id"][6]],
                    "target_id": ["not-an-entity"],
                    "weight": [1.0],
                }
            ),
        ]
    )
    out = hierarchical_leiden(ents, rels, GraphSettings())
    ids = ents["id"].to_list()
    members = sorted(map(frozenset, out["entity_ids"].to_list()), key=len)
    assert members == [frozenset(ids[3:5]), frozenset(ids[:3])]
    covered = {e for m in out["entity_ids"] for e in m}
    assert not covered & {ids[5], ids[6]}  # self loop only / dangling only = isolated


def test_no_relationships_gives_empty_frame_with_schema() -> None:
    ents, rels = _frames(4, [])
    out = hierarchical_leiden(ents, rels, GraphSettings())
    assert out.is_empty()
    assert out.columns == TABLES["communities"].names


def _check_hierarchy(out: pl.DataFrame, all_linked: set[str], settings: GraphSettings) -> None:
    n = len(out)
    assert out["community"].to_list() == list(range(n))
    assert out["human_readable_id"].to_list() == list(range(n))
    assert out["id"].n_unique() == n
    rows = {r["community"]: r for r in out.iter_rows(named=True)}
    members = _sets(out)
    assert out["level"].max() < settings.max_levels
    # numbering: by level, then smallest member id
    keys = [(r["level"], r["entity_ids"][0]) for r in rows.values()]
    assert keys == sorted(keys)
    for c, r in rows.items():
        assert r["size"] == len(r["entity_ids"]) >= 1
        if r["level"] == 0:
            assert r["parent"] == -1
        else:
            p = rows[r["parent"]]
            assert p["level"] == r["level"] - 1
            assert c in p["children"]
            assert members[c] <= members[r["parent"]]
        if r["children"]:
            assert len(r["children"]) >= 2
            assert r["size"] > settings.max_cluster_size
            kids = [members[k] for k in r["children"]]
            assert set().union(*kids) == members[c]  # children partition their parent
            assert sum(len(k) for k in kids) == len(members[c])
            assert all(rows[k]["parent"] == c for k in r["children"])
    for level in range(out["level"].max() + 1):
        at = [members[c] for c, r in rows.items() if r["level"] == level]
        assert sum(len(m) for m in at) == len(set().union(*at))  # disjoint at each level
    level0 = set().union(*[members[c] for c, r in rows.items() if r["level"] == 0])
    assert level0 == all_linked


def _splittable(members: set[str], ents: pl.DataFrame, rels: pl.DataFrame, seed: int) -> bool:
    """Would Leiden split this community's induced subgraph?"""
    ids = sorted(members)
    index = {e: i for i, e in enumerate(ids)}
    pairs = sorted(
        {
            (min(index[s], index[t]), max(index[s], index[t]))
            for s, t in zip(rels["source_id"], rels["target_id"], strict=True)
            if s in index and t in index and s != t
        }
    )
    g = ig.Graph(n=len(ids), edges=pairs)
    return len(set(leiden_membership(g, np.ones(len(pairs)), seed))) > 1


def test_sbm_hierarchy_invariants_and_block_recovery() -> None:
    settings = GraphSettings()
    ents, rels, block = _sbm(n_blocks=60, block=8, deg=6.0, p_in=0.7, seed=3)
    out = hierarchical_leiden(ents, rels, settings)
    linked = set(rels["source_id"]) | set(rels["target_id"])
    _check_hierarchy(out, linked, settings)

    # leaves (no children) larger than max_cluster_size must be unsplittable or at max depth
    for r in out.filter(pl.col("children").list.len() == 0).iter_rows(named=True):
        if r["size"] > settings.max_cluster_size and r["level"] < settings.max_levels - 1:
            assert not _splittable(set(r["entity_ids"]), ents, rels, settings.seed)

    # deepest community per entity = its leaf partition; blocks (size 8) must be recovered
    index = {e: i for i, e in enumerate(ents["id"].to_list())}
    leaf = (
        out.select("community", "level", "entity_ids")
        .explode("entity_ids")
        .sort("level")
        .group_by("entity_ids")
        .agg(pl.col("community").last())
    )
    labels = np.full(len(ents), -1)
    for e, c in leaf.iter_rows():
        labels[index[e]] = c
    assert (labels >= 0).all()
    purity = sum(np.bincount(block[labels == c]).max() for c in np.unique(labels)) / len(labels)
    inverse = sum(np.bincount(labels[block == b]).max() for b in np.unique(block)) / len(block)
    assert purity > 0.9 and inverse > 0.9, (purity, inverse)
    nmi = ig.compare_communities(labels.tolist(), block.tolist(), method="nmi")
    assert nmi > 0.9


def test_large_communities_are_split_to_max_size() -> None:
    # blocks of 30 with dense cores: level 0 ~ blocks, deeper levels split them below 10
    settings = GraphSettings(max_cluster_size=10)
    ents, rels, _ = _sbm(n_blocks=12, block=30, deg=8.0, p_in=0.25, seed=5)
    out = hierarchical_leiden(ents, rels, settings)
    linked = set(rels["source_id"]) | set(rels["target_id"])
    _check_hierarchy(out, linked, settings)
    assert out["level"].max() >= 1
    assert (out.filter(pl.col("level") == 0)["size"] > settings.max_cluster_size).any()
    for r in out.filter(pl.col("children").list.len() == 0).iter_rows(named=True):
        if r["size"] > settings.max_cluster_size and r["level"] < settings.max_levels - 1:
            assert not _splittable(set(r["entity_ids"]), ents, rels, settings.seed)


def test_max_levels_bounds_depth() -> None:
    ents, rels, _ = _sbm(n_blocks=12, block=30, deg=8.0, p_in=0.25, seed=5)
    one = hierarchical_leiden(ents, rels, GraphSettings(max_levels=1))
    assert one["level"].unique().to_list() == [0]
    assert one["children"].list.len().sum() == 0
    deep = hierarchical_leiden(ents, rels, GraphSettings(max_levels=4))
    assert (
        deep.filter(pl.col("level") == 0).drop("children").equals(one.drop("children"))
    )  # deeper levels never change the top level


def test_deterministic_and_independent_of_input_order() -> None:
    ents, rels, _ = _sbm(n_blocks=30, block=12, deg=6.0, p_in=0.5, seed=7)
    settings = GraphSettings()
    a = hierarchical_leiden(ents, rels, settings)
    b = hierarchical_leiden(ents, rels, settings)
    assert a.equals(b)
    # shuffled rows and reversed edge directions describe the same graph
    shuffled_rels = rels.sample(fraction=1.0, shuffle=True, seed=1)
    flipped = shuffled_rels.with_columns(
        pl.col("target_id").alias("source_id"), pl.col("source_id").alias("target_id")
    )
    c = hierarchical_leiden(ents.sample(fraction=1.0, shuffle=True, seed=2), flipped, settings)
    assert a.equals(c)
    # a different seed is allowed to differ, but must still be a valid hierarchy
    d = hierarchical_leiden(ents, rels, GraphSettings(seed=11))
    _check_hierarchy(d, set(rels["source_id"]) | set(rels["target_id"]), settings)


def test_parallel_edges_merge_weights() -> None:
    # 0-1 is strong only when its three parallel/reversed rows are summed
    edges = [(0, 1), (1, 0), (0, 1), (1, 2), (2, 3), (3, 0)]
    ents, rels = _frames(4, edges, [1.0, 1.0, 1.0, 1.0, 5.0, 1.0])
    out = hierarchical_leiden(ents, rels, GraphSettings())
    ids = ents["id"].to_list()
    groups = set(map(frozenset, out["entity_ids"].to_list()))
    assert groups == {frozenset(ids[:2]), frozenset(ids[2:])}
    rel_sets = {
        frozenset(m): set(r)
        for m, r in zip(out["entity_ids"].to_list(), out["relationship_ids"].to_list(), strict=True)
    }
    assert rel_sets[frozenset(ids[:2])] == {"r0", "r1", "r2"}


@pytest.mark.slow
def test_scale_20k_entities_100k_relationships() -> None:
    ents, rels, block = _sbm(n_blocks=1000, block=20, deg=10.0, p_in=0.4, seed=1)
    assert len(ents) == 20_000 and 95_000 < len(rels) < 105_000
    start = time.perf_counter()
    out = hierarchical_leiden(ents, rels, GraphSettings())
    elapsed = time.perf_counter() - start
    assert elapsed < 15, elapsed  # measured ~3 s on 2 cores
    # level 0 merges blocks (modularity's resolution limit); level 1 recovers them
    index = {e: i for i, e in enumerate(ents["id"].to_list())}
    level1 = out.filter(pl.col("level") == 1)
    good = sum(
        np.bincount(block[[index[e] for e in m]]).max() for m in level1["entity_ids"].to_list()
    )
    assert good / level1["size"].sum() > 0.95
