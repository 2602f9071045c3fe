"""Notebook exports: the loader (json / jsonl / rejected non-notes JSON) and the structure
from which a note's parent, children, siblings, object and referring notes all derive."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.ingest import load_folder
from pipeline.structure import build_structure

NOTEBOOK = {
    "title": "Physics notebook",
    "notes": [
        {"uri": "n:physics", "title": "Physics", "details": "Root note."},
        {
            "uri": "n:bohr",
            "title": "Niels Bohr",
            "parentUri": "n:physics",
            "siblingOrder": 2,
            "details": "Danish physicist. See [[Atom]].",
        },
        {"uri": "n:atom", "title": "Atom", "parent_uri": "n:physics", "sibling_order": 1},
        {
            "uri": "n:model",
            "title": "Bohr model",
            "parent_uri": "n:physics",
            "sibling_order": 3,
            "details": "Described in [Bohr's note](n:bohr).",
        },
        {"uri": "n:proposed", "title": "proposed", "parent_uri": "n:bohr", "object_uri": "n:model"},
        {"uri": "n:lost", "title": "cites", "parent_uri": "n:bohr", "object_uri": "n:missing"},
    ],
}
# a second notebook, one note per line, whose reification points into the first
JSONL = [
    {"uri": "m:electron", "title": "Электрон", "details": "Частица, см. [[Atom]]."},
    {"uri": "m:part", "title": "part of", "parent_uri": "m:electron", "object_uri": "n:atom"},
]


_ROOT: list = []


def built_root():
    return _ROOT[0]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("notes")
    _ROOT.append(root)
    (root / "physics.json").write_text(json.dumps(NOTEBOOK), encoding="utf-8")
    (root / "more.jsonl").write_text(
        "\n".join(json.dumps(n, ensure_ascii=False) for n in JSONL), encoding="utf-8"
    )
    (root / "config.json").write_text(json.dumps({"debug": True}), encoding="utf-8")
    (root / "list.json").write_text(json.dumps([{"a": 1}]), encoding="utf-8")
    docs, rejected = load_folder(root)
    built = build_structure(docs, root)
    sections, nodes, edges = built.tables
    warnings = built.warnings
    return docs, rejected, sections, nodes, edges, warnings


def test_loader(built):
    docs, rejected, *_ = built
    reasons = dict(zip(rejected["source_path"], rejected["reason"], strict=True))
    assert reasons["config.json"].startswith("JSON is not a notes export: ")
    assert reasons["list.json"].startswith("JSON is not a notes export: ")
    phys = docs.filter(pl.col("source_path") == "physics.json").row(0, named=True)
    assert phys["mime_type"] == "application/x-notes+json"
    assert phys["title"] == "Physics notebook"
    text = phys["text"]
    order = ["# Physics", "## Atom", "## Niels Bohr", "### proposed", "### cites", "## Bohr model"]
    assert [text.index(h + "\n") for h in order] == sorted(text.index(h + "\n") for h in order)
    assert "Object: Bohr model" in text and "Danish physicist" in text
    more = docs.filter(pl.col("source_path") == "more.jsonl").row(0, named=True)
    assert more["title"] == "Электрон" and more["language"] == "ru"


def _rel(built):
    docs, _, sections, nodes, edges, warnings = built
    s = sections.filter(pl.col("component_type") == "NOTE")
    uri_of = dict(zip(sections["id"], sections["uri"], strict=True))
    node_section = dict(zip(nodes["id"], nodes["section_id"], strict=True))
    return s, uri_of, node_section, edges


def test_parent_children_siblings(built):
    s, uri_of, _, _ = _rel(built)
    assert s.height == 8
    by_uri = {r["uri"]: r for r in s.iter_rows(named=True)}
    assert uri_of[by_uri["n:bohr"]["parent_id"]] == "n:physics"
    assert by_uri["n:physics"]["component_type"] == "NOTE"
    assert uri_of[by_uri["n:physics"]["parent_id"]] == "physics.json"  # the document root
    children = s.filter(pl.col("parent_id") == by_uri["n:physics"]["id"]).sort("seq")
    assert children["uri"].to_list() == ["n:atom", "n:bohr", "n:model"]
    assert children["seq"].to_list() == [0, 1, 2]
    # siblings of Niels Bohr: previous and next by seq under the same parent
    bohr = by_uri["n:bohr"]
    sib = s.filter(pl.col("parent_id") == bohr["parent_id"])
    prev = sib.filter(pl.col("seq") == bohr["seq"] - 1)["uri"].to_list()
    nxt = sib.filter(pl.col("seq") == bohr["seq"] + 1)["uri"].to_list()
    assert (prev, nxt) == (["n:atom"], ["n:model"])
    assert by_uri["n:proposed"]["path"] == ["Physics notebook", "Physics", "Niels Bohr", "proposed"]
    assert by_uri["n:proposed"]["level"] == 3


def test_details_nodes(built):
    docs, _, sections, nodes, *_ = built
    sec = sections.filter(pl.col("uri") == "n:bohr")["id"][0]
    got = nodes.filter(pl.col("section_id") == sec).select("node_type", "text").rows()
    assert got == [("HEADING", "Niels Bohr"), ("PARAGRAPH", "Danish physicist. See [[Atom]].")]


def test_object_and_referring_notes(built):
    s, uri_of, node_section, edges = _rel(built)
    reifies = edges.filter(pl.col("type") == "REIFIES")
    obj = {
        uri_of[r["source_id"]]: uri_of.get(r["target_id"]) for r in reifies.iter_rows(named=True)
    }
    assert obj == {"n:proposed": "n:model", "n:lost": None, "m:part": "n:atom"}
    lost = reifies.filter(pl.col("target_id").is_null())["metadata"][0]
    assert json.loads(lost)["reason"] == "object note not in corpus"

    refers = edges.filter(pl.col("type") == "REFERS_TO")
    referring: dict[str, set[str]] = {}
    for r in refers.iter_rows(named=True):
        if r["target_id"] is not None:
            src = uri_of[node_section[r["source_id"]]]
            referring.setdefault(uri_of[r["target_id"]], set()).add(src)
    for r in reifies.iter_rows(named=True):  # reification notes refer to their object too
        if r["target_id"] is not None:
            referring.setdefault(uri_of[r["target_id"]], set()).add(uri_of[r["source_id"]])
    assert referring == {
        "n:atom": {"n:bohr", "m:electron", "m:part"},  # wikilinks by title, cross-notebook
        "n:bohr": {"n:model"},  # a link to the note's uri
        "n:model": {"n:proposed"},
    }


def test_deterministic(built):
    docs, _, sections, nodes, edges, _ = built
    again = build_structure(load_folder(built_root())[0], built_root()).tables
    assert again[0].equals(sections) and again[1].equals(nodes) and again[2].equals(edges)
    fallback = build_structure(docs, None)  # without the files: the rendered text's headings
    assert "notes file not available" in fallback.warnings["physics.json"][0]
    assert "Niels Bohr" in fallback.sections["title"].to_list()
