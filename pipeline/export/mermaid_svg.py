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


def mermaid_svg(text: str) -> str:
    """SVG of the Mermaid flowchart `text` (the subset flow search writes)."""
    chart = parse(text)
    keys = list(chart.labels)
    pos = {k: i for i, k in enumerate(keys)}
    pairs = [(pos[a], pos[b]) for a, b, _ in chart.edges if a != b]
    widths = [len(chart.labels[k]) * CHAR_W + 2 * PAD for k in keys]
    coords = (
        ig.Graph(n=len(keys), edges=pairs, directed=True).layout_sugiyama().coords[: len(keys)]
        if keys
        else []
    )
    horizontal = chart.direction in ("LR", "RL")
    layers = sorted({int(round(c[1])) for c in coords})
    # a layer is as wide (LR) or as tall (TD) as its widest box
    extent = {
        layer: max(w for w, c in zip(widths, coords, strict=True) if int(round(c[1])) == layer)
        if horizontal
        else NODE_H
        for layer in layers
    }
    offset, at = {}, PAD
    for layer in layers:
        offset[layer] = at
        at += extent[layer] + GAP_X
    slot = NODE_H + GAP_Y if horizontal else max(widths, default=0) + GAP_Y
    centres = []
    for (x, y), w in zip(coords, widths, strict=True):
        layer = int(round(y))
        along = offset[layer] + (extent[layer] / 2 if horizontal else NODE_H / 2)
        across = PAD + x * slot + (NODE_H / 2 if horizontal else w / 2)
        centres.append((along, across) if horizontal else (across, along))
    if chart.direction in ("RL", "BT") and centres:
        far = max(c[0 if horizontal else 1] for c in centres) + min(
            c[0 if horizontal else 1] for c in centres
        )
        centres = [(far - cx, cy) if horizontal else (cx, far - cy) for cx, cy in centres]
    width = max((cx + w / 2 for (cx, _), w in zip(centres, widths, strict=True)), default=0) + PAD
    height = max((cy + NODE_H / 2 for _, cy in centres), default=0) + PAD
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker>'
        "</defs>",
    ]
    labels = []
    for a, b, label in chart.edges:
        (ax, ay), (bx, by) = centres[pos[a]], centres[pos[b]]
        x1, y1 = _clip(ax, ay, widths[pos[a]], NODE_H, bx, by)
        x2, y2 = _clip(bx, by, widths[pos[b]], NODE_H, ax, ay)
        out.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#888" '
            'marker-end="url(#arrow)"/>'
        )
        if label:
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
