"""Global search: map over community reports (rate 0–10), drop 0s, sort, reduce.

Offline, the map step rates each report from the cosine of its embedding with the query,
relative to the other reports: the median cosine and below is 0, the best is 10, scaled
by the community's own importance rating (half to full weight). Relative, because a
broad question ("what are the main themes?") is close to no report in absolute terms
yet has the most important communities as its answer, as an LLM map step would rate
them. The reduce step is extractive: the best reports' summaries and findings, best
first, within the token budget.

Level: pass a level to map over that level's reports only (0 = coarsest). `level=None`
chooses dynamically (GraphRAG's dynamic community selection): start from the top-level
communities, keep those rated at least `global_dynamic_threshold`, and descend into the
children of every kept one; a kept community whose children are relevant too gives way to
them (the finer reports say the same more precisely), one whose children are all rated
below the threshold stays. The selection uses the embedding ratings in both modes, so it
costs no LLM call; in LLM mode the map step then rates the selected reports itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from pipeline.query.records import graph_record
from pipeline.query.result import SearchResult, render_table
from pipeline.tokens import count_tokens, truncate_tokens

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables

ANSWER_REPORTS = 5
REPORT_TOKENS = 500


def rate(similarity: np.ndarray, importance: np.ndarray) -> np.ndarray:
    """(cosines, community ratings 0–10) -> query ratings 0–10 (one decimal)."""
    if similarity.size == 0:
        return similarity
    lo, hi = float(np.median(similarity)), float(similarity.max())
    if hi <= lo:
        return np.zeros_like(similarity)
    relevance = np.clip((similarity - lo) / (hi - lo), 0.0, 1.0)
    weight = 0.5 + 0.05 * np.clip(np.nan_to_num(importance), 0.0, 10.0)
    return np.round(10.0 * relevance * weight, 1)


def dynamic_selection(
    index: IndexTables, ratings: np.ndarray, threshold: float, trace: list[str]
) -> np.ndarray:
    """Report rows chosen by descending the community tree while ratings say relevant."""
    reps = index.community_reports
    row_of = dict(zip(reps["community"].to_list(), range(reps.height), strict=True))
    comms = index.communities.select("community", "level", "children").unique("community")
    children = dict(zip(comms["community"].to_list(), comms["children"].to_list(), strict=True))
    top = min(reps["level"].to_list())
    frontier = [c for c, lvl in zip(reps["community"], reps["level"], strict=True) if lvl == top]
    chosen = np.zeros(reps.height, dtype=bool)
    rated = levels = 0
    while frontier:
        levels += 1
        nxt: list[int] = []
        for comm in sorted(frontier):
            row = row_of.get(comm)
            if row is None:
                continue
            rated += 1
            if ratings[row] < threshold:
                continue
            chosen[row] = True
            kids = [k for k in children.get(comm) or [] if k in row_of]
            if any(ratings[row_of[k]] >= threshold for k in kids):
                chosen[row] = False  # its relevant children replace it
            nxt.extend(kids)
        frontier = nxt
    trace.append(
        f"map: dynamic level selection rated {rated} reports over {levels} levels "
        f"(threshold {threshold:g}) and kept {int(chosen.sum())}"
    )
    return chosen


def global_search(index: IndexTables, query: str, level: int | None = None) -> SearchResult:
    if index.is_empty:
        return index.empty_result(query, "global")
    qs = index.settings.query
    reps = index.community_reports
    trace: list[str] = []
    if reps.height == 0:
        return SearchResult(
            query=query,
            mode="global",
            answer="The index has no community reports, so global search has nothing to map over.",
            trace=["no community reports"],
        )
    vecs = index.report_vectors
    qvec = index.embed_query(query)
    sims = index.similarities(vecs, qvec).astype(np.float64)
    ratings = rate(sims, reps["rating"].to_numpy())
    if level is not None:
        mask = (reps["level"] == level).to_numpy()
        if not mask.any():
            levels = sorted(set(reps["level"].to_list()))
            return SearchResult(
                query=query,
                mode="global",
                answer=f"No community reports at level {level}; levels present: {levels}.",
                trace=[f"no reports at level {level}"],
            )
        ratings = np.zeros_like(sims)
        ratings[mask] = rate(sims[mask], reps["rating"].to_numpy()[mask])
        trace.append(f"map: rated the {int(mask.sum())} reports at level {level} (0-10)")
    else:
        mask = dynamic_selection(index, ratings, qs.global_dynamic_threshold, trace)
    ratings = np.where(mask, ratings, 0.0)
    frame = (
        reps.with_row_index("row")
        .with_columns(
            similarity=pl.Series(sims),
            query_rating=pl.Series(ratings),
        )
        .filter(pl.Series(mask))
    )
    n_all = frame.height
    frame = frame.filter(pl.col("query_rating") > 0).sort(
        ["query_rating", "similarity", "level", "community"],
        descending=[True, True, False, False],
    )
    trace.append(f"dropped {n_all - frame.height} reports rated 0; sorted by rating")
    if frame.height == 0:
        return SearchResult(
            query=query,
            mode="global",
            answer="No community report is relevant to the query (all were rated 0).",
            trace=trace,
        )

    table, records, unit_ids, answer_parts = _reduce(index, frame, trace)
    context = render_table("Reports", ["id", "title", "rating", "content"], table)
    trace.append(f"reduce: extractive answer from the top {len(answer_parts)} reports")
    return SearchResult(
        query=query,
        mode="global",
        answer="\n".join(answer_parts),
        context_text=context,
        records=records,
        text_unit_ids=unit_ids,
        trace=trace,
        context_tokens=count_tokens(context),
    )


def _reduce(
    index: IndexTables, frame: pl.DataFrame, trace: list[str]
) -> tuple[list[list[Any]], list[dict[str, Any]], list[str], list[str]]:
    """The best reports within the token budget: (context table rows, records, their text
    unit ids in order, the answer's bullets)."""
    qs = index.settings.query
    units = index.communities.select("community", "text_unit_ids")
    frame = frame.head(qs.global_top_reports).join(
        units, on="community", how="left", maintain_order="left"
    )
    budget = qs.max_context_tokens
    table, records, used, answer_parts = [], [], 0, []
    unit_ids: list[str] = []
    for rep in frame.iter_rows(named=True):
        content = truncate_tokens(rep["full_content"] or rep["summary"] or "", REPORT_TOKENS)
        n = count_tokens(content) + 8
        if records and used + n > budget:
            trace.append(f"reduce budget {budget} tokens reached after {len(records)} reports")
            break
        used += n
        table.append([rep["human_readable_id"], rep["title"], rep["query_rating"], content])
        unit_list = list(rep["text_unit_ids"] or [])
        records.append(
            graph_record(
                index,
                "report",
                rep,
                unit_list,
                score=float(rep["query_rating"]),
                rating=float(rep["query_rating"]),
                similarity=float(rep["similarity"]),
                title=rep["title"],
                text=content,
                community=rep["community"],
                level=rep["level"],
            )
        )
        unit_ids.extend(u for u in unit_list if u not in unit_ids)
        if len(answer_parts) < ANSWER_REPORTS:
            answer_parts.append(_answer_part(rep))
    return table, records, unit_ids, answer_parts


def _answer_part(rep: dict[str, Any]) -> str:
    """One bullet: the report's summary and its first finding, cited by report id."""
    text = (rep["summary"] or "").strip()
    findings = rep.get("findings") or []
    if findings:
        first = findings[0].get("summary") or ""
        if first and first not in text:
            text = f"{text} {first}".strip()
    if not text:
        text = truncate_tokens(rep["full_content"] or "", 80)
    cite = f"[report {rep['human_readable_id']}, rating {rep['query_rating']}]"
    return f"- {rep['title']}: {text} {cite}"
