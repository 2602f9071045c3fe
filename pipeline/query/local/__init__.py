"""Local search (GraphRAG / RAGU local): entities -> relations, neighbours, reports -> sources.

In: a question and the index tables (query/tables.py). Out: a SearchResult with the
GraphRAG-style context. Modules: search (knobs, ranking, entry point), context (tables).

1. The query's entities: by name (casefolded n-grams of the query against entity titles
   and aliases) and by embedding (nearest entity descriptions).
2. Text units are ranked by graph evidence fused with dense similarity (rerank.fuse):
   personalised PageRank over the text unit–entity bipartite graph, its restart mass on
   the query's entities (weighted ~1/log(document frequency), so common entities matter
   less) and on the top dense units. Mass flows unit -> shared entity -> unit, so a
   passage that shares a bridge entity with a relevant one is found even when it shares
   no words with the query (multi-hop questions). Then a second hop: units of documents
   whose title the best units name rise to just below them (rerank.title_bridges).
3. The context is built GraphRAG-style within `local_context_tokens`, the ranked text
   units paid for first: Entities, Relations, Summaries (community reports), Texts tables
   (the seed's sections) with human-readable ids; the records carry provenance.
"""
