"""`docgraph serve`: the real uvicorn server on 127.0.0.1 answers every mode with the text
`docgraph query --json` prints, and streams LLM answers (the fake OpenAI-compatible server)."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import uvicorn

from app.cli.main import build_parser
from app.serve.request import QueryRequest, run_query
from app.serve.server import create_app, open_index
from pipeline.config import LlmSettings, load_settings
from pipeline.llm.client import LlmClient
from pipeline.llm.fake_answers import message_text
from pipeline.llm.fake_server import FakeLlm
from pipeline.query import GraphIndex
from pipeline.query.modes import QUERY_MODES

QUESTION = "Who attended the Solvay Conference in Brussels?"
BODIES = {
    "naive": {"query": QUESTION, "top_k": 3},
    "local": {"query": QUESTION},
    "global": {"query": QUESTION, "level": 0},
    "expand": {"query": QUESTION, "max_hops": 2, "edge_types": ["MENTIONS", "RELATED"]},
    "focus": {"query": "niels_bohr.md", "budget": 600},
    "flow": {"query": QUESTION, "quick": True},
}


@contextmanager
def running(index: GraphIndex) -> Iterator[str]:
    """The real server in a thread, on a free port of 127.0.0.1; yields its base URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(index), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def post(url: str, body: dict) -> tuple[int, str, str]:
    """(status, content type, body text) of a JSON POST."""
    data = json.dumps(body).encode("utf-8")
    req = urllib.request.Request(url, data, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.headers["content-type"], resp.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["content-type"], exc.read().decode("utf-8")


@pytest.fixture(scope="module")
def offline(sample_index):
    _, out, _, _ = sample_index
    index = open_index(str(out), load_settings(None, {"output_dir": str(out)}))
    with running(index) as url:
        yield index, url


def test_every_mode_answers_what_the_cli_prints(offline):
    index, url = offline
    for mode in QUERY_MODES:
        status, ctype, text = post(f"{url}/query/{mode}", BODIES[mode])
        assert status == 200 and ctype == "application/json", (mode, text)
        expected = run_query(index, mode, QueryRequest(**BODIES[mode])).to_json(indent=2)
        assert text == expected, mode
        assert json.loads(text)["mode"] == mode


def test_health_and_errors(offline):
    index, url = offline
    with urllib.request.urlopen(f"{url}/health", timeout=10) as resp:
        health = json.loads(resp.read())
    assert health["status"] == "ok" and health["version"] == index.version
    assert health["text_units"] == index.text_units.height > 0 and health["llm"] is False
    status, _, text = post(f"{url}/query/local", {"query": "  "})
    assert status == 400 and "empty query" in json.loads(text)["detail"]
    status, _, text = post(f"{url}/query/naive", {"query": QUESTION, "top_k": 0})
    assert status == 422 and "top_k" in text
    status, _, _ = post(f"{url}/query/naive", {"query": QUESTION, "topk": 3})  # a typo
    assert status == 422
    status, _, _ = post(f"{url}/query/nosuchmode", {"query": QUESTION})
    assert status == 404
    status, _, text = post(f"{url}/query/local", {"query": QUESTION, "publication": ["nope"]})
    assert status == 400 and "unknown publication id nope" in json.loads(text)["detail"]
    # offline, stream is ignored (as in the CLI): the plain JSON result
    status, ctype, text = post(f"{url}/query/naive", {"query": QUESTION, "stream": True})
    assert status == 200 and ctype == "application/json" and json.loads(text)["answer"]


def test_serve_binds_to_loopback_by_default():
    args = build_parser().parse_args(["serve", "--output", "x"])
    assert args.host == "127.0.0.1" and args.port == 8000


def responder(messages: list[dict]) -> str:
    user = message_text(messages[-1])
    line = next((ln for ln in user.splitlines() if "Solvay" in ln), "none")
    return f"FROM CONTEXT: {line[:120]}"


def events(text: str) -> list[tuple[str, str]]:
    """(event, data) pairs of a Server-Sent Events body."""
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((fields["event"], fields["data"]))
    return out


def test_llm_answers_stream_as_server_sent_events(sample_index, tmp_path):
    _, out, _, _ = sample_index
    with FakeLlm(responder=responder) as fake:
        llm = LlmSettings(base_url=fake.base_url, api_key="sk-test", timeout_s=5.0)
        client = LlmClient(llm, tmp_path / "llm-cache", backoff_base_s=0.01)
        index = GraphIndex.open(out, load_settings(), llm=client)
        expected = index.local_search(QUESTION).answer  # the non-streamed LLM answer
        assert expected.startswith("FROM CONTEXT: ") and "Solvay" in expected
        with running(index) as url:
            # naive: not asked before, streamed piece by piece as the fake server writes it;
            # local: the answer above, from the LLM cache (one piece)
            for mode in ("naive", "local"):
                body = {"query": QUESTION, "stream": True}
                status, ctype, text = post(f"{url}/query/{mode}", body)
                assert status == 200 and ctype.startswith("text/event-stream")
                got = events(text)
                pieces = [json.loads(d) for e, d in got if e == "answer"]
                assert pieces and [e for e, _ in got] == ["answer"] * len(pieces) + ["result"]
                result = json.loads(got[-1][1])
                assert result["mode"] == mode and result["answer"] == "".join(pieces)
                assert result["citations"] == []  # as the unstreamed LLM answer's
                assert result["answer"].startswith("FROM CONTEXT: ") and result["context_text"]
                assert len(pieces) > 1 if mode == "naive" else result["answer"] == expected
            status, _, text = post(f"{url}/query/local", {"query": QUESTION})
            assert status == 200 and json.loads(text)["answer"] == expected
