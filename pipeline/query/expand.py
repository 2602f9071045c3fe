"""Expand search (the hierarchy seed): vector seeds, bounded typed-edge expansion, rerank.

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

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from pipeline.query.records import entity_record, unit_record
from pipeline.query.rerank import title_bridges
from pipeline.query.result import SearchResult
from pipeline.query.scoring import top_indices
from pipeline.query.text import extractive_answer
from pipeline.tokens import count_tokens, truncate_tokens

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables

# Per edge-type weights (the type's share of a path score). Declared once; a call's
# `weights` overrides some of them. Stored types not listed here get UNLISTED_WEIGHT.
DEFAULT_WEIGHTS: dict[str, float] = {
    "CONTAINS": 0.9,  # section <-> its own units (free hop)
    "PARENT": 0.6,
    "CHILD": 0.6,
    "SIBLING": 0.5,
    "REFERS_TO": 0.8,
    "CROSS_REFERENCES": 0.8,
    "REFERENCES_NOTE": 0.7,
    "REFERENCES_CITATION": 0.6,
    "IS_CAPTIONED_BY": 0.9,
    "CONTINUES": 0.9,
    "NEXT_SIBLING": 0.5,
    "REIFIES": 0.8,
    "SAME_TOPIC": 0.6,
    "MENTIONS": 0.9,
    "RELATED": 0.6,
}
UNLISTED_WEIGHT = 0.5
FREE_TYPES = ("CONTAINS",)  # followed after every hop without counting one
PRUNE_SCAN = 4  # pruning looks at this many times max_nodes candidates at most
KINDS = ("section", "text_unit", "entity")


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
    # Unit rank = own cosine + evidence_weight * best path score arriving over an edge.
    # Path scores decay by a product of weights <= 1 per hop (a 2-hop bridge through an
    # entity in a few units arrives at ~0.2-0.3), so the graph's word needs a weight above
    # the cosine's to lift a bridge passage over dense hits; 1.5-3 measure alike on MuSiQue.
    evidence_weight: float = 2.0
    # Then the second hop (rerank.title_bridges): units of documents whose title the best
    # `bridge_seeds` units name gain bridge_weight x the naming unit's rank score.
    bridge_seeds: int = 2
    bridge_weight: float = 0.3
    answer_units: int = 3
    answer_sentences: int = 3
    entity_context: int = 10  # entities listed in the context at most


DEFAULT_PARAMS = ExpandParams()


@dataclass
class ExpandGraph:
    """Typed adjacency over sections + units + entities, built once per index."""

    n_sections: int
    n_units: int
    n_entities: int
    adj: dict[str, sp.csr_matrix]  # type -> N x N, rows = source, value = edge weight
    section_vectors: np.ndarray  # mean of a section's own unit vectors, L2-normalised,
    section_rows: np.ndarray  # for the sections that hold units (the rest have no vector)
    unit_section: np.ndarray  # unit row -> section row (-1 when unknown)
    section_info: pl.DataFrame  # row order: id, title, path, uri, document_id, seq
    entity_df: np.ndarray
    node_units: sp.csr_matrix | None = None  # content nodes x units (for node seeds)
    node_vectors: np.ndarray | None = None
    stored_types: tuple[str, ...] = field(default_factory=tuple)

    @property
    def n(self) -> int:
        return self.n_sections + self.n_units + self.n_entities

    def kind(self, g: int) -> str:
        if g < self.n_sections:
            return "section"
        return "text_unit" if g < self.n_sections + self.n_units else "entity"


def expand_graph(index: IndexTables) -> ExpandGraph:
    """The index's expansion graph, built on first use and kept on the index object."""
    cached = getattr(index, "_expand_graph", None)
    if cached is None:
        cached = _build(index)
        index._expand_graph = cached  # type: ignore[attr-defined]
    return cached


def _build(index: IndexTables) -> ExpandGraph:
    sections = index.table("sections").with_row_index("srow")
    n_s, n_u, n_e = sections.height, index.text_units.height, index.entities.height
    n = n_s + n_u + n_e
    off_u, off_e = n_s, n_s + n_u
    sid = sections.select(pl.col("id").alias("sec"), pl.col("srow").cast(pl.Int64))
    edges: list[pl.DataFrame] = []  # columns src, dst (global rows), type, w

    def add(frame: pl.DataFrame, type_: str) -> None:
        edges.append(
            frame.select(
                pl.col("src").cast(pl.Int64),
                pl.col("dst").cast(pl.Int64),
                pl.lit(type_).alias("type"),
                pl.col("w").cast(pl.Float64),
            )
        )

    # ---- hierarchy (derived) ------------------------------------------------------------
    par = sections.select(pl.col("srow").cast(pl.Int64).alias("src"), "parent_id", "seq", "id")
    par = par.join(sid.rename({"sec": "parent_id", "srow": "dst"}), on="parent_id", how="inner")
    add(par.with_columns(w=pl.lit(1.0)), "PARENT")
    add(par.select(pl.col("dst").alias("src"), pl.col("src").alias("dst"), w=pl.lit(1.0)), "CHILD")
    sib = (
        par.sort("parent_id", "seq", "id")
        .with_columns(nxt=pl.col("src").shift(-1), same=pl.col("parent_id").shift(-1))
        .filter(pl.col("same") == pl.col("parent_id"))
    )
    add(sib.select("src", pl.col("nxt").alias("dst"), w=pl.lit(1.0)), "SIBLING")
    add(
        sib.select(pl.col("nxt").alias("src"), pl.col("src").alias("dst"), w=pl.lit(1.0)), "SIBLING"
    )

    # ---- containment: section <-> its own units ------------------------------------------
    units = index.text_units.select(pl.col("id").alias("uid"), pl.col("section_id").alias("sec"))
    units = units.with_row_index("urow").with_columns(pl.col("urow").cast(pl.Int64))
    us = units.join(sid, on="sec", how="left", maintain_order="left")
    unit_section = us["srow"].fill_null(-1).to_numpy().astype(np.int64)
    cont = us.drop_nulls("srow").select(
        pl.col("srow").alias("src"), (pl.col("urow") + off_u).alias("dst")
    )
    add(cont.with_columns(w=pl.lit(1.0)), "CONTAINS")
    add(
        cont.select(pl.col("dst").alias("src"), pl.col("src").alias("dst"), w=pl.lit(1.0)),
        "CONTAINS",
    )

    # ---- stored structure edges, content-node endpoints lifted to their units ----------
    node_unit = (
        index.text_units.select(pl.col("content_node_ids").alias("id"))
        .with_row_index("urow")
        .explode("id")
        .drop_nulls("id")
        .select("id", (pl.col("urow").cast(pl.Int64) + off_u).alias("g"))
    )
    nodes = index.table("content_nodes").select("id", pl.col("section_id").alias("sec"))
    node_sec = (
        nodes.join(node_unit, on="id", how="anti")
        .join(sid, on="sec", how="inner")
        .select("id", pl.col("srow").alias("g"))
    )
    ends = pl.concat(
        [sid.select(pl.col("sec").alias("id"), pl.col("srow").alias("g")), node_unit, node_sec]
    ).unique()
    stored = pl.concat(
        [index.table("structure_edges"), index.table("same_topic_edges")], how="vertical_relaxed"
    ).select("source_id", "target_id", pl.col("type").str.to_uppercase(), "weight")
    stored = (
        stored.drop_nulls(["source_id", "target_id", "type"])
        .join(ends.rename({"id": "source_id", "g": "src"}), on="source_id", how="inner")
        .join(ends.rename({"id": "target_id", "g": "dst"}), on="target_id", how="inner")
        .filter(pl.col("src") != pl.col("dst"))
        .with_columns(w=pl.col("weight").fill_null(1.0).clip(1e-3, 1.0))
    )
    stored_types = tuple(sorted(set(stored["type"].to_list())))
    for t in stored_types:
        e = stored.filter(pl.col("type") == t)
        add(e, t)
        add(e.select(pl.col("dst").alias("src"), pl.col("src").alias("dst"), "w"), t)

    # ---- entity edges ---------------------------------------------------------------------
    eu = index.entity_units  # entity_row, unit_row
    df = np.bincount(eu["entity_row"].to_numpy(), minlength=n_e).astype(np.float64)
    spec = math.log(2.0) / np.log1p(np.maximum(df, 1.0))
    ment = eu.select(
        (pl.col("unit_row").cast(pl.Int64) + off_u).alias("src"),
        (pl.col("entity_row").cast(pl.Int64) + off_e).alias("dst"),
    )
    w_ment = pl.Series(np.sqrt(spec)[eu["entity_row"].to_numpy()]) if n_e else pl.lit(1.0)
    add(ment.with_columns(w=w_ment), "MENTIONS")
    add(ment.select(pl.col("dst").alias("src"), pl.col("src").alias("dst"), w=w_ment), "MENTIONS")
    rels = index.relationships
    if rels.height and n_e:
        erow = index.entities.select(pl.col("id").alias("eid")).with_row_index("e")
        r = (
            rels.select("source_id", "target_id", pl.col("weight").fill_null(1.0))
            .join(erow.rename({"eid": "source_id", "e": "src"}), on="source_id", how="inner")
            .join(erow.rename({"eid": "target_id", "e": "dst"}), on="target_id", how="inner")
            .filter(pl.col("src") != pl.col("dst"))
        )
        top = float(r["weight"].max() or 1.0) if r.height else 1.0
        r = r.select(
            pl.col("src").cast(pl.Int64) + off_e,
            pl.col("dst").cast(pl.Int64) + off_e,
            w=(pl.col("weight") / (top if top > 0 else 1.0)).clip(1e-3, 1.0),
        )
        add(r, "RELATED")
        add(r.select(pl.col("dst").alias("src"), pl.col("src").alias("dst"), "w"), "RELATED")

    all_edges = pl.concat(edges).group_by("type", "src", "dst").agg(pl.col("w").max())
    adj: dict[str, sp.csr_matrix] = {}
    for t in sorted(set(all_edges["type"].to_list())):
        e = all_edges.filter(pl.col("type") == t)
        m = sp.csr_matrix(
            (e["w"].to_numpy(), (e["src"].to_numpy(), e["dst"].to_numpy())), shape=(n, n)
        )
        m.sort_indices()
        adj[t] = m

    # ---- section vectors: mean of own units' vectors ------------------------------------
    uv = index.unit_vectors
    if n_s and cont.height:
        member = sp.csr_matrix(
            (np.ones(cont.height), (cont["src"].to_numpy(), cont["dst"].to_numpy() - off_u)),
            shape=(n_s, n_u),
        )
        sv = np.asarray(member @ uv, dtype=np.float32)
        norm = np.linalg.norm(sv, axis=1, keepdims=True)
        sv = np.divide(sv, norm, out=np.zeros_like(sv), where=norm > 0)
    else:
        sv = np.zeros((n_s, uv.shape[1] if uv.ndim == 2 else 0), dtype=np.float32)
    section_rows = np.flatnonzero(np.abs(sv).sum(axis=1) > 0) if sv.size else np.zeros(0, int)
    sv = np.ascontiguousarray(sv[section_rows])

    # ---- content-node vectors (node seeds), only where the index stores them -------------
    node_units = node_vectors = None
    from pipeline.vectors import lance as vectors

    ids, mat = vectors.read_vectors(index.root, "content_nodes")
    # A paragraph's vector is its text unit's (pipeline/vectors/lance.py), so only the other node
    # types (headings, tables, captions, ...) can seed anything the unit vectors do not.
    types = index.table("content_nodes").select("id", "node_type")
    own_vec = (
        pl.DataFrame({"id": ids}, schema={"id": pl.String})
        .join(types, on="id", how="left")["node_type"]
        .ne_missing("PARAGRAPH")
        .to_numpy()
    )
    ids, mat = [i for i, k in zip(ids, own_vec, strict=True) if k], mat[own_vec]
    if ids and node_unit.height:
        nv = pl.DataFrame({"id": ids}).with_row_index("v").join(node_unit, on="id", how="inner")
        node_units = sp.csr_matrix(
            (np.ones(nv.height), (nv["v"].to_numpy(), nv["g"].to_numpy() - off_u)),
            shape=(len(ids), n_u),
        )
        node_vectors = mat

    info = sections.select(
        "id",
        "title",
        "path",
        "uri",
        "document_id",
        "seq",
        "level",
        "component_type",
        "human_readable_id",
    )
    return ExpandGraph(
        n_s,
        n_u,
        n_e,
        adj,
        sv,
        section_rows,
        unit_section,
        info,
        df,
        node_units,
        node_vectors,
        stored_types,
    )


def valid_types(graph: ExpandGraph) -> list[str]:
    return sorted(set(DEFAULT_WEIGHTS) | set(graph.stored_types))


def _check_types(names, graph: ExpandGraph, what: str) -> None:
    valid = valid_types(graph)
    bad = sorted({str(t) for t in names} - set(valid))
    if bad:
        raise ValueError(f"unknown edge type(s) in {what}: {bad}; valid: {', '.join(valid)}")


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


def expand_search(
    index: IndexTables,
    query: str,
    *,
    max_hops: int | None = None,
    max_nodes: int | None = None,
    edge_types: list[str] | None = None,
    weights: dict[str, float] | None = None,
    top_k: int | None = None,
    params: ExpandParams | None = None,
) -> SearchResult:
    if index.is_empty:
        return index.empty_result(query, "expand")
    qs = index.settings.query
    params = params or DEFAULT_PARAMS
    max_hops = qs.expand_max_hops if max_hops is None else int(max_hops)
    max_nodes = qs.expand_max_nodes if max_nodes is None else int(max_nodes)
    top_k = top_k or qs.top_k_units
    if max_hops < 0 or max_nodes < 1:
        raise ValueError("max_hops must be >= 0 and max_nodes >= 1")
    graph = expand_graph(index)
    if edge_types is not None:
        _check_types(edge_types, graph, "edge_types")
    if weights:
        _check_types(weights, graph, "weights")
        if any(not (0 <= float(w) <= 1) for w in weights.values()):
            raise ValueError("edge type weights must lie in [0, 1] (path scores must decay)")
    w = {t: DEFAULT_WEIGHTS.get(t, UNLISTED_WEIGHT) for t in valid_types(graph)}
    w.update({str(k): float(v) for k, v in (weights or {}).items()})
    allowed = sorted(set(edge_types) if edge_types is not None else set(w))
    allowed = [t for t in allowed if w[t] > 0]
    free = [t for t in allowed if t in FREE_TYPES]
    moves = [t for t in allowed if t not in FREE_TYPES]
    codes = {t: i for i, t in enumerate(sorted(w))}
    names = sorted(w)

    trace = [f"embedded query with {index.embedder.model_id}"]
    qvec = index.embed_query(query)
    n_s, n_u = graph.n_sections, graph.n_units
    off_u, off_e = n_s, n_s + n_u
    score = np.zeros(graph.n)
    hops = np.full(graph.n, -1, dtype=np.int64)
    pred = np.full(graph.n, -1, dtype=np.int64)
    arrive = np.zeros(graph.n)  # unit rank evidence: best path score arriving over an edge
    ptype = np.full(graph.n, -1, dtype=np.int64)

    def seed(g: np.ndarray, s: np.ndarray) -> None:
        s = np.asarray(s, dtype=np.float64)
        better = s > score[g]
        score[g[better]] = s[better]
        hops[g[better]] = 0

    usims = index.similarities(index.unit_vectors, qvec).astype(np.float64)
    own = np.zeros(graph.n)  # each node's own cosine with the query (0 where none)
    own[off_u:off_e] = usims
    top_u = top_indices(usims, params.seed_units)
    seed(top_u + off_u, usims[top_u])
    n_sec = n_node = n_ent = 0
    if n_s and graph.section_vectors.shape[1] == qvec.shape[0]:
        ssims = np.zeros(n_s)
        ssims[graph.section_rows] = graph.section_vectors @ qvec
        own[:n_s] = ssims
        top_s = top_indices(ssims, params.seed_sections)
        top_s = top_s[ssims[top_s] > 0]
        seed(top_s, ssims[top_s])
        n_sec = top_s.size
    if graph.node_vectors is not None and graph.node_units is not None:
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
        top_e = top_indices(esims, params.seed_entities)
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

    def relax(rows: np.ndarray, types: list[str], hop: int) -> np.ndarray:
        """Follow `types` from `rows`; returns the nodes whose score improved."""
        dst, val, src, code = _frontier_edges(graph, rows, score, types, w, codes)
        arrive[dst] = np.maximum(arrive[dst], val)  # dst is unique
        better = val > score[dst] + 1e-12
        dst, val, src, code = dst[better], val[better], src[better], code[better]
        score[dst], pred[dst], ptype[dst] = val, src, code
        hops[dst] = hop
        return dst

    frontier = np.flatnonzero(hops == 0)
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

    # ---- prune to max_nodes by blended relevance, keeping each node's best path -----------
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

    # ---- rank units: own cosine + graph evidence (every unit; not limited to the subgraph) -
    evidence = arrive[off_u:off_e]
    final = usims + params.evidence_weight * evidence
    final, bridged = title_bridges(index, final, params.bridge_seeds, params.bridge_weight)
    order = top_indices(final, top_k)
    unit_rank = order.tolist()
    final_of = dict(zip(unit_rank, final[order].tolist(), strict=True))
    trace.append(
        f"ranked {n_u} text units ({int((evidence > 0).sum())} reached over an edge): own "
        f"cosine + {params.evidence_weight:g} x best arriving path score"
        + (f"; second hop to documents titled {', '.join(bridged[:10])}" if bridged else "")
    )

    # ---- subgraph (data) ------------------------------------------------------------------
    ids = index.text_units["id"]

    def node_id(g: int) -> str:
        if g < off_u:
            return graph.section_info["id"][g]
        if g < off_e:
            return ids[g - off_u]
        return index.entities["id"][g - off_e]

    data_nodes = [
        {
            "kind": graph.kind(g),
            "id": node_id(g),
            "score": float(score[g]),
            "hops": int(hops[g]),
            "via": names[ptype[g]] if ptype[g] >= 0 else None,
        }
        for g in keep.tolist()
    ]
    data_edges = [
        {"source": node_id(int(pred[g])), "target": node_id(g), "type": names[ptype[g]]}
        for g in keep.tolist()
        if pred[g] >= 0 and int(pred[g]) in kept
    ]
    data = {
        "nodes": data_nodes,
        "edges": data_edges,
        "max_hops": max_hops,
        "max_nodes": max_nodes,
        "edge_types": allowed,
        "weights": {t: w[t] for t in allowed},
    }

    # ---- context, records, answer -------------------------------------------------------
    context, records = _context(
        index, graph, unit_rank, final_of, usims, score, hops, ptype, names, keep, params
    )
    trace.append(
        f"context: {sum(r['kind'] == 'text_unit' for r in records)} text units in "
        f"{len({r['document_id'] for r in records if r['kind'] == 'text_unit'})} documents, "
        f"{sum(r['kind'] == 'section' for r in records)} sections, "
        f"{sum(r['kind'] == 'entity' for r in records)} entities"
    )
    units = [r for r in records if r["kind"] == "text_unit"]
    units.sort(key=lambda r: r["rank"])
    answer = extractive_answer(
        query,
        [r["text"] for r in units[: params.answer_units]],
        max_sentences=params.answer_sentences,
        must_mention=[index.entities["title"][m.row] for m in matched],
    )
    trace.append("extractive answer from the top units' best sentences")
    return SearchResult(
        query=query,
        mode="expand",
        answer=answer or "No sentence of the retrieved text matches the query's words.",
        context_text=context,
        records=records,
        text_unit_ids=[ids[int(r)] for r in unit_rank],
        trace=trace,
        context_tokens=count_tokens(context),
        data=data,
    )


def _context(
    index: IndexTables,
    graph: ExpandGraph,
    unit_rank: list[int],
    final_of: dict[int, float],
    usims: np.ndarray,
    score: np.ndarray,
    hops: np.ndarray,
    ptype: np.ndarray,
    names: list[str],
    keep: np.ndarray,
    params: ExpandParams,
) -> tuple[str, list[dict[str, Any]]]:
    """Units grouped by document (best first), then section path (reading order)."""
    qs = index.settings.query
    budget = qs.max_context_tokens
    unit_budget = int(budget * 0.85)
    off_u, off_e = graph.n_sections, graph.n_sections + graph.n_units
    records: list[dict[str, Any]] = []
    used = 0
    for rank, row in enumerate(unit_rank):
        g = row + off_u
        rec = unit_record(
            index,
            row,
            final_of.get(row, float(usims[row])),
            rank=rank + 1,
            dense=float(usims[row]),
            hops=int(hops[g]),
            via=names[ptype[g]] if ptype[g] >= 0 else None,
        )
        n = rec["n_tokens"] or count_tokens(rec["text"])
        if records and used + n > unit_budget:
            break
        used += n
        records.append(rec)
    seq = index.text_units["seq"] if "seq" in index.text_units.columns else None
    doc_best: dict[str, int] = {}
    for rec in records:
        doc_best.setdefault(rec["document_id"] or "", rec["rank"])
    # Documents by their best unit; inside one, reading order (sections stay contiguous).
    grouped = sorted(
        records,
        key=lambda r: (
            doc_best[r["document_id"] or ""],
            (seq[index.unit_row[r["id"]]] if seq is not None else 0) or 0,
            r["rank"],
        ),
    )
    lines: list[str] = []
    cur_doc: str | None = None
    cur_path: list[str] | None = None
    for rec in grouped:
        doc = rec["document_id"] or ""
        if doc != cur_doc:
            lines.append(f"# {rec['document_title'] or rec['source_path'] or 'Untitled'}")
            cur_doc, cur_path = doc, None
        path = rec["section_path"]
        if path != cur_path:
            inner = path[1:] if len(path) > 1 else path
            lines.append(f"## {' > '.join(inner) if inner else '(document)'}")
            cur_path = path
        lines.append(f"[{rec['human_readable_id']}] {rec['text'].strip()}")
    # Sections and entities reached: records, and a short entity list in the context.
    sec_rows = keep[keep < off_u].tolist()
    info = graph.section_info
    docs = dict(
        zip(index.documents["id"].to_list(), index.documents["title"].to_list(), strict=True)
    )
    for g in sec_rows:
        s = info.row(g, named=True)
        records.append(
            {
                "kind": "section",
                "id": s["id"],
                "human_readable_id": s["human_readable_id"],
                "score": float(score[g]),
                "hops": int(hops[g]),
                "via": names[ptype[g]] if ptype[g] >= 0 else None,
                "title": s["title"],
                "text": s["title"] or "",
                "component_type": s["component_type"],
                "document_id": s["document_id"],
                "document_title": docs.get(s["document_id"]),
                "section_id": s["id"],
                "section_path": list(s["path"] or []),
                "section_uri": s["uri"],
            }
        )
    ent_rows = keep[keep >= off_e][: params.entity_context].tolist()
    ent_lines = []
    ents = index.entities
    for g in ent_rows:
        e = ents.row(g - off_e, named=True)
        desc = truncate_tokens(e["description"] or "", 60)
        n = count_tokens(desc) + 8
        if ent_lines and used + n > budget:
            break
        used += n
        ent_lines.append(f"[E{e['human_readable_id']}] {e['title']} ({e['type']}): {desc}")
        via = names[ptype[g]] if ptype[g] >= 0 else None
        records.append(
            entity_record(index, e, desc, score=float(score[g]), hops=int(hops[g]), via=via)
        )
    if ent_lines:
        lines += ["", "# Entities", *ent_lines]
    return "\n".join(lines), records


__all__ = ["DEFAULT_WEIGHTS", "ExpandGraph", "ExpandParams", "expand_graph", "expand_search"]
