"""LLM client throughput: chat calls/s and completion tokens/s of one `LlmClient` at several
concurrencies, against the in-process fake OpenAI-compatible server with a fixed latency.

    python benchmarks/llm_rate.py [--calls 200] [--latency 0.5 0] [--concurrency 1 4 16 64]

docs/scale.md projects LLM-mode wall time as `calls / min(W * L(c), R)`; this measures `L(c)`,
the calls/s one client achieves at concurrency `c` (`llm.concurrency`), and where the client
itself saturates. With a latency `l > 0` the ideal is `L(c) = c / l`; the efficiency column is
the measured rate over that ideal. With latency 0 the rate is the client's and the server's
own overhead on this machine (both run in this process, so they share one GIL: the figure is
a lower bound for the client alone).

Each row: start the fake server (`pipeline.llm.fake_server.FakeLlm`) with the latency,
build a client with the concurrency (disk cache off, no SDK retries, the client's own
retries counted), warm it up with a few untimed calls, then time one `run_many` of distinct
small text prompts (the default responder answers the prompt's first sentence). The number of
calls is rounded up to a multiple of `c` (so the ideal is exactly `c / l`) and capped so that
one row takes at most about `--max-row-s` seconds at the ideal rate. The fake server speaks
HTTP/1.0 (one connection per request, no keep-alive), so every call also pays a TCP
connect on loopback.

The `retries` column counts the client's retries (0 expected).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.config import LlmSettings  # noqa: E402
from pipeline.llm.client import LlmClient  # noqa: E402
from pipeline.llm.errors import LlmError  # noqa: E402
from pipeline.llm.fake_server import FakeLlm  # noqa: E402

STAGE = "rate"
WARMUP_CALLS = 4
MAX_TOKENS = 64


def _messages(run: str, i: int) -> list[dict]:
    """A distinct short prompt: the default responder answers its first sentence."""
    text = f"Call {i} of run {run} says hello. Answer with one short sentence."
    return [{"role": "user", "content": text}]


def _client(server: FakeLlm, concurrency: int, timeout_s: float, retries: int) -> LlmClient:
    settings = LlmSettings(
        enabled=True,
        base_url=server.base_url,
        api_key="fake-key",  # the fake server requires none; never read from a real env here
        chat_model="fake-model",
        concurrency=concurrency,
        timeout_s=timeout_s,
        max_retries=retries,
        max_tokens=MAX_TOKENS,
        cache=False,
    )
    return LlmClient(settings, None)  # no cache folder: every call is a real request


def _n_calls(calls: int, concurrency: int, latency: float, max_row_s: float) -> int:
    """`calls` rounded up to a multiple of the concurrency, capped at about `max_row_s`."""
    waves = math.ceil(calls / concurrency)
    if latency > 0:
        waves = min(waves, max(1, int(max_row_s / latency)))
    return waves * concurrency


def measure(
    server: FakeLlm, concurrency: int, calls: int, latency: float, args: argparse.Namespace
) -> dict:
    client = _client(server, concurrency, args.timeout, args.retries)
    run = uuid.uuid4().hex[:8]
    warm = client.run_many(
        [client.chat(_messages(run + "w", i), stage="warmup") for i in range(WARMUP_CALLS)]
    )
    if any(isinstance(r, LlmError) for r in warm):
        raise SystemExit(f"warm-up call failed: {next(r for r in warm if isinstance(r, LlmError))}")
    server.reset_counters()
    coros = [client.chat(_messages(run, i), stage=STAGE) for i in range(calls)]
    t0 = time.perf_counter()
    results = client.run_many(coros)
    wall = time.perf_counter() - t0
    c = client.counters[STAGE]
    return {
        "latency": latency,
        "concurrency": concurrency,
        "calls": calls,
        "ok": sum(not isinstance(r, LlmError) for r in results),
        "wall": wall,
        "client_calls": c.calls,
        "completion_tokens": c.completion_tokens,
        "retries": c.retries,
        "failures": c.failures,
        "cache_hits": c.cache_hits,
        "server_requests": server.requests,
        "max_in_flight": server.max_in_flight,
    }


HEAD = (
    "| latency s | concurrency | calls | wall s | calls/s | ideal c/latency | efficiency % "
    "| compl. tok/s | peak in flight | retries |"
)


def _row(r: dict) -> str:
    rate = r["client_calls"] / r["wall"]
    tok_s = r["completion_tokens"] / r["wall"]
    if r["latency"] > 0:
        ideal = r["concurrency"] / r["latency"]
        ideal_s, eff_s = f"{ideal:,.1f}", f"{100 * rate / ideal:.0f}"
    else:
        ideal_s, eff_s = "-", "-"
    return (
        f"| {r['latency']:>9g} | {r['concurrency']:>11} | {r['calls']:>5} | {r['wall']:>6.2f} "
        f"| {rate:>7,.1f} | {ideal_s:>15} | {eff_s:>12} | {tok_s:>12,.0f} "
        f"| {r['max_in_flight']:>14} | {r['retries']:>7} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200, help="calls per row (default 200)")
    parser.add_argument(
        "--latency", type=float, nargs="+", default=[0.5, 0.0], help="server latencies, s"
    )
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=[1, 4, 16, 64], help="client concurrencies"
    )
    parser.add_argument(
        "--max-row-s", type=float, default=30.0, help="cap on one row's ideal wall time, s"
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="client timeout_s per request")
    parser.add_argument("--retries", type=int, default=2, help="client max_retries")
    args = parser.parse_args()

    print(
        f"\n## LLM client rate: fake server, {args.calls} calls per row (max {args.max_row_s:g} s)"
    )
    print(HEAD)
    print("|" + "|".join("-" * len(c) for c in HEAD.split("|")[1:-1]) + "|")
    notes: list[str] = []
    for latency in args.latency:
        with FakeLlm(latency_s=latency) as server:
            for conc in args.concurrency:
                n = _n_calls(args.calls, conc, latency, args.max_row_s)
                r = measure(server, conc, n, latency, args)
                print(_row(r), flush=True)
                if r["ok"] != n or r["cache_hits"] or r["server_requests"] != n:
                    notes.append(
                        f"latency {latency:g} concurrency {conc}: {r['ok']}/{n} answered, "
                        f"{r['retries']} retries, {r['failures']} failures, "
                        f"{r['cache_hits']} shared/cached, {r['server_requests']} server requests"
                    )
    for note in notes:
        print(f"note: {note}")
    print(
        "\nRead it as L(c) ≈ c / latency (efficiency near 100 %) until the client saturates; the "
        "latency-0 rows give that ceiling on this machine (client and fake server together), so "
        "use L(c) = min(c / real latency, that ceiling) in docs/scale.md."
    )


if __name__ == "__main__":
    main()
