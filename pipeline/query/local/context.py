"""Local search's context tables: Entities, Relations, Summaries (reports) and Texts.

Each section is filled best first within its token budget, with a record per row it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.query.records import entity_record, graph_record, unit_record
from pipeline.query.result import render_table, texts_table
from pipeline.tokens import count_tokens, truncate_tokens

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


SECTION_HEADERS = (
    ("Entities", ["id", "entity", "type", "description", "number of relationships"]),
    ("Relations", ["id", "source", "target", "description", "weight"]),
    ("Summaries", ["id", "title", "level", "content"]),
)


def entities_section(
    index: IndexTables,
    rows: list[int],
    ent_scores: np.ndarray,
    matched: dict[int, str],
    budget: int,
) -> tuple[str, list[dict[str, Any]], int]:
    ents = index.entities
    table, records, used = [], [], 0
    for r in rows:
        e = ents.row(r, named=True)
        desc = truncate_tokens(e["description"] or "", 100)
        row = [e["human_readable_id"], e["title"], e["type"], desc, e["degree"]]
        n = count_tokens("|".join(map(str, row))) + 1  # as rendered, with its newline
        if records and used + n > budget:
            break
        used += n
        table.append(row)
        score = float(ent_scores[r]) if ent_scores.size else 0.0
        records.append(entity_record(index, e, desc, score=score, matched_name=matched.get(r)))
    header = SECTION_HEADERS[0][1]
    return render_table("Entities", header, table), records, used


def relationships_section(
    index: IndexTables, ent_rows: list[int], ent_scores: np.ndarray, budget: int
) -> tuple[str, list[dict[str, Any]], int]:
    """Relationships touching the selected entities: both ends selected first, then the
    endpoints' PageRank, then weight (one sparse product, no per-query join)."""
    rels = index.relationships
    header = SECTION_HEADERS[1][1]
    if not ent_rows or rels.height == 0:
        return render_table("Relations", header, []), [], 0
    # The selected entities' rows of the entities x relationships incidence: cost follows
    # their degree, not the number of relationships.
    sub = index.entity_relationships[ent_rows].tocoo()
    cand, inv = np.unique(sub.col, return_inverse=True)
    ends = np.bincount(inv, minlength=cand.size)  # 1 or 2 selected endpoints
    ent_w = ent_scores[np.asarray(ent_rows)][sub.row] if ent_scores.size else None
    rel_score = (
        np.bincount(inv, weights=ent_w, minlength=cand.size) if ent_w is not None else 0 * ends
    )
    weight = rels["weight"].fill_null(0).gather(cand).to_numpy()
    pick = np.lexsort((cand, -weight, -rel_score, -ends))[:200]
    order, score = cand[pick], dict(zip(cand[pick].tolist(), rel_score[pick].tolist(), strict=True))
    table, records, used = [], [], 0
    for r in order.tolist():
        rel = rels.row(r, named=True)
        desc = truncate_tokens(rel["description"] or "", 80)
        row = [rel["human_readable_id"], rel["source"], rel["target"], desc, rel["weight"]]
        n = count_tokens("|".join(map(str, row))) + 1  # as rendered, with its newline
        if used + n > budget:
            break
        used += n
        table.append(row)
        records.append(
            graph_record(
                index,
                "relationship",
                rel,
                rel["text_unit_ids"],
                score=float(score[r]),
                title=f"{rel['source']} -> {rel['target']}",
                text=desc,
            )
        )
    return render_table("Relations", header, table), records, used


def reports_section(
    index: IndexTables, ent_rows: list[int], budget: int
) -> tuple[str, list[dict[str, Any]], int]:
    """Reports of the communities holding the most selected entities (then finer, then rating)."""
    reps = index.community_reports
    header = SECTION_HEADERS[2][1]
    if not ent_rows or reps.height == 0:
        return render_table("Summaries", header, []), [], 0
    sel = np.zeros(index.entities.height)
    sel[ent_rows] = 1.0
    hits = index.entity_reports.T @ sel  # selected entities per report
    cand = np.flatnonzero(hits > 0)
    level = reps["level"].to_numpy()[cand]
    rating = reps["rating"].fill_null(0).to_numpy()[cand]
    order = cand[np.lexsort((cand, -rating, -level, -hits[cand]))]
    units = index.report_units
    table, records, used = [], [], 0
    for r in order.tolist():
        rep = reps.row(r, named=True)
        content = rep["summary"] or rep["full_content"] or ""
        content = truncate_tokens(content, 300)
        n = count_tokens("|".join(map(str, [rep["human_readable_id"], rep["title"], rep["level"]])))
        n += count_tokens(content) + 2
        if used + n > budget:
            if records:
                break
            continue
        used += n
        table.append([rep["human_readable_id"], rep["title"], rep["level"], content])
        records.append(
            graph_record(
                index,
                "report",
                rep,
                units[r],
                score=float(hits[r]),
                title=rep["title"],
                text=content,
                community=rep["community"],
                level=rep["level"],
            )
        )
    return render_table("Summaries", header, table), records, used


def sources_section(
    index: IndexTables,
    unit_rows: np.ndarray,
    scores: np.ndarray,
    sims: np.ndarray,
    budget: int,
) -> tuple[str, list[dict[str, Any]]]:
    records = (
        unit_record(index, row, float(scores[row]), rank=rank + 1, dense=float(sims[row]))
        for rank, row in enumerate(unit_rows.tolist())
    )
    return texts_table(records, budget)
