"""LLM answers over the contexts the search modes assemble (LLM mode).

Retrieval is the same offline and in LLM mode; only the answer changes. Local and naive
search answer from their context with the `local_search` prompt (streamable). Global search
maps batches of community reports to rated partial answers (`global_map`, concurrent),
drops the 0s, sorts, and reduces the best within a token budget (`global_reduce`).

An answer call that fails raises LlmAnswerError: a misconfigured LLM mode must not pass an
extractive answer off as the LLM's. With `fallback` (GraphIndex(llm_fallback=True), the
CLI's --offline-fallback) the extractive answer stays, and `result.fallback`, the trace and a
LlmFallbackWarning say why.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from pipeline.llm.errors import LlmError
from pipeline.llm.prompts import load_prompt, neutralise
from pipeline.query.result import SearchResult, render_table
from pipeline.tokens import count_tokens

if TYPE_CHECKING:
    from pipeline.llm.client import LlmClient

RESPONSE_TYPE = "a few concise paragraphs"
MAP_BATCH_TOKENS = 3000  # report text per map call
REDUCE_TOKENS = 6000  # partial answers given to the reduce call


class LlmAnswerError(RuntimeError):
    """The LLM could not write the answer and no fallback was asked for (`llm_fallback`)."""


class LlmFallbackWarning(UserWarning):
    """An offline stand-in (extractive answer, lexical analysis) replaced a failed LLM call."""


class MapAnswer(BaseModel):
    reasoning: str = ""
    response: str = ""
    rating: float = Field(0.0)


def local_messages(result: SearchResult) -> list[dict[str, str]]:
    """The answer prompt over a result's context: the focus prompt for a focus context (notes
    as JSON), the local-search prompt for the context tables of the other modes."""
    name = "focus_answer" if result.mode == "focus" else "local_search"
    return load_prompt(name).render(
        context=neutralise(result.context_text, "context"),
        question=result.query,
        response_type=RESPONSE_TYPE,
    )


def fall_back(result: SearchResult, what: str, reason: str, fallback: bool) -> SearchResult:
    """`result` as it is (extractive), its `fallback`, trace and a warning saying why; or
    LlmAnswerError when the caller did not ask for a fallback."""
    if not fallback:
        raise LlmAnswerError(f"{what} failed: {reason}")
    note = f"{what} failed ({reason}); kept the extractive answer"
    warnings.warn(note, LlmFallbackWarning, stacklevel=3)
    joined = f"{result.fallback}; {note}" if result.fallback else note
    return replace(result, fallback=joined, trace=[*result.trace, note])


def answer_from_context(
    llm: LlmClient, result: SearchResult, fallback: bool = False
) -> SearchResult:
    """`result` with its answer written by the LLM from its own context (same records)."""
    if not result.context_text:
        return result
    try:
        (answer,) = llm.run_many([llm.chat(local_messages(result), stage="answer")])
    except Exception as exc:  # noqa: BLE001 - reported as the answer's failure below
        answer = LlmError(str(exc))
    if isinstance(answer, LlmError):
        return fall_back(result, "LLM answer", answer.reason, fallback)
    return replace(
        result, answer=answer, citations=[], trace=[*result.trace, "answer: LLM over the context"]
    )


def stream_answer(llm: LlmClient, result: SearchResult) -> Iterator[str]:
    """The LLM answer to `result`'s context, piece by piece (for a CLI or a notebook)."""
    return stream_messages(llm, local_messages(result), stage="answer")


def stream_messages(llm: LlmClient, messages: list[dict], stage: str, **params) -> Iterator[str]:
    """An LLM answer streamed from a worker thread's event loop into a plain iterator."""
    import asyncio
    import queue
    import threading

    pieces: queue.Queue[str | None | BaseException] = queue.Queue()

    async def pump() -> None:
        try:
            async for piece in llm.stream(messages, stage=stage, **params):
                pieces.put(piece)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            pieces.put(exc)
        finally:
            await llm.aclose()
            pieces.put(None)

    threading.Thread(target=lambda: asyncio.run(pump()), daemon=True).start()
    while (item := pieces.get()) is not None:
        if isinstance(item, BaseException):
            raise item
        yield item


def guarded_stream(pieces: Iterator[str], result: SearchResult, fallback: bool) -> Iterator[str]:
    """`pieces` with an LLM failure as LlmAnswerError. With `fallback`, a failure before the
    first piece yields the extractive answer instead and sets `result.fallback` (a stream
    that broke off midway raises: what was shown cannot be taken back)."""
    started = False
    try:
        for piece in pieces:
            started = True
            yield piece
    except LlmError as exc:
        if started or not fallback:
            raise LlmAnswerError(f"LLM answer failed: {exc.reason}") from None
        kept = fall_back(result, "LLM answer", exc.reason, fallback)
        result.fallback, result.trace = kept.fallback, kept.trace
        yield result.answer


def _batches(records: list[dict], budget: int) -> list[list[dict]]:
    batches: list[list[dict]] = [[]]
    used = 0
    for rec in records:
        n = count_tokens(rec.get("text") or "")
        if batches[-1] and used + n > budget:
            batches.append([])
            used = 0
        batches[-1].append(rec)
        used += n
    return [b for b in batches if b]


def global_map_reduce(llm: LlmClient, result: SearchResult, fallback: bool = False) -> SearchResult:
    """LLM map (rated partial answers per batch of reports) and reduce, over the reports
    the offline global search selected (its records). Some map calls failing skips their
    reports (the trace says so); all failing, or the reduce failing, is the answer's failure."""
    reports = [r for r in result.records if r.get("kind") == "report"]
    if not reports:
        return result
    mapper = load_prompt("global_map")
    batches = _batches(reports, MAP_BATCH_TOKENS)
    calls = []
    for batch in batches:
        context = render_table(
            "Reports",
            ["id", "title", "content"],
            [[r["human_readable_id"], r.get("title", ""), r.get("text", "")] for r in batch],
        )
        messages = mapper.render(context=neutralise(context, "context"), question=result.query)
        calls.append(llm.chat_json(messages, MapAnswer, stage="global_map"))
    answers = llm.run_many(calls)
    trace = [*result.trace, f"map: {len(batches)} LLM calls over {len(reports)} reports"]
    partial = [a for a in answers if isinstance(a, MapAnswer) and a.rating > 0 and a.response]
    errors = [a for a in answers if isinstance(a, LlmError)]
    failed = len(errors)
    if errors and failed == len(answers):
        return fall_back(replace(result, trace=trace), "LLM map", errors[0].reason, fallback)
    if failed:
        trace.append(f"map: {failed} calls failed after retries; their reports were skipped")
    partial.sort(key=lambda a: -a.rating)
    trace.append(f"map: {len(partial)} partial answers rated > 0, sorted by rating")
    if not partial:
        return replace(result, trace=[*trace, "reduce: nothing relevant; kept extractive answer"])
    lines, used = [], 0
    for i, a in enumerate(partial, 1):
        line = f"Analyst {i} (importance {a.rating:g}): {a.response}"
        n = count_tokens(line)
        if lines and used + n > REDUCE_TOKENS:
            break
        lines.append(line)
        used += n
    messages = load_prompt("global_reduce").render(
        analyses=neutralise("\n\n".join(lines), "analyses"),
        question=result.query,
        response_type=RESPONSE_TYPE,
    )
    (final,) = llm.run_many([llm.chat(messages, stage="global_reduce")])
    if isinstance(final, LlmError):
        return fall_back(replace(result, trace=trace), "LLM reduce", final.reason, fallback)
    return replace(
        result, answer=final, citations=[], trace=[*trace, f"reduce: {len(lines)} partial answers"]
    )
