"""`docgraph export`: GraphML read back by networkx and igraph, and the HTML page driven in
a real headless Chromium (rendering, search, level switch, an XSS entity shown as text)."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import igraph as ig
import networkx as nx
import polars as pl
import pytest
from conftest import needs_system_tool

from app.cli.main import main
from pipeline.export import export_graphml, export_html, mermaid_svg
from pipeline.export.html import script_json
from pipeline.export.mermaid_svg import parse
from pipeline.query.flow.mermaid import mermaid
from pipeline.storage import store

XSS = "<img src=x onerror=alert(1)>"
# would mark the page if any text of the index ran as script
PWN = "<script>document.body.setAttribute('data-pwned','1')</script>"
TABLES = (
    "entities",
    "relationships",
    "communities",
    "community_reports",
    "text_units",
    "documents",
)


@pytest.fixture(scope="module")
def index(sample_index, tmp_path_factory) -> Path:
    """The sample index's graph tables plus an entity named like an XSS payload, linked to
    Marie Curie, in her communities, whose description and report hold a script."""
    _, out, _, _ = sample_index
    folder = tmp_path_factory.mktemp("export_index")
    tables = {name: store.read_table(out, name) for name in TABLES}
    entities = tables["entities"]
    curie = entities.filter(pl.col("title") == "Marie Curie").row(0, named=True)
    xss = {
        **{k: curie[k] for k in ("type", "aliases", "text_unit_ids", "frequency")},
        "id": "xss-entity",
        "human_readable_id": entities["human_readable_id"].max() + 1,
        "title": XSS,
        "description": f"a description that closes the script element: {PWN}\x0b",
        "degree": 1,
    }
    tables["entities"] = pl.concat([entities, pl.DataFrame([xss], schema=entities.schema)])
    rels = tables["relationships"]
    rel = {
        **rels.row(0, named=True),
        "id": "xss-rel",
        "source": XSS,
        "target": "Marie Curie",
        "source_id": "xss-entity",
        "target_id": curie["id"],
        "description": PWN,
    }
    tables["relationships"] = pl.concat([rels, pl.DataFrame([rel], schema=rels.schema)])
    tables["communities"] = tables["communities"].with_columns(
        pl.when(pl.col("entity_ids").list.contains(curie["id"]))
        .then(pl.col("entity_ids").list.concat(pl.lit(["xss-entity"])))
        .otherwise(pl.col("entity_ids"))
    )
    tables["community_reports"] = tables["community_reports"].with_columns(
        summary=pl.lit(PWN + " ") + pl.col("summary")
    )
    for name, frame in tables.items():
        store.write_table(folder, name, frame)
    return folder


def test_graphml_opens_in_networkx_and_igraph(index, tmp_path):
    target = tmp_path / "graph.graphml"
    assert export_graphml(index, target) == (
        store.table_rows(index, "entities"),
        store.table_rows(index, "relationships"),
    )
    entities = store.read_table(index, "entities")
    communities = store.read_table(index, "communities")
    levels = sorted(set(communities["level"]))
    g = nx.read_graphml(target)
    edges = store.table_rows(index, "relationships")
    assert (g.number_of_nodes(), g.number_of_edges()) == (entities.height, edges)
    node = g.nodes["xss-entity"]
    assert node["title"] == XSS and node["label"] == XSS
    assert "\x0b" not in node["description"] and PWN in node["description"]
    for level in levels:  # the entity's community per level, -1 where it has none
        at = communities.filter(
            (pl.col("level") == level) & pl.col("entity_ids").list.contains("xss-entity")
        )["community"].to_list()
        assert node[f"community_L{level}"] == (at[0] if at else -1)
    edge = g.get_edge_data("xss-entity", entities.filter(pl.col("title") == "Marie Curie")["id"][0])
    if g.is_multigraph():  # two relationships join some pair of entities: one edge each
        (edge,) = edge.values()
    assert edge["relationship_id"] == "xss-rel" and edge["description"] == PWN
    h = ig.Graph.Read_GraphML(str(target))
    assert (h.vcount(), h.ecount()) == (g.number_of_nodes(), g.number_of_edges())
    assert {f"community_L{level}" for level in levels} <= set(h.vs.attributes())
    assert XSS in h.vs["title"] and "weight" in h.es.attributes()


def _page_data(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    start = text.index('<script type="application/json" id="graph-data">')
    body = text[text.index(">", start) + 1 : text.index("</script>", start)]
    return json.loads(body)


def test_html_page_is_self_contained_and_capped(index, tmp_path):
    page = tmp_path / "graph.html"
    assert export_html(index, page, max_nodes=10) == (10, store.table_rows(index, "entities"))
    text = page.read_text(encoding="utf-8")
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert "<script src" not in text and "<link" not in text
    assert XSS not in text and "</script><script>" not in text  # data never as markup
    data = _page_data(page)
    top = store.read_table(index, "entities").sort(
        ["degree", "human_readable_id"], descending=[True, False]
    )
    assert [n["t"] for n in data["nodes"]] == top["title"].head(10).to_list()
    assert data["total"] == top.height
    assert all(0 <= a < 10 and 0 <= b < 10 for a, b, _ in data["edges"])
    assert script_json({"s": "</script>\u2028&"}) == '{"s":"\\u003c/script\\u003e\\u2028\\u0026"}'


CHROMIUM = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
    None,
)
needs_chromium = needs_system_tool("chromium", CHROMIUM is not None)


class _Dom(HTMLParser):
    """The dumped page: <body>'s attributes, the panel's text, every <img> tag."""

    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str | None] = {}
        self.images = 0
        self.panel: list[str] = []
        self.depth = 0  # > 0 inside the panel

    def handle_starttag(self, tag, attrs):
        if tag == "body":
            self.body = dict(attrs)
        self.images += tag == "img"
        if self.depth or ("id", "panel") in attrs:
            self.depth += 1

    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1

    def handle_data(self, data):
        if self.depth:
            self.panel.append(data)


def _browse(page: Path, fragment: str, tmp_path: Path) -> _Dom:
    """The page's DOM after its scripts ran, in headless Chromium."""
    dump = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--window-size=1400,900",
            "--dump-dom",
            page.as_uri() + "#" + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    dom = _Dom()
    dom.feed(dump)
    return dom


@pytest.fixture(scope="module")
def page(index, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("page") / "graph.html"
    export_html(index, target)
    return target


@needs_chromium
def test_browser_renders_nodes_and_finds_an_entity(page, index, tmp_path):
    data = _page_data(page)
    hits = [n for n in data["nodes"] if "curie" in n["t"].lower()]
    best = max(hits, key=lambda n: n["g"])  # the first hit: the highest degree
    dom = _browse(page, "search=CURIE", tmp_path)
    assert dom.body.get("data-ready") == "1", dom.body
    assert dom.body["data-rendered-nodes"] == str(len(data["nodes"]))
    assert int(dom.body["data-painted-pixels"]) > 5000  # the canvas really has a drawing
    assert dom.body["data-search-hits"] == str(len(hits)) and len(hits) >= 2
    assert dom.body["data-selected"] == best["t"] == "Marie Curie"
    panel = "".join(dom.panel)
    assert "Sources (" in panel and data["documents"][best["s"][0][0]] in panel
    assert data["reports"][str(best["c"][0])]["title"] in panel
    shown0 = {n["c"][0] for n in data["nodes"]}
    assert dom.body["data-communities"] == str(len(shown0))


@needs_chromium
def test_browser_level_switch_recolours_and_reports(page, tmp_path):
    data = _page_data(page)
    deepest = len(data["levels"]) - 1
    assert deepest >= 1, "the sample index has one community level only"
    dom = _browse(page, f"level={data['levels'][deepest]}&search=marie%20curie", tmp_path)
    assert dom.body["data-level"] == str(data["levels"][deepest])

    def at(node):  # its community at the deepest level, or the deepest one above it, or -1
        return next((c for c in reversed(node["c"][: deepest + 1]) if c >= 0), -1)

    assert dom.body["data-communities"] == str(len({at(n) for n in data["nodes"]}))
    curie = next(n for n in data["nodes"] if n["t"] == "Marie Curie")
    assert data["reports"][str(at(curie))]["title"] in "".join(dom.panel)


@needs_chromium
def test_browser_shows_an_xss_title_as_text(page, tmp_path):
    dom = _browse(page, "search=" + quote("<img src=x"), tmp_path)
    assert dom.body.get("data-ready") == "1", dom.body
    assert dom.body["data-selected"] == XSS
    assert dom.images == 0  # no <img> element was made from the title
    assert "data-pwned" not in dom.body  # nothing in the data ran
    panel = "".join(dom.panel)
    assert XSS in panel and PWN in panel  # title, description and report shown as text


def test_mermaid_svg_draws_the_flow_subset():
    text = mermaid(
        [("a", 'Niels "Bohr" <b>#1</b>'), ("b", "Copenhagen"), ("c", "Nobel [Prize]")],
        [
            ("a", "b", "PLACE_OF_BIRTH"),
            ("a", "b", "PLACE_OF_DEATH"),
            ("b", "c", "x|y"),
            ("a", "c", "RELATED_TO"),
        ],
    )
    svg = ET.fromstring(mermaid_svg(text))
    ns = {"s": "http://www.w3.org/2000/svg"}
    labels = [t.text for t in svg.iterfind(".//s:g/s:text", ns)]
    assert labels == ['Niels "Bohr" <b>#1</b>', "Copenhagen", "Nobel [Prize]"]
    assert len(svg.findall(".//s:polyline", ns)) == 3  # the two a->b edges are one line
    edge_labels = {t.text for t in svg.iterfind("./s:text", ns)}
    assert edge_labels == {"PLACE_OF_BIRTH, PLACE_OF_DEATH", "x|y", "RELATED_TO"}
    a_to_c = svg.findall(".//s:polyline", ns)[2].get("points").split()
    assert len(a_to_c) == 3  # a long edge bends once, at the layer it crosses
    assert parse("graph TD\n x --> y").direction == "TD"
    with pytest.raises(ValueError, match="subset"):
        mermaid_svg("graph LR\n subgraph one")


def test_cli_export(index, tmp_path, capsys):
    graphml, html = tmp_path / "g.graphml", tmp_path / "g.html"
    assert main(["export", "graphml", "--output", str(index), "--to", str(graphml)]) == 0
    assert nx.read_graphml(graphml).number_of_nodes() == store.table_rows(index, "entities")
    args = ["export", "html", "--output", str(index), "--to", str(html), "--max-nodes", "5"]
    assert main(args) == 0
    assert len(_page_data(html)["nodes"]) == 5
    assert "5 of " in capsys.readouterr().out
    assert main(["export", "html", "--output", str(tmp_path / "none"), "--to", str(html)]) == 2
