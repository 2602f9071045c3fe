"""Query answers in LLM mode: the real openai client over HTTP to the fake server."""

from __future__ import annotations

import json
import re

import pytest

from pipeline.config import LlmSettings, load_settings
from pipeline.fake_llm import FakeLlm, message_text
from pipeline.llm import LlmClient
from pipeline.query import GraphIndex

ANALYST = re.compile(r"Analyst \d+")


def responder(messages: list[dict]) -> str:
    """Answers that prove what the LLM was given: a context line, ratings, analyst counts."""
    system, user = message_text(messages[0]), message_text(messages[-1])
    if "map-reduce search" in system:
        hit = "Solvay" in user
        return json.dumps(
            {
                "reasoning": "looked",
                "response": "Solvay, Brussels" if hit else "",
                "rating": 8 * hit,
            }
        )
    if "<analyses>" in user:
        analysts = len(ANALYST.findall(user))
        return f"REDUCED {analysts} analysts"
    line = next((ln for ln in user.splitlines() if "Solvay" in ln), "none")
    return f"FROM CONTEXT: {line[:80]}"


@pytest.fixture()
def llm_index(sample_index, tmp_path):
    _, out, _, _ = sample_index
    with FakeLlm(responder=responder) as server:
        settings = LlmSettings(base_url=server.base_url, api_key="sk-test", timeout_s=2.0)
        client = LlmClient(settings, tmp_path / "llm-cache", backoff_base_s=0.01)
        yield GraphIndex.open(out, load_settings(), llm=client), server


def test_local_answer_is_written_by_the_llm_from_the_context(llm_index):
    index, server = llm_index
    result = index.local_search("Who attended the Solvay Conference in Brussels?")
    assert result.answer.startswith("FROM CONTEXT: ") and "Solvay" in result.answer
    assert "answer: LLM over the context" in result.trace
    assert server.by_stage.get("answer") == 1
    retrieved = index.local_search(
        "Who attended the Solvay Conference in Brussels?", llm_answer=False
    )
    assert retrieved.context_text == result.context_text
    assert "".join(index.stream_answer(retrieved)) == result.answer


def test_global_search_maps_rates_and_reduces(llm_index):
    index, server = llm_index
    result = index.global_search("What happened at the Solvay Conferences?")
    assert re.fullmatch(r"REDUCED [1-9]\d* analysts", result.answer)
    assert any(t.startswith("map: ") and "LLM calls" in t for t in result.trace)
    assert server.by_stage.get("global_map", 0) >= 1 and server.by_stage.get("global_reduce") == 1


def test_a_failing_endpoint_keeps_the_extractive_answer(sample_index, tmp_path):
    _, out, _, _ = sample_index
    offline = GraphIndex.open(out).local_search("Who attended the Solvay Conference?")
    with FakeLlm(fault_rate=1.0, faults=("500",)) as server:
        settings = LlmSettings(base_url=server.base_url, api_key="sk-test", max_retries=1)
        client = LlmClient(settings, None, backoff_base_s=0.01)
        result = GraphIndex.open(out, llm=client).local_search(
            "Who attended the Solvay Conference?"
        )
    assert result.answer == offline.answer
    assert any("LLM answer failed" in t for t in result.trace)
