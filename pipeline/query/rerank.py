"""Rank text units the graph proposes by their relevance to the question.

The graph modes find candidate units through entities and relationships: what a kept entity
or edge cites, or where personalised PageRank mass ends. That evidence says a unit is
*connected* to the question's subject, not that it *answers* it: a unit cited by many kept
entities (a list, a hub page) collects a large count while the one sentence that answers is
cited once. So the candidates are ranked by a fusion of the two signals:

    fused = graph_weight * (graph / max graph) ** power + (1 - graph_weight) * relevance

(relevance: the unit's cosine mixed with its BM25 score, IndexTables.unit_relevance).

`power` < 1 compresses the graph score's heavy tail (PageRank mass and citation sums span
orders of magnitude; a square root keeps their order but lets the question–unit cosine
decide between units the graph rates within a few times of each other). The top dense units
join the candidates with graph score 0, so a mode whose graph missed the answering unit
still has it (and a mode never ranks below its own dense candidates for lack of a link).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline.query.names import name_key
from pipeline.query.scoring import top_indices

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


CAP_GAP = 1e-9  # a bridged unit stays this far below the unit that names its title
# Graph evidence is trusted in full where at least this share of the documents is titled by
# an entity's name, less below it, not at all where none is (graph_trust).
TITLED_FULL = 0.4
UNITS_PER_TITLE = 2  # units of one bridged document lifted at most (its best by score)


def fuse(
    graph: np.ndarray, sims: np.ndarray, graph_weight: float, power: float = 0.5
) -> np.ndarray:
    """graph_weight * (graph / max) ** power + (1 - graph_weight) * sims (graph >= 0)."""
    graph = np.maximum(np.asarray(graph, dtype=np.float64), 0.0)
    top = graph.max() if graph.size else 0.0
    norm = np.power(graph / top, power) if top > 0 else np.zeros_like(graph)
    return graph_weight * norm + (1.0 - graph_weight) * np.asarray(sims, dtype=np.float64)


def rank_units(
    index: IndexTables,
    query: str,
    unit_ids: list[str],
    graph_scores: dict[str, float],
    *,
    graph_weight: float,
    power: float = 0.5,
    dense_candidates: int = 0,
    bridge_seeds: int = 0,
    bridge_weight: float = 0.0,
) -> tuple[list[str], dict[str, dict[str, float]], list[str]]:
    """Candidate unit ids best first, per id {score, graph, dense}, and the titles bridged.

    Candidates: the graph-proposed `unit_ids`, the `dense_candidates` nearest units, and the
    units `title_bridges` reaches from the best of those; scored by `fuse` (+ the bridge
    bonus). Ties keep the graph's order, then row order."""
    sims = index.unit_relevance(query)
    graph = np.zeros(sims.shape, dtype=np.float64)
    rows = [index.unit_row[u] for u in unit_ids if u in index.unit_row]
    graph[rows] = [graph_scores.get(u, 0.0) for u in unit_ids if u in index.unit_row]
    cand = np.zeros(sims.shape, dtype=bool)
    cand[rows] = True
    cand[top_indices(sims, dense_candidates)] = True
    scores = fuse(graph, sims, graph_weight, power)
    scores[~cand] = 0.0  # only candidates seed the second hop
    bridged, named = title_bridges(index, scores, bridge_seeds, bridge_weight)
    cand |= bridged > scores
    first = np.full(sims.shape, len(rows), dtype=np.int64)
    first[rows[::-1]] = np.arange(len(rows))[::-1]  # a unit's first place in the graph order
    idx = np.flatnonzero(cand)
    idx = idx[np.lexsort((idx, first[idx], -bridged[idx]))]
    ids = index.text_units["id"]
    info = {
        ids[r]: {"score": float(bridged[r]), "graph": float(graph[r]), "dense": float(sims[r])}
        for r in idx.tolist()
    }
    return list(info), info, named


def graph_trust(index: IndexTables) -> float:
    """How far the graph modes weigh graph evidence against the units' own relevance, 0..1:
    the share of documents whose title is an entity's name, over TITLED_FULL. The modes'
    graph weights were fitted where titles name what the documents are about (MuSiQue's
    Wikipedia pages: 0.58 of its documents); where they do not (books, booklets, chat logs),
    the same graph read off chunks of long texts ranked below the hybrid baseline (R@5 on
    `grb_novel`, titles 0.0: local 70.0 / expand 69.4 / flow quick 70.5 against naive 72.7), so
    there the units' relevance decides (`xquad_ru`: 0.42, full trust). Cached on the index."""
    trust = getattr(index, "_graph_trust", None)
    if trust is None:
        names, titles = index.name_index, index.documents["title"].fill_null("").to_list()
        share = sum(name_key(t) in names for t in titles) / max(len(titles), 1)
        trust = min(1.0, share / TITLED_FULL)
        index._graph_trust = trust
    return trust


def title_bridges(
    index: IndexTables, scores: np.ndarray, seeds: int, weight: float
) -> tuple[np.ndarray, list[str]]:
    """Second hop through the first hop's words: the best units (UNITS_PER_TITLE) of a
    document whose title one of the `seeds` best units names (written as a name, in another
    document) gain `weight` x that unit's score. Multi-hop questions ask about what the
    first passage names (the performer of a song, the country of a town): the page about
    that bridge entity is the next hop, though it shares no words with the question.
    Returns (scores, titles named)."""
    if seeds <= 0 or weight <= 0 or scores.size == 0:
        return scores, []
    texts, docs = index.text_units["text"], index.text_units["document_id"]
    bonus = np.zeros(scores.shape, dtype=np.float64)
    named: set[str] = set()
    cap = np.full(scores.shape, -np.inf)
    for r in top_indices(scores, seeds).tolist():
        by_title: dict[str, list[int]] = {}
        for m in index.match_titles(texts[r] or ""):
            if m.proper and docs[m.row] != docs[r]:
                by_title.setdefault(m.key, []).append(m.row)
        for key, rows in by_title.items():
            # A long document gets its best few units lifted, not all of them.
            best = sorted(rows, key=lambda u: (-scores[u], u))[:UNITS_PER_TITLE]
            bonus[best] = np.maximum(bonus[best], float(scores[r]))
            cap[best] = np.maximum(cap[best], float(scores[r]) - CAP_GAP)
            named.add(key)
    # The second hop follows the first: a bridged unit rises up to just below its namer,
    # bridged units in their own order (the j-th best by its score is j gaps below).
    hit = np.flatnonzero(bonus > 0)
    hit = hit[np.lexsort((hit, -scores[hit]))]
    cap[hit] -= CAP_GAP * np.arange(hit.size)
    out = scores.astype(np.float64)
    out[hit] = np.maximum(scores[hit], np.minimum(scores[hit] + weight * bonus[hit], cap[hit]))
    return out, sorted(named)
