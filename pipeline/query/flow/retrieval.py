"""Flow step 2, the scored subgraph: entity nodes and relationship edges for the terms.

Normal mode: LIKE and trigram matches (duckdb_store), entity vectors filling in, edges scored
by terms in their fact and endpoints kept, missing endpoints competing for the node cap.
Quick mode: entity and relationship vectors, then graph growth with halving scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from pipeline.query.flow.analysis import MIN_TERM_CHARS
from pipeline.query.flow.duckdb_store import FlowStore, flow_store
from pipeline.query.scoring import top_indices
from pipeline.query.word_keys import fold

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


LIKE_SHARE = 0.6  # of the node target, filled by LIKE matches (the rest by trigrams)
MIN_TRIGRAM_SIM = 0.1
NAME_SCORE, DESC_SCORE = 3.0, 2.0
FACT_SCORE, BOTH_ENDS, ONE_END = 2.0, 3.0, 1.0
QUICK_LEVELS, QUICK_LEVEL_NODES, QUICK_LEVEL_EDGES, QUICK_DECAY = 3, 20, 30, 0.5


def relationship_vectors(index: IndexTables) -> np.ndarray:
    """Relationship vectors aligned with `index.relationships` rows (cached on the index)."""
    cached = getattr(index, "_flow_rel_vectors", None)
    if cached is None:
        cached = index._aligned_vectors("relationships", index.relationships)
        index._flow_rel_vectors = cached
    return cached


@dataclass
class Subgraph:
    nodes: dict[int, dict[str, Any]]  # entity row -> {score, via}
    edges: dict[int, dict[str, Any]]  # relationship row -> {score, via}


def _edge_candidates(
    index: IndexTables, fs: FlowStore, nodes: dict[int, Any], terms: list[str]
) -> list[tuple[int, float, int]]:
    """(relationship row, score, endpoints among the nodes) of every edge touching the nodes,
    best first: +2 per term in its description, +3 both endpoints / +1 one, then weight."""
    rels = index.relationships
    if not nodes or rels.height == 0:
        return []
    sel = np.zeros(index.entities.height)
    sel[list(nodes)] = 1.0
    ends = index.entity_relationships.T @ sel
    rows = np.flatnonzero(ends > 0)
    facts = fs.fact_matches(rows.tolist(), terms)
    fact = np.array([facts.get(int(r), 0) for r in rows], dtype=np.float64)
    score = FACT_SCORE * fact + np.where(ends[rows] >= 2, BOTH_ENDS, ONE_END)
    weight = rels["weight"].fill_null(0).to_numpy()[rows]
    order = np.lexsort((rows, -weight, -score))
    return [(int(rows[k]), float(score[k]), int(min(ends[rows[k]], 2))) for k in order]


def retrieve(index: IndexTables, query: str, terms: list[str], trace: list[str]) -> Subgraph:
    qs = index.settings.query
    target, max_edges = max(1, qs.flow_max_nodes), max(0, qs.flow_max_edges)
    fs = flow_store(index)
    terms = [t for t in terms if len(fold(t).strip()) >= MIN_TERM_CHARS]
    nodes: dict[int, dict[str, Any]] = {}

    like_target = max(1, round(target * LIKE_SHARE))
    for row, score, names in fs.like_nodes(terms, like_target):
        nodes[row] = {"score": score, "via": "like", "name_match": names > 0}
    trace.append(f"like: {len(nodes)} nodes")

    sims = fs.trigram_sims(terms)
    if nodes:
        sims[list(nodes)] = 0.0
    degree = index.entities["degree"].fill_null(0).to_numpy()
    cand_rows = np.flatnonzero(sims >= MIN_TRIGRAM_SIM)
    order = cand_rows[np.lexsort((cand_rows, -degree[cand_rows], -sims[cand_rows]))]
    tri = order[: max(0, target - len(nodes))].tolist()
    for row in tri:
        sim = float(sims[row])
        nodes[row] = {"score": NAME_SCORE * sim, "via": "trigram", "similarity": sim}
    trace.append(f"trigram: {len(tri)} nodes (similarity >= {MIN_TRIGRAM_SIM})")

    if len(nodes) < target / 2 and index.entities.height and index.dense_reads(query):
        vs = index.similarities(index.entity_vectors, index.embed_query(query))
        added = 0
        for row in top_indices(vs, target + len(nodes)).tolist():
            if len(nodes) >= target:
                break
            if row not in nodes and vs[row] > 0:
                nodes[row] = {"score": float(vs[row]), "via": "vector"}
                added += 1
        trace.append(f"vector fallback: {added} nodes (under half of {target} found)")

    cand = _edge_candidates(index, fs, nodes, terms)
    kept = cand[:max_edges]
    src, tgt = edge_ends(index)
    # An endpoint is worth its edge's score, but never more than the node that brought it.
    missing: dict[int, float] = {}
    for row, score, _ in kept:
        ends = [int(src[row]), int(tgt[row])]
        parent = max((nodes[e]["score"] for e in ends if e in nodes), default=score)
        for erow in ends:
            if erow >= 0 and erow not in nodes:
                missing[erow] = max(missing.get(erow, 0.0), min(score, parent))
    pool = [(-v["score"], 0, r) for r, v in nodes.items()]
    pool += [(-s, 1, r) for r, s in missing.items()]
    keep = {r for _, _, r in sorted(pool)[:target]}
    fetched = sorted(r for r in missing if r in keep)
    for r in fetched:
        nodes[r] = {"score": missing[r], "via": "endpoint"}
    nodes = {r: v for r, v in nodes.items() if r in keep}
    # Edges between the final nodes, best first (one that lost an endpoint makes room).
    edges: dict[int, dict[str, Any]] = {}
    for row, score, ends in cand:
        if len(edges) >= max_edges:
            break
        if int(src[row]) in nodes and int(tgt[row]) in nodes:
            edges[row] = {"score": score, "via": "both ends" if ends == 2 else "one end"}
    trace.append(f"edges: {len(edges)} kept of {len(cand)}")
    trace.append(f"fetched {len(fetched)} missing endpoints")
    return Subgraph(nodes, edges)


def edge_ends(index: IndexTables) -> tuple[np.ndarray, np.ndarray]:
    """Entity rows of each relationship's source and target (-1: unknown), cached."""
    cached = getattr(index, "_flow_edge_ends", None)
    if cached is None:
        ids = index.entities.select(pl.col("id").alias("eid")).with_row_index("erow")
        ends = []
        for col in ("source_id", "target_id"):
            joined = index.relationships.select(pl.col(col).alias("eid")).join(
                ids, on="eid", how="left", maintain_order="left"
            )
            ends.append(joined["erow"].fill_null(-1).cast(pl.Int64).to_numpy())
        cached = (ends[0], ends[1])
        index._flow_edge_ends = cached
    return cached


def retrieve_quick(index: IndexTables, query: str, trace: list[str]) -> Subgraph:
    """Semantic seeds (entity and relationship vectors, 60/40 of the targets), then graph
    growth: each level adds the best edges (<= 30) and new nodes (<= 20) next to the last
    level's nodes, scored by their parent's score halved per level."""
    qs = index.settings.query
    n_target = max(1, round(qs.flow_max_nodes * LIKE_SHARE))
    e_target = max(0, round(qs.flow_max_edges * (1 - LIKE_SHARE)))
    qvec = index.embed_query(query)
    nodes: dict[int, dict[str, Any]] = {}
    edges: dict[int, dict[str, Any]] = {}
    reads = index.dense_reads(query)  # else no vector seeds: the units' ranking carries it
    if reads and index.entities.height:
        sims = index.similarities(index.entity_vectors, qvec)
        for row in top_indices(sims, n_target).tolist():
            nodes[row] = {"score": float(sims[row]), "via": "vector", "level": 0}
    rels = index.relationships
    src, tgt = edge_ends(index)
    if reads and rels.height and e_target:
        rsims = index.similarities(relationship_vectors(index), qvec)
        rsims = np.where((src >= 0) & (tgt >= 0), rsims, -np.inf)
        for row in top_indices(rsims, e_target).tolist():
            if not np.isfinite(rsims[row]):
                continue
            edges[row] = {"score": float(rsims[row]), "via": "vector", "level": 0}
            for end in (int(src[row]), int(tgt[row])):
                if end not in nodes:
                    nodes[end] = {"score": float(rsims[row]), "via": "endpoint", "level": 0}
    trace.append(f"semantic: {len(nodes)} nodes, {len(edges)} edges")

    inc = index.entity_relationships.tocsr()  # entities x relationships
    weight = rels["weight"].fill_null(0).to_numpy().astype(np.float64)
    frontier = sorted(nodes)
    for level in range(1, QUICK_LEVELS + 1):
        if not frontier or not rels.height:
            break
        sub = inc[frontier].tocoo()  # (frontier position, relationship) pairs
        base = np.array([nodes[n]["score"] for n in frontier]) * QUICK_DECAY**level
        rel, score = sub.col, base[sub.row]
        ok = (src[rel] >= 0) & (tgt[rel] >= 0) & ~np.isin(rel, list(edges))
        rel, score = rel[ok], score[ok]
        order = np.lexsort((rel, -weight[rel], -score))  # best first; a rel's best parent first
        rel, score = rel[order], score[order]
        _, first = np.unique(rel, return_index=True)
        keep = np.sort(first)
        added_nodes: list[int] = []
        added_edges = 0
        for r, s in zip(rel[keep].tolist(), score[keep].tolist(), strict=True):
            if added_edges >= QUICK_LEVEL_EDGES:
                break
            new = [e for e in (int(src[r]), int(tgt[r])) if e not in nodes]
            if new and len(added_nodes) + len(new) > QUICK_LEVEL_NODES:
                continue
            for e in new:
                nodes[e] = {"score": s, "via": f"growth {level}", "level": level}
                added_nodes.append(e)
            edges[r] = {"score": s, "via": f"growth {level}", "level": level}
            added_edges += 1
        trace.append(f"level {level}: +{len(added_nodes)} nodes, +{added_edges} edges")
        frontier = sorted(added_nodes)
    return Subgraph(nodes, edges)
