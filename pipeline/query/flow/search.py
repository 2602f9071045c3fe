"""Flow search's entry points: flow_search (analysis -> subgraph -> result) and its LLM answer.

The answer is written over the flow context with the `flow_answer` prompt, whole
(answer_flow) or streamed (stream_flow_answer).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from pipeline.llm.prompts import load_prompt, neutralise
from pipeline.query.flow.analysis import analyse, lexical_intent
from pipeline.query.flow.context import build_result
from pipeline.query.flow.retrieval import retrieve, retrieve_quick
from pipeline.query.result import SearchResult

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables


ANSWER_TEMPERATURE = 0.3
RESPONSE_TYPE = "a few concise paragraphs"


def flow_search(
    index: IndexTables, query: str, *, quick: bool = False, llm_answer: bool = True
) -> SearchResult:
    """Knowledge flow search (see pipeline.query.flow); `quick`: semantic + growth."""
    query = (query or "").strip()
    if not query:
        raise ValueError("empty query")
    mode = "flow"
    if index.is_empty:
        return index.empty_result(query, "flow")
    trace: list[str] = []
    if quick:
        analysis = {"entities": [], "intent": lexical_intent(query), "source": "none (quick)"}
        trace.append(f"analysis: skipped (quick), intent={analysis['intent']}")
        g = retrieve_quick(index, query, trace)
    else:
        analysis = analyse(index, query, trace)
        g = retrieve(index, query, analysis["entities"], trace)
    result = build_result(index, query, mode, analysis, g, trace)
    if analysis["source"] == "lexical" and index.llm is not None:
        result.fallback = next(t for t in trace if t.startswith("analysis: LLM failed"))
    if index.llm is not None and llm_answer:
        return answer_flow(index, result)
    return result


def flow_messages(result: SearchResult) -> list[dict[str, str]]:
    intent = (result.data.get("analysis") or {}).get("intent", "exploration")
    return load_prompt("flow_answer").render(
        context=neutralise(result.context_text, "context"),
        question=result.query,
        intent=intent,
        response_type=RESPONSE_TYPE,
    )


def answer_flow(index: IndexTables, result: SearchResult) -> SearchResult:
    """`result` answered by the LLM over its context (temperature 0.3); a failure is
    LlmAnswerError, or with `index.llm_fallback` the extractive answer (see answer.fall_back)."""
    from pipeline.llm.errors import LlmError
    from pipeline.query.answer import fall_back

    llm = index.llm
    try:
        (answer,) = llm.run_many(
            [llm.chat(flow_messages(result), stage="flow_answer", temperature=ANSWER_TEMPERATURE)]
        )
    except Exception as exc:  # noqa: BLE001 - reported as the answer's failure below
        answer = LlmError(str(exc))
    if isinstance(answer, LlmError):
        return fall_back(result, "LLM answer", answer.reason, index.llm_fallback)
    return replace(result, answer=answer, trace=[*result.trace, "answer: LLM over the flow"])


def stream_flow_answer(index: IndexTables, result: SearchResult) -> Iterator[str]:
    """The LLM answer to a flow result (`flow_search(..., llm_answer=False)`), piece by piece."""
    from pipeline.query.answer import stream_messages

    if index.llm is None:
        raise ValueError("streaming needs LLM mode (settings llm.enabled)")
    return stream_messages(
        index.llm, flow_messages(result), stage="flow_answer", temperature=ANSWER_TEMPERATURE
    )
