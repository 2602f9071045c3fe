"""Document shards: stable assignment, and incremental runs that re-materialize exactly the
shard of the file that changed plus the corpus-wide tail (counted in a real instance)."""

from __future__ import annotations

import os
import time
from collections import Counter

import polars as pl
import pytest
from dagster import DagsterEventType, DagsterInstance, EventRecordsFilter

from pipeline.ingest import shards
from pipeline.storage import store
from pipeline.vectors.lance import read_vectors

N = 8
NAMES = ["Ada Lovelace", "Charles Babbage", "Mary Somerville", "Michael Faraday", "Alan Turing"]
PLACES = ["London", "Paris", "Cambridge", "Manchester", "Edinburgh"]


def test_shard_assignment_is_stable_under_additions_and_spread():
    paths = [f"folder{i % 7}/doc{i}.md" for i in range(4000)]
    before = {p: shards.shard_of(p, 16) for p in paths}
    more = paths + [f"new/doc{i}.txt" for i in range(3000)]
    after = {p: shards.shard_of(p, 16) for p in more}
    assert all(after[p] == before[p] for p in paths)  # adding files never moves a file
    counts = Counter(after.values())
    assert sorted(counts) == shards.shard_keys(16)
    assert max(counts.values()) < 1.25 * min(counts.values())  # evenly spread


def test_a_fingerprint_changes_only_with_its_shard(tmp_path):
    for i in range(40):
        (tmp_path / f"d{i}.txt").write_text(f"Document {i}.")
    before = shards.fingerprints(tmp_path, [], N)
    time.sleep(0.01)
    (tmp_path / "d7.txt").write_text("Document 7, edited.")
    after = shards.fingerprints(tmp_path, [], N)
    assert shards.changed(before, after) == [shards.shard_of("d7.txt", N)]
    assert shards.changed(before, shards.fingerprints(tmp_path, [], N, salt="x")) == sorted(after)


def test_a_new_shard_format_re_runs_every_shard(monkeypatch):
    """An index written before a change of what a shard holds (short ids interleaved over the
    shards) would fail its checks once one old shard met a new one: every shard runs again."""
    from pipeline.config import load_settings

    settings = load_settings()
    before = shards.stage_settings_digest(settings)
    monkeypatch.setattr(shards, "SHARD_FORMAT", "1")
    assert shards.stage_settings_digest(settings) != before


def _doc(i: int) -> str:
    a, b = NAMES[i % 5], NAMES[(i + 2) % 5]
    place = PLACES[i % 5]
    return (
        f"Note {i}\n\n{a} met {b} in {place} in {1800 + i}. "
        f"{a} wrote to {b} about the engine number {i}. "
        f"Later {b} visited {PLACES[(i + 1) % 5]} with {a}.\n"
    )


def _materialized(instance: DagsterInstance, run_id: str) -> dict[str, set[str | None]]:
    """Asset -> partitions materialized by the run (None: an unpartitioned asset)."""
    out: dict[str, set[str | None]] = {}
    records = instance.get_event_records(
        EventRecordsFilter(event_type=DagsterEventType.ASSET_MATERIALIZATION), limit=100000
    )
    for record in records:
        entry = record.event_log_entry
        if entry.run_id != run_id:
            continue
        event = entry.dagster_event
        key = event.asset_key.to_user_string()
        out.setdefault(key, set()).add(event.partition)
        counts = out.setdefault("__count__", set())
        counts.add((key, event.partition))
    return out


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    base = tmp_path_factory.mktemp("shards")
    inp, out = base / "in", base / "out"
    (inp / "sub").mkdir(parents=True)
    for i in range(24):
        (inp / ("sub" if i % 3 else "") / f"note{i:02d}.txt").write_text(_doc(i))
    config = base / "docgraph.yaml"
    config.write_text(f"storage:\n  shards: {N}\n")
    instance = DagsterInstance.ephemeral()  # in memory: no SQLite event log to write
    from app.run import run_index

    def run():
        result = run_index(str(config), str(inp), str(out), instance=instance, log_level="ERROR")
        assert result.success
        return _materialized(instance, result.run_id)

    first = run()
    return {"inp": inp, "out": out, "run": run, "first": first, "config": config}


def _check_one_shard(done: dict, shard: str, first: dict) -> None:
    partitioned = {k for k, parts in first.items() if k != "__count__" and None not in parts}
    tail = {k for k, parts in first.items() if k != "__count__" and parts == {None}}
    assert "documents" in partitioned and "chunk_embeddings" in partitioned
    assert {"structure_edges", "entities", "communities", "published_index"} <= tail
    for key in partitioned:
        assert done.get(key) == {shard}, key  # exactly the changed shard
    for key in tail:
        assert done.get(key) == {None}, key  # and the tail, once
    assert len(done["__count__"]) == len(partitioned) + len(tail)


def test_the_first_run_materializes_every_shard(indexed):
    first = indexed["first"]
    assert first["documents"] == set(shards.shard_keys(N))
    assert first["chunks"] == set(shards.shard_keys(N))
    # every shard holds documents, read back as one table; short ids are corpus-wide
    assert len(store.table_files(indexed["out"], "chunks")) == N
    for name in ("documents", "sections", "content_nodes", "chunks", "text_units"):
        short = store.read_table(indexed["out"], name, ["human_readable_id"])["human_readable_id"]
        assert short.len() > N and short.n_unique() == short.len(), name


def test_editing_adding_and_deleting_one_file_rematerialize_its_shard_and_the_tail(indexed):
    inp, out, run, first = indexed["inp"], indexed["out"], indexed["run"], indexed["first"]
    before = store.read_table(out, "documents")
    short = ["id", "human_readable_id"]
    ids_before = {n: store.read_table(out, n, short) for n in ("entities", "relationships")}

    # edit
    time.sleep(0.01)
    edited = inp / "sub" / "note05.txt"
    edited.write_text(_doc(5) + "Faraday lectured at the Royal Institution.\n")
    _check_one_shard(run(), shards.shard_of("sub/note05.txt", N), first)
    assert "Royal Institution" in " ".join(store.read_table(out, "text_units")["text"])
    _check_reports(indexed)
    for name, old in ids_before.items():  # short ids (what reports cite) stay; new ones follow
        now = store.read_table(out, name, short)
        kept = now.join(old, on="id", suffix="_old")
        assert kept.height and (kept["human_readable_id"] == kept["human_readable_id_old"]).all()
        added = now.join(old, on="id", how="anti")["human_readable_id"]
        assert added.len() and added.min() > old["human_readable_id"].max(), name

    # add
    (inp / "added.txt").write_text(_doc(99) + "Somerville translated Laplace.\n")
    _check_one_shard(run(), shards.shard_of("added.txt", N), first)
    assert "added.txt" in store.read_table(out, "documents")["source_path"].to_list()

    # delete: the document's rows leave every table and the vector tables
    gone = inp / "sub" / "note07.txt"
    doc_id = before.filter(pl.col("source_path") == "sub/note07.txt")["id"].item()
    units = store.read_table(out, "text_units").filter(pl.col("document_id") == doc_id)["id"]
    nodes = store.read_table(out, "content_nodes").filter(pl.col("document_id") == doc_id)["id"]
    assert units.len() and nodes.len()
    gone.unlink()
    _check_one_shard(run(), shards.shard_of("sub/note07.txt", N), first)
    for name in ("documents", "sections", "content_nodes", "chunks", "text_units"):
        col = "id" if name == "documents" else "document_id"
        assert doc_id not in store.read_table(out, name)[col].to_list(), name
    for name in ("extracted_entities", "extracted_relationships"):
        assert not set(units) & set(store.read_table(out, name)["text_unit_id"]), name
    for name in ("entities", "relationships"):
        held = store.read_table(out, name)["text_unit_ids"].explode().drop_nulls()
        assert not set(units) & set(held), name
    edges = store.read_table(out, "structure_edges")
    assert not set(nodes) & (set(edges["source_id"]) | set(edges["target_id"].drop_nulls()))
    lance_ids, _ = read_vectors(out, "text_units")
    assert not set(units) & set(lance_ids) and lance_ids
    node_ids, _ = read_vectors(out, "content_nodes")
    assert not set(nodes) & set(node_ids)
    _check_reports(indexed)


def _check_reports(indexed) -> None:
    """The reports of an incremental run (those of unchanged communities kept from the last
    run) are the ones a full build writes from the run's own tables."""
    from pipeline.communities.reports.offline import build_reports
    from pipeline.config import load_settings

    out = indexed["out"]
    tables = [store.read_table(out, n) for n in ("communities", "entities")]
    tables += [store.read_table(out, n) for n in ("relationships", "text_units")]
    full = build_reports(*tables, load_settings(str(indexed["config"])).reports)
    assert store.read_table(out, "community_reports").equals(full)


def test_an_unchanged_folder_runs_the_tail_only(indexed):
    done = indexed["run"]()
    assert "documents" not in done and "chunks" not in done
    assert done["entities"] == {None} and done["published_index"] == {None}


def test_the_sensor_asks_for_the_changed_shard_only(indexed):
    from dagster import RunRequest, SkipReason, build_sensor_context

    from definitions import make_definitions
    from resources import DocgraphConfig

    inp, out, config = indexed["inp"], indexed["out"], indexed["config"]
    defs = make_definitions(str(config), str(inp), str(out))
    sensor_def = defs.resolve_sensor_def("input_folder_changed")
    resource = DocgraphConfig(config_path=str(config), input_dir=str(inp), output_dir=str(out))

    def tick():
        return sensor_def(build_sensor_context(resources={"docgraph": resource}))

    assert isinstance(tick(), SkipReason)  # the published version holds the folder as it is
    time.sleep(0.01)
    target = inp / "note00.txt"
    target.write_text(_doc(0) + "An edit.\n")
    os.utime(target)
    request = tick()
    shard = shards.shard_of("note00.txt", N)
    assert isinstance(request, RunRequest)
    assert request.tags["dagster/asset_partition_range_start"] == shard
    assert request.tags["dagster/asset_partition_range_end"] == shard
    assert request.tags["docgraph/changed_shards"] == shard


def test_the_index_does_not_depend_on_the_shard_count(tmp_path):
    """Links resolve across shards and the tail reads shards in path order: 1 shard and 4
    shards give the same tables (SAME_TOPIC weights up to float summation order)."""
    from app.run import run_index

    inp = tmp_path / "in"
    for i in range(12):
        folder = inp / f"part{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        j = (i * 5 + 1) % 12
        (folder / f"page{i}.md").write_text(
            f"# Page {i}\n\n{_doc(i)}\n## Links\n\nSee [page {j}](../part{j % 3}/page{j}.md#links)"
            f" and [[page{(i + 1) % 12}]].\n"
        )
    outs = {}
    for n in (1, 4):
        config = tmp_path / f"s{n}.yaml"
        config.write_text(f"storage:\n  shards: {n}\n")
        outs[n] = tmp_path / f"out{n}"
        assert run_index(str(config), str(inp), str(outs[n]), log_level="ERROR").success
    assert len(store.table_files(outs[4], "documents")) == 4
    links = store.read_table(outs[4], "structure_edges").filter(pl.col("type") == "REFERS_TO")
    assert links.height == 24 and links["target_id"].null_count() == 0  # across shards too
    for name in ("structure_edges", "text_units", "entities", "relationships", "communities"):
        one, four = store.read_table(outs[1], name), store.read_table(outs[4], name)
        key = [c for c in one.columns if one.schema[c] in (pl.Utf8, pl.Int64)]
        assert one.sort(key).equals(four.sort(key)), name
    reports = [store.read_table(outs[n], "community_reports").sort("id") for n in (1, 4)]
    assert reports[0].drop("rating").equals(reports[1].drop("rating"))


def test_the_nightly_schedule_runs_what_changed_and_nothing_when_up_to_date(indexed):
    """Each tick's request runs as the daemon would launch it (a run with no shard range
    failed at its first partitioned step); an unchanged index gets no run at all."""
    from dagster import RunRequest, SkipReason, build_schedule_context, execute_job
    from dagster import build_reconstructable_job as reconstructable

    from definitions import make_definitions
    from resources import DocgraphConfig

    inp, out, config = indexed["inp"], indexed["out"], indexed["config"]
    args = (str(config), str(inp), str(out), None)
    defs = make_definitions(*args)
    schedule = defs.resolve_schedule_def("index_nightly")
    resource = DocgraphConfig(config_path=str(config), input_dir=str(inp), output_dir=str(out))
    instance = DagsterInstance.ephemeral()

    def tick():
        context = build_schedule_context(
            instance=instance,
            resources={"docgraph": resource},
            repository_def=defs.get_repository_def(),
        )
        return schedule(context)

    def launch(request: RunRequest) -> dict:
        job = reconstructable("app.run", "index_job", reconstructable_args=args)
        with execute_job(
            job, instance, tags=request.tags, asset_selection=request.asset_selection
        ) as result:
            assert result.success
            return _materialized(instance, result.run_id)

    time.sleep(0.01)
    edited = inp / "note03.txt"
    edited.write_text(_doc(3) + "Babbage designed the Analytical Engine.\n")
    request = tick()
    assert isinstance(request, RunRequest) and request.asset_selection is None
    _check_one_shard(launch(request), shards.shard_of("note03.txt", N), indexed["first"])

    skipped = tick()
    assert isinstance(skipped, SkipReason) and "up to date" in skipped.skip_message
    version = store.read_manifest(out)["version"]

    # a report setting: the tail alone, once
    saved = config.read_text()
    config.write_text(saved + "reports:\n  max_findings: 3\n")
    try:
        request = tick()
        assert isinstance(request, RunRequest) and "settings" in request.tags["docgraph/plan"]
        assert "dagster/asset_partition_range_start" not in request.tags
        done = launch(request)
        assert "documents" not in done and done["community_reports"] == {None}
        assert store.read_manifest(out)["version"] != version
        assert isinstance(tick(), SkipReason)
    finally:
        config.write_text(saved)


def test_the_cli_leaves_an_up_to_date_index_alone(indexed, capsys):
    from app.cli.main import main
    from pipeline.config import load_settings
    from pipeline.ingest.find_stale import plan_run

    inp, out, config = indexed["inp"], indexed["out"], indexed["config"]
    argv = ["index", "--config", str(config), "--input", str(inp), "--output", str(out)]
    settings = load_settings(str(config), {"input_dir": str(inp), "output_dir": str(out)})
    if not plan_run(settings).up_to_date:  # an earlier test left a change: index it first
        assert main(argv + ["--log-level", "ERROR"]) == 0
    version = store.read_manifest(out)["version"]
    capsys.readouterr()
    assert main(argv) == 0
    assert "index up to date" in capsys.readouterr().out
    assert store.read_manifest(out)["version"] == version  # no run, no new version
    assert main(argv + ["--full", "--log-level", "ERROR"]) == 0  # --full runs all the same
    assert store.read_manifest(out)["version"] != version
