"""Expand search's knobs: seeding, beam, pruning, unit ranking and answer sizes.

Internal constants tuned on MuSiQue (benchmarks/retrieval.py); hops and nodes come from
QuerySettings, edge-type weights from expand/graph.py.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExpandParams:
    """Seeding and ranking knobs (internal constants; hops/nodes come from QuerySettings)."""

    seed_units: int = 10
    seed_sections: int = 5
    seed_nodes: int = 5
    seed_entities: int = 10
    min_entity_sim: float = 0.35
    # Seed score of an entity the query names as a proper name, and of the text units of a
    # document whose title it names (full weight: the query's own words).
    name_seed: float = 1.0
    beam: int = 40  # nodes expanded per hop
    max_df: int = 200  # entities in more units are not expanded through
    own_weight: float = 0.3  # subgraph pruning: blend of path score and own cosine
    # Unit rank = own relevance (cosine + BM25, IndexTables.unit_relevance) + evidence_weight
    # * best path score arriving over an edge.
    # Path scores decay by a product of weights <= 1 per hop (a 2-hop bridge through an
    # entity in a few units arrives at ~0.2-0.3), so the graph's word needs a weight above
    # the cosine's to lift a bridge passage over dense hits. With BM25 in the unit relevance
    # (pipeline/lexical/fusion.py) R@5 at 1.0 / 1.5 / 2.0: MuSiQue 72.4 / 71.8 / 72.2,
    # grb_novel 69.4 / 69.4 / 68.1 (2.0 with the dense cosine alone: MuSiQue 72.1).
    evidence_weight: float = 1.0
    # Then the second hop (rerank.title_bridges): units of documents whose title the best
    # `bridge_seeds` units name gain bridge_weight x the naming unit's rank score.
    bridge_seeds: int = 2
    bridge_weight: float = 0.3
    entity_context: int = 10  # entities listed in the context at most


DEFAULT_PARAMS = ExpandParams()
