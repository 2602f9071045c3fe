"""Tier 3: dagster.materialize of the whole asset graph into a temp folder on a tiny corpus."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from dagster import AssetCheckKey, AssetKey, AssetSelection, define_asset_job

from app.run import run_index
from definitions import make_definitions
from pipeline.schemas import SEMANTIC_TABLES, TABLES, VECTOR_TABLES
from pipeline.storage import store, validate


@pytest.fixture(scope="module")
def indexed(sample_index) -> tuple[Path, Path, object]:
    inp, out, result, bad = sample_index
    return inp, out, (result, bad)


def test_every_semantic_table_is_written_and_non_empty(indexed):
    _, out, (result, _) = indexed
    assert result.success
    for name in SEMANTIC_TABLES:
        df = store.read_table(out, name)
        assert df.height > 0, name
        assert validate.schema_problems(out, name) == [], name


def test_every_asset_check_passes(indexed):
    _, out, (result, _) = indexed
    evaluations = result.get_asset_check_evaluations()
    defined = make_definitions(output_dir=str(out)).resolve_asset_graph().asset_check_keys
    # every check once, grouped into a step per asset step (assets.checks.index_checks)
    assert sorted(e.asset_check_key for e in evaluations) == sorted(defined)
    assert len(defined) == len(TABLES) + len(VECTOR_TABLES)
    steps = {
        e.step_key for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    assert "graph_integrity" in steps and len(steps) < len(defined) / 2
    failed = [(e.asset_key.to_user_string(), e.metadata) for e in evaluations if not e.passed]
    assert failed == []


def test_one_check_of_a_step_runs_alone(indexed):
    """A step's checks are one Dagster step, but each can still be run by itself (the UI's
    "Execute" on one check): the others of its step are not evaluated."""
    inp, out, _ = indexed
    defs = make_definitions(input_dir=str(inp), output_dir=str(out))
    key = AssetCheckKey(AssetKey("relationships"), "integrity")
    job = define_asset_job("one_check", selection=AssetSelection.checks(key)).resolve(
        asset_graph=defs.resolve_asset_graph()
    )
    result = job.execute_in_process(resources=defs.resources, raise_on_error=False)
    assert result.success
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.asset_check_key == key and evaluation.passed


def test_bad_files_are_rejected_with_reasons_and_nothing_else_is_lost(indexed):
    inp, out, (_, bad) = indexed
    rejected = store.read_table(out, "rejected_documents")
    reasons = dict(rejected.select("source_path", "reason").iter_rows())
    assert set(bad) <= set(reasons)
    for name, word in bad.items():
        assert word.lower() in reasons[name].lower(), (name, reasons[name])
    docs = store.read_table(out, "documents")
    assert sorted(docs["source_path"]) == sorted(p.name for p in inp.iterdir() if p.name not in bad)


def test_graph_links_documents_entities_and_communities(indexed):
    _, out, _ = indexed
    entities = store.read_table(out, "entities")
    titles = set(entities["title"])
    for name in ("Marie Curie", "Albert Einstein", "Brussels", "Niels Bohr"):
        assert name in titles, name
    curie = entities.filter(pl.col("title") == "Marie Curie").row(0, named=True)
    assert curie["frequency"] >= 4 and curie["degree"] >= 5
    reports = store.read_table(out, "community_reports")
    assert reports["rating"].is_between(0, 10).all()
    assert all(len(f) > 0 for f in reports["findings"])


def test_vector_tables_hold_every_row(indexed):
    _, out, _ = indexed
    db = store.lance_db(out)
    for name in ("text_units", "entities", "relationships", "community_reports"):
        assert db.open_table(name).count_rows() == store.read_table(out, name).height, name


def test_rerun_on_unchanged_input_gives_identical_tables(indexed, tmp_path):
    inp, out, _ = indexed
    out2 = tmp_path / "again"
    assert run_index(input_dir=str(inp), output_dir=str(out2)).success
    for name in TABLES:
        if store.table_path(out, name).exists():
            a, b = store.read_table(out, name), store.read_table(out2, name)
            assert a.equals(b), name


def test_failed_stage_keeps_earlier_outputs(indexed, tmp_path, monkeypatch):
    inp, out, _ = indexed
    out3 = tmp_path / "partial"
    shutil.copytree(out, out3)
    before = store.read_table(out3, "communities")
    import assets.communities as semantic

    def boom(*args, **kwargs):
        raise RuntimeError("leiden exploded")

    monkeypatch.setattr(semantic, "hierarchical_leiden", boom)
    result = run_index(input_dir=str(inp), output_dir=str(out3), raise_on_error=False)
    assert not result.success
    assert store.read_table(out3, "communities").equals(before)
    assert not list(out3.rglob("*.tmp"))


def test_structure_layer_is_written(indexed):
    _, out, _ = indexed
    docs = store.read_table(out, "documents")
    sections = store.read_table(out, "sections")
    roots = sections.filter(pl.col("component_type") == "DOCUMENT")
    assert sorted(roots["document_id"]) == sorted(docs["id"])
    assert roots["parent_id"].is_null().all()
    nodes = store.read_table(out, "content_nodes")
    assert set(nodes["document_id"]) == set(docs["id"])
    assert nodes.height > docs.height


def test_links_between_sample_documents_resolve(indexed):
    _, out, (result, _) = indexed
    edges = store.read_table(out, "structure_edges").filter(pl.col("type") == "REFERS_TO")
    sections = store.read_table(out, "sections").select(pl.col("id").alias("target_id"), "uri")
    targets = edges.join(sections, on="target_id", how="left")
    uris = set(targets["uri"].drop_nulls())
    for uri in ("nobel_prize.md", "solvay_conference.txt", "ernest_rutherford.txt"):
        assert uri in uris, uri
    assert "albert_einstein.md#albert-einstein" in uris
    unresolved = targets.filter(pl.col("target_id").is_null())
    assert any("quantum_theory.md" in m for m in unresolved["metadata"])
    meta = [
        m.materialization.metadata
        for m in result.get_asset_materialization_events()
        if m.asset_key.to_user_string() == "structure_edges"
    ][0]
    assert 0 < meta["link_resolution_rate"].value < 1


def test_node_search_is_prefiltered_by_type_and_cites_sections(indexed):
    from pipeline.query import GraphIndex

    _, out, _ = indexed
    index = GraphIndex.open(out)
    headings = index.search_nodes("radioactivity", node_types=["HEADING"], top_k=3)
    assert headings.records and all(r["node_type"] == "HEADING" for r in headings.records)
    assert headings.records[0]["text"] == "Radioactivity"
    paragraphs = index.search_nodes("gold foil experiment", node_types=["PARAGRAPH"])
    top = paragraphs.records[0]
    assert "gold foil" in top["text"] and top["source_path"] == "ernest_rutherford.txt"
    assert store.lance_db(out).open_table("content_nodes").count_rows() == (
        store.read_table(out, "content_nodes").height
    )
    same_topic = store.read_table(out, "same_topic_edges")
    assert (same_topic["type"] == "SAME_TOPIC").all()


def test_a_real_pdf_goes_through_with_pages_and_sections(indexed):
    _, out, _ = indexed
    docs = store.read_table(out, "documents").filter(pl.col("source_path") == "laboratories.pdf")
    assert docs["n_pages"].to_list() == [2]
    doc_id = docs["id"][0]
    sections = store.read_table(out, "sections").filter(pl.col("document_id") == doc_id)
    assert {"1 Cavendish Laboratory", "2 Copenhagen"} <= set(sections["title"])
    nodes = store.read_table(out, "content_nodes").filter(pl.col("document_id") == doc_id)
    pages = {p["page"] for ps in nodes["positions"] for p in ps}
    assert pages == {1, 2}
    assert all(p["x1"] > p["x0"] and p["y1"] > p["y0"] for ps in nodes["positions"] for p in ps)
    units = store.read_table(out, "text_units").filter(pl.col("document_id") == doc_id)
    assert {p for ps in units["pages"] for p in ps} == {1, 2}
    titles = set(store.read_table(out, "entities")["title"])
    assert "Cavendish Laboratory" in titles and "Werner Heisenberg" in titles
