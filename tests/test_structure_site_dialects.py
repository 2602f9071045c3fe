"""Markdown of site generators other than mkdocs. MyST (Jupyter Book, Sphinx with
myst-parser): directives are containers or code as they render, their options no text;
roles, targets and toctrees are links of the site. Hugo shortcodes and Liquid tags (GitBook,
Jekyll): containers, code or nothing, and links whose destination is a tag resolve."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline.ingest import load_folder
from pipeline.structure import build_structure
from pipeline.structure.markdown import parse_blocks

PAGE = """(intro)=
# Harbour tools

% editors' note, never rendered
Start with {doc}`guide/install`.

```{note}
The model assumes a semi-diurnal tide.
```

```{warning} Deprecated since 2.0
:class: dropdown

Legacy mode goes away.
```

````{admonition} Nested
:class: tip

- an item

```{code-cell} ipython3
print("hi")
```
````

```{code-block} python
:caption: Quick start
:linenos:

import harbour
```

:::{seealso}
:class: dropdown
The raw data.
:::

```{figure} images/tides.png
:name: fig-tides

Tidal range at Lisbon.
```

+++

```{math}
:label: eq-tide
h(t) = A cos(w t)
```
"""


def _site(root: Path, pages: dict[str, str]):
    """Write `pages` (relative path -> text) under `root`, load the folder and build its
    structure: (documents, sections, nodes, edges)."""
    for rel, text in pages.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    docs, _ = load_folder(root)
    sections, nodes, edges = build_structure(docs, root).tables
    return docs, sections, nodes, edges


def _links(sections: pl.DataFrame, edges: pl.DataFrame, kind: bool = False) -> set[tuple]:
    """{([kind,] marker text, target section uri or the reason it is unresolved)}."""
    uri = dict(zip(sections["id"], sections["uri"], strict=True))
    out = set()
    for target, text, meta in (
        edges.filter(pl.col("type") == "REFERS_TO")
        .select("target_id", "marker_text", "metadata")
        .rows()
    ):
        meta = json.loads(meta)
        found = (text, uri.get(target) or meta["reason"])
        out.add((meta["kind"], *found) if kind else found)
    return out


def _blocks(text: str) -> list[tuple]:
    return [
        (b.kind, b.text, b.meta.get("container"), b.meta.get("container_title"), b.ids)
        for b in parse_blocks(text.split("\n"))
    ]


def test_myst_directives_are_containers_or_code_without_their_options():
    got = _blocks(PAGE)
    assert got == [
        ("ANCHOR", "", None, None, ["intro"]),
        ("HEADING", "Harbour tools", None, None, []),
        ("PARAGRAPH", "Start with guide/install.", None, None, []),  # a role reads as its text
        ("PARAGRAPH", "The model assumes a semi-diurnal tide.", "admonition:note", "", []),
        ("PARAGRAPH", "Deprecated since 2.0", "admonition:warning", "Deprecated since 2.0", []),
        ("PARAGRAPH", "Legacy mode goes away.", "admonition:warning", "Deprecated since 2.0", []),
        ("PARAGRAPH", "Nested", "admonition:tip", "Nested", []),
        ("LIST_ITEM", "an item", "admonition:tip", "Nested", []),
        ("CODE", 'print("hi")', "admonition:tip", "Nested", []),
        ("CODE", "import harbour", None, None, []),
        ("PARAGRAPH", "The raw data.", "admonition:seealso", "", []),
        ("ANCHOR", "", None, None, ["fig-tides"]),
        ("PARAGRAPH", "Tidal range at Lisbon.", "directive:figure", "", []),
        ("ANCHOR", "", None, None, ["eq-tide"]),
        ("CODE", "h(t) = A cos(w t)", None, None, []),
    ]
    # a container's title is text of the page, marked as the title it is
    titles = [b for b in parse_blocks(PAGE.split("\n")) if b.meta.get("role")]
    assert [(b.text, b.meta["role"]) for b in titles] == [
        ("Deprecated since 2.0", "container_title"),
        ("Nested", "container_title"),
    ]
    code = {b.text: b.meta for b in parse_blocks(PAGE.split("\n")) if b.kind == "CODE"}
    assert code['print("hi")'] == {
        "container": "admonition:tip",
        "container_title": "Nested",
        "directive": "code-cell",
        "language": "ipython3",
    }
    assert code["import harbour"] == {"directive": "code-block", "language": "python"}
    assert code["h(t) = A cos(w t)"] == {"directive": "math", "language": "math"}


def test_myst_list_and_csv_tables_are_table_nodes():
    page = (
        '```{csv-table} Tide table\n:header: "Port", "High water"\n:widths: 10, 20\n\n'
        'Lisbon, "06:12, 18:40"\n[Porto](porto.md), 07:01\n```\n\n'
        "```{list-table}\n:header-rows: 1\n\n* - Port\n  - Notes\n* - Faro\n"
        "  - Shallow\n\n    bar at low tide\n```\n"
    )
    csv_table, list_table = parse_blocks(page.split("\n"))
    assert csv_table.kind == list_table.kind == "TABLE"
    assert csv_table.meta["rows"] == [
        ["Port", "High water"],
        ["Lisbon", "06:12, 18:40"],
        ["[Porto](porto.md)", "07:01"],
    ]
    assert csv_table.text.split("\n")[:2] == ["Tide table", "| Port | High water |"]
    assert csv_table.links == [{"href": "porto.md", "text": "Porto", "kind": "inline"}]
    assert list_table.meta["rows"] == [["Port", "Notes"], ["Faro", "Shallow bar at low tide"]]
    assert list_table.text == "| Port | Notes |\n| Faro | Shallow bar at low tide |"


def test_percent_lines_are_comments_only_in_myst_pages():
    plain = "# Fees\n\n% of revenue paid as fees:\n\n```python\nx = 1\n```\n"
    assert [b[1] for b in _blocks(plain)] == ["Fees", "% of revenue paid as fees:", "x = 1"]
    myst = plain.replace("```python", "```{code-block} python")
    assert [b[1] for b in _blocks(myst)] == ["Fees", "x = 1"]


def test_myst_roles_targets_and_toctrees_link_the_site(tmp_path):
    (tmp_path / "guide").mkdir()
    (tmp_path / "intro.md").write_text(
        PAGE + "\n```{toctree}\n:maxdepth: 2\n\n"
        "guide/install\nAPI <guide/api>\nself\nguide/*\n```\n",
        encoding="utf-8",
    )
    (tmp_path / "guide" / "install.md").write_text(
        "# Installing\n\n(tide-model)=\n## The tide model\n\nSee {ref}`intro` and "
        "{ref}`the figure <fig-tides>`, {numref}`eq-tide`, {doc}`the API <api>`, "
        "{doc}`/intro` and {download}`data <../data/tides.csv>`.\n\n"
        "```{include} ../snippets/common.md\n```\n",
        encoding="utf-8",
    )
    (tmp_path / "guide" / "api.md").write_text(
        "# API\n\nBack to {ref}`the tide model <tide-model>` and {ref}`nowhere`.\n",
        encoding="utf-8",
    )
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "common.md").write_text("Shared text.\n", encoding="utf-8")
    docs, _ = load_folder(tmp_path)
    sections, nodes, edges = build_structure(docs, tmp_path).tables
    assert _links(sections, edges, kind=True) == {
        ("inline", "guide/install", "guide/install.md"),
        ("toctree", "", "guide/install.md"),
        ("toctree", "", "guide/api.md"),
        ("autoref", "intro", "intro.md#harbour-tools"),
        ("autoref", "the figure", "intro.md#harbour-tools"),
        ("autoref", "eq-tide", "intro.md#harbour-tools"),
        ("inline", "the API", "guide/api.md"),
        ("inline", "/intro", "intro.md"),
        ("inline", "data", "target document not in corpus"),
        ("snippet", "", "snippets/common.md"),
        ("autoref", "the tide model", "guide/install.md#the-tide-model"),
        ("autoref", "nowhere", "autorefs identifier not in corpus (another site's?)"),
    }
    # targets, comments, breaks and options are no text of any node
    assert not [t for t in nodes["text"] if t.startswith(("(", "%", "+++", ":"))]


HUGO_PAGE = """+++
title = "Tides"
weight = 10
+++

# Tides

See [the ports]({{< ref "docs/ports.md" >}}) and [Lisbon]({{< relref "ports#lisbon" >}}).

{{< hint info >}}
**Note:** tides follow the moon.
{{< /hint >}}

{{% notice warning "Mind the gap" %}}
Spring tides flood the quay.
{{% /notice %}}

{{< tabs "install" >}}
{{< tab "Linux" >}}
Use apt.
{{< /tab >}}
{{< /tabs >}}

{{< figure src="tides.png" caption="Tidal range at Lisbon" >}}
{{< youtube abc123 >}}
"""

GITBOOK_PAGE = """# Ports

## Lisbon

{% hint style="warning" %}
Lisbon has a strong current.
{% endhint %}

{% tabs %}
{% tab title="Python" %}
```python
import ports
```
{% endtab %}
{% endtabs %}

{% content-ref url="tides.md" %}
[tides.md](tides.md)
{% endcontent-ref %}

{% highlight ruby %}
puts "hi"
{% endhighlight %}

{% comment %}
A hidden draft.
{% endcomment %}

{% if site.beta %}
Beta ports.
{% else %}
No beta ports.
{% endif %}
Read [the tides]({% link docs/tides.md %}).
{% embed url="https://example.com/video" %}
"""


def test_hugo_shortcodes_and_liquid_tags_read_as_they_render(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "tides.md").write_text(HUGO_PAGE, encoding="utf-8")
    (tmp_path / "docs" / "ports.md").write_text(GITBOOK_PAGE, encoding="utf-8")
    docs, _ = load_folder(tmp_path)
    tides = docs.filter(pl.col("source_path") == "docs/tides.md").row(0, named=True)
    assert tides["title"] == "Tides" and json.loads(tides["metadata"])["weight"] == 10
    sections, nodes, edges = build_structure(docs, tmp_path).tables
    got = [
        (path, kind, text, meta.get("container"), meta.get("container_title"))
        for path, kind, text, meta in zip(
            nodes["document_id"].replace_strict(
                dict(zip(docs["id"], docs["source_path"], strict=True))
            ),
            nodes["node_type"],
            nodes["text"],
            map(json.loads, nodes["metadata"]),
            strict=True,
        )
        if kind != "HEADING"
    ]
    assert sorted(got) == sorted(
        [
            (
                "docs/tides.md",
                "PARAGRAPH",
                "See [the ports](docs/ports.md) and [Lisbon](ports#lisbon).",
                None,
                None,
            ),
            (
                "docs/tides.md",
                "PARAGRAPH",
                "**Note:** tides follow the moon.",
                "admonition:info",
                "",
            ),
            ("docs/tides.md", "PARAGRAPH", "Mind the gap", "admonition:warning", "Mind the gap"),
            (
                "docs/tides.md",
                "PARAGRAPH",
                "Spring tides flood the quay.",
                "admonition:warning",
                "Mind the gap",
            ),
            ("docs/tides.md", "PARAGRAPH", "Linux", "directive:tab", "Linux"),
            ("docs/tides.md", "PARAGRAPH", "Use apt.", "directive:tab", "Linux"),
            ("docs/tides.md", "PARAGRAPH", "Tidal range at Lisbon", "directive:figure", ""),
            (
                "docs/ports.md",
                "PARAGRAPH",
                "Lisbon has a strong current.",
                "admonition:warning",
                "",
            ),
            ("docs/ports.md", "PARAGRAPH", "Python", "directive:tab", "Python"),
            ("docs/ports.md", "CODE", "import ports", "directive:tab", "Python"),
            ("docs/ports.md", "PARAGRAPH", "[tides.md](tides.md)", "directive:content-ref", ""),
            ("docs/ports.md", "CODE", 'puts "hi"', None, None),
            ("docs/ports.md", "PARAGRAPH", "Beta ports.", None, None),
            ("docs/ports.md", "PARAGRAPH", "<https://example.com/video>", "directive:embed", ""),
            ("docs/ports.md", "PARAGRAPH", "No beta ports.", None, None),
            ("docs/ports.md", "PARAGRAPH", "Read [the tides](/docs/tides.md).", None, None),
        ]
    )
    assert _links(sections, edges) == {
        ("the ports", "docs/ports.md"),  # Hugo's ref: from the content root
        ("Lisbon", "docs/ports.md#lisbon"),  # ... or beside the page
        ("tides.md", "docs/tides.md"),
        ("the tides", "docs/tides.md"),
        ("https://example.com/video", "external URL"),  # GitBook's embed: a link
    }


def test_page_title_skips_headings_in_code_fenced_by_longer_or_other_fences(tmp_path):
    """A ```` fence holds ``` lines and a ``` fence ~~~ lines (CommonMark): a heading in
    either is code, not the page's title (front matter titles aside)."""
    (tmp_path / "a.md").write_text(
        "````md\n```python\n# not a title\n```\n# nor this\n````\n\n# Tide tables\n",
        encoding="utf-8",
    )
    (tmp_path / "b.md").write_text("```\n~~~\n# code\n```\nHarbour\n=======\n", encoding="utf-8")
    docs, _ = load_folder(tmp_path)
    assert dict(zip(docs["source_path"], docs["title"], strict=True)) == {
        "a.md": "Tide tables",
        "b.md": "Harbour",
    }


def test_tags_inside_lines_and_code_tags_alerts_and_one_line_blocks():
    """Real pages' cases: a paired shortcode on one line keeps its text; tags inside a line
    are markup (what they wrap stays); code-bodied shortcodes are code; a `{% link %}` in a
    code fence stays as written; GitHub alerts and Obsidian callouts are containers."""
    page = (
        "{{< note >}} Read the [template docs](t.md) first. {{</ note >}}\n\n"
        'Install Hugo {{% badge color="fuchsia" %}}0.126.0{{% /badge %}} or higher, '
        'since Jekyll {% include docs_version_badge.html version="4.0" %}.\n\n'
        '{{< tab header="hugo.yaml" lang="yaml" >}}\noutputs:\n  section:\n'
        "    - HTML\n{{< /tab >}}\n\n"
        "{{< mermaid >}}\ngraph TD\n    A[View] --> B\n{{< /mermaid >}}\n\n"
        "```liquid\n[Link]({% link /assets/doc.pdf %})\n```\n\n"
        "> [!NOTE]\n> **Markdown content**\n\n> [!faq]- Why tides?\n> The moon.\n\n"
        "> A real quote.\n"
    )
    got = [
        (b.kind, b.text, b.meta.get("container"), b.meta.get("container_title"))
        for b in parse_blocks(page.split("\n"))
    ]
    assert got == [
        ("PARAGRAPH", "Read the [template docs](t.md) first.", None, None),
        ("PARAGRAPH", "Install Hugo 0.126.0 or higher, since Jekyll .", None, None),
        ("CODE", "outputs:\n  section:\n    - HTML", None, None),
        ("CODE", "graph TD\n    A[View] --> B", None, None),
        ("CODE", "[Link]({% link /assets/doc.pdf %})", None, None),
        ("PARAGRAPH", "**Markdown content**", "admonition:note", ""),
        ("PARAGRAPH", "Why tides?", "admonition:faq", "Why tides?"),
        ("PARAGRAPH", "The moon.", "admonition:faq", "Why tides?"),
        ("BLOCK_QUOTATION", "A real quote.", None, None),
    ]
    languages = [b.meta.get("language") for b in parse_blocks(page.split("\n"))]
    assert languages[2:5] == ["yaml", "mermaid", "liquid"]


def test_myst_labels_as_link_targets_hugo_bundles_and_language_pages(tmp_path):
    """MyST resolves `[text](label)`, `[](#label)` and `[](scheme:label)` to a `(label)=`
    target anywhere in the project; Hugo's `relref` finds a branch bundle's `_index.md` and
    a page in a language (`page.en.md`); an old `{admonition,tip}` is a tip; roles read as
    their text in a definition's term too."""
    _, sections, nodes, edges = _site(
        tmp_path,
        {
            "guide/organising.md": "# Organising\n\n(organising-content)=\n## Sections\n\n"
            "(source-buttons:repo)=\n## Repository\n\nText {ref}`x <organising-content>`.\n",
            "typography.md": "# Typography\n\nSee [the section](#organising-content), "
            "[repo](source-buttons:repo), [again](organising-content) and "
            "[a site](https://example.com).\n\n:::{admonition,tip} Get involved\nJoin us.\n"
            ":::\n\n{ref}`Vote for features <organising-content>`\n: by adding a thumbs up.\n",
            "content/intro/widgets/_index.en.md": "# Widgets\n",
            "content/intro/dashboard.en.md": '# Dashboard\n\nSee [widgets]({{% relref "widgets" '
            '%}}) and [home]({{< ref "/content/intro/dashboard" >}}).\n',
        },
    )
    assert _links(sections, edges) == {
        ("x", "guide/organising.md#sections"),
        ("the section", "guide/organising.md#sections"),
        ("repo", "guide/organising.md#repository"),
        ("again", "guide/organising.md#sections"),
        ("a site", "external URL"),
        ("Vote for features", "guide/organising.md#sections"),
        ("widgets", "content/intro/widgets/_index.en.md"),
        ("home", "content/intro/dashboard.en.md"),
    }
    meta = {t: json.loads(m) for t, m in zip(nodes["text"], nodes["metadata"], strict=True)}
    assert meta["Join us."]["container"] == "admonition:tip"
    assert meta["Join us."]["container_title"] == "Get involved"
    assert "Vote for features: by adding a thumbs up." in meta


def test_quarto_and_r_markdown_pages_code_cells_and_callouts(tmp_path):
    """`.qmd` / `.Rmd` pages are Markdown: a ```{python} or ```{r} fence is a code cell
    (its `#|` options are code), a `::: {.callout-note}` div a container; a link to a
    `.qmd` page resolves, with its suffix or its `.html` one."""
    (tmp_path / "analysis.qmd").write_text(
        "---\ntitle: Tide analysis\n---\n\nSee [the data](data.qmd) and [model](model.html)."
        "\n\n```{python}\n#| echo: false\nimport pandas as pd\n```\n\n"
        "::: {.callout-note}\nTides follow the moon.\n:::\n",
        encoding="utf-8",
    )
    (tmp_path / "data.Rmd").write_text("# Data\n\n```{r}\nlibrary(tides)\n```\n", encoding="utf-8")
    (tmp_path / "model.qmd").write_text("# Model\n", encoding="utf-8")
    docs, _ = load_folder(tmp_path)
    assert sorted(docs["title"]) == ["Data", "Model", "Tide analysis"]
    sections, nodes, edges = build_structure(docs, tmp_path).tables
    got = {
        (kind, text, meta.get("language"), meta.get("container"))
        for kind, text, meta in zip(
            nodes["node_type"], nodes["text"], map(json.loads, nodes["metadata"]), strict=True
        )
        if kind != "HEADING"
    }
    assert got == {
        ("PARAGRAPH", "See [the data](data.qmd) and [model](model.html).", None, None),
        ("CODE", "#| echo: false\nimport pandas as pd", "python", None),
        ("PARAGRAPH", "Tides follow the moon.", None, "admonition:callout-note"),
        ("CODE", "library(tides)", "r", None),
    }
    assert _links(sections, edges) == {
        ("the data", "target document not in corpus"),  # data.Rmd is no data.qmd
        ("model", "model.qmd"),
    }


def test_jsx_components_html_and_fence_details_of_real_sites():
    """MDX components (Mintlify, Nextra, Starlight) hold Markdown, indented or not, and are
    containers; `<style>` is no text; HTML tags in a line are markup; a fence's title and
    flags; VitePress' `<<<` imports, FastAPI's `{* *}` ones and toc markers; attribute
    lists after links, in definition terms and mkdocs-material icons are no text."""
    page = (
        '<Callout type="info">\n  Useful information.\n</Callout>\n\n'
        '<Steps>\n  <Step title="First Step">\n    Do this first.\n  </Step>\n</Steps>\n\n'
        '<Accordion title="An accordion">\n  Any content:\n  ```java HelloWorld.java\n'
        "  class HelloWorld {}\n  ```\n</Accordion>\n\n"
        "<style>\n  :root { --x: 1 }\n</style>\n\n"
        '<Note>A note.</Note> Data <abbr title="x">"parsing"</abbr>, see `<div>`.\n\n'
        '```js title="docusaurus.config.js"\nx\n```\n\n```sh [npm]\nnpm i\n```\n\n'
        "```ts:line-numbers=2 {1}\nz\n```\n\n"
        "<<< @/snippets/snippet.js{2}\n\n[[toc]]\n\n[TOC]\n\n"
        "{* ../../docs_src/models/tutorial001_py310.py hl[9:12,16] *}\n\n"
        "`note`{ #type:note }\n\n:   An admonition.\n\n"
        "See [Paths](paths.md#values){.internal-link target=_blank} now.\n\n"
        '=== ":octicons-mark-github-16: Octicons"\n\n    In a tab :material-plus-circle:.\n'
    )
    blocks = parse_blocks(page.split("\n"))
    got = [(b.kind, b.text, b.meta.get("container"), b.meta.get("container_title")) for b in blocks]
    assert got == [
        ("PARAGRAPH", "Useful information.", "admonition:info", ""),
        ("PARAGRAPH", "First Step", "directive:step", "First Step"),
        ("PARAGRAPH", "Do this first.", "directive:step", "First Step"),
        ("PARAGRAPH", "An accordion", "directive:accordion", "An accordion"),
        ("PARAGRAPH", "Any content:", "directive:accordion", "An accordion"),
        ("CODE", "class HelloWorld {}", "directive:accordion", "An accordion"),
        ("PARAGRAPH", 'A note. Data "parsing", see `<div>`.', None, None),
        ("CODE", "x", None, None),
        ("CODE", "npm i", None, None),
        ("CODE", "z", None, None),
        ("SNIPPET", "", None, None),
        ("SNIPPET", "", None, None),
        ("LIST_ITEM", "`note`: An admonition.", None, None),
        ("PARAGRAPH", "See [Paths](paths.md#values) now.", None, None),
        ("PARAGRAPH", "Octicons", "tab", "Octicons"),
        ("PARAGRAPH", "In a tab .", "tab", "Octicons"),
    ]
    code = [(b.meta.get("language"), b.meta.get("title")) for b in blocks if b.kind == "CODE"]
    assert code == [
        ("java", "HelloWorld.java"),
        ("js", "docusaurus.config.js"),
        ("sh", "npm"),
        ("ts", None),
    ]
    snippets = [b.links for b in blocks if b.kind == "SNIPPET"]
    assert snippets == [
        [{"href": "snippets/snippet.js", "text": "", "kind": "snippet"}],
        [{"href": "../../docs_src/models/tutorial001_py310.py", "text": "", "kind": "snippet"}],
    ]
    term = next(b for b in blocks if b.kind == "LIST_ITEM")
    assert term.ids == ["type:note"]  # what `[x](#type:note)` points to


def test_site_root_links_with_a_trailing_slash_and_below_the_input_folder(tmp_path):
    """Starlight and Docusaurus write page links as `/guides/i18n/`: the page `i18n.mdx` (or
    the folder's index page); a site whose content folder lies below the input folder
    still resolves its `/`-links by the end of the path, when only one page ends so."""
    guides = "docs/src/content/docs/guides"
    _, sections, _, edges = _site(
        tmp_path,
        {
            f"{guides}/i18n.mdx": "# i18n\n\n## Fallback content\n\nText.\n",
            f"{guides}/pages.mdx": "# Pages\n\nSee [i18n](/guides/i18n/), "
            "[fallback](/guides/i18n/#fallback-content), and [nowhere](/guides/none/).\n",
        },
    )
    page = "docs/src/content/docs/guides/i18n.mdx"
    assert _links(sections, edges) == {
        ("i18n", page),
        ("fallback", page + "#fallback-content"),
        ("nowhere", "target document not in corpus"),
    }


def test_deeply_nested_tags_and_directives_are_read_without_recursing_past_the_stack():
    """3,000 nested `{% if %}`, `<div>`, `{{< hint >}}` or MyST fences: the text inside is
    kept and the parse neither overflows Python's stack nor takes long."""
    pages = {
        "liquid": "\n".join(f"{{% if a{i} %}}" for i in range(3000))
        + "\ninner text\n"
        + "{% endif %}\n" * 3000,
        "jsx": "<div>\n" * 3000 + "inner text\n" + "</div>\n" * 3000,
        "hugo": "{{< hint info >}}\n" * 3000 + "inner text\n" + "{{< /hint >}}\n" * 3000,
        "myst": "\n".join(":" * (303 - i) + "{note}" for i in range(300))
        + "\ninner text\n"
        + "\n".join(":" * (4 + i) for i in range(300)),
    }
    for name, page in pages.items():
        texts = [b.text for b in parse_blocks(page.split("\n"))]
        assert any("inner text" in t for t in texts), name


def test_note_app_markup_and_readme_html_links():
    """Obsidian and Logseq pages, GitHub READMEs: `%%comments%%`, `==highlight==` marks,
    `key:: value` properties and `((block refs))` are no text; a quote inside a callout
    loses all its `>` marks; `<a href>` links, in a line or in an HTML block, are links."""
    page = (
        'Use <a href="https://example.com/spec" target="_blank">OpenAPI</a> and '
        '<a href="docs.md">the **docs**</a>.\n\n'
        '<p align="center"><b>Docs</b>: <a href="py.md">Python</a> - '
        '<a href="guide.md">User <b>Guide</b></a></p>\n\n'
        "> [!note] Title\n> > Nested   quote\n> > more\n\n"
        "%% a hidden comment %%\n\n"
        "Some ==highlighted== text, a == b stays, `==code==` too.\n\n"
        "type:: [[Feature]]\nalias:: term/x\n"
        "The description ((60ab6f5b-4bdc-4a5e-9e4f-1f3a7a2b9c0d)) here.\n"
    )
    blocks = [b for b in parse_blocks(page.split("\n")) if b.kind != "ANCHOR"]
    assert [(b.kind, b.text) for b in blocks] == [
        ("PARAGRAPH", "Use OpenAPI and the **docs**."),
        ("PARAGRAPH", "Docs: Python - User Guide"),
        ("PARAGRAPH", "Title"),
        ("BLOCK_QUOTATION", "Nested   quote\nmore"),
        ("PARAGRAPH", "Some highlighted text, a == b stays, `==code==` too."),
        ("PARAGRAPH", "The description  here."),
    ]
    assert [(x["href"], x["text"]) for b in blocks[:2] for x in b.links] == [
        ("https://example.com/spec", "OpenAPI"),
        ("docs.md", "the docs"),
        ("py.md", "Python"),
        ("guide.md", "User Guide"),
    ]
    assert blocks[-1].links == [
        {"href": "Feature", "text": "Feature", "kind": "wikilink"},
        {"href": "60ab6f5b-4bdc-4a5e-9e4f-1f3a7a2b9c0d", "text": "", "kind": "block_ref"},
    ]


def test_a_paragraph_of_properties_alone_keeps_its_links_as_the_sections(tmp_path):
    """Logseq's `type:: [[Feature]]` block is no text, but its link stays (the section's)."""
    _, sections, nodes, edges = _site(
        tmp_path,
        {
            "Feature.md": "# Feature\n\nA feature.\n",
            "Page.md": "# Page\n\ntype:: [[Feature]]\ncollapsed:: true\n\nText.\n",
        },
    )
    assert "type:: [[Feature]]" not in "\n".join(nodes["text"])
    assert _links(sections, edges) == {("Feature", "Feature.md")}


def test_wikilinks_find_a_page_by_its_front_matter_aliases(tmp_path):
    """Obsidian resolves `[[Embedding files|embeds]]` to the page whose front matter lists
    that alias (`aliases:` a list, or one name)."""
    _, sections, _, edges = _site(
        tmp_path,
        {
            "Linking/Embed files.md": "---\naliases:\n  - Embedding files\n---\n"
            "# Embed files\n\nText.\n",
            "Tags.md": "---\nalias: Tagging\n---\n# Tags\n",
            "Callouts.md": "# Callouts\n\nSee [[Embedding files|embeds]], [[Tagging]] and "
            "[[Nothing]].\n",
        },
    )
    assert _links(sections, edges) == {
        ("embeds", "Linking/Embed files.md"),
        ("Tagging", "Tags.md"),
        ("Nothing", "no document or note with that name"),
    }


def test_logseq_page_properties_name_the_page_and_namespaces_are_file_names(tmp_path):
    """A Logseq graph: `title::` and `alias::` open a page (no front matter) and name it
    for wikilinks, a namespace page `projects/gozo` is the file `projects___gozo.md` (older
    graphs: `projects%2Fgozo.md`); the property lines stay no text."""
    docs, sections, nodes, edges = _site(
        tmp_path,
        {
            "pages/Mara Vella.md": "type:: [[Person]]\nalias:: Mara, [[M. Vella]]\n\n"
            "- Engineer who led the pilot.\n",
            "pages/projects___gozo.md": "- The Gozo extension.\n",
            "pages/harbour%2Fgates.md": "- The gates.\n",
            "pages/Renamed.md": "title:: Valletta Pilot\n\n- The pilot began in 2025.\n",
            "journals/2025_03_01.md": "- Kickoff of [[Valletta Pilot]] with [[Mara]], "
            "[[m. vella]], [[projects/gozo]] and [[harbour/gates]].\n",
        },
    )
    assert dict(docs.select("source_path", "title").iter_rows())["pages/Renamed.md"] == (
        "Valletta Pilot"
    )
    assert not any("::" in t for t in nodes["text"])
    assert _links(sections, edges) == {
        ("Person", "no document or note with that name"),
        ("M. Vella", "pages/Mara Vella.md"),  # a property's page ref, as `type::`'s
        ("Valletta Pilot", "pages/Renamed.md"),
        ("Mara", "pages/Mara Vella.md"),
        ("m. vella", "pages/Mara Vella.md"),
        ("projects/gozo", "pages/projects___gozo.md"),
        ("harbour/gates", "pages/harbour%2Fgates.md"),
    }


def test_block_references_reach_the_referenced_block_on_any_page(tmp_path):
    """Logseq's `((uuid))` (inline or in `{{embed ...}}`) refers to the block whose `id::`
    property it is, on whichever page (and shard) that block lives; Obsidian's `^id` ending a
    block names it for `[[Page#^id]]`. Ids, refs and macros are no text."""
    uuid = "64f1c2aa-1111-4b5e-9e4f-1f3a7a2b9c0d"
    _, sections, nodes, edges = _site(
        tmp_path,
        {
            "pages/Gate.md": f"- Intro.\n- The gate was rebuilt in 1998.\n  id:: {uuid}\n",
            "journals/2025_03_02.md": f"- As noted (({uuid})), it matters.\n"
            f"- {{{{embed (({uuid}))}}}}\n- Gone ((00000000-0000-4000-8000-000000000000)).\n",
            "Vault/Tides.md": "# Tides\n\nIntro.\n\n## Records\n\n"
            "Tide tables were first printed in 1850. ^first-tables\n\nx ^2 stays.\n",
            "Vault/Notes.md": "# Notes\n\nSee [[Tides#^first-tables]].\n",
        },
    )
    texts = nodes["text"].to_list()
    assert "The gate was rebuilt in 1998." in texts
    assert "As noted , it matters." in texts
    assert "Tide tables were first printed in 1850." in texts and "x ^2 stays." in texts
    assert not any("id::" in t or "((" in t or "{{" in t for t in texts)
    assert _links(sections, edges, kind=True) == {
        ("block_ref", "", "pages/Gate.md"),
        ("block_ref", "", "no block with that id in corpus"),
        ("wikilink", "Tides#^first-tables", "Vault/Tides.md#records"),
    }
    refs = edges.filter(pl.col("type") == "REFERS_TO")
    assert refs.filter(pl.col("metadata").str.contains(uuid)).height == 2  # inline and embed
