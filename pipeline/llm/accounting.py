"""What LLM calls cost, per pipeline stage: counters, token totals and their metadata summary.

Why its own module: the fake server counts requests by the same stage header the client sends,
and the summary (totals, per stage, USD cost where prices are set) is plain data for Dagster
metadata, apart from how calls are made. Stdlib only (plus the tokenizer), so the fake server
can import it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pipeline.tokens import count_tokens

STAGE_HEADER = "X-Docgraph-Stage"


@dataclass
class StageCounters:
    """Per stage. Tokens count real calls only (what was paid for), not cache hits; except
    `text_tokens` and `answer_tokens`, which a stage that sizes its calls by its answers
    records for every answer it gets (extraction: the packs' text, the answers' tokens, a cut
    answer as max_tokens), so answer_tokens / text_tokens is the ratio it sized them by.
    `memo_hits`: items answered from a per-item memory, with no call (extraction: units)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    repairs: int = 0
    failures: int = 0
    truncations: int = 0
    text_tokens: int = 0
    answer_tokens: int = 0
    memo_hits: int = 0


def add_counts(counters: dict[str, StageCounters] | None, stage: str, **counts: int) -> None:
    """Add `counts` (StageCounters fields) to `stage`'s counters; a no-op without counters (a
    stand-in client)."""
    if counters is not None:
        c = counters.setdefault(stage, StageCounters())
        for field, n in counts.items():
            setattr(c, field, getattr(c, field) + n)


def estimate_prompt_tokens(messages: list[dict]) -> int:
    """Prompt tokens of the messages, for a server that reports no usage."""
    return sum(count_tokens(m["content"]) for m in messages if isinstance(m.get("content"), str))


def usage_metadata(
    counters: dict[str, StageCounters],
    model_tokens: dict[tuple[str, str], list[int]],
    chat_model: str,
    prices: dict[str, tuple[float, float]] | None,
) -> dict[str, Any]:
    """Totals and per-stage counters (plus USD cost where `prices` covers the model, and the
    answer ratio of the stages that record one), as plain values fit for Dagster metadata. No
    key, no endpoint. `model_tokens`: (stage, model) -> [prompt, completion] tokens."""
    totals = StageCounters()
    by_stage: dict[str, dict[str, Any]] = {}
    for stage, c in sorted(counters.items()):
        by_stage[stage] = asdict(c)
        for field, value in asdict(c).items():
            setattr(totals, field, getattr(totals, field) + value)
    out: dict[str, Any] = {f"llm_{k}": v for k, v in asdict(totals).items()}
    out["llm_model"] = chat_model
    if prices:
        total_cost, unpriced = 0.0, set()
        for (stage, model), (p, c) in sorted(model_tokens.items()):
            if model not in prices:
                unpriced.add(model)
                continue
            cost = (p * prices[model][0] + c * prices[model][1]) / 1e6
            by_stage[stage]["cost_usd"] = round(by_stage[stage].get("cost_usd", 0.0) + cost, 6)
            total_cost += cost
        out["llm_cost_usd"] = round(total_cost, 6)
        if unpriced:
            out["llm_unpriced_models"] = ", ".join(sorted(unpriced))
    # the ratio per stage over the client's answers so far (a run's); a dict, no number, so
    # a step's metadata carries it whole (assets.metadata.llm_delta subtracts numbers)
    ratios = {
        stage: round(c.answer_tokens / c.text_tokens, 3)
        for stage, c in sorted(counters.items())
        if c.text_tokens
    }
    if ratios:
        out["llm_answer_ratio"] = ratios
    out["llm_by_stage"] = by_stage
    return out
