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

In: an output folder (its published version). Out: SearchResults. Layout, bottom up:
tables.py (the read-only view of the index tables every mode reads; names.py, scoring.py,
ppr.py under it), records.py (the one builder of result records), the modes (naive.py,
local/, global_search.py, expand/, focus/, flow/, nodes.py; rerank.py and answer.py shared),
scope.py (tables restricted to publications), modes.py (the one list of modes and their
options, which GraphIndex, the CLI and the HTTP API read), index.py (`GraphIndex`: open,
follow the newest version, `search(mode, query, **options)` and one method per mode made
from that list). Modes never import index.py or scope.py.
"""

from pipeline.query.index import GraphIndex
from pipeline.query.result import SearchResult

__all__ = ["GraphIndex", "SearchResult"]
