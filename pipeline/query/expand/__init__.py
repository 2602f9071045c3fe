"""Expand search (the hierarchy seed): vector seeds, bounded typed-edge expansion, rerank.

In: a question and the index tables (query/tables.py). Out: a SearchResult whose `data`
holds the expanded subgraph. Modules: graph (typed edges), params, search (seeds, beam
expansion, ranking), context (grouped context and records).

One node space holds sections, text units and entities (content nodes are folded into
the units that hold them). Typed edges, built once per index and cached on it:
  PARENT / CHILD / SIBLING   derived from sections.parent_id / seq (never stored);
  CONTAINS                   a section <-> its own text units (free: costs no hop);
  REFERS_TO, SAME_TOPIC, ... structure_edges / same_topic_edges, both directions, with the
                             stored weight; a content-node endpoint is lifted to its units;
  MENTIONS                   text unit <-> entity; entity -> unit weighted log 2 / log(1 + df),
                             so a rare bridge entity links strongly and a hub barely;
  RELATED                    entity <-> entity through a relationship (weight / max weight).

Seeds (hop 0) are the nearest text units, sections (mean of their units' vectors), content
nodes (projected onto their units) and entity descriptions, each scored by its cosine, and
the entities and document titles the query names as proper names (score `name_seed`: the
query's own words are the strongest evidence there is). Expansion is a
max-product beam search: a node's path score is the best  seed_score * prod(type_weight *
edge_weight)  over at most `max_hops` hops; every weight is <= 1, so scores decay along a
path. Each hop expands only the `beam` best nodes it just improved, hub entities (in more
than `max_df` units) left out before the cut: the cost follows the frontier, not the
corpus. Nodes are then ranked by  (1 - own_weight) * path score + own_weight * own cosine
with the query (ties: fewer hops, then row order) and kept up to `max_nodes`, each with its
best path (so the subgraph stays connected).
Text units are ranked apart from that cut, all of them:  own cosine + evidence_weight *
the best path score that arrived at the unit over an edge  (0 for a unit no edge reached;
a seed's own seed score is not counted, but the way back from its seeded section is:
0.9 x the section's cosine, so the top dense passages keep their place). A bridge passage
reached through a rare entity from a named one (or from a named document's passage)
rises above dense hits nothing links to. Summing or noisy-or-ing the paths into a node
instead of taking the best one, and wider beams, were measured on MuSiQue and lost (a
named entity's many neighbours flood the top ranks).
Then a second hop (rerank.title_bridges): the best units of documents whose title the top
two units name rise to just below them (the page about a bridge entity the question never
names; MuSiQue R@5 66.5 -> 70.5 on the first 50 questions, 71.3 -> 75.3 on the other 50).
Tuned on MuSiQue (benchmarks/retrieval.py): own_weight 0.3, name_seed 1.0, evidence_weight 2.
The context groups the units by document, then section path, in reading order.
"""
