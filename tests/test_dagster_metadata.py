"""Dagster-native metadata, kinds, checks and the code location (issue 13 point 4).

Reuses the session's sample index (tests/conftest.py: the real index job, once): its
materializations must carry the row count and column schema of what was written, its Lance
checks must pass, and a blocking check that fails must keep the assets after it from running.
"""

# No `from __future__ import annotations`: Dagster reads the probe assets' resource
# annotations as classes.
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from dagster import AssetCheckSeverity, AssetOut, Output, asset, materialize, multi_asset
from dagster_dg_core.context import DgContext

from assets.checks import integrity_checks, lance_table_problems, null_vectors
from assets.metadata import COLUMN_SCHEMA, ROW_COUNT
from definitions import defs
from pipeline import schemas
from pipeline.storage import lock, store
from resources import build_resources

ROOT = Path(__file__).resolve().parents[1]


def _materializations(result) -> dict[str, list[dict]]:
    """Every materialization's metadata, by asset name."""
    out: dict[str, list[dict]] = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        out.setdefault(mat.asset_key.to_user_string(), []).append(dict(mat.metadata))
    return out


def test_code_location_is_the_same_for_dg_dagster_dev_and_the_workspace_file():
    from dagster._core.workspace.load import location_origins_from_yaml_paths
    from dagster._core.workspace.load_target import ModuleTarget, get_target_from_toml_data

    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "dagster" not in data["tool"]  # it would win over [tool.dg] for `dagster dev`
    target = get_target_from_toml_data(data)  # what `dagster dev` (no -w) loads
    assert isinstance(target, ModuleTarget)
    assert (target.module_name, target.location_name) == ("definitions", "docgraph")
    # `dagster dev -w workspace.yaml`: the same module as the same location, from the root
    (origin,) = location_origins_from_yaml_paths([str(ROOT / "workspace.yaml")])
    loadable = origin.loadable_target_origin
    assert (loadable.module_name, origin.location_name) == ("definitions", "docgraph")
    dagster = Path(sys.executable).with_name("dagster")  # and it loads, from the root
    done = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "Validation successful for code location docgraph" in (
        done.stdout + done.stderr
    ), done.stderr[-2000:]
    context = DgContext.for_project_environment(ROOT, {})  # dagster-dg-cli: `dg dev`
    assert context.code_location_target_module_name == "definitions"
    assert context.code_location_name == "docgraph"


def test_every_table_asset_has_its_kinds():
    kinds = {spec.key.to_user_string(): spec.kinds for spec in defs.resolve_all_asset_specs()}
    for name in schemas.TABLES:
        assert {"polars", "parquet"} <= kinds[name], name
    for name in schemas.VECTOR_TABLES:
        assert kinds[f"{name}_vectors"] == {"lancedb"}, name


def test_materializations_carry_row_count_schema_and_preview(sample_index):
    _, out, result, _ = sample_index
    events = _materializations(result)
    specs = {s.key.to_user_string(): s for s in defs.resolve_all_asset_specs()}
    for name in schemas.TABLES:
        if not store.table_files(out, name):
            continue  # a table this run did not write (none today)
        written = pq.read_schema(store.table_files(out, name)[0]).names
        sharded = specs[name].partitions_def is not None
        # a sharded table's schema is its definition's: its materialization is stored once
        # per shard (16 copies in a full run); the others carry theirs
        assert (COLUMN_SCHEMA in specs[name].metadata) == sharded, name
        for meta in events[name]:  # a sharded table: one per shard, the whole table's figures
            assert meta[ROW_COUNT].value == store.table_rows(out, name), name
            assert (COLUMN_SCHEMA in meta) != sharded, name
            schema = specs[name].metadata[COLUMN_SCHEMA] if sharded else meta[COLUMN_SCHEMA]
            assert [c.name for c in schema.schema.columns] == written, name
            if not sharded:  # where the IO manager, or the step itself, wrote it
                assert meta["path"].value.endswith(f"/{name}.parquet"), name
            preview = meta["preview"].value
            assert len(preview.records) == min(5, store.table_rows(out, name)), name
            assert "vector" not in {c.name for c in preview.schema.columns}
    db = store.lance_db(out)
    for name in schemas.VECTOR_TABLES:
        (meta,) = events[f"{name}_vectors"]
        tbl = db.open_table(name)
        assert meta[ROW_COUNT].value == tbl.count_rows() == store.table_rows(out, name), name
        schema = {c.name: c.type for c in meta[COLUMN_SCHEMA].schema.columns}
        assert schema["vector"] == str(tbl.schema.field("vector").type), name
    # the worker wrote the model's token states as it started: titles need no forward pass
    assert events["entities_vectors"][0]["title_vectors"].value == "static"


def test_graph_assets_summarise_degrees_and_community_sizes(sample_index):
    _, out, result, _ = sample_index
    events = _materializations(result)
    (ents,) = events["entities"]
    low, mid, p90, high = (ents[f"degree_{k}"].value for k in ("min", "median", "p90", "max"))
    assert 0 <= low <= mid <= p90 <= high and high >= 1
    degree = store.read_table(out, "entities", ["degree"])["degree"]
    assert (low, high) == (degree.min(), degree.max())
    assert ents["isolated_entities"].value == (degree == 0).sum()
    by_type = ents["by_type"].value.records  # a Dagster table, not Markdown
    assert sum(r.data["entities"] for r in by_type) == store.table_rows(out, "entities")
    (comm,) = events["communities"]
    sizes = comm["community_sizes"].value.records
    communities = store.read_table(out, "communities")
    assert [r.data["level"] for r in sizes] == sorted(communities["level"].unique().to_list())
    assert sum(r.data["communities"] for r in sizes) == communities.height
    biggest = communities["entity_ids"].list.len().max()
    assert max(r.data["size_max"] for r in sizes) == biggest


def test_preview_cells_are_plain_text_shortened_and_json():
    from assets.metadata import frame_metadata

    df = pl.DataFrame(
        {
            "id": ["a"],
            "text": ["<script>x</script>\n" + "y" * 200],
            "ids": [["u1", "u2"]],
            "score": [float("nan")],
            "vector": [[0.1, 0.2]],
        }
    )
    meta = frame_metadata(df, 0.0)
    (record,) = meta["preview"].value.records
    text = record.data["text"]
    # the UI shows a table cell as text (escaped by React): escaping here would show &lt;
    assert text.startswith("<script>x</script> yyy") and len(text) == 80 and text[-1] == "…"
    assert record.data["ids"] == '["u1", "u2"]' and record.data["score"] == "nan"
    assert "vector" not in record.data  # left out of the preview, kept in the schema
    assert "vector" in {c.name for c in meta[COLUMN_SCHEMA].schema.columns}
    assert meta[ROW_COUNT] == 1


def test_lance_checks_run_and_pass(sample_index):
    _, _, result, _ = sample_index
    lance = {
        e.asset_key.to_user_string(): e
        for e in result.get_asset_check_evaluations()
        if e.check_name == "vectors"
    }
    assert set(lance) == {f"{name}_vectors" for name in schemas.VECTOR_TABLES}
    for key, evaluation in lance.items():
        meta = {k: v.value for k, v in evaluation.metadata.items()}
        assert evaluation.passed, (key, meta)
        assert meta["lance_rows"] == meta["parquet_rows"] > 0, key
        assert meta["vector_width"] == meta["model_dim"] and meta["null_vectors"] == 0, key


def test_lance_check_finds_missing_rows_wrong_width_and_null_vectors(sample_index, tmp_path):
    _, out, _, _ = sample_index
    units = store.read_table(out, "text_units").head(3)
    store.write_table(tmp_path, "text_units", units)
    assert lance_table_problems(tmp_path, "text_units", 384)[0] == [
        "lance table text_units does not exist"
    ]
    width = pa.list_(pa.float32(), 3)
    vectors = pa.array([[0.1, 0.2, 0.3], None], type=width)
    table = pa.table({"id": units["id"][:2].to_arrow(), "text": ["a", "b"], "vector": vectors})
    # Lance refuses a null vector unless told: another writer than ours might have been
    store.lance_db(tmp_path).create_table("text_units", data=table, on_bad_vectors="null")
    problems, counts = lance_table_problems(tmp_path, "text_units", 384)
    assert counts == {
        "lance_rows": 2,
        "parquet_rows": 3,
        "vector_width": 3,
        "model_dim": 384,
        "null_vectors": 1,
    }
    assert len(problems) == 3


def test_the_null_scan_after_a_checked_version_reads_only_new_fragments(tmp_path):
    """Against a version that passed (its fragments scanned then), only fragments with data
    files that version lacks are scanned: a null vector there is found, one in a kept
    fragment (impossible after a passed check, planted here) is not read again."""
    import lance

    width = pa.list_(pa.float32(), 2)
    first = pa.table({"id": ["a", "b"], "vector": pa.array([[1.0, 2.0], None], type=width)})
    lance.write_dataset(first, tmp_path / "base.lance")
    shutil.copytree(tmp_path / "base.lance", tmp_path / "run.lance")
    more = pa.table({"id": ["c", "d"], "vector": pa.array([None, [3.0, 4.0]], type=width)})
    lance.write_dataset(more, tmp_path / "run.lance", mode="append")
    run, base = lance.dataset(tmp_path / "run.lance"), lance.dataset(tmp_path / "base.lance")
    assert null_vectors(run) == 2  # the whole table
    assert null_vectors(run, base) == 1  # the new fragment only
    assert null_vectors(run, run) == 0


def _entities_run(folder: Path, entities: pl.DataFrame):
    """A run of a stand-in `entities` asset returning `entities`, its real integrity check
    (blocking), and an asset after it; returns (result, whether the asset after it ran)."""
    ran: list[bool] = []

    @asset(name="entities")
    def probe() -> pl.DataFrame:
        return entities

    @asset(deps=["entities"])
    def after_entities() -> None:
        ran.append(True)

    check = integrity_checks("probe", ["entities"])
    try:
        result = materialize(
            [probe, after_entities, check],
            resources=build_resources(output_dir=str(folder)),
            raise_on_error=False,
        )
    finally:
        lock.release(folder)
    return result, bool(ran)


def test_a_failing_blocking_check_stops_what_comes_after(sample_index, tmp_path):
    _, out, _, _ = sample_index
    folder = tmp_path / "out"
    shutil.copytree(out, folder, ignore=shutil.ignore_patterns("cache"))
    entities = store.read_table(folder, "entities")

    result, ran = _entities_run(folder, entities)  # the table as indexed: it passes
    assert result.success and ran

    duplicated = pl.concat([entities, entities.head(1)])  # one id twice
    result, ran = _entities_run(folder, duplicated)
    (evaluation,) = result.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.severity == AssetCheckSeverity.ERROR
    assert "1 duplicate id values" in evaluation.metadata["problems"].value
    assert not result.success and not ran
    assert "after_entities" not in _materializations(result)


def _checks_of(folder: Path, tables: dict[str, pl.DataFrame]) -> dict[str, dict]:
    """Each table's integrity check (passed, problems, rules) after a run of a stand-in step
    writing `tables` into a run of `folder`."""

    @multi_asset(outs={name: AssetOut() for name in tables}, name="probe")
    def probe():
        for name, frame in tables.items():
            yield Output(frame, output_name=name)

    try:
        result = materialize(
            [probe, integrity_checks("probe", list(tables))],
            resources=build_resources(output_dir=str(folder)),
            raise_on_error=False,
        )
    finally:
        lock.release(folder)
    return {
        e.asset_key.path[-1]: {
            "passed": e.passed,
            "problems": e.metadata["problems"].value,
            "rules": e.metadata["rules"].value,
        }
        for e in result.get_asset_check_evaluations()
    }


def test_checks_skip_the_rules_only_where_nothing_they_read_changed(sample_index, tmp_path):
    """A table whose files and whose referenced tables' files are the published version's
    (which passed its checks) is not read again; one whose parent changed is."""
    _, out, _, _ = sample_index
    folder = tmp_path / "out"
    shutil.copytree(out, folder, ignore=shutil.ignore_patterns("cache"))
    entities = store.read_table(folder, "entities")
    units = store.read_table(folder, "text_units")
    checks = _checks_of(folder, {"entities": entities, "text_units": units})
    assert all(c["passed"] for c in checks.values()), checks
    assert {c["rules"] for c in checks.values()} == {"unchanged since the published version"}
    # a text unit that entities name is gone: text_units is checked (and passes), and so is
    # entities, unchanged itself, whose lists now point nowhere
    named = entities["text_unit_ids"].explode().drop_nulls()[0]
    checks = _checks_of(
        folder, {"entities": entities, "text_units": units.filter(pl.col("id") != named)}
    )
    assert checks["text_units"]["rules"] == checks["entities"]["rules"] == "checked"
    assert not checks["entities"]["passed"]
    assert "text_unit_ids values not in text_units.id" in checks["entities"]["problems"]


def test_a_huge_cell_is_previewed_from_its_start():
    """A preview cell folds the whitespace of its first characters only (a 151 MB text split
    into words was 1.2 GB): the same cell as folding the whole, for long and short texts."""
    from assets.metadata import CELL_CHARS, _cell

    def whole(text: str) -> str:
        folded = " ".join(text.split())
        return folded if len(folded) <= CELL_CHARS else folded[: CELL_CHARS - 1] + "…"

    huge = "  Alice   met\tBob in\n\nParis. " * 1_000_000
    for text in (huge, huge[:300], huge[:90], "short  text\n", " " * 500 + "x"):
        assert _cell(text, CELL_CHARS) == whole(text) or not whole(text[: 4 * CELL_CHARS])
