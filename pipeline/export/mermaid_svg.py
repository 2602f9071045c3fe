"""Draw the Mermaid flowchart that flow search emits as SVG, with no JavaScript.

A notebook cannot load mermaid.js offline (and untrusted notebooks run no script), so the
subset `pipeline.query.flow.mermaid` writes — `graph LR|TD`, `id["label"]` nodes,
`a -->|"label"| b` edges, labels with Mermaid's `#code;` escapes — is parsed here, laid
out in layers with igraph's Sugiyama layout and drawn as plain SVG (which Jupyter, GitHub
and browsers show). Anything outside that subset is an error rather than a wrong picture.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

import igraph as ig

_HEADER = re.compile(r"^(?:graph|flowchart)\s+(LR|RL|TD|TB|BT)$")
_NODE = re.compile(r'^([A-Za-z_][\w-]*)\["(.*)"\]$')
_EDGE = re.compile(r'^([A-Za-z_][\w-]*)\s*-->\s*(?:\|"(.*)"\|\s*)?([A-Za-z_][\w-]*)$')
_CODE = re.compile(r"#(\d+|[a-z]+);")

CHAR_W, NODE_H, GAP_X, GAP_Y, PAD = 7.2, 30.0, 70.0, 22.0, 12.0


@dataclass
class Flowchart:
    direction: str
    labels: dict[str, str] = field(default_factory=dict)  # node id -> label, in order
    edges: list[tuple[str, str, str]] = field(default_factory=list)


def _unescape(label: str) -> str:
    """Mermaid's `#35;` / `#quot;` codes back to characters."""

    def code(m: re.Match[str]) -> str:
        name = m.group(1)
        if name.isdigit():
            return chr(int(name)) if int(name) < 0x110000 else m.group(0)
        return html.unescape(f"&{name};") if name in ("quot", "lt", "gt", "amp") else m.group(0)

    return _CODE.sub(code, label)


def parse(text: str) -> Flowchart:
    """The flowchart of `text`; ValueError naming the first line outside the subset."""
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("%%")]
    if not lines or not (header := _HEADER.match(lines[0])):
        raise ValueError("not a Mermaid flowchart: the first line must be 'graph LR' (or TD)")
    chart = Flowchart(header.group(1))
    for line in lines[1:]:
        if node := _NODE.match(line):
            chart.labels[node.group(1)] = _unescape(node.group(2))
        elif edge := _EDGE.match(line):
            a, label, b = edge.groups()
            for key in (a, b):
                chart.labels.setdefault(key, key)
            chart.edges.append((a, b, _unescape(label or "")))
        else:
            raise ValueError(f"Mermaid statement outside the supported subset: {line!r}")
    return chart


def _clip(cx: float, cy: float, w: float, h: float, tx: float, ty: float) -> tuple[float, float]:
    """Where the segment from the centre of a w x h box towards (tx, ty) leaves the box."""
    dx, dy = tx - cx, ty - cy
    if dx == 0 and dy == 0:
        return cx, cy
    t = min(w / 2 / abs(dx) if dx else float("inf"), h / 2 / abs(dy) if dy else float("inf"))
    return cx + dx * t, cy + dy * t


def _merged(chart: Flowchart) -> list[tuple[str, str, str]]:
    """One edge per (source, target), its distinct labels joined: parallel edges (born and
    died in the same city) would otherwise draw one line with labels on top of each other."""
    labels: dict[tuple[str, str], list[str]] = {}
    for a, b, label in chart.edges:
        seen = labels.setdefault((a, b), [])
        if label and label not in seen:
            seen.append(label)
    return [(a, b, ", ".join(v)) for (a, b), v in labels.items()]


def _layered(
    pairs: list[tuple[int, int]], n: int
) -> tuple[list[tuple[float, float]], list[list[tuple[float, float]]]]:
    """(x, layer) of `n` nodes and the bend points of each edge: Sugiyama layers first,
    then one dummy node per layer an edge crosses, laid out with the nodes so a long edge
    bends around boxes instead of crossing them. (igraph's own edge routing is not used:
    its control points come back out of order.)"""
    if n == 0:
        return [], []
    layer = [
        int(round(y))
        for _, y in ig.Graph(n=n, edges=pairs, directed=True).layout_sugiyama().coords[:n]
    ]
    extended, chains = list(pairs), []
    for a, b in pairs:
        low, high = sorted((layer[a], layer[b]))
        dummies = list(range(len(layer), len(layer) + max(0, high - low - 1)))
        layer += list(range(low + 1, high))
        chains.append(dummies if layer[a] <= layer[b] else dummies[::-1])
        if dummies:
            ends = (a, b) if layer[a] <= layer[b] else (b, a)
            path = [ends[0], *dummies, ends[1]]
            extended += list(zip(path, path[1:], strict=False))
    extended = [(a, b) for a, b in extended if abs(layer[a] - layer[b]) == 1]
    coords = ig.Graph(n=len(layer), edges=extended, directed=True).layout_sugiyama(layers=layer)
    xy = [(float(x), float(y)) for x, y in coords.coords[: len(layer)]]
    return xy[:n], [[xy[d] for d in chain] for chain in chains]


def mermaid_svg(text: str) -> str:
    """SVG of the Mermaid flowchart `text` (the subset flow search writes)."""
    chart = parse(text)
    keys = list(chart.labels)
    pos = {k: i for i, k in enumerate(keys)}
    edges = [e for e in _merged(chart) if e[0] != e[1]]
    widths = [len(chart.labels[k]) * CHAR_W + 2 * PAD for k in keys]
    coords, routes = _layered([(pos[a], pos[b]) for a, b, _ in edges], len(keys))
    horizontal = chart.direction in ("LR", "RL")
    layer_of = [int(round(c[1])) for c in coords]
    layers = sorted(set(layer_of) | {int(round(y)) for r in routes for _, y in r})
    # a layer is as wide (LR) or as tall (TD) as its widest box
    extent = {layer: 0.0 for layer in layers}
    for layer, w in zip(layer_of, widths, strict=True):
        extent[layer] = max(extent[layer], w if horizontal else NODE_H)
    offset, at = {}, PAD
    for layer in layers:
        offset[layer] = at
        at += extent[layer] + GAP_X
    slot = NODE_H + GAP_Y if horizontal else max(widths, default=0) + GAP_Y
    inset = NODE_H / 2 if horizontal else max(widths, default=0) / 2

    def place(x: float, y: float) -> tuple[float, float]:
        layer = int(round(y))
        along, across = offset[layer] + extent[layer] / 2, PAD + x * slot + inset
        return (along, across) if horizontal else (across, along)

    centres = [place(x, y) for x, y in coords]
    if chart.direction in ("RL", "BT") and centres:
        axis = 0 if horizontal else 1
        far = max(c[axis] for c in centres) + min(c[axis] for c in centres)

        def flip(c: tuple[float, float]) -> tuple[float, float]:
            return (far - c[0], c[1]) if horizontal else (c[0], far - c[1])

        centres = [flip(c) for c in centres]
        routes = [[flip(place(x, y)) for x, y in r] for r in routes]
    else:
        routes = [[place(x, y) for x, y in r] for r in routes]
    bends = [point for route in routes for point in route]
    right = [cx + w / 2 for (cx, _), w in zip(centres, widths, strict=True)]
    width = max(right + [x for x, _ in bends], default=0) + PAD
    height = max([cy + NODE_H / 2 for _, cy in centres] + [y for _, y in bends], default=0) + PAD
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker>'
        "</defs>",
    ]
    labels = []
    for (a, b, label), bends in zip(edges, routes, strict=True):
        (ax, ay), (bx, by) = centres[pos[a]], centres[pos[b]]
        first, last = (bends[0], bends[-1]) if bends else ((bx, by), (ax, ay))
        points = [
            _clip(ax, ay, widths[pos[a]], NODE_H, *first),
            *bends,
            _clip(bx, by, widths[pos[b]], NODE_H, *last),
        ]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        out.append(
            f'<polyline points="{path}" fill="none" stroke="#888" marker-end="url(#arrow)"/>'
        )
        if label:
            mid = len(points) // 2
            (x1, y1), (x2, y2) = points[mid - 1], points[mid]
            mx, my, w = (x1 + x2) / 2, (y1 + y2) / 2, len(label) * 6.0 + 6
            labels.append(
                f'<rect x="{mx - w / 2:.1f}" y="{my - 8:.1f}" width="{w:.1f}" height="15" '
                f'fill="#fff" opacity="0.85"/><text x="{mx:.1f}" y="{my + 3:.1f}" '
                f'text-anchor="middle" font-size="10" fill="#555">{escape(label)}</text>'
            )
    out += labels  # labels above every line
    for k, (cx, cy), w in zip(keys, centres, widths, strict=True):
        out.append(
            f'<g><title>{escape(k)}</title><rect x="{cx - w / 2:.1f}" y="{cy - NODE_H / 2:.1f}" '
            f'width="{w:.1f}" height="{NODE_H:.0f}" rx="5" fill="#ececff" stroke="#9370db"/>'
            f'<text x="{cx:.1f}" y="{cy + 4:.1f}" text-anchor="middle" '
            f"data-node={quoteattr(k)}>{escape(chart.labels[k])}</text></g>"
        )
    out.append("</svg>")
    return "\n".join(out)
