"""Ids survive edits: a one-line edit changes the ids of the text units, content nodes and
sections it touches, and no others, so rows, caches and citations downstream stay valid.

A document's id is the hash of its bytes (any edit changes it); units, nodes and sections
are anchored to the document's relative path and their own content instead.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.chunking.documents import chunk_structured
from pipeline.config import Settings
from pipeline.ingest import load_folder
from pipeline.structure import build_structure

SETTINGS = Settings()


def _index(folder: Path) -> tuple[pl.DataFrame, ...]:
    docs, _ = load_folder(folder)
    sections, nodes, edges = build_structure(docs, folder, SETTINGS.structure).tables
    units = chunk_structured(docs, sections, nodes, SETTINGS.chunking)
    return docs, sections, nodes, edges, units


def _edit_middle_line(path: Path, old: str, new: str) -> None:
    """Replace `old` by `new` in the first line at or after the middle of the file holding it."""
    lines = path.read_text("utf-8").split("\n")
    at = next(i for i in range(len(lines) // 2, len(lines)) if old in lines[i])
    lines[at] = lines[at].replace(old, new, 1)
    path.write_text("\n".join(lines), encoding="utf-8")


def _changed(before: pl.DataFrame, after: pl.DataFrame, cols: list[str]) -> tuple[int, int]:
    """(rows of `after` whose id is new, rows whose id is kept but whose `cols` differ)."""
    joined = after.join(before, on="id", how="left", suffix="_old")
    new = joined.filter(pl.col(f"{cols[0]}_old").is_null()).height
    differ = joined.filter(pl.col(f"{cols[0]}_old").is_not_null()).filter(
        pl.any_horizontal([pl.col(c) != pl.col(f"{c}_old") for c in cols])
    )
    return new, differ.height


def test_a_one_line_edit_of_the_book_changes_at_most_two_unit_ids(tmp_path, shared_data):
    book = tmp_path / "carol.txt"
    book.write_bytes((shared_data / "christmas_carol" / "mock_data.txt").read_bytes())
    docs0, sections0, nodes0, _, units0 = _index(tmp_path)
    _edit_middle_line(book, "Scrooge", "Ebenezer Scrooge")
    docs1, sections1, nodes1, _, units1 = _index(tmp_path)
    assert docs0["id"].item() != docs1["id"].item()  # the document row: its bytes' hash
    assert (units1["document_id"] == docs1["id"].item()).all()
    assert units0.height > 200 and abs(units1.height - units0.height) <= 1
    new, differ = _changed(units0, units1, ["text"])
    assert 1 <= new <= 2 and differ == 0
    kept = set(units0["id"]) & set(units1["id"])
    assert len(kept) >= units1.height - 2
    assert _changed(nodes0, nodes1, ["text"]) == (1, 0)  # the edited paragraph only
    assert set(sections0["id"]) == set(sections1["id"])


def test_a_one_line_edit_of_a_markdown_page_keeps_other_ids(tmp_path, shared_data):
    page = tmp_path / "models.md"
    src = shared_data / "markdown" / "pydantic" / "docs" / "concepts" / "models.md"
    page.write_bytes(src.read_bytes())
    _, sections0, nodes0, edges0, units0 = _index(tmp_path)
    _edit_middle_line(page, " the ", " the very ")
    _, sections1, nodes1, edges1, units1 = _index(tmp_path)
    assert sections0.select("id", "title", "path").equals(sections1.select("id", "title", "path"))
    assert _changed(nodes0, nodes1, ["text", "section_id"]) == (1, 0)
    new, differ = _changed(units0, units1, ["text"])
    assert 1 <= new <= 2 and differ == 0
    kept_edges = set(edges0.select("source_id", "target_id", "type").rows())
    edges_now = set(edges1.select("source_id", "target_id", "type").rows())
    assert len(edges_now - kept_edges) <= 2  # edges from or to the edited node


def test_ids_are_unique_and_deterministic_with_repeated_texts(tmp_path):
    para = "The same boilerplate paragraph, repeated verbatim."
    body = "\n\n".join(["# Notes", para, "## A", para, para, "## A", para, "## B", para])
    (tmp_path / "rep.md").write_text(body + "\n", encoding="utf-8")
    _, sections, nodes, _, units = _index(tmp_path)
    _, sections2, nodes2, _, units2 = _index(tmp_path)
    for a, b in ((sections, sections2), (nodes, nodes2), (units, units2)):
        assert a["id"].n_unique() == a.height and a["id"].equals(b["id"])
    assert nodes.filter(pl.col("text") == para).height == 5
    assert sections["title"].to_list().count("A") == 2


def test_renaming_the_file_is_a_new_document_to_the_ids(tmp_path):
    """Ids are anchored to the relative path: the same bytes under another name are
    another document, with other units and nodes (the bytes' hash is the same)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    text = "# Title\n\nMarie Curie worked in Paris.\n"
    (tmp_path / "a" / "one.md").write_text(text, encoding="utf-8")
    (tmp_path / "b" / "two.md").write_text(text, encoding="utf-8")
    docs_a, _, nodes_a, _, units_a = _index(tmp_path / "a")
    docs_b, _, nodes_b, _, units_b = _index(tmp_path / "b")
    assert docs_a["sha256"].equals(docs_b["sha256"]) and not docs_a["id"].equals(docs_b["id"])
    assert not set(units_a["id"]) & set(units_b["id"])
    assert not set(nodes_a["id"]) & set(nodes_b["id"])
