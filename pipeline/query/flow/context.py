"""Flow step 3, the result: Definitions, Facts, a Mermaid diagram and supporting text units.

Units are those the kept nodes and edges cite plus the nearest few, ranked by relevance to
the question (rerank.py); the extractive answer and the records come with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from pipeline.query.extractive import cited_answer
from pipeline.query.flow.mermaid import mermaid
from pipeline.query.flow.retrieval import Subgraph
from pipeline.query.records import entity_record, graph_record, unit_record
from pipeline.query.rerank import graph_trust, rank_units
from pipeline.query.result import SearchResult, texts_table
from pipeline.tokens import count_tokens, truncate_tokens

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


DESC_TOKENS, FACT_TOKENS = 80, 60
# Supporting text units: the cited ones plus the nearest few, ranked by relevance (rerank.py);
# chosen on the first 50 MuSiQue questions (benchmarks/retrieval.py).
# The unit relevance mixes BM25 in (pipeline/lexical/fusion.py), which halves the spread of
# units no query word matches, so the citation score's weight went from 0.3 to 0.15 with it:
# flow / flow quick R@5 at 0.15 vs 0.3, MuSiQue 70.7 / 66.2 vs 68.4 / 64.3, grb_novel 73.8 / 70.5
# vs 67.7 / 69.3 (0.3 with the dense cosine alone: MuSiQue 70.6 / 64.3).
UNIT_GRAPH_WEIGHT, UNIT_GRAPH_POWER, UNIT_DENSE_CANDIDATES = 0.15, 0.5, 10
UNIT_BRIDGE_SEEDS, UNIT_BRIDGE_WEIGHT = 2, 0.3  # rerank.title_bridges: the second hop


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def _unit_ranking(
    index: IndexTables, items: list[tuple[float, list[str]]]
) -> tuple[list[str], dict[str, float]]:
    """Text unit ids cited by the kept nodes/edges, ranked by the sum of their scores."""
    if not items:
        return [], {}
    frame = pl.DataFrame(
        {
            "score": [float(s) for s, _ in items],
            "order": list(range(len(items))),
            "id": [[] if u is None else list(u) for _, u in items],
        },
        schema={"score": pl.Float64, "order": pl.Int64, "id": pl.List(pl.String)},
    )
    ranked = (
        frame.explode("id")
        .drop_nulls("id")
        .filter(pl.col("id").is_in(index.text_units["id"].implode()))
        .group_by("id")
        .agg(pl.col("score").sum(), pl.col("order").min())
        .sort(["score", "order", "id"], descending=[True, False, False])
    )
    return ranked["id"].to_list(), dict(zip(ranked["id"], ranked["score"], strict=True))


def build_result(
    index: IndexTables, query: str, mode: str, analysis: dict, g: Subgraph, trace: list[str]
) -> SearchResult:
    qs = index.settings.query
    node_rows = sorted(g.nodes, key=lambda r: (-g.nodes[r]["score"], r))
    edge_rows = sorted(g.edges, key=lambda r: (-g.edges[r]["score"], r))
    node_recs, edge_recs = _graph_records(index, g, node_rows, edge_rows)
    # The graph gets what text units do not (quick mode's grown subgraph can be large):
    # definitions first (half), then facts between shown entities, best first.
    graph_budget = int(qs.max_context_tokens * (1 - qs.text_unit_prop))
    definitions, facts, diagram = _graph_context(node_recs, edge_recs, graph_budget)
    unit_ids, unit_info = _supporting_units(index, query, g, node_rows, edge_rows, trace)
    sections = [
        "-----Definitions-----\n" + "\n".join(definitions),
        "-----Facts-----\n" + "\n".join(facts),
        "-----Diagram-----\n```mermaid\n" + diagram + "\n```",
    ]
    budget = max(0, qs.max_context_tokens - count_tokens("\n\n".join(sections)))
    texts, unit_recs = texts_table(
        (
            unit_record(
                index,
                index.unit_row[uid],
                unit_info[uid]["score"],
                rank=rank + 1,
                graph=unit_info[uid]["graph"],
                dense=unit_info[uid]["dense"],
            )
            for rank, uid in enumerate(unit_ids[: qs.top_k_units])
        ),
        budget,
    )
    sections.append(texts)
    context = "\n\n".join(sections)
    trace.append(
        f"context: {len(definitions)} of {len(node_recs)} definitions, {len(facts)} of "
        f"{len(edge_recs)} facts, {len(unit_recs)} of {len(unit_ids)} supporting text units"
    )

    answer, citations = cited_answer(index, query, unit_recs)
    if answer:
        trace.append("answer: extractive, from the top supporting units")
    elif facts:
        answer = facts[0].split("] ", 1)[-1]
        trace.append("answer: the top fact (no sentence of the units matches)")
    else:
        answer = "Nothing in the index matches the query."
        trace.append("answer: nothing found")
    return SearchResult(
        query=query,
        mode=mode,
        answer=answer,
        citations=citations,
        context_text=context,
        records=[*node_recs, *edge_recs, *unit_recs],
        text_unit_ids=unit_ids,
        trace=trace,
        context_tokens=count_tokens(context),
        data={
            "analysis": analysis,
            "nodes": node_recs,
            "edges": edge_recs,
            "mermaid": diagram,
            "definitions": definitions,
            "facts": facts,
        },
    )


def _graph_records(
    index: IndexTables, g: Subgraph, node_rows: list[int], edge_rows: list[int]
) -> tuple[list[dict], list[dict]]:
    """The records of the kept entities and relationships, in the given row orders."""
    ents, rels = index.entities, index.relationships
    node_recs, edge_recs = [], []
    for r in node_rows:
        e = ents.row(r, named=True)
        text = _one_line(truncate_tokens(e["description"] or "", DESC_TOKENS))
        node_recs.append(entity_record(index, e, text, **g.nodes[r]))
    for r in edge_rows:
        rel = rels.row(r, named=True)
        edge_recs.append(
            graph_record(
                index,
                "relationship",
                rel,
                rel["text_unit_ids"],
                title=f"{rel['source']} -> {rel['target']}",
                source=rel["source"],
                target=rel["target"],
                source_id=rel["source_id"],
                target_id=rel["target_id"],
                type=rel["type"] or "RELATED_TO",
                text=_one_line(truncate_tokens(rel["description"] or "", FACT_TOKENS)),
                **g.edges[r],
            )
        )
    return node_recs, edge_recs


def _graph_context(
    node_recs: list[dict], edge_recs: list[dict], graph_budget: int
) -> tuple[list[str], list[str], str]:
    """Definitions (up to half the budget), then facts between shown entities, and the
    Mermaid diagram of what is shown; marks the shown records `in_context`."""
    definitions, shown, used = [], set(), 0
    for n in node_recs:
        line = f"- [{n['human_readable_id']}] {_one_line(n['title'])}: {n['text']}"
        cost = count_tokens(line)
        if definitions and used + cost > graph_budget // 2:
            break
        used += cost
        definitions.append(line)
        shown.add(n["id"])
        n["in_context"] = True
    facts, shown_edges = [], []
    for x in edge_recs:
        if x["source_id"] not in shown or x["target_id"] not in shown:
            continue
        line = (
            f"- [{x['human_readable_id']}] {_one_line(x['source'])} -{_one_line(x['type'])}-> "
            f"{_one_line(x['target'])}: {x['text']}"
        )
        cost = count_tokens(line)
        if used + cost > graph_budget:
            break
        used += cost
        facts.append(line)
        shown_edges.append(x)
        x["in_context"] = True
    diagram = mermaid(
        [(n["id"], n["title"]) for n in node_recs if n["id"] in shown],
        [(x["source_id"], x["target_id"], x["type"]) for x in shown_edges],
    )
    return definitions, facts, diagram


def _supporting_units(
    index: IndexTables,
    query: str,
    g: Subgraph,
    node_rows: list[int],
    edge_rows: list[int],
    trace: list[str],
) -> tuple[list[str], dict[str, dict]]:
    """The text units cited by the kept nodes and edges plus the nearest few, ranked by
    citation score and relevance: (unit ids, per id its scores)."""
    ents, rels = index.entities, index.relationships
    cited, cite_scores = _unit_ranking(
        index,
        [(g.nodes[r]["score"], ents["text_unit_ids"][r]) for r in node_rows]
        + [(g.edges[r]["score"], rels["text_unit_ids"][r]) for r in edge_rows],
    )
    weight = UNIT_GRAPH_WEIGHT * graph_trust(index)
    unit_ids, unit_info, bridged = rank_units(
        index,
        query,
        cited,
        cite_scores,
        graph_weight=weight,
        power=UNIT_GRAPH_POWER,
        dense_candidates=UNIT_DENSE_CANDIDATES,
        bridge_seeds=UNIT_BRIDGE_SEEDS,
        bridge_weight=UNIT_BRIDGE_WEIGHT,
    )
    trace.append(
        f"text units: {len(cited)} cited by the kept nodes and edges + the nearest "
        f"{UNIT_DENSE_CANDIDATES}, ranked by {weight:g} x citation score "
        f"(max-normalised) ** {UNIT_GRAPH_POWER:g} + {1 - weight:g} x relevance"
        + (f"; second hop to documents titled {', '.join(bridged[:10])}" if bridged else "")
    )
    return unit_ids, unit_info
