"""Markdown structure: tree shape, node types, line numbers, links of every kind resolved
across two documents (and unresolved ones with their reasons), determinism."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest import load_folder
from pipeline.structure import build_structure
from pipeline.structure.markdown import parse_blocks, plain_inline
from pipeline.structure.model import slugify

A_MD = """---
title: Alpha Doc
tags: [x, y]
---
Intro with [link to b](guide/b.md) and [b setup](guide/b.md#setup-steps).

# Alpha

Text under alpha.

## Install {#custom-install}

```bash
# not a heading
[not a link](guide/b.md)
```

| col | val |
|-----|-----|
| a   | 1   |

- item one [ref link][b-ref]
- item two
    - nested [[b#Usage Notes]]

Setext Title
------------

> quoted [encoded](guide/b%2Emd)

!!! note "Careful"
    Admonition text with [missing anchor](guide/b.md#nope).

    ## not a section inside an admonition

### Deep `code_name` & more

[Missing doc](nothere.md), [ext](https://example.com), [[Unknown Page]] and [auto][pkg.Thing].

[b-ref]: guide/b.md#usage-notes
"""

B_MD = """Setup Steps
===========

Do it. Back to [alpha](../a.md#alpha), to [a](../a) and [its start](/a.md#custom-install).

## Usage Notes

First.

## Usage Notes

Again.
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("md")
    (root / "guide").mkdir()
    (root / "a.md").write_text(A_MD, encoding="utf-8")
    (root / "guide" / "b.md").write_text(B_MD, encoding="utf-8")
    docs, rejected = load_folder(root)
    assert rejected.height == 0
    built = build_structure(docs, root)
    return root, docs, *built.tables, built.warnings


def _by_path(docs: pl.DataFrame) -> dict[str, str]:
    return dict(zip(docs["source_path"], docs["id"], strict=True))


def test_section_tree_shape(built):
    _, docs, sections, nodes, _, warnings = built
    assert warnings == {}
    ids = _by_path(docs)
    a = sections.filter(pl.col("document_id") == ids["a.md"]).sort("human_readable_id")
    got = a.select("title", "level", "seq", "uri", "component_type").rows()
    assert got == [
        ("Alpha Doc", 0, 0, "a.md", "DOCUMENT"),
        ("Alpha", 1, 0, "a.md#alpha", "SECTION"),
        ("Install", 2, 0, "a.md#custom-install", "SECTION"),
        ("Setext Title", 2, 1, "a.md#setext-title", "SECTION"),
        ("Deep code_name & more", 3, 0, "a.md#deep-code_name-more", "SECTION"),
    ]
    by_title = {r["title"]: r for r in a.iter_rows(named=True)}
    assert by_title["Alpha"]["parent_id"] == by_title["Alpha Doc"]["id"]
    assert by_title["Setext Title"]["parent_id"] == by_title["Alpha"]["id"]
    assert by_title["Deep code_name & more"]["parent_id"] == by_title["Setext Title"]["id"]
    assert by_title["Deep code_name & more"]["path"] == [
        "Alpha Doc",
        "Alpha",
        "Setext Title",
        "Deep code_name & more",
    ]
    root_meta = json.loads(by_title["Alpha Doc"]["metadata"])
    assert root_meta["front_matter"] == {"title": "Alpha Doc", "tags": ["x", "y"]}
    assert json.loads(by_title["Install"]["metadata"])["line_start"] == 11

    b = sections.filter(pl.col("document_id") == ids["guide/b.md"]).sort("human_readable_id")
    assert b.select("title", "level", "seq", "uri").rows() == [
        ("Setup Steps", 0, 0, "guide/b.md"),  # the loader's title: the first heading
        ("Setup Steps", 1, 0, "guide/b.md#setup-steps"),
        ("Usage Notes", 2, 0, "guide/b.md#usage-notes"),
        ("Usage Notes", 2, 1, "guide/b.md#usage-notes_1"),
    ]


def test_node_types_and_lines(built):
    _, docs, sections, nodes, _, _ = built
    a = nodes.filter(pl.col("document_id") == _by_path(docs)["a.md"]).sort("seq_major")
    types = a["node_type"].to_list()
    assert types.count("HEADING") == 4
    assert types.count("TABLE") == 1 and types.count("CODE") == 1
    assert types.count("LIST_ITEM") == 3 and types.count("BLOCK_QUOTATION") == 1
    code = a.filter(pl.col("node_type") == "CODE").row(0, named=True)
    assert code["text"] == "# not a heading\n[not a link](guide/b.md)"
    meta = json.loads(code["metadata"])
    assert (meta["line_start"], meta["line_end"], meta["language"]) == (13, 16, "bash")
    table = a.filter(pl.col("node_type") == "TABLE")["text"][0]
    assert table.count("\n") == 2 and table.startswith("| col")
    items = a.filter(pl.col("node_type") == "LIST_ITEM")
    assert [json.loads(m)["depth"] for m in items["metadata"]] == [0, 0, 1]
    adm = a.filter(pl.col("text").str.contains("Admonition text"))
    assert adm["node_type"].to_list() == ["PARAGRAPH"]
    assert json.loads(adm["metadata"][0])["container"] == "admonition:note"
    assert a.filter(pl.col("text").str.contains("not a section"))["node_type"][0] == "PARAGRAPH"
    assert not a["text"].str.contains(r"\[b-ref\]:").any()  # definitions are no content
    assert a["positions"].list.eval(pl.element().struct.field("page")).explode().eq(1).all()
    # every node sits in its own document's sections
    secs = set(sections.filter(pl.col("document_id") == a["document_id"][0])["id"])
    assert set(a["section_id"]) <= secs


def _links(built) -> dict[tuple[str, str], dict]:
    _, docs, sections, nodes, edges, _ = built
    paths = dict(zip(docs["id"], docs["source_path"], strict=True))
    node_doc = dict(zip(nodes["id"], nodes["document_id"], strict=True))
    uri = dict(zip(sections["id"], sections["uri"], strict=True))
    out = {}
    for e in edges.filter(pl.col("type") == "REFERS_TO").iter_rows(named=True):
        meta = json.loads(e["metadata"])
        key = (paths[node_doc[e["source_id"]]], meta["href"])
        out[key] = {**meta, "target": uri.get(e["target_id"]), "text": e["marker_text"]}
    return out


def test_links_resolved_and_unresolved(built):
    links = _links(built)
    got = {k: (v["kind"], v["target"], v.get("reason")) for k, v in links.items()}
    assert got == {
        ("a.md", "guide/b.md"): ("inline", "guide/b.md", None),
        ("a.md", "guide/b.md#setup-steps"): ("inline", "guide/b.md#setup-steps", None),
        ("a.md", "guide/b.md#usage-notes"): ("reference", "guide/b.md#usage-notes", None),
        ("a.md", "b#Usage Notes"): ("wikilink", "guide/b.md#usage-notes", None),
        ("a.md", "guide/b%2Emd"): ("inline", "guide/b.md", None),
        ("a.md", "guide/b.md#nope"): ("inline", "guide/b.md", "anchor not found in guide/b.md"),
        ("a.md", "nothere.md"): ("inline", None, "target document not in corpus"),
        ("a.md", "https://example.com"): ("inline", None, "external URL"),
        ("a.md", "Unknown Page"): ("wikilink", None, "no document or note with that name"),
        ("a.md", "pkg.Thing"): (
            "autoref",
            None,
            "autorefs identifier not in corpus (another site's?)",
        ),
        ("guide/b.md", "../a.md#alpha"): ("inline", "a.md#alpha", None),
        ("guide/b.md", "../a"): ("inline", "a.md", None),
        ("guide/b.md", "/a.md#custom-install"): ("inline", "a.md#custom-install", None),
    }
    assert links[("a.md", "guide/b.md#nope")]["anchor_resolved"] is False
    assert links[("a.md", "guide/b.md#setup-steps")]["anchor_resolved"] is True
    assert links[("a.md", "guide/b.md#usage-notes")]["text"] == "ref link"
    assert links[("a.md", "b#Usage Notes")]["line"] == 24


def test_autorefs_identifiers_resolved_across_the_site(tmp_path):
    """mkdocs-autorefs links (`[text][id]`, `[id][]`) go to where the site declares the id:
    a mkdocstrings directive or `## ::: x` heading (and the members under it), an explicit
    anchor, a heading; the linking page's own first; another site's ids stay unresolved."""
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "api.md").write_text(
        "# API\n\n## Things\n\n::: pkg.mod.Thing\n\n## ::: pkg.Other { .api }\n\nText.\n\n"
        "## Words\n\n[](){#enum}\n\nEnums are words here.\n\n## Usage\n\nHow.\n",
        encoding="utf-8",
    )
    (tmp_path / "guide.md").write_text(
        "# Guide\n\nSee [the thing][pkg.mod.Thing], [pkg.mod.Thing.method][], "
        "[pkg.Other.attr][], [pkg.Other][], [words][enum], [enum.Enum.value][], "
        "[pathlib.Path][] and [usage][].\n\n## Usage\n\nHere.\n",
        encoding="utf-8",
    )
    docs, _ = load_folder(tmp_path)
    sections, nodes, edges = build_structure(docs, tmp_path).tables
    uri = dict(zip(sections["id"], sections["uri"], strict=True))
    got = {}
    for target, meta in (
        edges.filter(pl.col("type") == "REFERS_TO").select("target_id", "metadata").rows()
    ):
        meta = json.loads(meta)
        got[meta["href"]] = uri.get(target) or meta["reason"]
    foreign = "autorefs identifier not in corpus (another site's?)"
    assert got == {
        "pkg.mod.Thing": "ref/api.md#things",
        "pkg.mod.Thing.method": "ref/api.md#things",  # a member, under its class's directive
        "pkg.Other.attr": "ref/api.md#pkg.Other",
        "pkg.Other": "ref/api.md#pkg.Other",  # the heading mkdocstrings renders, id and all
        "enum": "ref/api.md#words",  # an explicit anchor
        "enum.Enum.value": foreign,  # not a member of the `enum` anchor: Python's inventory
        "pathlib.Path": foreign,
        "usage": "guide.md#usage",  # two pages have it: the linking page's own
    }
    titles = dict(zip(sections["uri"], sections["title"], strict=True))
    assert titles["ref/api.md#pkg.Other"] == "pkg.Other"


def test_pymdown_snippets_refer_to_the_files_they_include(tmp_path):
    """`--8<-- "file"` (either form, sections and line ranges aside) is no paragraph of
    markers: the page's section refers to each included file, from the corpus root or beside
    the page; a file outside the input folder stays unresolved with the reason; escaped
    (`;--8<--`) and fenced markers are text."""
    (tmp_path / "docs" / "snippets").mkdir(parents=True)
    (tmp_path / "README.md").write_text("# Project\n\nWhat it does.\n", encoding="utf-8")
    (tmp_path / "docs" / "snippets" / "abbr.md").write_text("*[HTML]: markup\n", encoding="utf-8")
    (tmp_path / "docs" / "parts.md").write_text("# Parts\n\nOne.\n", encoding="utf-8")
    (tmp_path / "docs" / "index.md").write_text(
        '# Home\n\n--8<-- "README.md"\n\n## More\n\n--8<--\nparts.md:2:3\n'
        "; skipped.md\ndocs/snippets/abbr.md\nLICENSE\n--8<--\n\n"
        ';--8<-- "escaped.md"\n\n```\n--8<-- "fenced.md"\n```\n',
        encoding="utf-8",
    )
    docs, _ = load_folder(tmp_path)
    sections, nodes, edges = build_structure(docs, tmp_path).tables
    uri = dict(zip(sections["id"], sections["uri"], strict=True))
    got = []
    for source, target, meta in (
        edges.filter(pl.col("type") == "REFERS_TO").select("source_id", "target_id", "metadata")
    ).rows():
        meta = json.loads(meta)
        got.append((uri[source], meta["href"], uri.get(target) or meta["reason"]))
    outside = "snippet file not in corpus (outside the input folder?)"
    assert sorted(got) == [
        ("docs/index.md#home", "README.md", "README.md"),
        ("docs/index.md#more", "LICENSE", outside),
        ("docs/index.md#more", "docs/snippets/abbr.md", "docs/snippets/abbr.md"),
        ("docs/index.md#more", "parts.md", "docs/parts.md"),  # beside the page
    ]
    texts = nodes.filter(
        pl.col("document_id") == docs.filter(pl.col("source_path") == "docs/index.md")["id"][0]
    )["text"].to_list()
    assert not [t for t in texts if "8<" in t and "escaped" not in t and "fenced" not in t]
    assert [t for t in texts if "escaped.md" in t] and [t for t in texts if "fenced.md" in t]


def test_deterministic(built):
    root, docs, sections, nodes, edges, _ = built
    again = build_structure(load_folder(root)[0], root).tables
    assert again[0].equals(sections) and again[1].equals(nodes) and again[2].equals(edges)


def test_slugs_and_inline_text():
    assert slugify("Validating data") == "validating-data"
    assert slugify("A - B: c/d") == "a-b-cd"
    assert slugify("Модели и поля") == "модели-и-поля"
    assert plain_inline("Use `__init__` with *care* and [links](x.md) {#id}") == (
        "Use __init__ with care and links"
    )


def test_fences_and_tildes_are_opaque():
    blocks = parse_blocks(["~~~", "# no", "```", "~~~", "# Yes"])
    assert [(b.kind, b.text) for b in blocks] == [("CODE", "# no\n```"), ("HEADING", "Yes")]


def test_pydantic_docs_link_acceptance(shared_data):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "markdown_links", Path(__file__).resolve().parents[1] / "benchmarks/markdown_links.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = "\n".join(mod.run(shared_data / "markdown" / "pydantic" / "docs"))
    import re

    found, right = map(
        int, re.search(r"links found (\d+); resolved to the right document (\d+)", text).groups()
    )
    anchored, sec = map(
        int, re.search(r"anchored (\d+); resolved to the right section (\d+)", text).groups()
    )
    assert found == 340 and right >= 0.95 * found
    assert anchored == 175 and sec >= 0.90 * anchored


CAPTIONED_MD = """# Results

Table 1: Scores per method.

| a | b |
|---|---|
| 1 | 2 |

| c | d |
|---|---|
| 3 | 4 |

**Table 2.** Second table, its caption below.

Table 3 shows a sentence, not a caption.

| e | f |
|---|---|
| 5 | 6 |

## Русский

| g | h |
|---|---|
| 7 | 8 |

Таблица 4 — Итоги.

*Figure 5.* A figure caption next to a table is no table caption.

| i | j |
|---|---|
| 9 | 0 |

See Table 1, Table 2 and таблица 4.
"""


def test_table_captions_is_captioned_by():
    from pipeline.structure.crossrefs import cross_references
    from pipeline.structure.markdown import parse_markdown

    doc = parse_markdown("d", "t.md", "t", CAPTIONED_MD)
    text = {n["id"]: n["text"] for n in doc.nodes}
    tables = [n["id"] for n in doc.nodes if n["node_type"] == "TABLE"]
    assert not any(n["node_type"] == "FIGURE" for n in doc.nodes)  # images stay paragraphs
    edges = [e for e in doc.edges if e["type"] == "IS_CAPTIONED_BY"]
    pairs = {(text[e["source_id"]][:5], text[e["target_id"]][:12]) for e in edges}
    # table -> caption, as in PDFs: caption above (t1), below (t2, t4); t3 and t5 have none
    assert pairs == {
        ("| a |", "Table 1: Sco"),
        ("| c |", "**Table 2.**"),
        ("| g |", "Таблица 4 — "),
    }, pairs
    assert all(e["source_id"] in tables and e["weight"] == 1.0 for e in edges)
    # cross-references still target the caption and name the captioned table
    by_target = {
        text[e["target_id"]][:12]: json.loads(e["metadata"]) for e in cross_references(doc)
    }
    cap_of = {e["target_id"]: e["source_id"] for e in edges}
    assert set(by_target) == {"Table 1: Sco", "**Table 2.**", "Таблица 4 — "}
    for e in edges:
        assert by_target[text[e["target_id"]][:12]]["captioned_id"] == cap_of[e["target_id"]]


def _contained(lines: list[str]) -> list[tuple]:
    """(kind, text, container, container title) of each block of `lines`."""
    return [
        (b.kind, b.text, b.meta.get("container"), b.meta.get("container_title"))
        for b in parse_blocks(lines)
    ]


def test_colon_fenced_containers_of_other_site_generators():
    """Docusaurus, VitePress, Pandoc/MyST and remark-directive containers hold content,
    their fences are no text; a `::: x` line no colon fence closes stays a mkdocstrings
    directive, even beside them."""
    lines = [
        ":::tip My tip",
        "Tip text.",
        ":::",
        "",
        ":::danger[Take care]",
        "",
        "Danger text.",
        "",
        ":::",
        "::: details Click to see",
        "Details text.",
        ":::",
        "",
        "::: pkg.module",
        "    options:",
        "      show_source: false",
        "",
        "::::{note}",
        ':::info{title="x"}',
        "Nested text.",
        ":::",
        "::::",
        "Closing paragraph.",
    ]
    assert _contained(lines) == [
        ("PARAGRAPH", "My tip", "admonition:tip", "My tip"),  # a title is text too
        ("PARAGRAPH", "Tip text.", "admonition:tip", "My tip"),
        ("PARAGRAPH", "Take care", "admonition:danger", "Take care"),
        ("PARAGRAPH", "Danger text.", "admonition:danger", "Take care"),
        ("PARAGRAPH", "Click to see", "admonition:details", "Click to see"),
        ("PARAGRAPH", "Details text.", "admonition:details", "Click to see"),
        ("CODE", "::: pkg.module\noptions:\n  show_source: false", None, None),
        ("PARAGRAPH", "Nested text.", "admonition:info", ""),
        ("PARAGRAPH", "Closing paragraph.", None, None),
    ]


MDX = """---
title: Tutorial Intro
---
import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';
export const toc = [
  {value: 'Install', id: 'install'},
];

# Tutorial Intro {/* the page's own title */}

Read the [setup guide](./guides/setup) first.

<Tabs groupId="os">
<TabItem value="linux" label="Linux">

Install with the package manager.

</TabItem>
</Tabs>

```jsx
import Tabs from '@theme/Tabs';
```

## Install

:::note[Requirements]
Node.js 18 or above.
:::
"""


def test_mdx_pages_read_as_markdown_without_their_javascript(tmp_path):
    """A Docusaurus site's .mdx pages: ESM imports/exports and MDX comments are no text
    (code fences keep theirs), JSX tags alone make no node, line numbers stay the file's,
    and links resolve to and from .mdx pages with or without their suffix."""
    (tmp_path / "docs" / "guides").mkdir(parents=True)
    (tmp_path / "docs" / "intro.mdx").write_text(MDX, encoding="utf-8")
    (tmp_path / "docs" / "guides" / "setup.md").write_text(
        "# Setup\n\nSee [the intro](../intro.mdx#install) and [again](/docs/intro).\n",
        encoding="utf-8",
    )
    docs, rejected = load_folder(tmp_path)
    assert rejected.height == 0 and docs.height == 2
    built = build_structure(docs, tmp_path)
    sections, nodes, edges = built.tables
    warnings = built.warnings
    assert warnings == {}
    intro = nodes.filter(pl.col("document_id") == _by_path(docs)["docs/intro.mdx"])
    got = [
        (r["node_type"], r["text"], json.loads(r["metadata"])["line_start"])
        for r in intro.sort("seq_major", "seq_minor").iter_rows(named=True)
    ]
    assert got == [
        ("HEADING", "Tutorial Intro", 10),
        ("PARAGRAPH", "Read the [setup guide](./guides/setup) first.", 12),
        ("PARAGRAPH", "Linux", 15),  # the tab's label
        ("PARAGRAPH", "Install with the package manager.", 17),
        ("CODE", "import Tabs from '@theme/Tabs';", 22),
        ("HEADING", "Install", 26),
        ("PARAGRAPH", "Requirements", 28),
        ("PARAGRAPH", "Node.js 18 or above.", 29),
    ]
    refers = edges.filter(pl.col("type") == "REFERS_TO")
    uri = dict(zip(sections["id"], sections["uri"], strict=True))
    assert sorted(uri.get(t) for t in refers["target_id"]) == [
        "docs/guides/setup.md",
        "docs/intro.mdx",
        "docs/intro.mdx#install",
    ]


def test_pymdown_blocks_are_containers_without_their_options():
    """pymdown-extensions blocks (FastAPI's docs): `/// tip | Title` ... `///`, nested by
    longer fences; the YAML options under the header are no text; `///` inside a line is."""
    lines = [
        "/// tip | Pro tip",
        "",
        "Use the reload flag while developing.",
        "",
        "///",
        "/// details | Click me",
        "    type: warning",
        "",
        "Hidden text.",
        "///",
        "//// note",
        "/// warning",
        "Nested text.",
        "///",
        "////",
        "A path like ///usr/bin stays text.",
    ]
    assert _contained(lines) == [
        ("PARAGRAPH", "Pro tip", "admonition:tip", "Pro tip"),
        ("PARAGRAPH", "Use the reload flag while developing.", "admonition:tip", "Pro tip"),
        ("PARAGRAPH", "Click me", "admonition:details", "Click me"),
        ("PARAGRAPH", "Hidden text.", "admonition:details", "Click me"),
        ("PARAGRAPH", "Nested text.", "admonition:warning", ""),
        ("PARAGRAPH", "A path like ///usr/bin stays text.", None, None),
    ]
