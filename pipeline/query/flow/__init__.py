"""Knowledge flow search: query analysis -> scored subgraph -> definitions, facts, Mermaid.

In: a question and the index tables (query/tables.py). Out: a SearchResult with the
analysis, the scored subgraph as records, a Mermaid diagram and supporting text units.
Modules in step order: analysis, duckdb_store + retrieval, mermaid + context, search.

Normal mode
1. Query analysis: the LLM (`query_analysis` prompt -> {entities, intent}) in LLM mode, else
   (offline, or when its JSON is unusable) a lexical analysis: quoted strings, capitalised
   spans and entity names found in the query, content words when there is nothing else;
   the intent from cue words.
2. Retrieval over the Parquet tables with DuckDB (in-memory, parameterised, built once per
   index): name/description LIKE matches fill 60% of the node target (+3 per term in the
   name, +2 per term in the description); trigram similarity (Jaccard of padded 3-gram
   sets, as pg_trgm, which DuckDB lacks; a node's best over its title and aliases) >= 0.1
   fills 40% and catches misspellings; the entity vectors fill in when fewer than half the
   target were found.
3. Edges touching the nodes: +2 per term in the fact (description), +3 when both endpoints
   are nodes, +1 when one is. Missing endpoints of kept edges are fetched and compete for
   the node cap with the edge's score, so the cap holds and every edge has both ends.
4. Context: Definitions, Facts, a Mermaid `graph LR` diagram, supporting text units: those
   the kept nodes and edges cite (scored by the sum of their scores) and the nearest few by
   cosine, ranked by relevance to the question (rerank.py: citation score fused with the
   question–unit cosine; a unit many kept entities cite is connected, not necessarily an
   answer).

Quick mode: entity and relationship vectors (60/40 of the targets), then graph growth up to
3 levels with scores halving per level; no LLM analysis.
"""
