"""Expand search itself: seeds, the max-product beam expansion, pruning and unit ranking.

Seeds by cosine (units, sections, content nodes, entities) and by name; expansion over the
allowed edge types (expand/graph.py) up to `max_hops`; nodes pruned to `max_nodes` with
their best paths; every unit ranked by own cosine + path evidence, then the title bridge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from pipeline.query.expand.context import build_context
from pipeline.query.expand.graph import (
    DEFAULT_WEIGHTS,
    UNLISTED_WEIGHT,
    ExpandGraph,
    check_types,
    expand_graph,
    valid_types,
)
from pipeline.query.expand.params import DEFAULT_PARAMS, ExpandParams
from pipeline.query.extractive import answered_result
from pipeline.query.rerank import graph_trust, title_bridges
from pipeline.query.result import SearchResult
from pipeline.query.scoring import top_indices

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


FREE_TYPES = ("CONTAINS",)  # followed after every hop without counting one
PRUNE_SCAN = 4  # pruning looks at this many times max_nodes candidates at most


def _frontier_edges(
    graph: ExpandGraph,
    rows: np.ndarray,
    score: np.ndarray,
    types: list[str],
    weights: dict[str, float],
    type_code: dict[str, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Best incoming path score per reached node: (dst, score, src, type code)."""
    dsts, vals, srcs, codes = [], [], [], []
    for t in types:
        m = graph.adj.get(t)
        if m is None or rows.size == 0:
            continue
        sub = m[rows]
        if sub.nnz == 0:
            continue
        counts = np.diff(sub.indptr)
        src = np.repeat(rows, counts)
        dsts.append(sub.indices.astype(np.int64))
        vals.append(sub.data * score[src] * weights[t])
        srcs.append(src)
        codes.append(np.full(sub.nnz, type_code[t], dtype=np.int64))
    if not dsts:
        z = np.zeros(0, dtype=np.int64)
        return z, np.zeros(0), z, z
    dst, val, src, code = (np.concatenate(x) for x in (dsts, vals, srcs, codes))
    order = np.lexsort((code, src, -val, dst))  # per dst: best value, then lowest src/type
    dst, val, src, code = dst[order], val[order], src[order], code[order]
    first = np.ones(dst.size, dtype=bool)
    first[1:] = dst[1:] != dst[:-1]
    return dst[first], val[first], src[first], code[first]


@dataclass
class _Paths:
    """Best path per node of the expansion graph, improved in place by seeds and hops."""

    graph: ExpandGraph
    weights: dict[str, float]
    codes: dict[str, int]
    score: np.ndarray = field(init=False)
    hops: np.ndarray = field(init=False)
    pred: np.ndarray = field(init=False)
    arrive: np.ndarray = field(init=False)  # unit rank evidence: best score over an edge
    ptype: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        n = self.graph.n
        self.score = np.zeros(n)
        self.hops = np.full(n, -1, dtype=np.int64)
        self.pred = np.full(n, -1, dtype=np.int64)
        self.arrive = np.zeros(n)
        self.ptype = np.full(n, -1, dtype=np.int64)

    def seed(self, g: np.ndarray, s: np.ndarray) -> None:
        s = np.asarray(s, dtype=np.float64)
        better = s > self.score[g]
        self.score[g[better]] = s[better]
        self.hops[g[better]] = 0

    def relax(self, rows: np.ndarray, types: list[str], hop: int) -> np.ndarray:
        """Follow `types` from `rows`; returns the nodes whose score improved."""
        score = self.score
        dst, val, src, code = _frontier_edges(
            self.graph, rows, score, types, self.weights, self.codes
        )
        self.arrive[dst] = np.maximum(self.arrive[dst], val)  # dst is unique
        better = val > score[dst] + 1e-12
        dst, val, src, code = dst[better], val[better], src[better], code[better]
        score[dst], self.pred[dst], self.ptype[dst] = val, src, code
        self.hops[dst] = hop
        return dst


def expand_search(
    index: IndexTables,
    query: str,
    *,
    max_hops: int,
    max_nodes: int,
    top_k: int,
    edge_types: list[str] | None = None,
    weights: dict[str, float] | None = None,
    params: ExpandParams | None = None,
) -> SearchResult:
    if index.is_empty:
        return index.empty_result(query, "expand")
    params = params or DEFAULT_PARAMS
    if max_hops < 0 or max_nodes < 1:
        raise ValueError("max_hops must be >= 0 and max_nodes >= 1")
    graph = expand_graph(index)
    w, allowed = _edge_weights(graph, edge_types, weights)
    names = sorted(w)
    paths = _Paths(graph, w, {t: i for i, t in enumerate(names)})

    trace = [f"embedded query with {index.embedder.model_id}"]
    usims, own = _seed(index, query, paths, params, trace)
    _expand(paths, allowed, max_hops, params, trace)
    keep, kept = _prune(paths, own, params, max_nodes, trace)
    unit_rank, final_of = _rank_units(index, usims, paths, params, top_k, trace)
    ids = index.text_units["id"]
    data = {
        **_subgraph(index, paths, names, keep, kept),
        "max_hops": max_hops,
        "max_nodes": max_nodes,
        "edge_types": allowed,
        "weights": {t: w[t] for t in allowed},
    }

    # ---- context, records, answer -------------------------------------------------------
    context, records = build_context(
        index,
        graph,
        unit_rank,
        final_of,
        usims,
        paths.score,
        paths.hops,
        paths.ptype,
        names,
        keep,
        params,
    )
    trace.append(
        f"context: {sum(r['kind'] == 'text_unit' for r in records)} text units in "
        f"{len({r['document_id'] for r in records if r['kind'] == 'text_unit'})} documents, "
        f"{sum(r['kind'] == 'section' for r in records)} sections, "
        f"{sum(r['kind'] == 'entity' for r in records)} entities"
    )
    units = [r for r in records if r["kind"] == "text_unit"]
    units.sort(key=lambda r: r["rank"])
    return answered_result(
        index,
        query,
        "expand",
        units,
        context=context,
        records=records,
        text_unit_ids=[ids[int(r)] for r in unit_rank],
        trace=trace,
        data=data,
    )


def _edge_weights(
    graph: ExpandGraph, edge_types: list[str] | None, weights: dict[str, float] | None
) -> tuple[dict[str, float], list[str]]:
    """Every valid type's weight (defaults, then the call's `weights`) and the types to
    follow (the call's `edge_types` or all, sorted, those of weight 0 left out)."""
    if edge_types is not None:
        check_types(edge_types, graph, "edge_types")
    if weights:
        check_types(weights, graph, "weights")
        if any(not (0 <= float(w) <= 1) for w in weights.values()):
            raise ValueError("edge type weights must lie in [0, 1] (path scores must decay)")
    w = {t: DEFAULT_WEIGHTS.get(t, UNLISTED_WEIGHT) for t in valid_types(graph)}
    w.update({str(k): float(v) for k, v in (weights or {}).items()})
    allowed = sorted(set(edge_types) if edge_types is not None else set(w))
    return w, [t for t in allowed if w[t] > 0]


def _seed(
    index: IndexTables, query: str, paths: _Paths, params: ExpandParams, trace: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Seeds the paths by cosine (units, sections, content nodes, entities) and by name;
    returns the units' cosines and every node's own cosine with the query (0 where none)."""
    graph, seed = paths.graph, paths.seed
    qvec = index.embed_query(query)
    n_s, n_u = graph.n_sections, graph.n_units
    off_u, off_e = n_s, n_s + n_u
    usims = index.unit_relevance(query)
    own = np.zeros(graph.n)
    own[off_u:off_e] = usims
    top_u = top_indices(usims, params.seed_units)
    seed(top_u + off_u, usims[top_u])
    n_sec = n_node = n_ent = 0
    reads = index.dense_reads(query)  # else the vectors' cosines are noise: no vector seeds
    if reads and n_s and graph.section_vectors.shape[1] == qvec.shape[0]:
        ssims = np.zeros(n_s)
        ssims[graph.section_rows] = graph.section_vectors @ qvec
        own[:n_s] = ssims
        top_s = top_indices(ssims, params.seed_sections)
        top_s = top_s[ssims[top_s] > 0]
        seed(top_s, ssims[top_s])
        n_sec = top_s.size
    if reads and graph.node_vectors is not None and graph.node_units is not None:
        nsims = index.similarities(graph.node_vectors, qvec)
        top_n = top_indices(nsims, params.seed_nodes)
        proj = graph.node_units[top_n].multiply(nsims[top_n][:, None]).tocsr()
        if proj.nnz:
            best = np.asarray(proj.max(axis=0).todense()).ravel()
            hit = np.flatnonzero(best > 0)
            seed(hit + off_u, best[hit])
            n_node = top_n.size
    matched = index.match_entities(query) if graph.n_entities else []
    if graph.n_entities:
        esims = index.similarities(index.entity_vectors, qvec)
        own[off_e:] = esims
        top_e = top_indices(esims, params.seed_entities if reads else 0)
        top_e = top_e[esims[top_e] >= params.min_entity_sim]
        seed(top_e + off_e, esims[top_e])
        n_ent = top_e.size
        if matched:
            rows = np.array(sorted({m.row for m in matched if m.proper}), dtype=np.int64)
            if rows.size:
                seed(rows + off_e, np.full(rows.size, params.name_seed))
                n_ent += rows.size
    titled = sorted({m.row for m in index.match_titles(query) if m.proper})
    if titled:
        seed(np.array(titled, dtype=np.int64) + off_u, np.full(len(titled), params.name_seed))
    trace.append(
        f"seeds: {top_u.size} text units, {n_sec} sections, {n_node} content nodes, "
        f"{n_ent} entities ({len({m.key for m in matched})} named in the query), "
        f"{len(titled)} text units of documents whose title the query names"
    )
    return usims, own


def _expand(
    paths: _Paths, allowed: list[str], max_hops: int, params: ExpandParams, trace: list[str]
) -> None:
    """The max-product beam expansion from the seeds over the `allowed` types, up to
    `max_hops` (FREE_TYPES followed after every hop without counting one)."""
    graph, score, relax = paths.graph, paths.score, paths.relax
    free = [t for t in allowed if t in FREE_TYPES]
    moves = [t for t in allowed if t not in FREE_TYPES]
    off_u, off_e = graph.n_sections, graph.n_sections + graph.n_units
    frontier = np.flatnonzero(paths.hops == 0)
    if free:
        frontier = np.union1d(frontier, relax(frontier, free, 0))
    pruned_hubs = 0
    for hop in range(1, max_hops + 1):
        if frontier.size == 0:
            break
        ents = frontier[frontier >= off_e]
        hub = ents[graph.entity_df[ents - off_e] > params.max_df]
        if hub.size:  # before the cut, so that hubs take no beam slot
            pruned_hubs += hub.size
            frontier = np.setdiff1d(frontier, hub)
        frontier = frontier[np.lexsort((frontier, -score[frontier]))][: params.beam]
        improved = relax(frontier, moves, hop)
        if free and improved.size:
            improved = np.union1d(improved, relax(improved, free, hop))
        kinds = np.bincount(np.searchsorted([off_u, off_e], improved, side="right"), minlength=3)
        trace.append(
            f"hop {hop}: expanded {frontier.size} nodes -> {improved.size} reached or improved "
            f"({kinds[0]} sections, {kinds[1]} text units, {kinds[2]} entities)"
        )
        frontier = improved
    if pruned_hubs:
        trace.append(f"skipped {pruned_hubs} hub entities (in more than {params.max_df} units)")


def _prune(
    paths: _Paths, own: np.ndarray, params: ExpandParams, max_nodes: int, trace: list[str]
) -> tuple[np.ndarray, set[int]]:
    """The reached nodes pruned to `max_nodes` by blended relevance, each with its best
    path: (kept nodes in order, the same as a set)."""
    score, hops, pred = paths.score, paths.hops, paths.pred
    reached = np.flatnonzero(score > 0)
    blend = (1 - params.own_weight) * score + params.own_weight * own
    cand = reached[np.lexsort((reached, hops[reached], -blend[reached]))]
    keep_list: list[int] = []
    kept: set[int] = set()
    for g in cand[: max_nodes * PRUNE_SCAN].tolist():
        chain = []
        while g >= 0 and g not in kept:
            chain.append(g)
            g = int(pred[g])
        if len(keep_list) + len(chain) <= max_nodes:
            keep_list.extend(reversed(chain))
            kept.update(chain)
        if len(keep_list) >= max_nodes:
            break
    keep = np.array(keep_list, dtype=np.int64)
    if reached.size > keep.size:
        trace.append(
            f"pruned {reached.size - keep.size} of {reached.size} reached nodes "
            f"(max_nodes {max_nodes}; a node comes with its best path)"
        )
    return keep, kept


def _rank_units(
    index: IndexTables,
    usims: np.ndarray,
    paths: _Paths,
    params: ExpandParams,
    top_k: int,
    trace: list[str],
) -> tuple[list[int], dict[int, float]]:
    """Every unit (not only the subgraph's) ranked by own cosine + graph evidence, then the
    title bridge: the top_k unit rows and their final scores."""
    graph = paths.graph
    evidence = paths.arrive[graph.n_sections : graph.n_sections + graph.n_units]
    weight = params.evidence_weight * graph_trust(index)
    final = usims + weight * evidence
    final, bridged = title_bridges(index, final, params.bridge_seeds, params.bridge_weight)
    order = top_indices(final, top_k)
    unit_rank = order.tolist()
    final_of = dict(zip(unit_rank, final[order].tolist(), strict=True))
    trace.append(
        f"ranked {graph.n_units} text units ({int((evidence > 0).sum())} reached over an edge): "
        f"own relevance + {weight:g} x best arriving path score"
        + (f"; second hop to documents titled {', '.join(bridged[:10])}" if bridged else "")
    )
    return unit_rank, final_of


def _subgraph(
    index: IndexTables, paths: _Paths, names: list[str], keep: np.ndarray, kept: set[int]
) -> dict[str, list[dict]]:
    """The kept nodes and the best-path edges between them, as result data."""
    graph, score, hops, pred, ptype = paths.graph, paths.score, paths.hops, paths.pred, paths.ptype
    off_u, off_e = graph.n_sections, graph.n_sections + graph.n_units
    ids = index.text_units["id"]

    def node_id(g: int) -> str:
        if g < off_u:
            return graph.section_info["id"][g]
        if g < off_e:
            return ids[g - off_u]
        return index.entities["id"][g - off_e]

    nodes = [
        {
            "kind": graph.kind(g),
            "id": node_id(g),
            "score": float(score[g]),
            "hops": int(hops[g]),
            "via": names[ptype[g]] if ptype[g] >= 0 else None,
        }
        for g in keep.tolist()
    ]
    edges = [
        {"source": node_id(int(pred[g])), "target": node_id(g), "type": names[ptype[g]]}
        for g in keep.tolist()
        if pred[g] >= 0 and int(pred[g]) in kept
    ]
    return {"nodes": nodes, "edges": edges}
