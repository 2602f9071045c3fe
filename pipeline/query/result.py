"""The one result shape every search mode returns, and the context-table rendering they share."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.tokens import count_tokens


@dataclass
class SearchResult:
    """What a search produced: the answer, the exact context an LLM would get, and why.

    `records` carry kind (text_unit / entity / relationship / report), id,
    human_readable_id, score, text or title, and provenance (document_id,
    document_title, source_path, pages). `text_unit_ids` is the ranked unit list that
    retrieval benchmarks score; `trace` lists the actions taken, in order.
    """

    query: str
    mode: str
    answer: str
    context_text: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)
    text_unit_ids: list[str] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    context_tokens: int = 0
    # Mode-specific structured output: focus -> the Overall JSON; flow -> query analysis,
    # definitions, facts, Mermaid diagram; expand -> the expanded subgraph.
    data: dict[str, Any] = field(default_factory=dict)
    # The offline answer's sentences with their sources (pipeline/query/extractive.py): n,
    # sentence, id and kind of its record, document, section path, pages; empty for an LLM
    # answer.
    citations: list[dict[str, Any]] = field(default_factory=list)
    # Why an offline stand-in replaced a failed LLM step (llm_fallback); None when none did.
    fallback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, default=str, **kwargs)


def _cell(value: Any) -> str:
    """One table cell on one line: the delimiter and newlines would break the row."""
    text = "" if value is None else str(value)
    return text.replace("\r", " ").replace("\n", " ").replace("|", "/")


def render_table(title: str, header: list[str], rows: list[list[Any]]) -> str:
    """A GraphRAG-style context section: '-----Title-----' then '|'-delimited rows."""
    lines = [f"-----{title}-----", "|".join(header)]
    lines.extend("|".join(_cell(v) for v in row) for row in rows)
    return "\n".join(lines)


def texts_table(records: Iterable[dict[str, Any]], budget: int) -> tuple[str, list[dict]]:
    """Text unit records, in order, as the Texts section until `budget` tokens are spent (the
    first always goes in); records are consumed lazily, so callers can pass a generator."""
    table, kept, used = [], [], 0
    for rec in records:
        n = rec["n_tokens"] or count_tokens(rec["text"])
        if kept and used + n > budget:
            break
        used += n
        kept.append(rec)
        table.append([rec["human_readable_id"], rec["document_title"], rec["text"]])
    return render_table("Texts", ["id", "document", "text"], table), kept
