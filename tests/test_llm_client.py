"""LLM client against the fake OpenAI-compatible server, over real HTTP with the real SDK."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest
from pydantic import BaseModel

from pipeline.config import LlmSettings, load_settings
from pipeline.llm.client import LlmClient
from pipeline.llm.errors import LlmAuthError, LlmError
from pipeline.llm.fake_answers import default_responder
from pipeline.llm.fake_server import FakeLlm
from pipeline.llm.json_repair import parse_json, repair_json

SECRET = "sk-test-SECRET-123"


class Entity(BaseModel):
    name: str
    type: str
    description: str


class Relationship(BaseModel):
    source: str
    target: str
    description: str
    strength: float


class Extraction(BaseModel):
    entities: list[Entity]
    relationships: list[Relationship]


def settings(server: FakeLlm, **kw) -> LlmSettings:
    base = {"base_url": server.base_url, "api_key": SECRET, "timeout_s": 0.5, "max_retries": 4}
    return LlmSettings(**{**base, **kw})


def client(server: FakeLlm, cache_dir: Path | None, **kw) -> LlmClient:
    return LlmClient(settings(server, **kw), cache_dir, backoff_base_s=0.01, backoff_cap_s=0.05)


def user(text: str, json_mode: bool = False) -> list[dict]:
    msgs = [{"role": "user", "content": text}]
    if json_mode:
        msgs.insert(0, {"role": "system", "content": "Extract a graph. Return JSON."})
    return msgs


@pytest.fixture
def server():
    with FakeLlm(require_key=SECRET, stall_s=1.5) as srv:
        yield srv


def test_chat_and_token_counters(server, tmp_path):
    llm = client(server, tmp_path)
    [answer] = llm.run_many([llm.chat(user("Marie Curie worked in Paris. More."), stage="s")])
    assert answer == "Marie Curie worked in Paris."
    c = llm.counters["s"]
    assert (c.calls, c.cache_hits, c.retries) == (1, 0, 0)
    assert c.prompt_tokens > 0 and c.completion_tokens > 0
    assert server.by_stage["s"] == 1


def test_cache_hit_makes_no_request_and_survives_a_new_client(server, tmp_path):
    msgs = user("Ада Лавлейс wrote notes. Then more.")
    first = client(server, tmp_path)
    assert first.run_many([first.chat(msgs, stage="x")]) == ["Ада Лавлейс wrote notes."]
    assert server.requests == 1
    second = client(server, tmp_path)
    assert second.run_many([second.chat(msgs, stage="x")]) == ["Ада Лавлейс wrote notes."]
    assert server.requests == 1
    assert (second.counters["x"].calls, second.counters["x"].cache_hits) == (1 - 1, 1)
    # different parameters are a different call
    second.run_many([second.chat(msgs, stage="x", temperature=0.7)])
    assert server.requests == 2
    # the same call twice at once is made once
    third = client(server, tmp_path / "other")
    third.run_many([third.chat(msgs, stage="y"), third.chat(msgs, stage="y")])
    assert server.requests == 3
    assert third.counters["y"].calls == 1 and third.counters["y"].cache_hits == 1


def test_partial_cache_writes_are_never_read(server, tmp_path):
    msgs = user("Kill me softly. Tail.")
    llm = client(server, tmp_path)
    llm.run_many([llm.chat(msgs, stage="k")])
    [entry] = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert entry.name == entry.parent.name + entry.name[2:] and entry.suffix == ".json"
    assert json.loads(entry.read_text())["text"] == "Kill me softly."
    # a killed writer leaves at most a temp file next to a truncated target: neither is used
    (entry.parent / f".{entry.stem[:16]}.abc.tmp").write_text('{"text": "partial"}')
    entry.write_text('{"text": "trunc')
    again = client(server, tmp_path)
    assert again.run_many([again.chat(msgs, stage="k")]) == ["Kill me softly."]
    assert server.requests == 2 and again.counters["k"].cache_hits == 0
    assert json.loads(entry.read_text())["text"] == "Kill me softly."


@pytest.mark.parametrize("fault", ["429", "500", "timeout"])
def test_retries_then_success(server, tmp_path, fault):
    server.queue_faults(fault, fault)
    llm = client(server, tmp_path)
    [answer] = llm.run_many([llm.chat(user("Retry works. X."), stage="r")])
    assert answer == "Retry works."
    assert llm.counters["r"].retries == 2 and llm.counters["r"].calls == 1
    assert server.by_fault[fault] == 2


def test_retry_after_is_honoured(tmp_path):
    with FakeLlm(retry_after=0.4) as srv:
        srv.queue_faults("429")
        llm = LlmClient(settings(srv), tmp_path, backoff_base_s=10.0, backoff_cap_s=30.0)
        t0 = time.perf_counter()
        assert llm.run_many([llm.chat(user("Wait. X."), stage="r")]) == ["Wait."]
        elapsed = time.perf_counter() - t0
    assert 0.4 <= elapsed < 3.0  # the header's 0.4 s, not a 5-10 s backoff


def test_retries_exhausted_is_an_llm_error(server, tmp_path):
    server.queue_faults(*["500"] * 3)
    llm = client(server, tmp_path, max_retries=2)
    [result] = llm.run_many([llm.chat(user("Never. X."), stage="f")])
    assert isinstance(result, LlmError) and "500" in result.reason
    assert llm.counters["f"].failures == 1 and server.requests == 3
    assert not [p for p in tmp_path.rglob("*.json")]  # failures are not cached


def test_repair_json_cases():
    assert json.loads(repair_json('Sure!\n```json\n{"a": [1, 2,], }\n```')) == {"a": [1, 2]}
    assert json.loads(repair_json("{'a': 'it\"s', 'b': True, 'c': None}")) == {
        "a": 'it"s',
        "b": True,
        "c": None,
    }
    assert json.loads(repair_json('noise {"a": "x, ]"} tail')) == {"a": "x, ]"}
    good = default_responder(user("Alice met Bob.", json_mode=True))
    obj, repaired, _ = parse_json(good, Extraction)
    assert obj is not None and not repaired and [e.name for e in obj.entities] == ["Alice", "Bob"]
    obj, repaired, err = parse_json(good[: len(good) // 2], Extraction)
    assert obj is None and repaired and err


def test_malformed_json_repaired(server, tmp_path):
    broken = '```json\n{"entities": [{"name": "Ann", "type": "P", "description": "d",},],\n'
    broken += '"relationships": [],}\n```'
    with FakeLlm(responder=lambda m: broken) as srv:
        llm = client(srv, tmp_path)
        [obj] = llm.run_many([llm.chat_json(user("x", True), Extraction, stage="j")])
        assert isinstance(obj, Extraction) and obj.entities[0].name == "Ann"
        assert llm.counters["j"].repairs == 1 and srv.requests == 1


def test_hopeless_answer_one_reask_then_error(tmp_path):
    seen: list[list[dict]] = []

    def responder(messages: list[dict]) -> str:
        seen.append(messages)
        return "I cannot answer in JSON, sorry."

    with FakeLlm(responder=responder) as srv:
        llm = client(srv, tmp_path)
        [result] = llm.run_many([llm.chat_json(user("x", True), Extraction, stage="j")])
        assert isinstance(result, LlmError) and "re-ask" in result.reason
        assert srv.requests == 2  # the call and exactly one re-ask
    assert seen[1][-2] == {"role": "assistant", "content": "I cannot answer in JSON, sorry."}
    assert seen[1][-1]["role"] == "user" and "JSON" in seen[1][-1]["content"]
    assert llm.counters["j"].failures == 1


def test_reask_recovers(tmp_path):
    answers = iter(['{"entities": [', default_responder(user("Bo Li.", True))])
    with FakeLlm(responder=lambda m: next(answers)) as srv:
        llm = client(srv, tmp_path)
        [obj] = llm.run_many([llm.chat_json(user("x", True), Extraction, stage="j")])
        assert isinstance(obj, Extraction) and [e.name for e in obj.entities] == ["Bo", "Li"]


def test_a_recovered_answer_is_cached_for_its_first_prompt(tmp_path):
    """A malformed answer that no repair fixes (`repairable=0`: cut in half) is recovered by
    the re-ask; a re-run with the same inputs then makes no call at all (issue 45)."""
    msgs = user("Bo Li met Ann.", True)
    with FakeLlm(repairable=0.0) as srv:
        srv.queue_faults("malformed", None)  # the first answer broken, the re-ask's fine
        first = client(srv, tmp_path)
        [obj] = first.run_many([first.chat_json(msgs, Extraction, stage="j")])
        assert srv.requests == 2 and srv.by_fault["malformed"] == 1
        again = client(srv, tmp_path)
        [same] = again.run_many([again.chat_json(msgs, Extraction, stage="j")])
        assert srv.requests == 2 and again.counters["j"].cache_hits == 1
    assert isinstance(obj, Extraction) and same == obj


def test_faults_at_20_percent_never_raise(tmp_path):
    with FakeLlm(fault_rate=0.2, seed=7, stall_s=1.0) as srv:
        llm = LlmClient(
            settings(srv, timeout_s=0.3, max_retries=3, concurrency=16),
            tmp_path,
            backoff_base_s=0.01,
            backoff_cap_s=0.05,
        )
        texts = [f"Unit {i} mentions Alice and Bob in Berlin." for i in range(50)]
        coros = [llm.chat_json(user(t, True), Extraction, stage="extract") for t in texts]
        results = llm.run_many(coros)
    assert len(results) == 50
    assert all(isinstance(r, Extraction | LlmError) for r in results)
    ok = [r for r in results if isinstance(r, Extraction)]
    assert len(ok) >= 45
    assert all({"Alice", "Bob", "Berlin"} <= {e.name for e in r.entities} for r in ok)
    assert all(r.reason for r in results if isinstance(r, LlmError))
    assert sum(v for k, v in srv.by_fault.items() if k != "none") > 0
    assert llm.counters["extract"].retries > 0


def test_concurrency_bound_respected(tmp_path):
    with FakeLlm(latency_s=0.1) as srv:
        llm = client(srv, tmp_path, concurrency=3)
        results = llm.run_many([llm.chat(user(f"N{i}. x"), stage="c") for i in range(12)])
        assert results == [f"N{i}." for i in range(12)]
        assert srv.max_in_flight == 3


def test_stream_yields_full_text(server, tmp_path):
    llm = client(server, tmp_path)
    text = "Streaming answers arrive piece by piece, in Unicode: café, Ёлка."

    async def collect() -> list[str]:
        return [p async for p in llm.stream(user(text), stage="answer")]

    [pieces] = llm.run_many([collect()])
    assert len(pieces) > 3 and "".join(pieces) == text
    assert llm.counters["answer"].calls == 1 and llm.counters["answer"].completion_tokens > 0
    [again] = llm.run_many([collect()])  # cached: no request
    assert "".join(again) == text and server.requests == 1


def test_stream_retries_before_first_piece(server, tmp_path):
    server.queue_faults("500")
    llm = client(server, tmp_path, cache=False)

    async def collect() -> str:
        return "".join([p async for p in llm.stream(user("Once. Twice."), stage="a")])

    assert llm.run_many([collect()]) == ["Once."]
    assert llm.counters["a"].retries == 1


def test_metadata_and_cost(server, tmp_path):
    llm = client(server, tmp_path, prices={"gpt-4o-mini": (1.0, 2.0)})
    llm.run_many([llm.chat(user("Price me. X."), stage="p")])
    meta = llm.metadata()
    c = llm.counters["p"]
    expected = (c.prompt_tokens * 1.0 + c.completion_tokens * 2.0) / 1e6
    assert meta["llm_calls"] == 1 and meta["llm_cost_usd"] == pytest.approx(expected)
    assert meta["llm_by_stage"]["p"]["calls"] == 1
    json.dumps(meta)  # plain values


def test_no_secret_anywhere(server, tmp_path, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    env_settings = load_settings(environ={})
    assert env_settings.llm.api_key.get_secret_value() == SECRET
    server.queue_faults("429", "500")
    llm = client(server, tmp_path)
    results = llm.run_many(
        [
            llm.chat(user("Secret test. X."), stage="s"),
            llm.chat_json(user("Alice.", True), Extraction, stage="j"),
        ]
    )
    assert not any(isinstance(r, LlmError) for r in results)  # the key reached the server
    assert llm.counters["s"].retries + llm.counters["j"].retries == 2
    bad = LlmClient(settings(server, api_key="wrong", max_retries=0), tmp_path / "b")
    with pytest.raises(LlmAuthError) as refused:  # a wrong key stops the run: see test_llm_trust
        bad.run_many([bad.chat(user("Q."), stage="s")])
    err = refused.value
    assert "401" in str(err)
    blobs = [
        repr(env_settings),
        str(env_settings),
        env_settings.model_dump_json(),
        repr(llm.settings),
        repr(llm),
        json.dumps(llm.metadata()),
        caplog.text,
        str(err),
        *(p.read_text() for p in tmp_path.rglob("*") if p.is_file()),
    ]
    assert any(r.name.startswith("pipeline.llm") for r in caplog.records)  # retries were logged
    for blob in blobs:
        assert SECRET not in blob


def test_cli_fake_llm_serves_until_interrupted(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "fake-llm", "--port", "0", "--seed", "1"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        line = proc.stdout.readline()
        base_url = line.split()[-1]
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        sdk = openai.OpenAI(base_url=base_url, api_key="any", max_retries=0)
        reply = sdk.chat.completions.create(model="m", messages=user("By hand. X."))
        assert reply.choices[0].message.content == "By hand."
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
