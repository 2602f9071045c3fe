"""Mermaid `graph LR` rendering of a subgraph, with labels that cannot break out."""

from __future__ import annotations

from typing import Any

LABEL_CHARS = 48
_MERMAID_ESCAPES = {
    "#": "#35;",
    '"': "#quot;",
    "[": "#91;",
    "]": "#93;",
    "(": "#40;",
    ")": "#41;",
    "{": "#123;",
    "}": "#125;",
    "<": "#lt;",
    ">": "#gt;",
    "|": "#124;",
    ";": "#59;",
    "`": "#96;",
}


def mermaid_label(text: Any, limit: int = LABEL_CHARS) -> str:
    """`text` safe inside a quoted Mermaid label: one line, entity codes for the characters
    that could end the label or the statement ('#' too, so no code can be smuggled in)."""
    s = " ".join(str(text or "").split())
    if len(s) > limit:
        s = s[: limit - 1].rstrip() + "…"
    return "".join(_MERMAID_ESCAPES.get(c, c) for c in s)  # one pass: codes stay codes


def mermaid(nodes: list[tuple[str, str]], edges: list[tuple[str, str, str]]) -> str:
    """`graph LR` of (key, label) nodes and (source key, target key, label) edges; node ids
    are generated (n0, n1, ...), never taken from the data."""
    ids = {key: f"n{i}" for i, (key, _) in enumerate(nodes)}
    lines = ["graph LR"]
    lines += [f'    {ids[k]}["{mermaid_label(label)}"]' for k, label in nodes]
    for a, b, label in edges:
        if a in ids and b in ids:
            lines.append(f'    {ids[a]} -->|"{mermaid_label(label, 32)}"| {ids[b]}')
    return "\n".join(lines)
