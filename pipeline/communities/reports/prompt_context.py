"""Each community's LLM prompt context: its data lines by section, ordered and budgeted.

Why its own module: the context decides both what the model sees and whether a re-run can
reuse a call (the client's exact-prompt cache, the remembered report's line digests), so it
is deterministic: members by degree then title, relations by weight then names, excerpts by
member mentions then id, children by title (never by community number), each section cut to
its share of `ReportSettings.llm_context_tokens`.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.config import ReportSettings
from pipeline.tokens import count_tokens, truncate_tokens

_EXCERPT_TOKENS = 160
_DESC_TOKENS = 60
_SHARES = {"entities": 0.4, "relationships": 0.25, "excerpts": 0.35}  # leaves
_PARENT_SHARES = {"reports": 0.6, "entities": 0.25, "relationships": 0.15}


def _budgeted(lines: list[str], budget: int) -> list[str]:
    out, used = [], 0
    for line in lines:
        n = count_tokens(line) + 1
        if used + n > budget:
            break
        out.append(line)
        used += n
    return out


def _short(text: str, n: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= 4 * n or count_tokens(text) <= n else truncate_tokens(text, n)


def report_contexts(
    communities: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    settings: ReportSettings,
) -> dict[int, dict[str, list[str]]]:
    """Per community (only those that get a call): its data lines by section, ordered and cut
    to the section budgets; `reports` is filled later from the children's final reports."""
    budget = settings.llm_context_tokens
    todo = communities.filter(pl.col("size") >= settings.llm_min_size)
    ents = entities.select(
        pl.col("id").alias("entity_id"),
        "title",
        pl.col("type").fill_null(""),
        pl.col("description").fill_null(""),
        pl.col("degree").fill_null(0),
    )
    child_cover = (
        communities.select(pl.col("community").alias("child"), "entity_ids")
        .join(
            communities.select("community", pl.col("children").alias("child")).explode("child"),
            on="child",
        )
        .explode("entity_ids")
        .select("community", pl.col("entity_ids").alias("entity_id"))
        .unique()
    )
    members = (
        todo.select("community", pl.col("entity_ids").alias("entity_id"))
        .explode("entity_id")
        .join(child_cover, on=["community", "entity_id"], how="anti")  # parents: uncovered only
        .join(ents, on="entity_id")
        .sort(["community", "degree", "title", "entity_id"], descending=[False, True, False, False])
    )
    rels = (
        todo.select("community", pl.col("relationship_ids").alias("id"))
        .explode("id")
        .join(
            relationships.select("id", "source", "target", "type", "description", "weight"), on="id"
        )
        .sort(
            ["community", "weight", "source", "target", "id"],
            descending=[False, True, False, False, False],
        )
    )
    leaves = todo.filter(pl.col("children").list.len() == 0)
    excerpts = (
        leaves.select("community", "entity_ids", pl.col("text_unit_ids").alias("id"))
        .explode("id")
        .join(text_units.select("id", "text", pl.col("entity_ids").alias("u_ents")), on="id")
        .with_columns(
            pl.col("u_ents").list.set_intersection("entity_ids").list.len().alias("mentions")
        )
        .sort(["community", "mentions", "id"], descending=[False, True, False])
        .group_by("community", maintain_order=True)
        .head(12)
    )
    out: dict[int, dict[str, list[str]]] = {
        c: {"reports": [], "entities": [], "relationships": [], "excerpts": []}
        for c in todo["community"].to_list()
    }
    is_leaf = set(leaves["community"].to_list())

    def share(comm: int, section: str) -> int:
        return int(budget * (_SHARES if comm in is_leaf else _PARENT_SHARES).get(section, 0))

    for comm, frame in members.group_by("community", maintain_order=True):
        c = comm[0]
        lines = [
            f"- {r['title']} [{r['type']}]: {_short(r['description'], _DESC_TOKENS)}"
            for r in frame.head(60).iter_rows(named=True)
        ]
        out[c]["entities"] = _budgeted(lines, share(c, "entities"))
    for comm, frame in rels.group_by("community", maintain_order=True):
        c = comm[0]
        lines = [
            f"- {r['source']} -> {r['target']} ({r['type']}): "
            f"{_short(r['description'], _DESC_TOKENS)}"
            for r in frame.head(60).iter_rows(named=True)
        ]
        out[c]["relationships"] = _budgeted(lines, share(c, "relationships"))
    for comm, frame in excerpts.group_by("community", maintain_order=True):
        c = comm[0]
        lines = [f"- {_short(t, _EXCERPT_TOKENS)}" for t in frame["text"].to_list()]
        out[c]["excerpts"] = _budgeted(lines, share(c, "excerpts"))
    return out


def render_context(sections: dict[str, list[str]]) -> str:
    heads = {
        "reports": "Sub-community reports",
        "entities": "Entities",
        "relationships": "Relationships",
        "excerpts": "Text excerpts",
    }
    parts = [f"{heads[k]}:\n" + "\n".join(v) for k, v in sections.items() if v]
    return "\n\n".join(parts)


def _child_line(comm: int, rep: dict[str, Any], budget: int) -> str:
    # Named by title, not by community number: Leiden renumbers communities when the graph
    # changes elsewhere, and a number in the prompt would miss the cache for no reason.
    return f"- {rep['title']} — {_short(rep['summary'], budget)}"


def child_reports(
    kids: list[int], final: dict[int, dict[str, Any]], settings: ReportSettings
) -> list[str]:
    """A parent's `reports` section: a line per child's final report, cut to the budget."""
    per = max(20, int(settings.llm_context_tokens * 0.6 / len(kids)) - 12)
    lines = [_child_line(k, final[k], per) for k in kids]
    share = int(settings.llm_context_tokens * _PARENT_SHARES["reports"])
    return _budgeted(lines, share)
