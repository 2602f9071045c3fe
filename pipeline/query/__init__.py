"""Query module: open an output folder with `GraphIndex.open(path)` and search it.

    idx = GraphIndex.open("data/output")
    idx.naive_search("…")    # dense over text units (the baseline)
    idx.local_search("…")    # entities -> graph -> sources, PageRank-ranked
    idx.global_search("…")   # rated community reports, reduced

Every mode returns a `SearchResult` (answer, context text, records with provenance,
ranked text unit ids, trace, token count).
"""

from pipeline.query.index import GraphIndex
from pipeline.query.result import SearchResult

__all__ = ["GraphIndex", "SearchResult"]
