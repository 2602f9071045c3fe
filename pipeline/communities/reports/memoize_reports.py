"""Remembered LLM community reports: when one may be kept on a re-run with no call.

Why its own module: the reuse test (same members, every entity the report names still in the
graph, a context changed by at most `ReportSettings.llm_reuse_max_change` of its lines) and
what is kept on disk for it (line digests, never document text) are one policy; see
pipeline.communities.reports.with_llm for how the stage applies it. Memos live in the LLM
summaries' store (pipeline.llm.cache.memo_store).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from pipeline.communities.reports.model_answer import ReportAnswer
from pipeline.config import ReportSettings
from pipeline.ids import sha256_hex
from pipeline.llm.cache import memo_store

if TYPE_CHECKING:  # openai's import (~0.45 s) waits until a run calls a model
    from pipeline.llm.client import LlmClient

STAGE = "report"
MEMO_KIND = "report-memo-v2"
MAX_TITLE_WORDS = 8  # longer titles are not looked for in report text
_WORD = re.compile(r"\w+")


def memo_key(
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
class Memo:
    """A remembered report: the answer, the context lines it was written from, the digest of
    its community's member ids then, and the ids of the entities its text names."""

    answer: ReportAnswer
    lines: list[str]
    members: str
    names: list[str]

    def still_true(self, members: str, present: set[str]) -> bool:
        """Written for today's members, and naming no entity that is gone."""
        return self.members == members and all(n in present for n in self.names)


def memo_get(llm: LlmClient, key: str) -> Memo | None:
    """The report remembered for this community, if any (and whole)."""
    memo = memo_store(llm.cache)
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
    return Memo(answer, [str(x) for x in lines], members, [str(x) for x in names])


def memo_put(llm: LlmClient, key: str, memo: Memo) -> None:
    store = memo_store(llm.cache)
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


def members_digest(ids: list[str]) -> str:
    return sha256_hex("\x1f".join(sorted(ids)).encode("utf-8"))


def title_index(entities: pl.DataFrame) -> dict[str, str]:
    """Entity title as a run of lower-cased words ("j j thomson") -> entity id."""
    keys = entities.select(
        "id", pl.col("title").str.to_lowercase().str.extract_all(r"\w+").list.join(" ")
    ).filter((pl.col("title") != "") & (pl.col("title").str.count_matches(" ") < MAX_TITLE_WORDS))
    return dict(zip(keys["title"].to_list(), keys["id"].to_list(), strict=True))


def answer_text(answer: ReportAnswer) -> str:
    parts = [answer.title, answer.summary, answer.rating_explanation]
    parts += [f"{f.summary} {f.explanation}" for f in answer.findings]
    return "\n".join(parts)


def named_entities(text: str, titles: dict[str, str]) -> list[str]:
    """Ids of the entities whose title occurs in `text` as a run of whole words."""
    words = _WORD.findall(text.lower())
    found = {
        titles[key]
        for n in range(1, MAX_TITLE_WORDS + 1)
        for i in range(len(words) - n + 1)
        if (key := " ".join(words[i : i + n])) in titles
    }
    return sorted(found)


def line_digests(sections: dict[str, list[str]]) -> list[str]:
    """The context's lines as digests: enough to measure how much a context changed, while
    the memo on disk holds no document text (a deleted document's excerpts must not stay)."""
    return [sha256_hex(f"{k}\t{line}".encode())[:24] for k, v in sections.items() for line in v]


def context_change(old: list[str], new: list[str]) -> float:
    """Share of two contexts' lines that are in only one of them (Jaccard distance). Lines,
    not characters: one edited excerpt is one changed fact, however long its text."""
    a, b = set(old), set(new)
    return len(a ^ b) / len(a | b) if a or b else 0.0
