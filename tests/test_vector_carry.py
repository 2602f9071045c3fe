"""Vector tables carried over (issue 49): after edits, additions and deletions an incremental
run rewrites only the Lance rows that changed, and its tables equal the ones a whole build
makes from the same tables (ids, stored columns, vectors, vector and full-text search); the
deleted text is in no file of the new version, and the published version it started from
keeps every byte of its files (they are hard links in the run's folder).

Tables are cut in tiny fragments here (lance_write.FRAGMENT_ROWS) so that a few dozen
documents make many fragments and index segments, as a large corpus does."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import lancedb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import DagsterEventType

from app.run import run_index
from pipeline.storage import store, validate
from pipeline.vectors import carry_over, held_rows, lance_write
from pipeline.vectors.build_tables import VECTOR_TABLES, build_vector_tables_at_once

FIRST = ["Alice", "Bruno", "Clara", "Diego", "Elena", "Felix", "Greta", "Hugo", "Irene"]
LAST = ["Abbott", "Brenner", "Castillo", "Dunmore", "Eriksen", "Fairfax", "Gallagher"]
TOWNS = ["Aberdeen", "Bergen", "Coimbra", "Dresden", "Eindhoven", "Florence", "Granada",
         "Heidelberg", "Innsbruck", "Jena", "Kraków", "Leiden", "Mainz", "Nantes", "Oslo",
         "Porto", "Quimper", "Rostock", "Salamanca", "Toledo", "Utrecht", "Verona", "Weimar",
         "Ypres", "Zagreb", "Antwerp", "Bologna", "Cádiz", "Delft", "Erfurt", "Ghent",
         "Haarlem", "Lyon", "Marseille", "Naples", "Padua", "Riga", "Siena", "Turin",
         "Uppsala", "Valencia", "Vienna", "Zurich", "Bruges", "Seville"]  # fmt: skip
HUBS = ["London", "Paris", "Berlin"]  # shared: in every third document each
SECRET = "Quokkaville"  # only in the document that is deleted
FARADAY = " Faraday lectured at the Royal Institution."  # added to a note


def _doc(i: int, extra: str = "") -> str:
    """A note whose people and town are its own (most entities belong to one document, as in
    a real corpus), and one of three capitals that many notes share."""
    a = f"{FIRST[i % 9]} {LAST[i % 7]}"
    b = f"{FIRST[(i + 4) % 9]} {LAST[(i + 3) % 7]}"
    town, hub = TOWNS[i % len(TOWNS)], HUBS[i % 3]
    return (
        f"# Note {i}\n\n{a} met {b} in {town} in {1800 + i}. {a} wrote to {b} from {hub} "
        f"about the observatory of {town}.\n\nLater {b} visited {hub} with {a}.{extra}\n"
    )


def _outcomes(result) -> dict[str, dict]:
    out = {}
    for event in result.all_events:
        if event.event_type != DagsterEventType.ASSET_MATERIALIZATION:
            continue
        mat = event.event_specific_data.materialization
        name = mat.asset_key.path[-1]
        if name.endswith("_vectors"):
            out[name.removesuffix("_vectors")] = {k: v.value for k, v in mat.metadata.items()}
    return out


def _file_hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _holds(folder: Path, word: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and word.encode() in p.read_bytes()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A base index, then two incremental runs (edits, a deletion, additions), with the
    facts each test checks collected along the way."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lance_write, "FRAGMENT_ROWS", 4)
        mp.setattr(lance_write, "MERGE_SMALL", 3)
        # every table carried over however much changed: the mechanics under test here
        mp.setattr(carry_over, "WHOLE_SHARE", 100.0)
        # fragments of 4 rows: any deleted row passes the share; held wherever allowed
        mp.setattr(lance_write, "HOLD_SHARE", 1.0)
        base = tmp_path_factory.mktemp("carry")
        inp, out = base / "in", base / "out"
        inp.mkdir()
        for i in range(40):
            (inp / f"note{i:02d}.md").write_text(_doc(i))
        (inp / "secret.md").write_text(_doc(44, f" The {SECRET} Society met in {SECRET}."))
        config = base / "docgraph.yaml"
        config.write_text("storage:\n  shards: 16\n")  # most shards unchanged by a run

        def run():
            result = run_index(str(config), str(inp), str(out), log_level="ERROR")
            assert result.success
            return _outcomes(result)

        facts = {"first": run(), "out": out, "config": config, "inp": inp}
        first_version = store.resolve(out)
        facts["base_lance"] = first_version / store.LANCE_DIR
        facts["base_before"] = _file_hashes(facts["base_lance"])
        facts["secret_in_base"] = _holds(facts["base_lance"], SECRET)

        (inp / "note03.md").write_text(_doc(3, FARADAY))
        (inp / "note11.md").write_text(_doc(11).replace("observatory", "museum"))
        (inp / "secret.md").unlink()
        (inp / "added1.md").write_text(_doc(45, " Somerville translated Laplace in Kew."))
        facts["second"] = run()
        facts["base_after"] = _file_hashes(facts["base_lance"])
        facts["second_lance"] = store.resolve(out) / store.LANCE_DIR

        (inp / "note20.md").write_text(_doc(20, " Turing ran the Pilot ACE at Teddington."))
        # note03 grew in the second run (its rows were held); now its town leaves it
        (inp / "note03.md").write_text(_doc(3, FARADAY).replace(TOWNS[3], "Dover"))
        (inp / "note30.md").unlink()
        (inp / "added2.md").write_text(_doc(46))
        facts["third"] = run()
        facts["third_lance"] = store.resolve(out) / store.LANCE_DIR
    return facts


def test_the_runs_carry_rows_over(runs):
    assert all(o["incremental"] == "whole" for o in runs["first"].values())
    for key in ("second", "third"):
        outcomes = runs[key]
        assert set(outcomes) == set(VECTOR_TABLES)
        carried = [n for n, o in outcomes.items() if o["incremental"] == "carried"]
        assert set(carried) == set(VECTOR_TABLES), (key, outcomes)
        for name in carried:
            o = outcomes[name]
            assert o["rows_carried"] > 0 and o["rows_recomputed"] > 0, (key, name, o)
            assert o["rows_carried"] + o["rows_recomputed"] == o["rows"]


def test_the_published_version_keeps_its_bytes(runs):
    assert runs["base_before"] == runs["base_after"]
    assert runs["base_before"]  # its Lance files were there to compare


def test_the_deleted_text_is_in_no_file_of_the_new_version(runs):
    assert runs["secret_in_base"]  # the check sees the text where it is
    assert _holds(runs["second_lance"], SECRET) == []
    for name in VECTOR_TABLES:
        table = lancedb.connect(str(runs["second_lance"])).open_table(name)
        assert len(table.list_versions()) == 1, name


def test_held_rows_leave_with_the_text_they_were_made_from(runs):
    """The third run deletes note 30 with rows held since the second: the note's town is in
    no file of the version it makes."""
    assert _holds(runs["second_lance"], "Ghent")
    assert _holds(runs["third_lance"], "Ghent") == []


def test_rows_held_after_an_addition_leave_when_their_text_does(runs):
    """The second run only added to note03 (the rows made from it held, its text still in
    the file); the third takes its town out of it: the town is in no file of the version
    it makes."""
    assert _holds(runs["second_lance"], TOWNS[3])
    assert _holds(runs["third_lance"], TOWNS[3]) == []


def _rows(lance_dir: Path, name: str) -> pl.DataFrame:
    table = lancedb.connect(str(lance_dir)).open_table(name).to_arrow()
    return pl.from_arrow(table.drop_columns(["created_at"])).sort("id")


@pytest.fixture(scope="module")
def rebuilt(runs, tmp_path_factory):
    """The last version's Lance tables built whole from its own tables."""
    from resources import DocgraphConfig, EmbedderResource

    out = runs["out"]
    copy = tmp_path_factory.mktemp("whole") / "v"
    shutil.copytree(store.resolve(out), copy)
    config = DocgraphConfig(
        config_path=str(runs["config"]), input_dir=str(runs["inp"]), output_dir=str(out)
    )
    embedder = EmbedderResource(config=config).get()
    settings = config.settings().embedding
    done = dict(build_vector_tables_at_once(copy, VECTOR_TABLES, embedder, settings))
    assert set(done) == set(VECTOR_TABLES)
    return copy / store.LANCE_DIR


def test_carried_tables_equal_whole_ones(runs, rebuilt):
    carried = store.resolve(runs["out"]) / store.LANCE_DIR
    for name in VECTOR_TABLES:
        ours, whole = _rows(carried, name), _rows(rebuilt, name)
        assert ours.height == whole.height > 0, name
        assert ours.drop("vector").equals(whole.drop("vector")), name
        a, b = (np.stack(t["vector"].to_numpy()) for t in (ours, whole))
        assert np.array_equal(a, b), (name, float(np.abs(a - b).max()))  # to the bit
    assert validate.lance_problems(runs["out"]) == []


def test_carried_tables_equal_a_full_index_of_the_same_folder(runs, tmp_path_factory):
    """A fresh index of the same input folder: the same rows, to the bit (the reports follow
    the communities, which a full index may number otherwise: the carry-over policy)."""
    out = tmp_path_factory.mktemp("full") / "out"
    assert run_index(str(runs["config"]), str(runs["inp"]), str(out), log_level="ERROR").success
    carried, full = (store.resolve(o) / store.LANCE_DIR for o in (runs["out"], out))
    for name in ("text_units", "content_nodes", "entities", "relationships"):
        ours, theirs = _rows(carried, name), _rows(full, name)
        assert ours.height == theirs.height > 0, name
        assert ours.equals(theirs), name


def _held(lance_dir: Path, name: str) -> bool:
    """Whether a fragment of the table holds deleted rows (pipeline.vectors.held_rows)."""
    import lance

    frags = lance.dataset(str(lance_write.table_dir(lance_dir, name))).get_fragments()
    return any(f.metadata.deletion_file for f in frags)


def test_carried_tables_search_as_whole_ones(runs, rebuilt):
    """The same hits, and the same BM25 scores but where a fragment holds deleted rows
    (its segment's statistics count them until it is compacted)."""
    carried = store.resolve(runs["out"]) / store.LANCE_DIR
    held = {name for name in VECTOR_TABLES if _held(carried, name)}
    assert held and held <= set(held_rows.HOLD_TABLES)  # the runs left some held
    for name in VECTOR_TABLES:
        ours = lancedb.connect(str(carried)).open_table(name)
        whole = lancedb.connect(str(rebuilt)).open_table(name)
        probes = _rows(rebuilt, name).head(3)
        for vector in probes["vector"].to_list():
            hits = [t.search(vector).limit(5).select(["id"]).to_list() for t in (ours, whole)]
            assert [h["id"] for h in hits[0]] == [h["id"] for h in hits[1]], name
        for word in ("Faraday", "Royal Institution", "London", "Teddington", "observatory"):
            hits = [
                t.search(word, query_type="fts").limit(10_000).select(["id"]).to_list()
                for t in (ours, whole)
            ]
            scored = [sorted((round(h["_score"], 4), h["id"]) for h in found) for found in hits]
            if name in held:
                scored = [sorted(i for _, i in found) for found in scored]
            assert scored[0] == scored[1], (name, word)  # every hit, its BM25 score the same


def test_the_graphrag_alias_and_query_copies_follow_the_new_version(runs):
    from pipeline.compat.lance_names import GRAPHRAG_NAMES
    from pipeline.vectors import vector_copies
    from pipeline.vectors.lance import read_vectors

    version = store.resolve(runs["out"])
    lance_dir = version / store.LANCE_DIR
    for name, alias in GRAPHRAG_NAMES.items():
        assert _rows(lance_dir, alias).equals(_rows(lance_dir, name)), alias
    vector_copies.copy_table(version, "entities")
    ids, matrix = read_vectors(runs["out"], "entities")
    table = _rows(lance_dir, "entities")
    got = pl.DataFrame({"id": ids, "vector": list(matrix)}).sort("id")
    assert got["id"].equals(table["id"])
    assert np.array_equal(np.stack(got["vector"].to_numpy()), np.stack(table["vector"].to_numpy()))


def test_the_embedding_cache_keeps_the_vectors_of_carried_rows(runs):
    """The cache's sweep keeps the vectors runs used: a run that carries a text unit over
    records its vector as used, or a later whole write would embed the corpus again."""
    from pipeline.vectors.embed import cache_key
    from pipeline.vectors.texts import embedding_text
    from resources import DocgraphConfig, EmbedderResource

    out = runs["out"]
    config = DocgraphConfig(
        config_path=str(runs["config"]), input_dir=str(runs["inp"]), output_dir=str(out)
    )
    embedder = EmbedderResource(config=config).get()
    units = store.read_table(out, "text_units")
    keys = {cache_key(embedder.model_id, t) for t in embedding_text("text_units", units)}
    found = embedder._lookup(pl.DataFrame({"key": sorted(keys)}))
    assert found.height == len(keys) > 0


# ---------------------------------------------------------------- the parts, on small tables


def _table(ids: list[str], words: list[str], seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(3, 9)))) for _ in ids]
    vectors = rng.random((len(ids), 4), dtype=np.float32)
    return pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "text": pa.array(texts, pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 4),
        }
    )


def _scores(lance_dir: Path, name: str, word: str) -> list[tuple[float, str]]:
    table = lancedb.connect(str(lance_dir)).open_table(name)
    hits = table.search(word, query_type="fts").limit(10_000).select(["id"]).to_list()
    return sorted((round(h["_score"], 5), h["id"]) for h in hits)


def test_updates_keep_the_index_a_whole_write_makes(tmp_path, monkeypatch):
    """Rounds of deletions (whole fragments, parts of them) and appends, small fragments
    merged: every round the full-text scores equal a fresh whole write's of the same rows,
    one index segment per fragment, one Lance version."""
    import lance

    monkeypatch.setattr(lance_write, "FRAGMENT_ROWS", 6)
    monkeypatch.setattr(lance_write, "MERGE_SMALL", 3)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa"]
    rows = _table([f"r{i:03d}" for i in range(40)], words)
    lance_write.write_whole(tmp_path / "a", "t", rows.to_batches(), rows.schema)
    path = lance_write.table_dir(tmp_path / "a", "t")
    rng = np.random.default_rng(1)
    for n in range(5):
        ids = rows["id"].to_pylist()
        gone = [ids[i] for i in rng.choice(len(ids), size=7, replace=False)]
        if n == 2:  # a whole fragment's rows
            where = lance_write.fragments_of(path)
            gone = where.filter(pl.col("fragment") == where["fragment"].min())["id"].to_list()
        new = _table([f"n{n}-{i}" for i in range(int(rng.integers(1, 9)))], words, seed=n + 7)
        lance_write.update(path, rows.schema, gone, new.to_batches())
        kept = pa.compute.invert(pa.compute.is_in(rows["id"], pa.array(gone, pa.string())))
        rows = pa.concat_tables([rows.filter(kept), new])
        lance_write.write_whole(tmp_path / "fresh", "t", rows.to_batches(), rows.schema)
        for word in ("gamma", "kappa"):
            assert _scores(tmp_path / "a", "t", word) == _scores(tmp_path / "fresh", "t", word)
        shape = lance_write.layout(path)
        assert shape.rows == rows.num_rows and shape.fragmented() is None, (n, shape)
        assert len(lance.dataset(str(path)).versions()) == 1
        # every deletion materialized: no deleted row's text is left in a data file
        assert not any(f.metadata.deletion_file for f in lance.dataset(str(path)).get_fragments())
        # every fragment holds half of FRAGMENT_ROWS but fewer than MERGE_SMALL ones
        assert shape.fragments <= -(-rows.num_rows // 3) + 2, (n, shape)


def test_a_fragment_holds_deleted_rows_only_where_allowed_and_under_its_share(
    tmp_path, monkeypatch
):
    """`may_hold`: a fragment keeps its deleted rows hidden (a deletion file, its text still
    in the data file) while under HOLD_SHARE of its rows are deleted; past it, or where not
    allowed, it is compacted and the text leaves every file. Live rows are the same either
    way."""
    import lance

    monkeypatch.setattr(lance_write, "FRAGMENT_ROWS", 20)
    words = ["alpha", "beta", "gamma"]
    rows = _table([f"r{i:02d}" for i in range(40)], words)
    marked = pa.array([f"{t} q{i:02d}zyzzyva" for i, t in enumerate(rows["text"].to_pylist())])
    rows = rows.set_column(1, "text", marked)
    lance_write.write_whole(tmp_path, "t", rows.to_batches(), rows.schema)
    path = lance_write.table_dir(tmp_path, "t")
    where = dict(lance_write.fragments_of(path).iter_rows())
    first, second = where["r00"], where["r20"]
    assert first != second

    def live() -> list[str]:
        return sorted(lance.dataset(str(path)).to_table(columns=["id"])["id"].to_pylist())

    # one row of 20 in each: the first fragment may hold it, the second may not
    done = lance_write.update(path, rows.schema, ["r00", "r20"], [], may_hold={first})
    assert done["held"] == [first] and done["compacted"] == 1
    assert live() == [f"r{i:02d}" for i in range(40) if i not in (0, 20)]
    assert _holds(path, "q00zyzzyva") and not _holds(path, "q20zyzzyva")
    assert lance_write.layout(path).fragmented() is None
    # two more of the first fragment's: 3 of 20 deleted, past HOLD_SHARE: compacted
    done = lance_write.update(path, rows.schema, ["r01", "r02"], [], may_hold={first})
    assert done["held"] == [] and done["compacted"] == 1
    assert not any(_holds(path, f"q{i:02d}zyzzyva") for i in (0, 1, 2, 20))
    assert len(live()) == 36


def _version(root: Path, docs: dict[str, tuple[str, str]], units: dict[str, tuple[str, str]]):
    """A version folder's documents {id: (source_path, text)} and text units {id: (document
    id, text)}."""
    root.mkdir()
    rows = [(i, p, t, len(t)) for i, (p, t) in docs.items()]
    columns = ["id", "source_path", "text", "byte_size"]
    pl.DataFrame(rows, columns, orient="row").write_parquet(root / "documents.parquet")
    pl.DataFrame(
        [(i, d, t) for i, (d, t) in units.items()], ["id", "document_id", "text"], orient="row"
    ).write_parquet(root / "text_units.parquet")


def test_rows_may_be_held_while_the_text_they_were_made_from_is_there(tmp_path, monkeypatch):
    """held_rows.may_hold: a deleted row's fragment may hold it when the text of each of its
    units is still in the corpus: the unit is, or its file still holds its text (an edit
    that added to it: the units it grew into stand for it); a fragment an earlier run left
    holding rows keeps them until one of their units' text leaves."""
    folder, base = tmp_path / "run", tmp_path / "base"
    old = {"u1": ("d1", "One."), "u2": ("d1", "Two."), "u4": ("d2", "Four."), "u5": ("d3", "Five.")}
    old["u6"] = ("d4", "# Six\n\nSix. Sixty.")
    paths = {"d1": "a.md", "d2": "b.md", "d3": "c.md", "d4": "e.md"}
    _version(base, {d: (p, "") for d, p in paths.items()}, old)
    # b.md lost "Four.", c.md grew after "Five.", e.md's unit grew, d.md is new
    now = {"d1": ("a.md", ""), "d2x": ("b.md", "Forty."), "d3x": ("c.md", "Five. Fifty.")}
    now["d4x"] = ("e.md", "Six. Sixty. Sixty-one.")
    units = {"u1": ("d1", "One."), "u2": ("d1", "Two."), "u3": ("d5", "Three.")}
    units |= {"u40": ("d2x", "Forty."), "u50": ("d3x", "Five. Fifty."), "u51": ("d3x", "x")}
    units["u60"] = ("d4x", "# Six\n\nSix. Sixty. Sixty-one.")
    _version(folder, now | {"d5": ("d.md", "Three.")}, units)
    made = {"e1": ["u1", "u2"], "e2": ["u2", "u4"], "e3": [], "e5": ["u5"], "e6": ["u6", "u1"]}
    frame = pl.DataFrame({"id": list(made), "text_unit_ids": list(made.values())})
    frame.write_parquet(base / "entities.parquet")
    earlier = pl.DataFrame({"fragment": [7, 8, 9], "unit": ["u1", "u4", "u5"]})
    held_rows.write_record(folder, "entities", earlier, [7, 8, 9])
    deleted_at = pl.DataFrame({"id": [*made, "e9"], "fragment": [1, 2, 3, 5, 6, 4]})
    fragments, record = held_rows.may_hold(folder, base, "entities", deleted_at)
    # e2 was made from u4, gone; so was 8's row; e9 is no row of the base: none can tell
    assert fragments == {1, 3, 5, 6, 7, 9}
    held_rows.write_record(folder, "entities", record, fragments)
    kept = held_rows.read_record(folder, "entities")
    assert kept.rows() == [
        (1, "u1"), (1, "u2"), (3, None), (5, "u50"), (5, "u51"), (6, "u1"), (6, "u60"),
        (7, "u1"), (9, "u50"), (9, "u51"),
    ]  # fmt: skip
    # a report's units are its community's
    pl.DataFrame({"id": ["r1", "r2"], "community": [1, 2]}).write_parquet(
        base / "community_reports.parquet"
    )
    lists = {"community": [1, 2], "text_unit_ids": [["u1", "u5"], ["u2", "u4"]]}
    pl.DataFrame(lists).write_parquet(base / "communities.parquet")
    reports_at = pl.DataFrame({"id": ["r1", "r2", "r3"], "fragment": [1, 2, 3]})
    assert held_rows.may_hold(folder, base, "community_reports", reports_at)[0] == {1}
    units_at = pl.DataFrame({"id": ["u4", "u5"], "fragment": [1, 2]})  # a unit's own text
    assert held_rows.may_hold(folder, base, "text_units", units_at)[0] == {2}
    # a content node's units are those holding it; one with a description, or none, is compacted
    holding = {"u4": ["n4"], "u5": ["n5", "n9"], "u6": ["n6"], "u1": ["n7", "n9"]}
    frame = pl.read_parquet(base / "text_units.parquet")
    held_by = [holding.get(u, []) for u in frame["id"]]
    frame.with_columns(content_node_ids=pl.Series(held_by, dtype=pl.List(pl.Utf8))).write_parquet(
        base / "text_units.parquet"
    )
    nodes = {"id": ["n4", "n5", "n6", "n7", "n8", "n9"], "description": ["", None, "", "a", "", ""]}
    pl.DataFrame(nodes).write_parquet(base / "content_nodes.parquet")
    nodes_at = pl.DataFrame({"id": nodes["id"], "fragment": [4, 5, 6, 7, 8, 9]})
    assert held_rows.may_hold(folder, base, "content_nodes", nodes_at)[0] == {5, 6, 9}
    # a file past the bounds is not searched: its rows are compacted
    absent = pl.Series(["u5", "u6"])
    assert held_rows._moved(folder, base, absent)["unit"].unique().sort().to_list() == ["u5", "u6"]
    monkeypatch.setattr(held_rows, "MOVED_FILE_BYTES", len("Five. Fifty."))
    assert held_rows._moved(folder, base, absent)["unit"].unique().to_list() == ["u5"]
    monkeypatch.setattr(held_rows, "MOVED_SEARCH_BYTES", len("Five. Fifty.") - 1)
    assert held_rows._moved(folder, base, absent).is_empty()


def test_long_texts_are_cut_in_fragments_of_fewer_rows(tmp_path, monkeypatch):
    """A table cut by its text gets fragments (and index segments) of fewer rows where its
    texts are long, recorded with it: an update appends and compacts by them, and a table
    written before they were recorded is written whole once."""
    import lance

    from pipeline.vectors import row_digests

    monkeypatch.setattr(lance_write, "FRAGMENT_ROWS", 16)
    monkeypatch.setattr(lance_write, "MIN_FRAGMENT_ROWS", 2)
    short = _table([f"s{i:02d}" for i in range(40)], ["a", "b"])
    words = [w * 40 for w in ("alpha", "beta", "gamma")]  # 200-letter words
    long = _table([f"r{i:02d}" for i in range(40)], words)
    # 4.5 rows' text of the first batch (the one the rows per fragment are read from)
    first = sum(len(t) for t in long["text"].to_pylist()[:8]) / 8
    cut = int(4.5 * first)
    for name, rows, per in (("short", short, 16), ("long", long, 4)):
        batches = rows.to_batches(max_chunksize=8)
        lance_write.write_whole(tmp_path, name, batches, rows.schema, text_bytes=cut)
        shape = lance_write.layout(lance_write.table_dir(tmp_path, name))
        assert (shape.per, shape.largest, shape.fragments) == (per, per, -(-40 // per)), name
    path = lance_write.table_dir(tmp_path, "long")
    new = _table([f"n{i}" for i in range(9)], words, seed=5)
    lance_write.update(path, long.schema, ["r00", "r21"], new.to_batches())
    shape = lance_write.layout(path)
    assert shape.per == 4 and shape.largest == 4 and shape.rows == 47
    assert shape.fragmented() is None and shape.segments == shape.fragments
    # a table whose rows per fragment were never recorded is judged by FRAGMENT_ROWS: the
    # text units' (cut by their text) are written whole once, another table's kept
    lance.dataset(str(path)).delete_config_keys([lance_write.FRAGMENT_KEY])
    assert lance_write.layout(path).per is None
    assert lance_write.layout(path).fragmented() is None
    folder = tmp_path / "v"
    for name in ("text_units", "entities"):
        lance_write.write_whole(folder / store.LANCE_DIR, name, long.to_batches(), long.schema)
        table = lance_write.table_dir(folder / store.LANCE_DIR, name)
        lance.dataset(str(table)).delete_config_keys([lance_write.FRAGMENT_KEY])
        digests = pl.DataFrame({"id": long["id"].to_pylist(), "own": range(40), "vec": range(40)})
        digests = digests.cast({"own": pl.UInt64, "vec": pl.UInt64})
        row_digests.write_digests(folder, name, digests, "key")
        whole = carry_over.plan(folder, name, digests, "key").whole
        assert (whole is not None and "not cut by their text" in whole) == (name == "text_units")


def test_an_update_and_the_query_copy_do_not_import_lancedb(tmp_path):
    """lancedb takes ~1.2 s to import; changing rows of a table that has its index, and
    copying its vectors for queries, need only pylance: a nightly run must not pay for it.
    (In a process of its own: this one has imported lancedb long ago.)"""
    words = ["alpha", "beta", "gamma", "delta"]
    rows = _table([f"r{i}" for i in range(12)], words)
    lance_write.write_whole(tmp_path, "t", rows.to_batches(), rows.schema)
    new = _table(["n1", "n2"], words, seed=3)
    pq.write_table(new, tmp_path / "new.parquet")
    code = f"""
import sys
import pyarrow.parquet as pq
from pathlib import Path
from pipeline.vectors import lance_write, vector_copies
root = Path({str(tmp_path)!r})
new = pq.read_table(root / "new.parquet")
path = lance_write.table_dir(root, "t")
done = lance_write.update(path, new.schema, ["r1", "r2"], new.to_batches())
(rows, dim), blocks = vector_copies.lance_blocks(root, "t")
ids = [i for block_ids, _ in blocks for i in block_ids]
print(done["appended"], rows, dim, len(ids), "lancedb" in sys.modules)
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2", "12", "4", "12", "False"]


def test_a_plan_carries_few_changes_and_goes_whole_past_its_share(tmp_path, monkeypatch):
    from pipeline.vectors import row_digests

    monkeypatch.setattr(lance_write, "FRAGMENT_ROWS", 8)
    rows = _table([f"r{i:03d}" for i in range(64)], ["a", "b", "c"])
    folder = tmp_path / "v"
    lance_write.write_whole(folder / store.LANCE_DIR, "t", rows.to_batches(), rows.schema)
    ids = rows["id"].to_pylist()
    digests = pl.DataFrame({"id": ids, "own": range(64), "vec": range(64)}).cast(
        {"own": pl.UInt64, "vec": pl.UInt64}
    )
    row_digests.write_digests(folder, "t", digests, "key")
    assert carry_over.plan(folder, "t", digests, "other").whole is not None  # other settings

    few = digests.with_columns(
        pl.when(pl.col("id") == "r005").then(999).otherwise(pl.col("vec")).alias("vec")
    ).filter(pl.col("id") != "r040")
    plan = carry_over.plan(folder, "t", few, "key")
    assert plan.whole is None
    assert sorted(plan.delete) == ["r005", "r040"] and plan.append == ["r005"]

    many = digests.with_columns((pl.col("vec") + 1000).alias("vec"))
    plan = carry_over.plan(folder, "t", many, "key")
    assert plan.whole is not None and "row-equivalents" in plan.whole

    # a table laid out otherwise (one fragment of 64 rows) is written whole once
    monkeypatch.setattr(lance_write, "FRAGMENT_ROWS", 64)
    lance_write.write_whole(folder / store.LANCE_DIR, "t", rows.to_batches(), rows.schema)
    monkeypatch.setattr(lance_write, "FRAGMENT_ROWS", 8)
    assert "a fragment of 64 rows" in carry_over.plan(folder, "t", few, "key").whole


def test_a_node_no_unit_holds_gets_its_digest():
    """A content node no text unit lists (an empty list of holders) is a row like any other:
    its digest was dropped with it once (explode drops an empty list), and the step failed
    on a corpus with such a node (tests/test_bad_input_corpus.py)."""
    from pipeline.vectors.row_digests import table_digests

    units = pl.DataFrame({"id": ["u1"], "text": ["A text."], "n_tokens": [2], "document_id": ["d"]})
    nodes = pl.DataFrame(
        {
            "id": ["n1", "n2"],
            "node_type": ["paragraph", "page_number"],
            "text": ["A text.", "3"],
            "description": [None, None],
            "document_id": ["d", "d"],
            "section_id": ["s", "s"],
        },
        schema_overrides={"description": pl.Utf8},
    )
    known = {"text_units": table_digests("text_units", units, {})}
    holders = pl.DataFrame({"id": ["u1"], "content_node_ids": [["n1"]]})
    digests = table_digests("content_nodes", nodes, known, holders)
    assert digests["id"].to_list() == ["n1", "n2"] and digests["vec"].null_count() == 0
    assert digests["vec"][0] != digests["vec"][1]


def test_a_list_of_ids_digests_as_the_exact_sum_of_theirs():
    """A row's list of ids digests as the wrapping sum of their digests: in any order, as
    often as named, ids without a digest (unknown, null) counting nothing, and exact in all
    64 bits (a sum that went through a float once merged rows whose lists differ)."""
    from pipeline.vectors.row_digests import _combined

    big = [2**64 - 3, 2**63 + 12_345, 2**53 + 1]
    digests = pl.DataFrame(
        {"id": ["a", "b", "c", "d"], "vec": pl.Series([*big, None], dtype=pl.UInt64)}
    )
    lists = [["a", "b"], ["b", "a"], [], None, ["a", "a"], ["d"], ["c", None, "zz"], ["c"]]
    got = _combined(pl.DataFrame({"ids": lists}), "ids", digests).to_list()
    value = dict(zip("abc", big, strict=True))
    want = [sum(value.get(i, 0) for i in ids or []) % 2**64 for ids in lists]
    assert got == want
    assert got[6] == got[7] != got[7] + 1  # 2**53 + 1: not a float


@pytest.mark.parametrize("added", [0, 1, 2, 4])
def test_patched_vectors_are_looked_up_as_rebuilt_ones(added):
    """The carried (ids, vectors) patched in place (a dropped row's slot reused) hold each
    kept and added id with its own vector, and no dropped one: as many rows dropped as
    added, more dropped, more added."""
    rng = np.random.default_rng(49)
    ids = [f"r{i}" for i in range(6)]
    old = rng.random((6, 3), dtype=np.float32)
    expect = {i: old[n].copy() for n, i in enumerate(ids)}
    drop = {"r1", "r4"}
    new_ids = ["r4", "n1", "n2", "n3"][:added]  # r4 changed, the others new
    new = rng.random((added, 3), dtype=np.float32)
    for i in drop:
        expect.pop(i)
    expect |= {i: new[n] for n, i in enumerate(new_ids)}
    got_ids, got = carry_over.patched((ids, old), drop, new_ids, new)
    assert sorted(got_ids) == sorted(expect) and got.shape == (len(expect), 3)
    for n, i in enumerate(got_ids):
        assert np.array_equal(got[n], expect[i])


def _digests_of_relationships(units: list[list[str]], title: str, mode: str) -> pl.Series:
    from pipeline.config import EmbeddingSettings
    from pipeline.vectors.end_titles import titled_rows
    from pipeline.vectors.row_digests import ENTITY_TITLES, table_digests, title_digests

    settings = EmbeddingSettings(relationship_vectors=mode)
    text_units = pl.DataFrame(
        {"id": ["u1", "u2", "u3"], "text": ["a", "b", "c"], "n_tokens": 1, "document_id": "d"}
    )
    entities = pl.DataFrame(
        {
            "id": ["hub", "x", "y"],
            "title": [title, "X", "Y"],
            "type": "PERSON",
            "description": "",
            "frequency": [len(units[0]), 1, 1],
            "text_unit_ids": units,
        }
    )
    known = {"text_units": table_digests("text_units", text_units, {})}
    known["entities"] = table_digests("entities", entities, known)
    known[ENTITY_TITLES] = title_digests(entities, titled_rows(entities, settings))
    rels = pl.DataFrame(
        {
            "id": ["r1", "r2"],
            "source": [title, title],
            "target": ["X", "Y"],
            "description": "",
            "source_id": ["hub", "hub"],
            "target_id": ["x", "y"],
            "text_unit_ids": [["u1"], ["u2"]],
        }
    )
    return table_digests("relationships", rels, known, relationships=mode)["vec"]


@pytest.mark.parametrize("mode", ["context", "titles+units"])
def test_a_hub_gaining_a_unit_changes_its_relationships_only_under_context(mode):
    """Under "context" a relationship holds its ends' whole vectors: a hub entity mentioned in
    one more text unit changes every relationship of it. Under "titles+units" it holds their
    titles only: the same edit changes none, a renamed end changes them all."""
    before = _digests_of_relationships([["u1", "u2"], ["u1"], ["u2"]], "Hub", mode)
    gained = _digests_of_relationships([["u1", "u2", "u3"], ["u1"], ["u2"]], "Hub", mode)
    renamed = _digests_of_relationships([["u1", "u2"], ["u1"], ["u2"]], "Hub City", mode)
    assert (before != gained).sum() == (2 if mode == "context" else 0)
    assert (before != renamed).sum() == 2


def test_relationships_by_units_lie_by_their_documents():
    """Outside "context" relationships are laid out as entities: those in many units first,
    the others by the document of their first unit (an edit's rows in few fragments)."""
    units = pl.DataFrame({"id": ["u1", "u2", "u3"], "document_id": ["d2", "d1", "d3"]})
    many = [f"u{i}" for i in range(carry_over.HUB_UNITS)]
    rels = pl.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "source_id": ["e1", "e2", "e3", "e4"],
            "target_id": ["e5", "e5", "e5", "e5"],
            "text_unit_ids": [["u1"], ["u3"], many, ["u2"]],
        }
    )
    ordered = carry_over.order("relationships", rels, units, None, by_units=True)
    assert ordered["id"].to_list() == ["c", "d", "a", "b"]
    assert ordered.columns == rels.columns


def test_relationship_digests_recorded_under_other_settings_are_not_patched(tmp_path):
    """The vector settings changed since the base version: its record of the relationships'
    digests is not patched from the graph step's list (build_tables hashes every row)."""
    from pipeline.config import EmbeddingSettings
    from pipeline.vectors import listed_digests, row_digests

    digests = pl.DataFrame(
        {"id": ["r1"], "own": [1], "vec": [2]},
        schema_overrides={"own": pl.UInt64, "vec": pl.UInt64},
    )
    row_digests.write_digests(tmp_path, "relationships", digests, "old-settings")
    frame = pl.DataFrame({"id": ["r1"], "source_id": ["e1"], "target_id": ["e2"]})
    only = pl.Series(["r1"])
    units = digests.clear()
    settings = EmbeddingSettings()
    got = listed_digests.patched_digests(tmp_path, "new-settings", only, frame, units, settings)
    assert got is None
