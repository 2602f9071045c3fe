"""Naive search: hybrid retrieval over text units (dense cosine mixed with BM25), the baseline
every benchmark compares against; `query.lexical_weight: 0` makes it the dense ranking alone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.query.extractive import answered_result
from pipeline.query.records import unit_record
from pipeline.query.result import SearchResult, render_table
from pipeline.query.scoring import top_indices
from pipeline.tokens import count_tokens

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


def naive_search(index: IndexTables, query: str, top_k: int) -> SearchResult:
    if index.is_empty:
        return index.empty_result(query, "naive")
    qs = index.settings.query
    trace = [f"embedded query with {index.embedder.model_id}"]
    sims = index.unit_relevance(query)
    rows = top_indices(sims, top_k)
    trace.append(
        f"{index.relevance_name(query)} over {sims.shape[0]} text units -> top {len(rows)}"
    )

    budget = qs.max_context_tokens
    records, table_rows, used = [], [], 0
    for rank, row in enumerate(rows.tolist()):
        rec = unit_record(index, row, float(sims[row]), rank=rank + 1)
        n = rec["n_tokens"] or count_tokens(rec["text"])
        if records and used + n > budget:
            trace.append(f"context budget {budget} tokens reached after {len(records)} units")
            break
        used += n
        records.append(rec)
        table_rows.append([rec["human_readable_id"], rec["document_title"], rec["text"]])
    context = render_table("Texts", ["id", "document", "text"], table_rows)
    ids = index.text_units["id"]
    return answered_result(
        index,
        query,
        "naive",
        records,
        context=context,
        records=records,
        text_unit_ids=[ids[int(r)] for r in rows],
        trace=trace,
    )
