"""The GraphRAG 3.x output contract (pipeline/compat/graphrag_schema.json) over a real index:
every table GraphRAG's readers read has every column they need, with a compatible type, and
our Lance tables open under GraphRAG's names. No graphrag import: the contract is data;
benchmarks/graphrag_compat.py runs GraphRAG's own code over an index."""

from __future__ import annotations

import os

import lancedb
import polars as pl
import pyarrow as pa
import pytest

from pipeline.compat.columns import stamp_period, with_text_unit_ids
from pipeline.compat.contract import check_tables, load_contract, schema_problems, type_ok
from pipeline.compat.lance_names import GRAPHRAG_NAMES
from pipeline.storage import store


@pytest.fixture(scope="module")
def out(sample_index):
    return sample_index[1]


def test_the_contract_names_graphrags_columns_and_where_they_come_from():
    contract = load_contract()
    assert contract["graphrag_version"].startswith("3.")
    tables = contract["tables"]
    # the columns of the issue: GraphRAG's readers fail without them
    assert "rank" in tables["community_reports"]["columns"]
    assert {"text_unit_ids", "raw_data"} <= set(tables["documents"]["columns"])
    assert tables["communities"]["columns"]["period"]["nonempty"]
    for name, spec in tables.items():
        for col, want in spec["columns"].items():
            assert want["type"] in contract["types"], (name, col)
            assert set(want["from"]) <= set(contract["sources"]), (name, col)


def test_every_table_meets_the_contract(out):
    assert check_tables(out) == []


def test_the_check_sees_a_missing_or_mistyped_column():
    spec = load_contract()["tables"]["community_reports"]
    ok = pa.schema([(c, _example(w["type"])) for c, w in spec["columns"].items()])
    assert schema_problems("community_reports", ok, spec) == []
    renamed = ok.set(ok.get_field_index("rank"), pa.field("rating", pa.float64()))
    problems = schema_problems("community_reports", renamed, spec)
    assert problems == ["community_reports.rank: missing"]
    mistyped = ok.set(ok.get_field_index("children"), pa.field("children", pa.string()))
    assert schema_problems("community_reports", mistyped, spec) == [
        "community_reports.children: string is not list[int]"
    ]
    assert not type_ok("int", pa.string()) and type_ok("float", pa.int64())


def _example(kind: str) -> pa.DataType:
    return {
        "str": pa.string(),
        "int": pa.int64(),
        "float": pa.float64(),
        "list[str]": pa.list_(pa.string()),
        "list[int]": pa.list_(pa.int64()),
        "list[struct]": pa.list_(pa.struct([("summary", pa.string())])),
        "object": pa.string(),
    }[kind]


def test_graphrag_columns_hold_what_graphrag_puts_there(out):
    reports = store.read_table(out, "community_reports")
    assert reports["rank"].to_list() == reports["rating"].to_list()
    units = store.read_table(out, "text_units", ["id", "document_id", "covariate_ids"])
    docs = store.read_table(out, "documents", ["id", "text_unit_ids", "raw_data", "metadata"])
    held = docs.select("id", pl.col("text_unit_ids").list.sort()).sort("id")
    expected = (
        units.group_by("document_id")
        .agg(pl.col("id").sort().alias("text_unit_ids"))
        .rename({"document_id": "id"})
    )
    joined = held.join(expected, on="id", how="left", suffix="_units")
    assert joined.height == docs.height and docs.height > 0
    for row in joined.iter_rows(named=True):
        assert row["text_unit_ids"] == (row["text_unit_ids_units"] or []), row["id"]
    assert docs["raw_data"].to_list() == docs["metadata"].to_list()
    assert units["covariate_ids"].list.len().sum() == 0
    for name in ("communities", "community_reports"):
        periods = store.read_table(out, name, ["period"])["period"]
        assert periods.str.contains(r"^\d{4}-\d{2}-\d{2}$").all(), name


def test_lance_tables_open_under_graphrags_names(out):
    contract = load_contract()["vector_tables"]
    assert {contract[a]["table"]: a for a in contract} == GRAPHRAG_NAMES
    folder = store.resolve(out) / store.LANCE_DIR
    db = lancedb.connect(str(folder))
    for ours, alias in GRAPHRAG_NAMES.items():
        table = db.open_table(alias).to_arrow()
        for col, want in contract[alias]["columns"].items():
            assert type_ok(want["type"], table.schema.field(col).type), (alias, col)
        parquet_ids = store.read_table(out, ours, ["id"])["id"].sort().to_list()
        assert sorted(table["id"].to_pylist()) == parquet_ids, alias
        # hard links: the alias shares the source table's files (no second copy on disk)
        src = folder / f"{ours}.lance"
        data = sorted((src / "data").iterdir())
        assert data and os.path.samefile(data[0], folder / f"{alias}.lance" / "data" / data[0].name)


def test_period_is_the_run_date_and_kept_while_a_community_is_unchanged():
    now = pl.DataFrame({"id": ["a", "b"], "period": ["", ""]})
    before = pl.DataFrame({"id": ["a", "c"], "period": ["2024-01-02", "2024-01-03"]})
    out = stamp_period(now, before, today="2026-11-23")
    assert out["period"].to_list() == ["2024-01-02", "2026-11-23"]
    assert stamp_period(now, None, today="2026-11-23")["period"].to_list() == ["2026-11-23"] * 2


def test_documents_get_their_units_in_reading_order():
    docs = pl.DataFrame({"id": ["d1", "d2"], "text_unit_ids": [["old"], ["old"]]})
    units = pl.DataFrame(
        {"id": ["u2", "u1", "u3"], "document_id": ["d1", "d1", "d9"], "seq": [1, 0, 0]}
    )
    out = with_text_unit_ids(docs, units)
    assert out["text_unit_ids"].to_list() == [["u1", "u2"], []]


def test_the_run_date_is_that_of_source_date_epoch_when_set(monkeypatch):
    """Reproducible builds' `$SOURCE_DATE_EPOCH` fixes the ingest date (a rebuild any day
    gives the same `period`); unset or not a number, it is today's UTC date."""
    from datetime import UTC, datetime

    from pipeline.compat.columns import run_date

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert run_date() == "2023-11-14"
    for value in ("", "soon"):
        monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
        assert run_date() == datetime.now(UTC).date().isoformat()
