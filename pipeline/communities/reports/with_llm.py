"""LLM community reports (stage "report"), bottom-up, in the seed schema of
pipeline.communities.reports.offline.

Leaves (no children) are written from their members, relationships and text excerpts; a parent
from its children's reports plus its own members that no child covers — level by level, deepest
first, one `run_many` per level, so a parent always reads its children's final reports.

Cost: a community smaller than `ReportSettings.llm_min_size` keeps its extractive report with
no call (not a failure); every prompt's context is capped at `llm_context_tokens`
(default 1,500). Incremental: the context holds only the community's own content, ordered
deterministically (members by degree then title, relations by weight then names, excerpts by
member mentions then id, children in community order) and names entities and children by
title rather than by row or community numbers, so an unchanged community re-runs from the
client's disk cache.

Re-runs: every LLM report is remembered per community (number and level; see
pipeline.communities.reports.memoize_reports, kept in `summarize_llm.memo_store`) with digests
of the context lines it was written from (no text: a deleted document's excerpts must not stay on
disk), a digest of its member entities and the entities its text names (entity titles found in
it, as ids). A remembered report is kept with no call only when it can still be true of today's
data: the same members, every entity it names still in the graph (deleted content never
survives in a report), and a context changed only a little
(`ReportSettings.llm_reuse_max_change`: the share of lines added or removed; excerpt and
description churn). Its parent then sees the same child line, so a changed excerpt does not re-
bill every ancestor. Drift cannot accumulate unseen: the comparison is always with the lines
the kept report was written from. An unchanged context re-runs from the exact-prompt cache as
before.

Failure policy: a community whose call fails (after retries, repair and one re-ask) is recorded
as {community, reason} and keeps its remembered LLM report when that report passes the same
members-and-names test and its context shares at least one line with today's (a report the
model wrote for this community beats the extractive one; a memo sharing nothing is a
renumbered, unrelated community), else its extractive report. A fatal error (a refused key)
is raised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from pipeline.communities.reports.memoize_reports import (
    STAGE,
    Memo,
    answer_text,
    context_change,
    line_digests,
    members_digest,
    memo_get,
    memo_key,
    memo_put,
    named_entities,
    title_index,
)
from pipeline.communities.reports.model_answer import ReportAnswer, report_row
from pipeline.communities.reports.prompt_context import (
    child_reports,
    render_context,
    report_contexts,
)
from pipeline.config import ReportSettings
from pipeline.llm.prompts import data_block, load_prompt
from pipeline.schemas import TABLES

if TYPE_CHECKING:  # openai's import (~0.45 s) waits until a run calls a model
    from pipeline.llm.client import LlmClient

__all__ = ["build_reports_llm"]


def build_reports_llm(
    communities: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    extractive_reports: pl.DataFrame,
    llm: LlmClient,
    settings: ReportSettings,
) -> tuple[pl.DataFrame, list[dict], dict[str, int]]:
    """(community_reports, failures, counts): see the module docstring. Same columns as
    `offline.build_reports`; failures are [{community, reason}]; counts are `sent`
    (communities sent to the client: a call, or the exact-prompt cache), `reused` (kept their
    remembered report with no call) and `failed_kept` (failed, kept their remembered report)."""
    schema = TABLES["community_reports"]
    base = {r["community"]: r for r in extractive_reports.iter_rows(named=True)}
    counts = {"sent": 0, "reused": 0, "failed_kept": 0}
    if communities.is_empty():
        return extractive_reports.select(schema.names), [], counts
    contexts = report_contexts(communities, entities, relationships, text_units, settings)
    prompt = load_prompt("community_report")
    info = {
        r["community"]: r
        for r in communities.select("community", "level", "children").iter_rows(named=True)
    }
    final: dict[int, dict[str, Any]] = dict(base)
    failures: list[dict] = []
    titles = title_index(entities)
    present = set(entities["id"].to_list())
    members = {
        r["community"]: members_digest(r["entity_ids"] or [])
        for r in communities.select("community", "entity_ids").iter_rows(named=True)
    }
    for level in sorted({info[c]["level"] for c in contexts}, reverse=True):
        comms = sorted(c for c in contexts if info[c]["level"] == level)
        msgs, seen, keys, kept, previous = [], [], [], {}, {}
        for c in comms:
            kids = sorted(k for k in (info[c]["children"] or []) if k in final)
            if kids:
                contexts[c]["reports"] = child_reports(kids, final, settings)
            context = data_block(render_context(contexts[c]), "community", id=c)
            msgs.append(
                prompt.render(
                    level=level,
                    context=context,
                    max_findings=settings.max_findings,
                    max_tokens=settings.max_report_tokens,
                )
            )
            seen.append(line_digests(contexts[c]))
            keys.append(memo_key(llm, prompt.hash, c, level, settings))
            memo = memo_get(llm, keys[-1])
            if memo is None or not memo.still_true(members[c], present):
                continue  # no report of today's members that names only existing entities
            change = context_change(memo.lines, seen[-1])
            if 0 < change <= settings.llm_reuse_max_change:
                kept[c] = memo.answer
            elif change < 1.0:
                previous[c] = memo.answer  # the fallback should this call fail
        todo = [i for i, c in enumerate(comms) if c not in kept]
        counts["sent"] += len(todo)
        counts["reused"] += len(kept)
        called = llm.run_many([llm.chat_json(msgs[i], ReportAnswer, stage=STAGE) for i in todo])
        results: list[Any] = [kept.get(c) for c in comms]
        for i, res in zip(todo, called, strict=True):
            results[i] = res
            if not isinstance(res, BaseException):
                names = named_entities(answer_text(res), titles)
                memo_put(llm, keys[i], Memo(res, seen[i], members[comms[i]], names))
        for c, res in zip(comms, results, strict=True):
            if isinstance(res, BaseException):
                reason = f"{type(res).__name__}: {getattr(res, 'reason', None) or res}"
                # Still a failure (a remembered report is stale for today's context), but the
                # model's earlier report for this community is closer than the extractive one.
                fallback = previous.get(c)
                if fallback is not None:
                    reason += "; kept the previous LLM report"
                    counts["failed_kept"] += 1
                failures.append({"community": c, "reason": reason})
                if fallback is None:
                    continue
                res = fallback
            final[c] = report_row(base[c], res, settings)
    rows = [final[c] for c in sorted(final)]
    table = pl.DataFrame(
        rows,
        schema_overrides={
            "findings": pl.List(pl.Struct({"summary": pl.Utf8, "explanation": pl.Utf8}))
        },
    ).to_arrow()
    out = pl.from_arrow(table.select(schema.names).cast(schema))
    return out, failures, counts  # type: ignore[return-value]
