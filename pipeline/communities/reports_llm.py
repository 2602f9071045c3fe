"""LLM community reports (stage "report"), bottom-up, in the seed schema of
pipeline.communities.reports.

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
`summarize_llm.memo_store`) with digests of the context lines it was written from (no text: a
deleted document's excerpts must not stay on disk), a digest of its member
entities and the entities its text names (entity titles found in it, as ids). A remembered
report is kept with no call only when it can still be true of today's data: the same members,
every entity it names still in the graph (deleted content never survives in a report), and a
context changed only a little (`ReportSettings.llm_reuse_max_change`: the share of lines added
or removed; excerpt and description churn). Its parent then sees the same child line, so a
changed excerpt does not re-bill every ancestor. Drift cannot accumulate unseen: the comparison
is always with the lines the kept report was written from. An unchanged context re-runs from
the exact-prompt cache as before.

Failure policy: a community whose call fails (after retries, repair and one re-ask) is recorded
as {community, reason} and keeps its remembered LLM report when that report passes the same
members-and-names test and its context shares at least one line with today's (a report the
model wrote for this community beats the extractive one; a memo sharing nothing is a
renumbered, unrelated community), else its extractive report. A fatal error (a refused key)
is raised.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import polars as pl
from pydantic import BaseModel, field_validator, model_validator

from pipeline.communities.reports import _markdown
from pipeline.config import ReportSettings
from pipeline.graph.summarize_llm import memo_store
from pipeline.ids import sha256_hex
from pipeline.llm.client import LlmClient
from pipeline.llm.prompts import data_block, load_prompt
from pipeline.schemas import TABLES
from pipeline.tokens import count_tokens, truncate_tokens

__all__ = ["STAGE", "ReportAnswer", "build_reports_llm", "report_contexts"]

STAGE = "report"
MEMO_KIND = "report-memo-v2"
MAX_TITLE_WORDS = 8  # longer titles are not looked for in report text
_WORD = re.compile(r"\w+")
_EXCERPT_TOKENS = 160
_DESC_TOKENS = 60
_SHARES = {"entities": 0.4, "relationships": 0.25, "excerpts": 0.35}  # leaves
_PARENT_SHARES = {"reports": 0.6, "entities": 0.25, "relationships": 0.15}


class Finding(BaseModel):
    summary: str = ""
    explanation: str = ""

    @model_validator(mode="before")
    @classmethod
    def _text(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"summary": data, "explanation": ""}
        return data

    @field_validator("summary", "explanation", mode="before")
    @classmethod
    def _str(cls, v: Any) -> str:
        return "" if v is None else " ".join(str(v).split())


class ReportAnswer(BaseModel):
    """The model's report; lenient on types, strict on having a title and a summary."""

    title: str
    summary: str
    rating: float = 0.0
    rating_explanation: str = ""
    findings: list[Finding] = []

    @field_validator("title", "summary", "rating_explanation", mode="before")
    @classmethod
    def _str(cls, v: Any) -> str:
        return "" if v is None else " ".join(str(v).split())

    @field_validator("title", "summary")
    @classmethod
    def _non_empty(cls, v: str) -> str:
        if not v:
            raise ValueError("must not be empty")
        return v

    @field_validator("rating", mode="before")
    @classmethod
    def _clamp(cls, v: Any) -> float:
        try:
            x = float(str(v).split("/")[0].strip()) if not isinstance(v, int | float) else float(v)
        except ValueError:
            return 0.0
        return min(10.0, max(0.0, x)) if x == x else 0.0


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


def _render_context(sections: dict[str, list[str]]) -> str:
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
    `reports.build_reports`; failures are [{community, reason}]; counts are `sent`
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
    titles = _title_index(entities)
    present = set(entities["id"].to_list())
    members = {
        r["community"]: _digest(r["entity_ids"] or [])
        for r in communities.select("community", "entity_ids").iter_rows(named=True)
    }
    for level in sorted({info[c]["level"] for c in contexts}, reverse=True):
        comms = sorted(c for c in contexts if info[c]["level"] == level)
        msgs, seen, keys, kept, previous = [], [], [], {}, {}
        for c in comms:
            kids = sorted(k for k in (info[c]["children"] or []) if k in final)
            if kids:
                per = max(20, int(settings.llm_context_tokens * 0.6 / len(kids)) - 12)
                lines = [_child_line(k, final[k], per) for k in kids]
                share = int(settings.llm_context_tokens * _PARENT_SHARES["reports"])
                contexts[c]["reports"] = _budgeted(lines, share)
            context = data_block(_render_context(contexts[c]), "community", id=c)
            msgs.append(
                prompt.render(
                    level=level,
                    context=context,
                    max_findings=settings.max_findings,
                    max_tokens=settings.max_report_tokens,
                )
            )
            seen.append(_line_digests(contexts[c]))
            keys.append(_memo_key(llm, prompt.hash, c, level, settings))
            memo = _memo_get(llm, keys[-1])
            if memo is None or not memo.still_true(members[c], present):
                continue  # no report of today's members that names only existing entities
            change = _change(memo.lines, seen[-1])
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
                names = _names(_answer_text(res), titles)
                _memo_put(llm, keys[i], _Memo(res, seen[i], members[comms[i]], names))
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
            final[c] = _row(base[c], res, settings)
    rows = [final[c] for c in sorted(final)]
    table = pl.DataFrame(
        rows,
        schema_overrides={
            "findings": pl.List(pl.Struct({"summary": pl.Utf8, "explanation": pl.Utf8}))
        },
    ).to_arrow()
    out = pl.from_arrow(table.select(schema.names).cast(schema))
    return out, failures, counts  # type: ignore[return-value]


def _memo_key(
    llm: LlmClient, prompt_hash: str, community: int, level: int, settings: ReportSettings
) -> str:
    cfg = llm.settings
    parts = [
        MEMO_KIND,
        cfg.chat_model,
        str(cfg.temperature),
        prompt_hash,
        str(community),
        str(level),
        str(settings.max_findings),
        str(settings.max_report_tokens),
    ]
    return sha256_hex("\x1f".join(parts).encode("utf-8"))


@dataclass(frozen=True)
class _Memo:
    """A remembered report: the answer, the context lines it was written from, the digest of
    its community's member ids then, and the ids of the entities its text names."""

    answer: ReportAnswer
    lines: list[str]
    members: str
    names: list[str]

    def still_true(self, members: str, present: set[str]) -> bool:
        """Written for today's members, and naming no entity that is gone."""
        return self.members == members and all(n in present for n in self.names)


def _memo_get(llm: LlmClient, key: str) -> _Memo | None:
    """The report remembered for this community, if any (and whole)."""
    memo = memo_store(llm)
    entry = memo.get(key) if memo is not None else None
    if entry is None or entry.get("kind") != MEMO_KIND:
        return None
    lines, members, names = entry.get("lines"), entry.get("members"), entry.get("names")
    if not (isinstance(lines, list) and isinstance(members, str) and isinstance(names, list)):
        return None
    try:
        answer = ReportAnswer.model_validate_json(entry["text"])
    except ValueError:
        return None
    return _Memo(answer, [str(x) for x in lines], members, [str(x) for x in names])


def _memo_put(llm: LlmClient, key: str, memo: _Memo) -> None:
    store = memo_store(llm)
    if store is None:
        return
    entry = {
        "kind": MEMO_KIND,
        "stage": STAGE,
        "text": memo.answer.model_dump_json(),
        "lines": memo.lines,
        "members": memo.members,
        "names": memo.names,
    }
    if store.get(key) != entry:
        store.put(key, entry)


def _digest(ids: list[str]) -> str:
    return sha256_hex("\x1f".join(sorted(ids)).encode("utf-8"))


def _title_index(entities: pl.DataFrame) -> dict[str, str]:
    """Entity title as a run of lower-cased words ("j j thomson") -> entity id."""
    keys = entities.select(
        "id", pl.col("title").str.to_lowercase().str.extract_all(r"\w+").list.join(" ")
    ).filter((pl.col("title") != "") & (pl.col("title").str.count_matches(" ") < MAX_TITLE_WORDS))
    return dict(zip(keys["title"].to_list(), keys["id"].to_list(), strict=True))


def _answer_text(answer: ReportAnswer) -> str:
    parts = [answer.title, answer.summary, answer.rating_explanation]
    parts += [f"{f.summary} {f.explanation}" for f in answer.findings]
    return "\n".join(parts)


def _names(text: str, titles: dict[str, str]) -> list[str]:
    """Ids of the entities whose title occurs in `text` as a run of whole words."""
    words = _WORD.findall(text.lower())
    found = {
        titles[key]
        for n in range(1, MAX_TITLE_WORDS + 1)
        for i in range(len(words) - n + 1)
        if (key := " ".join(words[i : i + n])) in titles
    }
    return sorted(found)


def _line_digests(sections: dict[str, list[str]]) -> list[str]:
    """The context's lines as digests: enough to measure how much a context changed, while
    the memo on disk holds no document text (a deleted document's excerpts must not stay)."""
    return [sha256_hex(f"{k}\t{line}".encode())[:24] for k, v in sections.items() for line in v]


def _change(old: list[str], new: list[str]) -> float:
    """Share of two contexts' lines that are in only one of them (Jaccard distance). Lines,
    not characters: one edited excerpt is one changed fact, however long its text."""
    a, b = set(old), set(new)
    return len(a ^ b) / len(a | b) if a or b else 0.0


def _row(base: dict[str, Any], ans: ReportAnswer, settings: ReportSettings) -> dict[str, Any]:
    findings = [
        {"summary": f.summary, "explanation": f.explanation}
        for f in ans.findings
        if f.summary or f.explanation
    ][: settings.max_findings]
    content = _markdown(ans.title, ans.summary, findings)
    if count_tokens(content) > settings.max_report_tokens:
        content = truncate_tokens(content, settings.max_report_tokens)
    doc = {
        "title": ans.title,
        "summary": ans.summary,
        "rating": ans.rating,
        "rating_explanation": ans.rating_explanation,
        "findings": findings,
    }
    return {
        **base,
        "title": ans.title,
        "summary": ans.summary,
        "rating": ans.rating,
        "rank": ans.rating,  # GraphRAG's name
        "rating_explanation": ans.rating_explanation,
        "findings": findings,
        "full_content": content,
        "full_content_json": json.dumps(doc, sort_keys=True, ensure_ascii=False),
    }
