"""See the graph: export an index's entity graph for other tools and for people.

`export_graphml` writes GraphML (entities with their community per level, relationships
with descriptions and weights) that Gephi, igraph and networkx open; `export_html` writes
one self-contained offline HTML page (the vendored vis-network library, the data as
escaped JSON, a strict Content-Security-Policy) with the graph coloured by community, a
level switch, search and a panel showing an entity's description, sources and community
report; `mermaid_svg` draws the Mermaid diagram of a flow search as SVG, so a notebook
shows it without loading mermaid.js from a CDN.
"""

from pipeline.export.graphml import export_graphml
from pipeline.export.html import DEFAULT_MAX_NODES, export_html
from pipeline.export.mermaid_svg import mermaid_svg

__all__ = ["DEFAULT_MAX_NODES", "export_graphml", "export_html", "mermaid_svg"]
