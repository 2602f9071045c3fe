"""Markdown on markdown-it-py (issue 11): footnotes, definition lists, attribute-list ids,
reference definitions, front-matter-only pages and 1,000-deep nesting, each of which the
line-based parser got wrong, plus the mkdocs containers it kept."""

from __future__ import annotations

import base64
import json
import random
import time

import polars as pl

from pipeline.ingest import load_folder
from pipeline.structure import build_structure
from pipeline.structure.markdown import parse_markdown
from pipeline.structure.model import DocStructure


def _parse(md: str) -> DocStructure:
    return parse_markdown("d", "t.md", "t", md)


def _meta(row: dict) -> dict:
    return json.loads(row["metadata"])


def _links(doc: DocStructure) -> dict[str, dict]:
    return {link["href"]: link for link in doc.links}


FOOTNOTES = """# Notes

Einstein's 1905 papers[^ann] changed physics[^2].

[^ann]: Published in *Annalen der Physik*, see [the volume](annalen.md).

    A second paragraph of the note, with [its own link](volume17.md).

[^2]: A short one.
"""


def test_footnote_bodies_are_note_nodes_linked_from_their_markers():
    doc = _parse(FOOTNOTES)
    assert not any(n["node_type"] == "CODE" for n in doc.nodes)
    notes = {_meta(n)["marker"]: n for n in doc.nodes if n["node_type"] == "NOTE"}
    assert set(notes) == {"ann", "2"}
    assert "Annalen der Physik" in notes["ann"]["text"]
    assert "second paragraph of the note" in notes["ann"]["text"]
    assert (_meta(notes["ann"])["line_start"], _meta(notes["ann"])["line_end"]) == (5, 7)
    links = _links(doc)
    assert links["annalen.md"]["source_id"] == notes["ann"]["id"]
    assert links["volume17.md"]["source_id"] == notes["ann"]["id"]
    para = next(n for n in doc.nodes if n["node_type"] == "PARAGRAPH")
    edges = {(e["source_id"], e["target_id"], e["marker_text"]) for e in doc.edges}
    assert edges == {
        (para["id"], notes["ann"]["id"], "ann"),
        (para["id"], notes["2"]["id"], "2"),
    }
    assert all(e["type"] == "REFERENCES_NOTE" for e in doc.edges)


DEFINITIONS = """# Glossary

Half-life
:   The time for half of a radioactive sample to decay, see [decay](decay.md).

    Measured for radium by [Rutherford](rutherford.md).

Isotope
:   Atoms of one element with different masses.
"""


def test_definition_list_bodies_keep_their_term_and_links():
    doc = _parse(DEFINITIONS)
    assert not any(n["node_type"] == "CODE" for n in doc.nodes)
    items = [n for n in doc.nodes if n["node_type"] == "LIST_ITEM"]
    assert [(_meta(n)["term"], n["seq_minor"]) for n in items] == [
        ("Half-life", 0),
        ("Half-life", 1),
        ("Isotope", 0),
    ]
    assert items[0]["text"].startswith("Half-life: The time for half")
    assert (_meta(items[0])["line_start"], _meta(items[0])["line_end"]) == (3, 4)  # term on
    assert items[1]["text"] == "Measured for radium by [Rutherford](rutherford.md)."
    links = _links(doc)
    assert links["decay.md"]["source_id"] == items[0]["id"]
    assert links["rutherford.md"]["source_id"] == items[1]["id"]


ATTR_IDS = """# Page

## Quoted id { id="quoted" }

## Colon style {: #colon .wide }

## Spaced { #spaced }

## Class only { .wide }

Body text.
{ #para-id }
"""


def test_attribute_list_ids_of_every_style_name_the_section():
    doc = _parse(ATTR_IDS)
    got = [(s["title"], s["uri"]) for s in doc.sections[1:]]
    assert got == [
        ("Page", "t.md#page"),
        ("Quoted id", "t.md#quoted"),
        ("Colon style", "t.md#colon"),
        ("Spaced", "t.md#spaced"),
        ("Class only", "t.md#class-only"),
    ]
    last = doc.sections[-1]
    assert _meta(last)["anchors"] == ["para-id"]
    assert [n["text"] for n in doc.nodes if n["node_type"] == "PARAGRAPH"] == ["Body text."]


REFERENCES = """# Refs

Planck's constant is explained in the
[quantum]: wrong.md

Read [the quantum page][quantum] first.

[quantum]: right.md
"""


def test_a_definition_like_line_inside_a_paragraph_shadows_no_definition():
    doc = _parse(REFERENCES)
    hrefs = {link["text"]: link["href"] for link in doc.links}
    assert hrefs["the quantum page"] == "right.md"
    assert "wrong.md" not in {link["href"] for link in doc.links}


def test_a_front_matter_only_page_is_a_document_its_links_reach(tmp_path):
    (tmp_path / "moved.md").write_text("---\ntitle: Moved page\nredirect: new.md\n---\n", "utf-8")
    (tmp_path / "bare.md").write_text("---\nredirect: new.md\n---\n", "utf-8")
    (tmp_path / "new.md").write_text("# New\n\nOld address: [moved](moved.md).\n", "utf-8")
    docs, rejected = load_folder(tmp_path)
    assert rejected.is_empty(), rejected.to_dicts()
    titles = dict(zip(docs["source_path"], docs["title"], strict=True))
    assert titles["moved.md"] == "Moved page" and titles["bare.md"] == "bare"
    built = build_structure(docs, tmp_path)
    sections, nodes, edges = built.tables
    warnings = built.warnings
    assert warnings == {}
    moved_id = docs.filter(pl.col("source_path") == "moved.md")["id"].item()
    root = sections.filter(pl.col("document_id") == moved_id)
    assert root.select("uri", "component_type").rows() == [("moved.md", "DOCUMENT")]
    assert json.loads(root["metadata"].item())["front_matter"]["redirect"] == "new.md"
    refers = edges.filter(pl.col("type") == "REFERS_TO")
    assert refers["target_id"].to_list() == [root["id"].item()]


def test_a_page_of_empty_front_matter_is_still_an_empty_file(tmp_path):
    (tmp_path / "empty.md").write_text("---\n---\n", "utf-8")
    docs, rejected = load_folder(tmp_path)
    assert docs.is_empty() and rejected["reason"].to_list() == ["empty file (front matter only)"]


DEPTH = 1000
DEEP = {
    "list": "".join("  " * i + f"- level {i} item\n" for i in range(DEPTH)),
    "quotes": "> " * DEPTH + "deep [inside](quoted.md)\n",
    "quote lines": "".join(">" * (i + 1) + f" line {i}\n" for i in range(DEPTH)),
    "list in quote": "".join(
        "  " * i + ("- " if i % 2 else "> ") + f"x{i}\n" for i in range(DEPTH)
    ),
    "admonitions": "".join("    " * i + "!!! note\n" for i in range(DEPTH))
    + "    " * DEPTH
    + "body [b](deep.md)\n",
    "images": "![" * DEPTH + "x" + "](i.png)" * DEPTH + "\n",
    "brackets": "[" * DEPTH + "x" + "](a.md)" * DEPTH + "\n",
}


def test_nesting_1000_deep_degrades_to_flat_content_quickly():
    for name, body in DEEP.items():
        t0 = time.perf_counter()
        doc = _parse("# Deep\n\n" + body)
        assert time.perf_counter() - t0 < 5, name
        assert len(doc.sections) == 2, name
        assert doc.nodes[1:], name
    doc = _parse("# Deep\n\n" + DEEP["list"])
    items = [n["text"] for n in doc.nodes if n["node_type"] == "LIST_ITEM"]
    assert items == [f"level {i} item" for i in range(DEPTH)]
    depths = [_meta(n)["depth"] for n in doc.nodes if n["node_type"] == "LIST_ITEM"]
    assert depths[:3] == [0, 1, 2] and depths == sorted(depths)
    assert [link["href"] for link in _parse(DEEP["quotes"]).links] == ["quoted.md"]
    assert [link["href"] for link in _parse(DEEP["admonitions"]).links] == ["deep.md"]


CONTAINERS = """# API

!!! example "With code"
    Before the code.

    ### Inside heading

    ```python
    x = 1


    y = 2
    ```

    After two blank lines, [still inside](inside.md).

=== "Tab one"

    Tab text [tab link](tab.md).

::: pkg.module
    options:
      show_source: false

<a id="old-name"></a>

## Renamed

| a | b |
|---|---|
| 1 | [two](two.md) |
"""


def test_mkdocs_containers_tables_and_html_anchors():
    doc = _parse(CONTAINERS)
    nodes = {n["text"][:12]: n for n in doc.nodes}
    after = _meta(nodes["After two bl"])
    assert (after["container"], after["container_title"]) == ("admonition:example", "With code")
    code = next(n for n in doc.nodes if n["text"].startswith("x = 1"))
    assert code["text"] == "x = 1\n\n\ny = 2" and _meta(code)["container"] == "admonition:example"
    assert _meta(nodes["Tab text [ta"])["container"] == "tab"
    directive = nodes["::: pkg.modu"]
    assert directive["node_type"] == "CODE" and "show_source" in directive["text"]
    api, renamed = doc.sections[1:]
    assert _meta(api)["anchors"] == ["inside-heading", "pkg.module"]
    inside = nodes["### Inside h"]  # no section, but its toc id still leads here
    assert inside["node_type"] == "PARAGRAPH" and inside["section_id"] == api["id"]
    assert _meta(renamed)["anchors"] == ["old-name"]
    table = next(n for n in doc.nodes if n["node_type"] == "TABLE")
    assert _meta(table)["rows"] == [["a", "b"], ["1", "[two](two.md)"]]
    assert {link["href"] for link in doc.links} == {"inside.md", "tab.md", "two.md"}


def test_front_matter_left_in_the_text_is_no_content():
    doc = _parse("---\ntitle: [unclosed\n---\n\n# Real title\n\nBody.\n")
    assert [s["title"] for s in doc.sections[1:]] == ["Real title"]
    assert [n["text"] for n in doc.nodes] == ["Real title", "Body."]
    assert _meta(doc.sections[1])["line_start"] == 5


# Issue 45, 4: images read as their words, their addresses are links, data URIs are nowhere.
PAYLOAD = base64.b64encode(random.Random(45).randbytes(600_000)).decode()  # 800 KB of base64
IMAGES = f"""# Lab

The lab in 1920.

![A photo of the lab](data:image/png;base64,{PAYLOAD} "Cavendish, 1920")

![Logo](https://example.com/logo.png) and a [badge ![CI](https://ci.example.com/b.svg)](ci.md)

![By reference][plan] <img src="data:image/gif;base64,{PAYLOAD[:500]}" alt="An inline one">

<img src="figures/floor.png" alt="The floor plan" title="Ground floor">

| Room | View |
|------|------|
| Lab  | ![A cell photo](data:image/png;base64,{PAYLOAD[:500]}){{.wide}} |

[Download](data:application/pdf;base64,{PAYLOAD[:500]})

[plan]: data:image/png;base64,{PAYLOAD[:500]}
"""


def test_images_read_as_their_alt_text_and_their_addresses_are_links():
    doc = _parse(IMAGES)
    text = "\n".join(n["text"] for n in doc.nodes)
    assert "base64" not in text and PAYLOAD[:40] not in text
    for words in (
        "A photo of the lab (Cavendish, 1920)",
        "Logo and a [badge CI](ci.md)",
        "By reference An inline one",
        "The floor plan (Ground floor)",
        "| Lab  | A cell photo |",
        "[Download]([data])",
    ):
        assert words in text, words
    assert [(link["href"], link["kind"], link["text"]) for link in doc.links] == [
        ("https://example.com/logo.png", "image", "Logo"),
        ("https://ci.example.com/b.svg", "image", "CI"),
        ("ci.md", "inline", "badge"),
        ("figures/floor.png", "image", "The floor plan"),
    ]


def test_a_data_uri_image_indexes_to_a_few_units_of_its_alt_text(tmp_path):
    """The real index job: an 800 KB data URI image was 2,000 units of base64 (and as many
    entities); now the page is a unit or two holding its alt text, the image address a link,
    and a data URI in a plain-text file reads as `[image]`."""
    from app.run import run_index
    from pipeline.storage import store

    inp, out = tmp_path / "input", tmp_path / "output"
    inp.mkdir()
    (inp / "lab.md").write_text(IMAGES, encoding="utf-8")
    (inp / "notes.txt").write_text(
        f"Notes on the lab.\n\nIts photo: data:image/png;base64,{PAYLOAD[:100_000]}\n", "utf-8"
    )
    assert run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR").success
    units = store.read_table(out, "text_units")["text"].to_list()
    assert len(units) <= 4, len(units)
    assert any("A photo of the lab (Cavendish, 1920)" in u for u in units)
    assert any("Its photo: [image]" in u for u in units)
    entities = store.read_table(out, "entities").select("title", "description")
    stored = "\n".join([*units, *entities.to_series(0), *entities.to_series(1)])
    assert "base64" not in stored and PAYLOAD[:40] not in stored
    links = store.read_table(out, "document_links")
    assert ("https://example.com/logo.png", "image") in links.select("href", "kind").rows()
    assert not links["href"].str.starts_with("data:").any()


def test_the_plain_chunker_reads_a_data_uri_as_a_placeholder(tmp_path):
    """chunking.method: simple (and the fallback of a document whose structure failed) cuts
    the document's text itself: its data URIs too read as `[image]` there."""
    from pipeline.chunking.documents import chunk_structured
    from pipeline.config import ChunkingSettings

    (tmp_path / "lab.md").write_text(IMAGES, encoding="utf-8")
    docs, _ = load_folder(tmp_path)
    sections, nodes, _ = build_structure(docs, tmp_path).tables
    units = chunk_structured(docs, sections, nodes, ChunkingSettings(method="simple"))
    text = "\n".join(units["text"])
    assert units.height <= 2 and "![A photo of the lab]([image]" in text
    assert "base64" not in text
