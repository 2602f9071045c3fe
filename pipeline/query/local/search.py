"""Local search itself: its knobs, the PageRank + dense unit ranking, and the entry point.

The query's entities (by name and by embedding) restart a personalised PageRank over the
unit–entity graph; unit scores are fused with the dense cosine (rerank.fuse), bridged by
title, and the context is built within `local_context_tokens` (local/context.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.config import QuerySettings
from pipeline.query.extractive import answered_result
from pipeline.query.local.context import (
    SECTION_HEADERS,
    entities_section,
    relationships_section,
    reports_section,
    sources_section,
)
from pipeline.query.rerank import fuse, graph_trust, title_bridges
from pipeline.query.result import SearchResult, render_table
from pipeline.query.scoring import top_indices
from pipeline.tokens import count_tokens

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


@dataclass(frozen=True)
class LocalParams:
    """Ranking knobs of local search (tuned on MuSiQue; see benchmarks/retrieval.py).

    The first three come from QuerySettings (`params_from_settings`); the rest are
    internal constants of the method.
    """

    damping: float = 0.85  # PageRank continuation probability (1 - restart)
    graph_weight: float = 0.7  # blend: graph_weight * PPR (max-normalised) + rest * cosine
    dense_seeds: int = 3  # top dense units added to the restart set
    dense_seed_mass: float = 1.0  # their share of the restart mass vs name-matched entities
    entity_sim_mass: float = 0.5  # share given to embedding-matched entities
    min_entity_sim: float = 0.35  # an entity description must be this close to count
    name_mass: float = 1.0  # share given to entities named in the query
    title_mass: float = 1.0  # share given to units of documents whose title the query names
    common_word_factor: float = 0.1  # weight of a lower-case query word matching a name
    idf_power: float = 1.0  # restart weight of an entity = (1 / log(1 + df)) ** idf_power
    hops: int = 2  # PageRank runs on the units this many unit->entity->unit steps away
    max_df: int = 1000  # entities in more units than this are not expanded through
    # Final rank = rerank.fuse: graph_weight * (PPR / max) ** graph_power + rest * cosine.
    graph_power: float = 0.25
    # Then the second hop (rerank.title_bridges): units of documents whose title the best
    # `bridge_seeds` units name gain bridge_weight x the naming unit's score.
    bridge_seeds: int = 2
    bridge_weight: float = 0.3
    max_unit_share: float = 0.75  # of the context budget the Texts section may take


DEFAULT_PARAMS = LocalParams()


def params_from_settings(qs: QuerySettings) -> LocalParams:
    return replace(
        DEFAULT_PARAMS,
        dense_seeds=qs.local_dense_seeds,
        damping=qs.local_damping,
        graph_weight=qs.local_graph_weight,
    )


def unit_scores(
    index: IndexTables, query: str, qvec: np.ndarray, params: LocalParams, trace: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, str]]:
    """(blended unit scores, dense unit sims, PPR entity scores, matched entity rows->name)."""
    sims = index.unit_relevance(query)
    g = index.unit_entity_graph
    n_u, n_e = g.n_units, g.n_entities
    reset = np.zeros(n_u + n_e, dtype=np.float64)

    matches = index.match_entities(query) if n_e else []
    matched_rows = {m.row: m.key for m in matches}
    if matches and params.name_mass > 0:
        rows = np.array([m.row for m in matches], dtype=np.int64)
        proper = np.array([1.0 if m.proper else params.common_word_factor for m in matches])
        w = g.entity_weight[rows] ** params.idf_power * proper
        if w.sum() > 0:
            np.add.at(reset, n_u + rows, params.name_mass * w / w.sum())
        names = sorted({k for k in matched_rows.values()})
        trace.append(f"name match: {len(rows)} entities ({', '.join(names[:10])})")

    titles = index.match_titles(query) if params.title_mass > 0 else []
    if titles:
        rows = np.array([m.row for m in titles], dtype=np.int64)
        per_key: dict[str, int] = {}
        for m in titles:
            per_key[m.key] = per_key.get(m.key, 0) + 1
        w = np.array(
            [
                (1.0 if m.proper else params.common_word_factor)
                / per_key[m.key]
                / np.log1p(per_key[m.key])
                for m in titles
            ]
        )
        if w.sum() > 0:
            np.add.at(reset, rows, params.title_mass * w / w.sum())
            names = sorted({m.key for m in titles})
            trace.append(f"title match: {len(names)} document titles ({', '.join(names[:10])})")

    if n_e and params.entity_sim_mass > 0 and index.dense_reads(query):
        esims = index.similarities(index.entity_vectors, qvec)
        top = top_indices(esims, index.settings.query.top_k_entities)
        top = top[esims[top] >= params.min_entity_sim]
        if top.size:
            w = esims[top] * g.entity_weight[top] ** params.idf_power
            reset[n_u + top] += params.entity_sim_mass * w / w.sum()
            trace.append(
                f"embedding match: {top.size} entities (cosine >= {params.min_entity_sim})"
            )

    seeds = top_indices(sims, params.dense_seeds)
    if seeds.size and params.dense_seed_mass > 0:
        w = np.maximum(sims[seeds], 1e-6).astype(np.float64)
        reset[seeds] += params.dense_seed_mass * w / w.sum()
        trace.append(f"dense seeds: top {seeds.size} text units")

    unit_ppr, ent_scores = g.personalized_pagerank(
        reset[:n_u], reset[n_u:], params.damping, hops=params.hops, max_df=params.max_df
    )
    top_ppr = unit_ppr.max() if n_u else 0.0
    if top_ppr > 0:
        weight = params.graph_weight * graph_trust(index)
        scores = fuse(unit_ppr, sims, weight, params.graph_power)
        trace.append(
            f"personalised PageRank over {int((unit_ppr > 0).sum())} of {n_u} units "
            f"(damping {params.damping}, {params.hops} hops), fused {weight:.2f} "
            f"x (PPR / max) ** {params.graph_power:g} with relevance"
        )
        scores, bridged = title_bridges(index, scores, params.bridge_seeds, params.bridge_weight)
        if bridged:
            trace.append(
                f"second hop: documents titled by names in the top {params.bridge_seeds} "
                f"units ({', '.join(bridged[:10])})"
            )
    else:
        scores = sims.astype(np.float64)
        trace.append("no entity graph: ranked by dense similarity alone")
    return scores, sims, ent_scores, matched_rows


def local_search(
    index: IndexTables,
    query: str,
    top_k: int,
    params: LocalParams | None = None,
) -> SearchResult:
    if index.is_empty:
        return index.empty_result(query, "local")
    qs = index.settings.query
    params = params or params_from_settings(qs)
    trace = [f"embedded query with {index.embedder.model_id}"]
    qvec = index.embed_query(query)
    scores, sims, ent_scores, matched = unit_scores(index, query, qvec, params, trace)
    unit_rows = top_indices(scores, top_k)

    # ---- context within the token budget -----------------------------------------------
    # The ranked units carry the evidence, so they are paid for first (up to max_unit_share
    # of the budget); entities, relations and summaries share what is left, summaries in
    # the proportion community_prop : (1 - text_unit_prop - community_prop).
    budget = qs.local_context_tokens
    src_section, src_records = sources_section(
        index, unit_rows, scores, sims, int(budget * params.max_unit_share)
    )
    headers = "\n\n".join(render_table(t, h, []) for t, h in SECTION_HEADERS)
    rest = max(0, budget - count_tokens(src_section) - count_tokens(headers) - 2)
    graph_prop = max(1e-9, 1 - qs.text_unit_prop - qs.community_prop)
    report_budget = int(rest * qs.community_prop / (qs.community_prop + graph_prop))
    graph_budget = rest - report_budget

    ent_rows = _select_entities(ent_scores, matched, qs.top_k_entities)
    records: list[dict[str, Any]] = []
    sections: list[str] = []

    ent_section, ent_records, used = entities_section(
        index, ent_rows, ent_scores, matched, graph_budget // 2
    )
    rel_section, rel_records, _ = relationships_section(
        index, ent_rows, ent_scores, graph_budget - used
    )
    rep_section, rep_records, _ = reports_section(index, ent_rows, report_budget)
    for sec, recs in (
        (ent_section, ent_records),
        (rel_section, rel_records),
        (rep_section, rep_records),
        (src_section, src_records),
    ):
        sections.append(sec)
        records.extend(recs)
    trace.append(
        f"context: {len(ent_records)} entities, {len(rel_records)} relationships, "
        f"{len(rep_records)} reports, {len(src_records)} text units"
    )
    context = "\n\n".join(sections)

    ids = index.text_units["id"]
    return answered_result(
        index,
        query,
        "local",
        src_records,
        context=context,
        records=records,
        text_unit_ids=[ids[int(r)] for r in unit_rows],
        trace=trace,
    )


def _select_entities(ent_scores: np.ndarray, matched: dict[int, str], k: int) -> list[int]:
    """The query's named entities first, then the entities PageRank reached most."""
    rows = list(dict.fromkeys(sorted(matched, key=lambda r: (-ent_scores[r], r))))
    if ent_scores.size:
        for r in top_indices(ent_scores, k + len(rows)).tolist():
            if len(rows) >= max(k, len(matched)):
                break
            if ent_scores[r] > 0 and r not in rows:
                rows.append(r)
    return rows
