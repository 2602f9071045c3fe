"""Query module: open an output folder with `GraphIndex.open(path)` and search it.

    idx = GraphIndex.open("data/output")
    idx.naive_search("…")    # dense over text units (the baseline)
    idx.local_search("…")    # entities -> graph -> sources, PageRank-ranked
    idx.global_search("…")   # rated community reports, reduced
    idx.expand_search("…")   # vector seeds + structure/entity graph expansion
    idx.focus_context(uri)   # a note or section with its related notes by priority
    idx.flow_search("…")     # knowledge flow: analysis, scored subgraph, Mermaid

Every mode returns a `SearchResult` (answer, context text, records with provenance,
ranked text unit ids, trace, token count).
"""

from pipeline.query.index import GraphIndex
from pipeline.query.result import SearchResult

__all__ = ["GraphIndex", "SearchResult"]
