"""Expand search's context and records: units grouped by document, then section path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.query.expand.graph import ExpandGraph
from pipeline.query.expand.params import ExpandParams
from pipeline.query.records import entity_record, section_record, unit_record
from pipeline.tokens import count_tokens, truncate_tokens

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


def build_context(
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
            section_record(
                s,
                docs.get(s["document_id"]),
                score=float(score[g]),
                hops=int(hops[g]),
                via=names[ptype[g]] if ptype[g] >= 0 else None,
            )
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
