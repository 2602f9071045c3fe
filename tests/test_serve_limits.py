"""`docgraph serve` bounds every request (issue 45): a huge body is 413 at once and costs the
next query nothing, a long field is 422, no message echoes more than a prefix of the input,
and 8 clients × 25 queries all get answers; the real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import http.client
import json
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest
import test_serve
from test_serve import QUESTION, post, running

from app.serve.limits import Busy, WorkSlots, shorten
from app.serve.server import open_index
from pipeline.config import load_settings
from pipeline.config.serve import ServeSettings

offline = test_serve.offline  # the fixture: the real server over the sample index
LIMITS = ServeSettings()
MAX_MESSAGE = 1000  # a whole error body, well over what any bound lets through


def connect(url: str) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)


def timed_query(url: str) -> float:
    started = time.perf_counter()
    status, _, text = post(f"{url}/query/local", {"query": QUESTION})
    assert status == 200, text
    return time.perf_counter() - started


def test_a_10_mb_body_is_413_at_once_and_the_next_query_is_as_fast(offline):
    _, url = offline
    usual = statistics.median(timed_query(url) for _ in range(5))
    body = json.dumps({"query": "radium " * 1_500_000}).encode("utf-8")  # 10.5 MB
    conn = connect(url)
    started = time.perf_counter()
    conn.request("POST", "/query/local", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    text = resp.read().decode("utf-8")
    took = time.perf_counter() - started
    assert resp.status == 413 and resp.headers["content-type"] == "application/json"
    assert "serve.max_body_bytes" in json.loads(text)["detail"] and len(text) < MAX_MESSAGE
    assert took < 0.1, f"413 after {took * 1000:.0f} ms"
    conn.close()
    after = statistics.median(timed_query(url) for _ in range(5))
    assert after < max(2 * usual, usual + 0.05), (usual, after)


def test_a_chunked_body_over_the_bound_is_413(offline):
    _, url = offline
    piece = b" " * 65536
    pieces = [b'{"query": "', *[piece] * (LIMITS.max_body_bytes // len(piece) + 2), b'"}']
    conn = connect(url)
    conn.request(
        "POST",
        "/query/naive",
        iter(pieces),
        {"Content-Type": "application/json"},
        encode_chunked=True,
    )
    resp = conn.getresponse()
    assert resp.status == 413 and "max_body_bytes" in resp.read().decode("utf-8")
    conn.close()
    status, _, _ = post(f"{url}/query/naive", {"query": QUESTION})
    assert status == 200


def test_a_long_query_is_422_quoting_only_its_beginning(offline):
    _, url = offline
    query = "Who attended the Solvay Conference? " * 3000  # 108,000 characters, under 1 MiB
    status, _, text = post(f"{url}/query/naive", {"query": query})
    detail = json.loads(text)["detail"]
    assert status == 422 and "serve.max_query_chars" in detail, text[:300]
    assert f"{len(query)} characters" in detail and len(text) < MAX_MESSAGE
    status, _, text = post(f"{url}/query/local", {"query": QUESTION, "publication": ["x" * 300]})
    assert status == 422 and "serve.max_name_chars" in text and len(text) < MAX_MESSAGE


def test_an_unknown_focus_uri_is_400_quoting_only_its_beginning(offline):
    _, url = offline
    uri = "no/such/note-" + "abcdefghij" * 150 + ".md"  # 1,516 characters: under the bound
    status, _, text = post(f"{url}/query/focus", {"query": uri})
    assert status == 400 and "no note or section with uri" in text
    assert uri not in text and len(text) < MAX_MESSAGE


def test_a_malformed_body_is_422_quoting_only_a_prefix(offline):
    _, url = offline
    long = "z" * 50_000
    for body, field in (
        ({"query": QUESTION, "top_k": long}, "top_k"),  # FastAPI echoes the input whole
        ({"query": QUESTION, long: 1}, "zzzz"),  # an unknown key: its name
    ):
        status, _, text = post(f"{url}/query/naive", body)
        assert status == 422 and field in text and len(text) < MAX_MESSAGE, text[:300]


def test_8_clients_25_queries_each_all_answered(offline):
    _, url = offline
    bodies = [{"query": QUESTION}, {"query": "radium polonium"}, {"query": "Niels Bohr atom"}]

    def client(n: int) -> list[int]:
        modes = ("naive", "local", "expand")
        return [post(f"{url}/query/{modes[(n + i) % 3]}", bodies[i % 3])[0] for i in range(25)]

    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        statuses = [s for got in pool.map(client, range(8)) for s in got]
    took = time.perf_counter() - started
    assert statuses == [200] * 200, f"{sum(s != 200 for s in statuses)} errors in {took:.1f} s"


def test_every_slot_busy_and_the_queue_full_is_503_with_retry_after(sample_index):
    _, out, _, _ = sample_index
    bounds = {"max_concurrent_queries": 1, "max_queued_queries": 0}  # from the settings
    settings = load_settings(None, {"output_dir": str(out), "serve": bounds}, environ={})
    start = threading.Barrier(8)

    def client(url: str) -> list[tuple[int, str | None, str]]:
        start.wait()
        got = []
        for _ in range(5):
            conn = connect(url)
            body = json.dumps({"query": QUESTION})
            conn.request("POST", "/query/local", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            got.append((resp.status, resp.headers["retry-after"], resp.read().decode("utf-8")))
            conn.close()
        return got

    with running(open_index(str(out), settings)) as url, ThreadPoolExecutor(8) as pool:
        answers = [a for got in pool.map(client, [url] * 8) for a in got]
    busy = [a for a in answers if a[0] == 503]
    assert busy and len(busy) < len(answers) and {a[0] for a in answers} == {200, 503}
    for _, retry_after, text in busy:
        assert retry_after == "1" and "serve.max_queued_queries" in json.loads(text)["detail"]


def test_work_slots_queue_a_bounded_time_then_answer_busy():
    async def scenario() -> None:
        slots = WorkSlots(1, max_queued=1, wait_s=0.2)
        async with slots.slot():
            started = time.monotonic()
            with pytest.raises(Busy, match="no query slot came free in 0.2 s"):
                async with slots.slot():
                    pass
            assert time.monotonic() - started >= 0.2
            waiter = asyncio.create_task(_hold(slots))
            await asyncio.sleep(0.01)  # it waits: the queue is full now
            with pytest.raises(Busy, match=r"the queue \(1\) is full"):
                async with slots.slot():
                    pass
        await waiter  # the slot came free: the waiter ran
        async with slots.slot():
            pass

    asyncio.run(scenario())


async def _hold(slots: WorkSlots) -> None:
    async with slots.slot():
        pass


def test_shorten_keeps_a_prefix_and_says_the_length():
    assert shorten("short") == "short"
    long = shorten("x" * 10_000)
    assert long.startswith("x" * 60 + "…") and "10000 characters" in long and len(long) < 100
