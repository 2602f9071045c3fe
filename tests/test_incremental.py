"""Incremental re-runs: stable communities (pure function) and the LLM cost of adding a small
document to an indexed corpus (whole job against the fake server)."""

from __future__ import annotations

import random
from pathlib import Path

import igraph as ig
import polars as pl
import pytest

from assets.run import run_index
from pipeline import store
from pipeline.cli import write_sample_corpus
from pipeline.communities import hierarchical_leiden
from pipeline.config import GraphSettings
from pipeline.fake_llm import FakeLlm
from pipeline.ids import stable_id

SMALL_DOC = """# Lise Meitner in Berlin

Lise Meitner worked with Otto Hahn at the Kaiser Wilhelm Institute in Berlin, where Max Planck
had supported her first position. Lise Meitner wrote to Niels Bohr in Copenhagen about nuclear
fission in 1939.
"""


def _graph(n_blocks: int, block: int, seed: int, extra: int = 0, extra_seed: int = 0):
    """An SBM entity graph (blocks of `block` entities with dense insides), plus `extra` new
    entities: a few linked to old entities, the rest a chain among themselves."""
    random.seed(seed)
    n = n_blocks * block
    p_in, deg = 0.25, 8.0
    p_out = (deg - p_in * (block - 1)) / (n - block)
    pref = [[p_in if i == j else p_out for j in range(n_blocks)] for i in range(n_blocks)]
    edges = [(f"e{a}", f"e{b}") for a, b in ig.Graph.SBM(pref, [block] * n_blocks).get_edgelist()]
    names = [f"e{i}" for i in range(n)]
    rng = random.Random(extra_seed)
    new = [f"n{i}" for i in range(extra)]
    for i, name in enumerate(new):
        if i % 3 == 2:  # linked only to the previous new entity: joins through it
            edges.append((name, new[i - 1]))
        else:
            edges += [(name, f"e{rng.randrange(n)}"), (name, f"e{rng.randrange(n)}")]
    names += new
    ids = {t: stable_id("entity", t) for t in names}
    ents = pl.DataFrame(
        {
            "id": [ids[t] for t in names],
            "title": names,
            "text_unit_ids": [[f"u-{t}"] for t in names],
        }
    )
    rels = pl.DataFrame(
        {
            "id": [f"r-{a}-{b}" for a, b in edges],
            "source_id": [ids[a] for a, _ in edges],
            "target_id": [ids[b] for _, b in edges],
            "weight": [1.0] * len(edges),
        }
    )
    return ents, rels


def _members(df: pl.DataFrame) -> dict[int, set[str]]:
    return {c: set(e) for c, e in df.select("community", "entity_ids").iter_rows()}


def _check_valid(out: pl.DataFrame, linked: set[str]) -> None:
    """Hierarchy invariants that hold for incremental tables too (numbering may have gaps)."""
    rows = {r["community"]: r for r in out.iter_rows(named=True)}
    members = _members(out)
    assert out["community"].n_unique() == out.height == out["id"].n_unique()
    assert out["human_readable_id"].to_list() == out["community"].to_list()
    assert out["community"].to_list() == sorted(out["community"].to_list())
    for c, r in rows.items():
        assert r["size"] == len(r["entity_ids"]) >= 1
        if r["parent"] != -1:
            assert rows[r["parent"]]["level"] == r["level"] - 1
            assert c in rows[r["parent"]]["children"]
        if r["children"]:
            kids = [members[k] for k in r["children"]]
            assert set().union(*kids) == members[c]  # children partition their parent
            assert sum(len(k) for k in kids) == len(members[c])
    for level in range(out["level"].max() + 1):
        at = [members[c] for c, r in rows.items() if r["level"] == level]
        assert sum(len(m) for m in at) == len(set().union(*at))
    level0 = set().union(*[members[c] for c, r in rows.items() if r["level"] == 0])
    assert level0 == linked


def _linked(rels: pl.DataFrame) -> set[str]:
    return set(rels["source_id"]) | set(rels["target_id"])


def test_unchanged_graph_gives_the_identical_table() -> None:
    ents, rels = _graph(12, 30, seed=5)
    full = hierarchical_leiden(ents, rels, GraphSettings())
    assert full["level"].max() >= 1
    again = hierarchical_leiden(ents, rels, GraphSettings(), previous=full)
    assert again.equals(full)
    # an empty previous table means "no previous run"
    empty_prev = full.clear()
    assert hierarchical_leiden(ents, rels, GraphSettings(), previous=empty_prev).equals(full)


def test_small_addition_keeps_communities_and_places_new_entities() -> None:
    settings = GraphSettings()
    ents, rels = _graph(12, 30, seed=5)
    full = hierarchical_leiden(ents, rels, settings)
    ents2, rels2 = _graph(12, 30, seed=5, extra=9, extra_seed=1)  # 9 new of 360: 2.5 %
    inc = hierarchical_leiden(ents2, rels2, settings, previous=full)
    _check_valid(inc, _linked(rels2))

    before, after = _members(full), _members(inc)
    new_ids = set(ents2["id"]) - set(ents["id"])
    # every old community survives with its old members (plus new entities only), same level
    for c, m in before.items():
        assert c in after and after[c] - m <= new_ids and m <= after[c], c
    levels = dict(full.select("community", "level").iter_rows())
    assert (
        dict(
            inc.filter(pl.col("community").is_in(list(before)))
            .select("community", "level")
            .iter_rows()
        )
        == levels
    )
    # communities that did not gain a member keep their id; most of them are untouched
    ids_before = dict(full.select("community", "id").iter_rows())
    ids_after = dict(inc.select("community", "id").iter_rows())
    untouched = [c for c in before if after[c] == before[c]]
    assert all(ids_after[c] == ids_before[c] for c in untouched)
    assert len(untouched) >= 0.7 * len(before)
    # a from-scratch Leiden on the same graph would have moved many more entities
    scratch = hierarchical_leiden(ents2, rels2, settings)
    assert _check_valid(scratch, _linked(rels2)) is None
    # new entities: each one in a level-0 community with one of its neighbours
    level0 = {
        e: c
        for c, es in inc.filter(pl.col("level") == 0).select("community", "entity_ids").iter_rows()
        for e in es
    }
    nbrs: dict[str, set[str]] = {}
    for s, t in rels2.select("source_id", "target_id").iter_rows():
        nbrs.setdefault(s, set()).add(t)
        nbrs.setdefault(t, set()).add(s)
    for e in new_ids:
        assert any(level0[e] == level0[x] for x in nbrs[e]), e


def test_new_entities_linked_only_to_each_other_form_new_communities() -> None:
    settings = GraphSettings()
    ents, rels = _graph(6, 20, seed=3)
    full = hierarchical_leiden(ents, rels, settings)
    isolated = [stable_id("entity", t) for t in ("x1", "x2", "x3")]
    ents2 = pl.concat(
        [
            ents,
            pl.DataFrame(
                {"id": isolated, "title": ["x1", "x2", "x3"], "text_unit_ids": [["ux"]] * 3}
            ),
        ]
    )
    rels2 = pl.concat(
        [
            rels,
            pl.DataFrame(
                {
                    "id": ["rx1", "rx2"],
                    "source_id": isolated[:2],
                    "target_id": isolated[1:],
                    "weight": [1.0, 1.0],
                }
            ),
        ]
    )
    inc = hierarchical_leiden(ents2, rels2, settings, previous=full)
    _check_valid(inc, _linked(rels2))
    top = full["community"].max()
    fresh = inc.filter(pl.col("community") > top)
    assert fresh.height == 1 and set(fresh["entity_ids"][0]) == set(isolated)
    assert fresh["level"][0] == 0 and fresh["parent"][0] == -1
    assert inc.filter(pl.col("community") <= top).equals(full)


def test_removed_entities_leave_and_empty_communities_vanish() -> None:
    settings = GraphSettings()
    ents, rels = _graph(12, 30, seed=5)
    full = hierarchical_leiden(ents, rels, settings)
    # the smallest deepest community disappears with all its entities (a few % of the graph)
    leaf = (
        full.filter(pl.col("level") == full["level"].max())
        .sort("size", "community")
        .row(0, named=True)
    )
    gone = set(leaf["entity_ids"])
    assert len(gone) <= 0.1 * ents.height
    ents2 = ents.filter(~pl.col("id").is_in(list(gone)))
    rels2 = rels.filter(
        ~pl.col("source_id").is_in(list(gone)) & ~pl.col("target_id").is_in(list(gone))
    )
    inc = hierarchical_leiden(ents2, rels2, settings, previous=full)
    _check_valid(inc, _linked(rels2))
    assert leaf["community"] not in set(inc["community"])
    parent = inc.filter(pl.col("community") == leaf["parent"])
    assert leaf["community"] not in parent["children"][0]
    assert not gone & set(inc["entity_ids"].explode())


def test_large_change_recomputes_from_scratch() -> None:
    settings = GraphSettings(incremental_max_change=0.1)
    ents, rels = _graph(12, 30, seed=5)
    full = hierarchical_leiden(ents, rels, settings)
    ents2, rels2 = _graph(12, 30, seed=5, extra=60, extra_seed=2)  # 60 new of 360: 17 %
    inc = hierarchical_leiden(ents2, rels2, settings, previous=full)
    assert inc.equals(hierarchical_leiden(ents2, rels2, settings))
    # the same change under a looser threshold is carried over instead
    loose = GraphSettings(incremental_max_change=0.5)
    kept = hierarchical_leiden(ents2, rels2, loose, previous=full)
    assert not kept.equals(inc)
    assert set(full["community"]) <= set(kept["community"])
    _check_valid(kept, _linked(rels2))


def _config(tmp_path: Path, server: FakeLlm) -> str:
    path = tmp_path / "llm.yaml"
    path.write_text(
        "llm:\n"
        "  enabled: true\n"
        f"  base_url: {server.base_url}\n"
        "  chat_model: fake-model\n"
        "  timeout_s: 5.0\n"
        "  max_retries: 2\n",
        encoding="utf-8",
    )
    return str(path)


@pytest.mark.parametrize("name", ["lise_meitner.md"])
def test_adding_a_small_document_costs_few_llm_calls(tmp_path, monkeypatch, name) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
    inp, out = tmp_path / "input", tmp_path / "out"
    write_sample_corpus(inp)
    with FakeLlm() as server:
        config = _config(tmp_path, server)
        assert run_index(config_path=config, input_dir=str(inp), output_dir=str(out)).success
        assert server.by_stage.get("report", 0) > 0
        before = store.read_table(out, "communities")
        (inp / name).write_text(SMALL_DOC, encoding="utf-8")
        server.reset_counters()
        assert run_index(config_path=config, input_dir=str(inp), output_dir=str(out)).success
        by_stage = dict(server.by_stage)
        assert by_stage.get("extract", 0) == 1, by_stage
        assert server.requests <= 5, by_stage
    after = store.read_table(out, "communities")
    assert "Lise Meitner" in set(store.read_table(out, "entities")["title"])
    # kept communities keep their numbers, levels and (if their members are unchanged) ids
    old = {r["community"]: r for r in before.iter_rows(named=True)}
    new = {r["community"]: r for r in after.iter_rows(named=True)}
    assert set(old) <= set(new)
    for c, r in old.items():
        assert new[c]["level"] == r["level"]
        assert set(r["entity_ids"]) <= set(new[c]["entity_ids"])
        if new[c]["entity_ids"] == r["entity_ids"]:
            assert new[c]["id"] == r["id"]
    unchanged = sum(new[c]["entity_ids"] == r["entity_ids"] for c, r in old.items())
    assert unchanged >= len(old) // 2
