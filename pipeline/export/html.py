"""The entity graph as one self-contained, offline HTML page.

Everything is inside the file: the vendored vis-network build (static/, MIT), the page's
own script (static/graph.js) and the data as JSON in a `<script type="application/json">`
element. Data never becomes markup: the JSON escapes `<`, `>`, `&`, U+2028 and U+2029 so
no text can close the element, and the script inserts every string with `textContent`.
A Content-Security-Policy allows only the page's two scripts (by hash) and no load from
anywhere, so even a missed injection could neither run nor call home.

Node positions are computed here (igraph Fruchterman-Reingold, seeded by a circle so the
same index gives the same picture) and the browser only draws: no physics simulation,
so a few thousand nodes open at once.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import igraph as ig

from pipeline.export.data import EntityGraph, load, reports, snippet, sources
from pipeline.storage.files import atomic_write_text

DEFAULT_MAX_NODES = 2000
SOURCES_PER_NODE = 3  # snippets shown in the panel; the count says how many there are

_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def script_json(value: Any) -> str:
    """`value` as JSON that is safe as the text of a `<script>` element: no `</script>`,
    `<!--` or line separator can appear (each is escaped inside its JSON string)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return "".join(_JSON_ESCAPES.get(c, c) for c in text)


def _static(name: str) -> str:
    return (resources.files("pipeline.export") / "static" / name).read_text(encoding="utf-8")


def _csp_hash(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def layout(
    n: int, edges: list[tuple[int, int]], weights: list[float] | None = None
) -> list[tuple[float, float]]:
    """Deterministic positions for `n` nodes, spread so nodes of ~20 px rarely overlap;
    heavier edges pull their ends closer."""
    if n == 0:
        return []
    graph = ig.Graph(n=n, edges=edges)
    seed = graph.layout_circle().coords
    coords = graph.layout_fruchterman_reingold(weights=weights, seed=seed, niter=500).coords
    xs, ys = [c[0] for c in coords], [c[1] for c in coords]
    span = max(max(xs) - min(xs), max(ys) - min(ys)) or 1.0
    scale = 60.0 * math.sqrt(n) / span
    cx, cy = (max(xs) + min(xs)) / 2, (max(ys) + min(ys)) / 2
    return [(round((x - cx) * scale, 1), round((y - cy) * scale, 1)) for x, y in coords]


def page_data(output_dir: str | Path, graph: EntityGraph) -> dict[str, Any]:
    """What the page shows: nodes (with positions, communities per level and source
    snippets), edges by node index, documents, community reports, counts."""
    ids = graph.nodes["id"].to_list()
    index = {entity_id: i for i, entity_id in enumerate(ids)}
    edges = [
        (index[s], index[t], float(w or 1.0))
        for s, t, w in graph.edges.select("source_id", "target_id", "weight").iter_rows()
    ]
    rows = list(graph.nodes.iter_rows(named=True))
    # edges inside a top-level community pull harder: communities come out as clusters
    top = [graph.community_at(row["id"], 0) for row in rows]
    pulls = [4.0 if top[a] == top[b] >= 0 else 1.0 for a, b, _ in edges]
    positions = layout(len(ids), [(a, b) for a, b, _ in edges], pulls)
    wanted = {u for row in rows for u in (row["text_unit_ids"] or [])[:SOURCES_PER_NODE]}
    units = sources(output_dir, wanted)
    documents: dict[str, int] = {}
    none = [-1] * len(graph.levels)
    nodes = []
    for row, (x, y) in zip(rows, positions, strict=True):
        shown = []
        for unit_id in (row["text_unit_ids"] or [])[:SOURCES_PER_NODE]:
            if unit_id in units:
                doc, text = units[unit_id]
                doc_index = documents.setdefault(doc, len(documents))
                shown.append([doc_index, snippet(text, row["title"])])
        nodes.append(
            {
                "t": row["title"] or "",
                "k": row["type"] or "",
                "d": row["description"] or "",
                "g": int(row["degree"] or 0),
                "c": graph.membership.get(row["id"], none),
                "x": x,
                "y": y,
                "s": shown,
                "n": len(row["text_unit_ids"] or []),
            }
        )
    communities = {c for node in nodes for c in node["c"] if c >= 0}
    return {
        "levels": graph.levels,
        "total": graph.total_nodes,
        "nodes": nodes,
        "edges": [[a, b, w] for a, b, w in edges],
        "documents": list(documents),
        "reports": {str(c): r for c, r in reports(output_dir, communities).items()},
    }


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src {hashes}; \
style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>docgraph entity graph</title>
<style>
html, body {{ margin: 0; height: 100%; font: 14px/1.4 system-ui, sans-serif; color: #222; }}
body {{ display: grid; grid-template-columns: 1fr 380px; grid-template-rows: auto 1fr; }}
header {{ grid-column: 1 / 3; display: flex; gap: 12px; align-items: center; flex-wrap: wrap;
  padding: 8px 12px; border-bottom: 1px solid #ddd; background: #fafafa; }}
header h1 {{ font-size: 16px; margin: 0; }}
#summary {{ color: #555; }}
#search {{ width: 240px; padding: 4px 6px; }}
#graph {{ min-height: 0; background: #fff; }}
aside {{ overflow: auto; border-left: 1px solid #ddd; padding: 10px 14px; }}
aside h2 {{ font-size: 18px; margin: 4px 0; overflow-wrap: anywhere; }}
aside h3 {{ font-size: 14px; margin: 14px 0 4px; }}
.meta, .note {{ color: #666; }}
.hit {{ display: block; width: 100%; text-align: left; margin: 2px 0; padding: 3px 6px;
  border: 1px solid #ddd; background: #fff; cursor: pointer; overflow-wrap: anywhere; }}
.hit:hover {{ background: #eef; }}
.source {{ margin: 6px 0; padding-left: 8px; border-left: 3px solid #ddd; }}
.doc {{ font-weight: 600; }}
.legend span.swatch {{ display: inline-block; width: 10px; height: 10px; margin-right: 6px;
  border-radius: 50%; }}
.legend div {{ overflow-wrap: anywhere; }}
</style>
</head>
<body>
<header>
<h1>docgraph entity graph</h1>
<label>level <select id="level"></select></label>
<input id="search" type="search" placeholder="search entities" autocomplete="off">
<span id="summary"></span>
</header>
<div id="graph"></div>
<aside id="panel"></aside>
<script type="application/json" id="graph-data">{data}</script>
<script>{vendor}</script>
<script>{app}</script>
</body>
</html>
"""


def render(data: dict[str, Any]) -> str:
    """The page for `data` (from `page_data`)."""
    vendor, app = _static("vis-network.min.js"), _static("graph.js")
    for name, script in (("vis-network.min.js", vendor), ("graph.js", app)):
        lowered = script.lower()
        if "</script" in lowered or "<!--" in lowered:  # would end the inline element
            raise ValueError(f"static/{name} cannot be inlined in a <script> element")
    hashes = " ".join(_csp_hash(s) for s in (vendor, app))
    return _PAGE.format(hashes=hashes, data=script_json(data), vendor=vendor, app=app)


def export_html(
    output_dir: str | Path, target: str | Path, max_nodes: int = DEFAULT_MAX_NODES
) -> tuple[int, int]:
    """Write the page for the `max_nodes` entities of highest degree to `target`;
    (nodes shown, entities in the index)."""
    if max_nodes < 1:
        raise ValueError(f"max_nodes must be >= 1, not {max_nodes}")
    graph = load(output_dir, max_nodes)
    atomic_write_text(Path(target), render(page_data(output_dir, graph)))
    return graph.nodes.height, graph.total_nodes
