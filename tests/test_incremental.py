"""Incremental re-runs: stable communities (pure function) and the LLM cost of adding a small
document to an indexed corpus (whole job against the fake server)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import igraph as ig
import polars as pl
import pytest
from conftest import write_llm_config

from app.cli.demo import write_sample_corpus
from app.run import run_index
from pipeline.communities.leiden import hierarchical_leiden, next_state, plan_communities
from pipeline.communities.table import Reuse, reuse_from
from pipeline.config import GraphSettings
from pipeline.ids import stable_id
from pipeline.llm.fake_server import FakeLlm
from pipeline.storage import store

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


def test_kept_lists_equal_the_computed_ones(tmp_path) -> None:
    """A carried-over hierarchy keeps the last table's relationship and text unit lists only
    for communities none of whose members changed (pipeline.communities.table.Reuse): the
    table equals the one computed whole, after new entities, a member's new text unit, and a
    relationship moved between old entities."""
    settings = GraphSettings()
    ents, rels = _graph(12, 30, seed=5)
    full = hierarchical_leiden(ents, rels, settings)
    ents.write_parquet(tmp_path / "entities.parquet")
    rels.write_parquet(tmp_path / "relationships.parquet")
    full.write_parquet(tmp_path / "communities.parquet")
    ents2, rels2 = _graph(12, 30, seed=5, extra=9, extra_seed=1)
    ents2 = ents2.with_columns(
        pl.when(pl.col("title") == "e7")
        .then(pl.col("text_unit_ids").list.concat(pl.lit(["u-new"])))
        .otherwise(pl.col("text_unit_ids"))
    )
    ids = dict(ents2.select("title", "id").iter_rows())
    moved = pl.DataFrame(
        {"id": ["r-moved"], "source_id": [ids["e3"]], "target_id": [ids["e4"]], "weight": [1.0]}
    )
    rels2 = pl.concat([rels2.slice(1), moved])
    whole = hierarchical_leiden(ents2, rels2, settings, previous=full)
    reuse = reuse_from(tmp_path, ents2, rels2, tmp_path)
    kept = hierarchical_leiden(ents2, rels2, settings, previous=full, reuse=reuse)
    assert kept.equals(whole)
    assert 0.5 * whole.height < reuse.kept < whole.height
    # the changed members are what keeps the test honest: keeping every list would differ
    blind = Reuse(reuse.lists, reuse.changed.clear())
    assert not hierarchical_leiden(ents2, rels2, settings, previous=full, reuse=blind).equals(whole)


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


def _run(ents, rels, settings, previous=None, state=None):
    """One run as the communities asset does it: plan, compute, next state."""
    plan = plan_communities(ents, rels, settings, previous, state)
    out = hierarchical_leiden(
        ents, rels, settings, previous=previous if plan["carry_over"] else None
    )
    return out, plan, next_state(plan, out)


def test_small_changes_accumulate_until_a_full_recompute_and_counting_restarts() -> None:
    settings = GraphSettings(incremental_max_change=0.1)
    ents, rels = _graph(12, 30, seed=5)
    table, plan, state = _run(ents, rels, settings)
    assert not plan["carry_over"] and state["base_entities"] == 360
    assert (state["added"], state["removed"]) == (0, 0)
    legacy = table  # the same nights without state: only this run's change is checked
    modes, changes = [], []
    for night in range(1, 7):  # 8 new entities a night: 2.2 % of the graph, 11.1 % by night 5
        ents2, rels2 = _graph(12, 30, seed=5, extra=8 * night, extra_seed=1)
        out, plan, state = _run(ents2, rels2, settings, previous=table, state=state)
        assert plan["run_change"] <= 0.1
        modes.append(plan["carry_over"])
        changes.append(plan["change"])
        _check_valid(out, _linked(rels2))
        if plan["carry_over"]:
            assert set(table["community"]) <= set(out["community"])
            assert (
                state["added"] == plan["added"] and state["base_entities"] == plan["base_entities"]
            )
        else:
            assert plan["reason"].startswith("cumulative change")
            assert out.equals(hierarchical_leiden(ents2, rels2, settings))  # Leiden from scratch
            assert state["base_entities"] == len(_linked(rels2))
            assert (state["added"], state["removed"]) == (0, 0)
        legacy, legacy_plan, _ = _run(ents2, rels2, settings, previous=legacy, state=None)
        assert legacy_plan["carry_over"]  # the drift the cumulative guard exists for
        table = out
    assert modes == [True, True, True, True, False, True]
    assert changes[:5] == pytest.approx([8 / 360, 16 / 360, 24 / 360, 32 / 360, 40 / 360])
    assert changes[5] == pytest.approx(8 / state["base_entities"])  # counting restarted


def test_removals_count_towards_the_cumulative_change() -> None:
    settings = GraphSettings(incremental_max_change=0.1)
    ents, rels = _graph(12, 30, seed=5, extra=24, extra_seed=1)
    table, _, state = _run(ents, rels, settings)
    ents2, rels2 = _graph(12, 30, seed=5, extra=9, extra_seed=1)  # 15 of 384 gone
    _, plan, state = _run(ents2, rels2, settings, previous=table, state=state)
    assert plan["carry_over"] and (state["added"], state["removed"]) == (0, 15)


def test_partition_settings_change_forces_a_recompute() -> None:
    settings = GraphSettings()
    ents, rels = _graph(12, 30, seed=5)
    table, _, state = _run(ents, rels, settings)
    ents2, rels2 = _graph(12, 30, seed=5, extra=3, extra_seed=1)
    for changed in (
        GraphSettings(max_cluster_size=8),
        GraphSettings(seed=7),
        GraphSettings(max_levels=5),
    ):
        out, plan, new_state = _run(ents2, rels2, changed, previous=table, state=state)
        assert not plan["carry_over"] and plan["reason"] == "partition settings changed"
        assert out.equals(hierarchical_leiden(ents2, rels2, changed))
        assert new_state["partition_hash"] != state["partition_hash"]
    # 0 switches the carry-over off, even for an unchanged graph
    off = GraphSettings(incremental_max_change=0.0)
    _, plan, _ = _run(ents, rels, off, previous=table, state=state)
    assert not plan["carry_over"] and plan["reason"] == "incremental_max_change is 0"
    # settings that do not shape the partition keep the carry-over
    loose = GraphSettings(incremental_max_change=0.3, description_max_tokens=99)
    _, plan, new_state = _run(ents2, rels2, loose, previous=table, state=state)
    assert plan["carry_over"] and new_state["partition_hash"] == state["partition_hash"]


def test_missing_unreadable_or_stale_state() -> None:
    settings = GraphSettings()
    ents, rels = _graph(12, 30, seed=5)
    table, _, state = _run(ents, rels, settings)
    ents2, rels2 = _graph(12, 30, seed=5, extra=3, extra_seed=1)
    # no sidecar (an index from before it): carried over on this run's change, counting starts
    out, plan, new_state = _run(ents2, rels2, settings, previous=table, state=None)
    assert plan["carry_over"] and plan["reason"] == "carried over (no state)"
    assert new_state["base_entities"] == 360 and new_state["added"] == 3
    # unreadable, or describing another table (the table write after it never happened)
    for bad, reason in (
        ({}, "state sidecar unreadable"),
        ({**state, "added": -1}, "state sidecar unreadable"),
        ({**state, "table_hash": "0" * 64}, "state sidecar describes another table"),
    ):
        out, plan, new_state = _run(ents2, rels2, settings, previous=table, state=bad)
        assert not plan["carry_over"] and plan["reason"] == reason
        assert out.equals(hierarchical_leiden(ents2, rels2, settings))
        assert (new_state["added"], new_state["removed"]) == (0, 0)


def test_unchanged_input_gives_identical_table_and_state() -> None:
    settings = GraphSettings()
    ents, rels = _graph(12, 30, seed=5)
    table, _, state = _run(ents, rels, settings)
    for _ in range(2):
        again, plan, state2 = _run(ents, rels, settings, previous=table, state=state)
        assert plan["carry_over"] and plan["change"] == 0.0
        assert again.equals(table)
        assert json.dumps(state2, sort_keys=True) == json.dumps(state, sort_keys=True)


def _grow_leaf(n_new: int):
    """A graph, its full table, a small level-1 leaf (3+ members, the smallest) and the graph
    with `n_new` new entities: a clique among themselves, each linked to two members of it."""
    settings = GraphSettings()
    ents, rels = _graph(12, 30, seed=5)
    full = hierarchical_leiden(ents, rels, settings)
    leaf = (
        full.filter(
            (pl.col("level") == 1) & (pl.col("children").list.len() == 0) & (pl.col("size") >= 3)
        )
        .sort("size", "community")
        .row(0, named=True)
    )
    members = sorted(leaf["entity_ids"])
    new = [stable_id("entity", f"g{i}") for i in range(n_new)]
    edges = [(a, b) for i, a in enumerate(new) for b in new[i + 1 :]]
    edges += [(a, members[(2 * i + k) % len(members)]) for i, a in enumerate(new) for k in (0, 1)]
    ents2 = pl.concat(
        [
            ents,
            pl.DataFrame(
                {
                    "id": new,
                    "title": [f"g{i}" for i in range(n_new)],
                    "text_unit_ids": [[f"u-g{i}"] for i in range(n_new)],
                }
            ),
        ]
    )
    rels2 = pl.concat(
        [
            rels,
            pl.DataFrame(
                {
                    "id": [f"rg-{a}-{b}" for a, b in edges],
                    "source_id": [a for a, _ in edges],
                    "target_id": [b for _, b in edges],
                    "weight": [1.0] * len(edges),
                }
            ),
        ]
    )
    return settings, full, leaf, set(new), ents2, rels2


def test_a_leaf_grown_past_max_cluster_size_is_split_and_nothing_else_changes() -> None:
    settings, full, leaf, new, ents2, rels2 = _grow_leaf(8)
    assert leaf["size"] + len(new) > settings.max_cluster_size >= leaf["size"]
    out, plan, _ = _run(ents2, rels2, settings, previous=full, state=None)
    assert plan["carry_over"]
    _check_valid(out, _linked(rels2))
    rows = {r["community"]: r for r in out.iter_rows(named=True)}
    grown = rows[leaf["community"]]
    assert set(grown["entity_ids"]) == set(leaf["entity_ids"]) | new
    assert len(grown["children"]) >= 2  # split into sub-communities at the next level
    top = int(full["community"].max())
    for k in grown["children"]:
        assert k > top and rows[k]["level"] == leaf["level"] + 1
        assert rows[k]["parent"] == leaf["community"] and rows[k]["size"] <= len(
            grown["entity_ids"]
        )
    assert sorted(set(out["community"]) - set(full["community"])) == sorted(grown["children"])
    # ancestors gained the new entities only; every other community is the very same row
    ancestors = set()
    c = leaf["parent"]
    while c != -1:
        ancestors.add(c)
        c = rows[c]["parent"]
    cols = ["community", "level", "parent", "children", "entity_ids", "id", "size"]
    before = full.filter(~pl.col("community").is_in([leaf["community"], *ancestors]))
    assert (
        out.filter(pl.col("community").is_in(before["community"].implode()))
        .select(cols)
        .equals(before.select(cols))
    )
    for a in ancestors:
        old = full.filter(pl.col("community") == a).row(0, named=True)
        assert rows[a]["children"] == old["children"]
        assert set(rows[a]["entity_ids"]) == set(old["entity_ids"]) | new
    # the split is the one the full build makes of those members: Leiden on their subgraph
    inside = set(grown["entity_ids"])
    sub = hierarchical_leiden(
        ents2.filter(pl.col("id").is_in(list(inside))),
        rels2.filter(
            pl.col("source_id").is_in(list(inside)) & pl.col("target_id").is_in(list(inside))
        ),
        settings,
    ).filter(pl.col("level") == 0)
    assert sorted(map(sorted, sub["entity_ids"].to_list())) == sorted(
        sorted(rows[k]["entity_ids"]) for k in grown["children"]
    )
    again, plan2, _ = _run(ents2, rels2, settings, previous=out, state=None)
    assert plan2["carry_over"] and again.equals(out)


def test_a_leaf_still_within_max_cluster_size_gets_no_children() -> None:
    settings, full, leaf, new, ents2, rels2 = _grow_leaf(settings_gap := 1)
    assert leaf["size"] + settings_gap <= settings.max_cluster_size
    out, plan, _ = _run(ents2, rels2, settings, previous=full, state=None)
    assert plan["carry_over"] and set(out["community"]) == set(full["community"])
    assert out.filter(pl.col("community") == leaf["community"])["children"][0].to_list() == []


def _communities_metadata(result) -> dict:
    [event] = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key.path[-1] == "communities"
    ]
    return {k: v.value for k, v in event.materialization.metadata.items()}


def test_asset_keeps_the_state_sidecar_and_reports_the_mode(sample_index, tmp_path) -> None:
    inp, out, result, _ = sample_index
    state_path = store.resolve(out) / "communities_state.json"  # in the published version
    state = json.loads(state_path.read_text(encoding="utf-8"))
    assert state["added"] == state["removed"] == 0
    assert state["base_entities"] == len(
        set(
            store.read_table(out, "communities")
            .filter(pl.col("level") == 0)["entity_ids"]
            .explode()
        )
    )
    meta = _communities_metadata(result)
    assert meta["incremental"] == "recomputed" and meta["cumulative_change"] == 0.0
    # a re-run on unchanged input carries over: identical table, byte-identical sidecar
    again = tmp_path / "again"
    shutil.copytree(out, again)
    rerun = run_index(input_dir=str(inp), output_dir=str(again))
    meta = _communities_metadata(rerun)
    assert meta["incremental"] == "carried_over" and meta["cumulative_change"] == 0.0
    communities = store.read_table(again, "communities")
    assert (meta["rows_carried"], meta["rows_recomputed"]) == (communities.height, 0)
    assert communities.equals(store.read_table(out, "communities"))
    # and every report is kept from the last run (pipeline.communities.reports.reuse_unchanged),
    # as is
    reports = store.read_table(out, "community_reports")
    assert store.read_table(again, "community_reports").equals(reports)
    [event] = [
        e
        for e in rerun.get_asset_materialization_events()
        if e.asset_key.path[-1] == "community_reports"
    ]
    report_meta = {k: v.value for k, v in event.materialization.metadata.items()}
    assert report_meta["reports_kept_unchanged"] == report_meta["rows_carried"] == reports.height
    assert report_meta["rows_recomputed"] == 0
    # their digests carried over too (carry_digests), the evidence sidecars written
    assert report_meta["report_digests_carried"] == reports.height
    assert report_meta["incremental"] == "carried"
    for name in ("community_reports_evidence.parquet", "community_reports_view_rows.parquet"):
        assert (store.resolve(again) / name).exists()
    assert (store.resolve(again) / "communities_state.json").read_bytes() == (
        state_path.read_bytes()
    )
    assert not list(again.rglob("*.tmp"))


def _config(tmp_path: Path, server: FakeLlm) -> str:
    return write_llm_config(tmp_path / "llm.yaml", server.base_url, timeout_s=5.0, max_retries=2)


@pytest.mark.parametrize("name", ["lise_meitner.md"])
def test_adding_a_small_document_costs_few_llm_calls(tmp_path, monkeypatch, name) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
    inp, out = tmp_path / "input", tmp_path / "out"
    write_sample_corpus(inp)
    with FakeLlm(answers="verbose") as server:  # the whole offline graph: communities to report
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
    state = json.loads((store.resolve(out) / "communities_state.json").read_text(encoding="utf-8"))
    assert state["added"] > 0  # carried over, and counted towards the next full recompute
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
