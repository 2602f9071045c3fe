"""The publications manifest end to end: the real index job over a folder whose manifest maps
documents to publications (with bad rows), then the tables, the failures, filtered queries
and the vector tables' provenance columns."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from pipeline import schemas
from pipeline.config import Settings
from pipeline.ingest import folder_fingerprint, shards
from pipeline.query import GraphIndex
from pipeline.storage import store

BOHR = (
    "Niels Bohr\n\nNiels Bohr founded the Institute for Theoretical Physics in Copenhagen in "
    "1921. Bohr's model of the hydrogen atom placed electrons on fixed orbits around the "
    "nucleus, and Copenhagen became a centre of quantum mechanics.\n"
)
BOHR_DATA = (
    "# Copenhagen visitors\n\nWerner Heisenberg visited Niels Bohr in Copenhagen in 1926 and "
    "worked at the Copenhagen institute on the uncertainty principle.\n"
)
CURIE = (
    "# Marie Curie\n\nMarie Curie discovered polonium and radium in Paris with Pierre Curie. "
    "She won the Nobel Prize in Chemistry in 1911 for the isolation of radium.\n"
)

GOOD = [
    {
        "id": "P1",
        "title": "Bohr and Copenhagen",
        "abstract": "The Copenhagen institute.",
        "authors": ["A. Historian", {"name": "B. Archivist"}],
        "date": 1985,
        "source_url": "https://example.org/p1",
        "files": [
            {"path": "bohr.txt", "type": "main", "language": "en", "version": 2},
            {"path": "data/visitors.md", "type": "SUPPLEMENTAL", "description": "visitor log"},
            {"path": "nothing-here/*.pdf", "type": "OTHER"},  # a glob that matches nothing
        ],
    },
    {
        "id": "P2",
        "title": "Radium",
        "citation": "Curie, M. (1911).",
        "files": [
            {"path": "curie/*.md"},
            {"path": "bohr.txt", "type": "APPENDIX"},  # unknown type
            {"path": "data/visitors.md", "type": "OTHER"},  # claimed by P1 already
        ],
    },
]
BAD_LINES = [json.dumps({"id": "P1", "title": "again"}), '{"id": "P3", "title": ']


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    from app.run import run_index

    root = tmp_path_factory.mktemp("pubs")
    inp, out = root / "in", root / "out"
    (inp / "data").mkdir(parents=True)
    (inp / "curie").mkdir()
    (inp / "bohr.txt").write_text(BOHR, encoding="utf-8")
    (inp / "data" / "visitors.md").write_text(BOHR_DATA, encoding="utf-8")
    (inp / "curie" / "radium.md").write_text(CURIE, encoding="utf-8")
    lines = [json.dumps(p) for p in GOOD] + BAD_LINES
    (inp / "publications.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run_index(input_dir=str(inp), output_dir=str(out))
    assert result.success
    return inp, out, result


def test_publications_and_document_columns(indexed):
    _, out, _ = indexed
    docs = store.read_table(out, "documents").sort("source_path")
    assert docs["source_path"].to_list() == ["bohr.txt", "curie/radium.md", "data/visitors.md"]
    cols = ["publication_id", "document_type", "document_description", "document_language"]
    assert docs.select(cols + ["document_version"]).rows() == [
        ("P1", "MAIN", None, "en", "2"),
        ("P2", "MAIN", None, None, None),
        ("P1", "SUPPLEMENTAL", "visitor log", None, None),
    ]
    assert store.read_table(out, "rejected_documents").height == 0  # the manifest is no document
    pubs = store.read_table(out, "publications")
    assert pubs["id"].to_list() == ["P1", "P2"]
    p1, p2 = pubs.rows(named=True)
    assert (p1["title"], p1["date"], p1["authors"]) == (
        "Bohr and Copenhagen",
        "1985",
        ["A. Historian", "B. Archivist"],
    )
    assert p1["source_url"] == "https://example.org/p1" and p2["citation"] == "Curie, M. (1911)."
    by_path = dict(zip(docs["source_path"], docs["id"], strict=True))
    assert sorted(p1["document_ids"]) == sorted([by_path["bohr.txt"], by_path["data/visitors.md"]])
    assert p2["document_ids"] == [by_path["curie/radium.md"]]


def test_bad_manifest_rows_are_failure_rows_with_reasons(indexed):
    _, out, result = indexed
    fails = store.read_table(out, "publication_failures")
    rows = {(r["source_path"], r["reason"], r["fallback"]) for r in fails.iter_rows(named=True)}
    m, skipped = "publications.jsonl", "file entry skipped"
    claimed = "claimed by publications P1 and P2 (publications.jsonl line 2)"
    unknown = "unknown document type 'APPENDIX' (MAIN, SUPPLEMENTAL or OTHER)"
    assert rows == {
        (m, "line 1: publication P1, file 3 (nothing-here/*.pdf): matches no file", skipped),
        (m, f"line 2: publication P2, file 2: type: {unknown}", skipped),
        ("data/visitors.md", claimed, "kept in P1"),
        (m, "line 3: duplicate publication id P1", "publication skipped (the first one is kept)"),
        (m, "line 4: invalid JSON (Expecting value)", "line skipped"),
    }
    assert set(fails["stage"]) == {"publications"}
    [event] = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key.path == ["publication_failures"]
    ]
    shown = event.materialization.metadata["failures"].value
    assert "duplicate publication id P1" in shown and "matches no file" in shown


def test_queries_filtered_by_publication(indexed):
    _, out, _ = indexed
    settings = Settings(output_dir=str(out))
    docs = store.read_table(out, "documents")
    units = store.read_table(out, "text_units", ["id", "document_id"])
    p2_docs = set(docs.filter(docs["publication_id"] == "P2")["id"])
    p2_units = set(units.filter(units["document_id"].is_in(list(p2_docs)))["id"])
    question = "Who founded the institute in Copenhagen, Niels Bohr?"

    everything = GraphIndex.open(out, settings)
    assert not set(everything.naive_search(question).text_unit_ids) <= p2_units

    scoped = GraphIndex.open(out, settings, publication_id="P2")
    for result in (
        scoped.naive_search(question),
        scoped.local_search(question),
        scoped.expand_search(question),
        scoped.flow_search(question),
    ):
        assert result.text_unit_ids, result.mode
        assert set(result.text_unit_ids) <= p2_units, result.mode
        units_shown = [r for r in result.records if r.get("kind") == "text_unit"]
        assert {r["publication_title"] for r in units_shown} <= {"Radium"}, result.mode
    record = scoped.naive_search(question).records[0]
    assert (record["publication_id"], record["publication_title"]) == ("P2", "Radium")

    both = everything.for_publications(["P1", "P2"]).naive_search(question)
    assert set(both.text_unit_ids) == set(everything.naive_search(question).text_unit_ids)
    with pytest.raises(ValueError, match="unknown publication id P9; known: P1, P2"):
        GraphIndex.open(out, settings, publication_id="P9")


def test_cli_publication_option(indexed, capsys):
    from app.cli.main import main

    _, out, _ = indexed
    args = ["query", "naive", "radium and polonium", "--output", str(out), "--json"]
    assert main([*args, "--publication", "P1"]) == 0
    records = json.loads(capsys.readouterr().out)["records"]
    assert records and {r["publication_id"] for r in records} == {"P1"}
    assert main([*args, "--publication", "nope"]) == 2
    assert "unknown publication id nope" in capsys.readouterr().err


def test_lance_tables_record_model_and_time(indexed):
    import lancedb

    _, out, _ = indexed
    db = lancedb.connect(str(store.resolve(out) / store.LANCE_DIR))
    now, model = datetime.now(UTC), Settings().embedding.model
    assert model.endswith("all-MiniLM-L6-v2")  # the name as configured, not a local path
    for name in schemas.VECTOR_TABLES:
        table = db.open_table(name).to_arrow()
        assert set(table["embedding_model"].to_pylist()) <= {model}, name
        stamps = table["created_at"].to_pylist()
        assert all(now - timedelta(minutes=30) < s <= now for s in stamps), name
    assert db.open_table("text_units").count_rows() > 0


def test_a_manifest_edit_makes_only_the_remapped_files_shard_stale(indexed):
    inp, out, _ = indexed
    settings = Settings(input_dir=str(inp), output_dir=str(out))
    from pipeline.ingest.find_stale import stale_shards

    assert stale_shards(settings) == []
    before = folder_fingerprint(inp)
    manifest = inp / "publications.jsonl"
    text = manifest.read_text(encoding="utf-8")
    try:
        manifest.write_text(text.replace('"visitor log"', '"guest book"'), encoding="utf-8")
        assert folder_fingerprint(inp) != before  # the folder sensor sees the edit
        n = settings.storage.shards
        assert stale_shards(settings) == [shards.shard_of("data/visitors.md", n)]
    finally:
        manifest.write_text(text, encoding="utf-8")


def test_json_manifest_object_form_globs_and_bad_paths(tmp_path):
    from pipeline.ingest import InputFolderError, check_input_folder, walk_input
    from pipeline.ingest.publications import read_manifest

    (tmp_path / "publications.json").write_text('{"publications": []}', encoding="utf-8")
    with pytest.raises(InputFolderError, match="holds no files"):  # the manifest is no file
        check_input_folder(tmp_path)
    (tmp_path / "ch").mkdir()
    for name in ("ch/1.md", "ch/2.md", "ch/errata.md"):
        (tmp_path / name).write_text("# x\n\ntext\n", encoding="utf-8")
    book = {
        "id": "B",
        "files": [
            {"path": "ch/*.md"},  # every chapter ...
            {"path": "./ch/errata.md", "type": "other", "version": "3"},  # ... but this one
            {"path": "../elsewhere.md"},
        ],
    }
    data = {"publications": [book, {"id": " ", "title": "blank id"}, "not an object"]}
    (tmp_path / "publications.json").write_text(json.dumps(data), encoding="utf-8")
    entries = walk_input(tmp_path)
    assert [e.rel for e in entries] == ["ch/1.md", "ch/2.md", "ch/errata.md"]
    manifest = read_manifest(tmp_path, entries)
    files = {
        r: (m.publication_id, m.document_type, m.document_version)
        for r, m in manifest.files.items()
    }
    assert files == {
        "ch/1.md": ("B", "MAIN", None),
        "ch/2.md": ("B", "MAIN", None),
        "ch/errata.md": ("B", "OTHER", "3"),
    }
    assert [f["reason"] for f in manifest.failures] == [
        "item 1: publication B, file 3: path: path '../elsewhere.md' is not inside the input "
        "folder",
        "item 2: id: missing publication id",
        "item 3: not an object",
    ]
    (tmp_path / "publications.json").write_text('{"title": "no list"}', encoding="utf-8")
    [failure] = read_manifest(tmp_path, entries).failures
    assert failure["reason"] == (
        "top level is an object without a 'publications' list, not a list of publications"
    )
    assert failure["fallback"] == "manifest ignored"
