"""The entity graph as GraphML, for Gephi, igraph, networkx, Cytoscape.

Written directly (not through igraph's writer) so node ids are the entity ids, every
attribute has a declared type, and text that XML 1.0 cannot hold (control characters
from PDFs) is dropped instead of producing a file the readers reject.
"""

from __future__ import annotations

import re
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from pipeline.export.data import EntityGraph, load
from pipeline.storage.files import atomic_write_with

# characters XML 1.0 forbids (everything below U+0020 but tab, LF, CR; lone surrogates;
# U+FFFE/U+FFFF)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: object) -> str:
    return escape(_NOT_XML.sub("", "" if value is None else str(value)))


def _attr(value: object) -> str:
    return quoteattr(_NOT_XML.sub("", str(value)))


def node_keys(levels: list[int]) -> list[tuple[str, str]]:
    """(name, GraphML type) of every node attribute."""
    base = [
        ("label", "string"),  # Gephi shows `label`
        ("title", "string"),
        ("type", "string"),
        ("description", "string"),
        ("degree", "long"),
        ("human_readable_id", "long"),
    ]
    return base + [(f"community_L{level}", "long") for level in levels]


EDGE_KEYS = [
    ("relationship_id", "string"),
    ("type", "string"),
    ("description", "string"),
    ("weight", "double"),
]


def graphml_lines(graph: EntityGraph):
    """The GraphML document, line by line (a large graph is never held as one string)."""
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    yield (
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns '
        'http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n'
    )
    for name, kind in node_keys(graph.levels):
        yield f'  <key id="n_{name}" for="node" attr.name="{name}" attr.type="{kind}"/>\n'
    for name, kind in EDGE_KEYS:
        yield f'  <key id="e_{name}" for="edge" attr.name="{name}" attr.type="{kind}"/>\n'
    yield '  <graph id="entities" edgedefault="undirected">\n'
    none = [-1] * len(graph.levels)
    for row in graph.nodes.iter_rows(named=True):
        values = {
            "label": row["title"],
            "title": row["title"],
            "type": row["type"],
            "description": row["description"],
            "degree": row["degree"] or 0,
            "human_readable_id": row["human_readable_id"],
        }
        for level, community in zip(
            graph.levels, graph.membership.get(row["id"], none), strict=True
        ):
            values[f"community_L{level}"] = community
        yield f"    <node id={_attr(row['id'])}>\n"
        for name, value in values.items():
            if value is not None:
                yield f'      <data key="n_{name}">{_text(value)}</data>\n'
        yield "    </node>\n"
    for row in graph.edges.iter_rows(named=True):
        yield (
            f"    <edge id={_attr(row['id'])} source={_attr(row['source_id'])} "
            f"target={_attr(row['target_id'])}>\n"
        )
        values = {
            "relationship_id": row["id"],
            "type": row["type"],
            "description": row["description"],
            "weight": row["weight"],
        }
        for name, value in values.items():
            if value is not None:
                yield f'      <data key="e_{name}">{_text(value)}</data>\n'
        yield "    </edge>\n"
    yield "  </graph>\n</graphml>\n"


def export_graphml(output_dir: str | Path, target: str | Path) -> tuple[int, int]:
    """Write the index's whole entity graph to `target` (atomically); (nodes, edges)."""
    graph = load(output_dir)

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.writelines(graphml_lines(graph))

    atomic_write_with(Path(target), write)
    return graph.nodes.height, graph.edges.height
