"""Query latency per mode, offline (model loaded, no LLM): p50 / p95 in milliseconds.

    python benchmarks/query_latency.py --musique /tmp/mq/output      # an indexed MuSiQue
    python benchmarks/query_latency.py --synthetic /tmp/syn100k      # built if absent
    python benchmarks/query_latency.py --musique DIR --synthetic DIR --queries 50

Naive search (one matmul over the text unit vectors) is the baseline row of each index.
Every mode runs once per index before timing, so one-off costs (reading tables, building
graph matrices and lookups) are reported separately as "first call" and excluded from the
percentiles, as a long-lived query service (a notebook, an API) would see them; each timed
call embeds its question (the index's query-vector cache is cleared). Questions:
MuSiQue's own; on the synthetic index, questions naming one or two of its entities.
Focus context is timed on note uris (the synthetic index) or section uris (MuSiQue).
Targets (issue 5): local and expand p50 <= 50 ms, focus p50 <= 10 ms at 100k.

Issue 13 point 5 (any output folder, e.g. the sample corpus's):

    python benchmarks/query_latency.py --cold /tmp/cq       # cold `docgraph query`, phases
    python benchmarks/query_latency.py --serve /tmp/cq      # warm p50: HTTP vs in-process

--cold runs `docgraph query local` in a new interpreter each time, with the fast path (the
ONNX query embedder and the vector copies) and without it (an empty XDG_CACHE_HOME and no
copies: sentence-transformers and lancedb, as before), plus a breakdown of one cold run.
--serve starts `docgraph serve` on 127.0.0.1 and times each mode over HTTP (one kept-alive
connection) against the same call in this process.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.query import GraphIndex  # noqa: E402

MUSIQUE = ROOT.parent / "shared" / "data" / "musique" / "musique_train.json"


def _modes(idx: GraphIndex) -> dict[str, Callable[[str], object]]:
    return {
        "naive (baseline)": idx.naive_search,
        "local": idx.local_search,
        "global": idx.global_search,
        "expand": idx.expand_search,
        "flow": idx.flow_search,
        "flow quick": lambda q: idx.flow_search(q, quick=True),
        "focus": idx.focus_context,
    }


def time_index(name: str, idx: GraphIndex, questions: list[str], uris: list[str]) -> list[dict]:
    rows = []
    for mode, fn in _modes(idx).items():
        inputs = uris if mode == "focus" else questions
        t = time.perf_counter()
        fn(inputs[0])
        first = (time.perf_counter() - t) * 1000
        ms = []
        for q in inputs:
            idx._query_vectors.clear()  # every timed call embeds its question
            t = time.perf_counter()
            fn(q)
            ms.append((time.perf_counter() - t) * 1000)
        rows.append(
            {
                "index": name,
                "mode": mode,
                "n": len(ms),
                "first call ms": round(first),
                "p50 ms": round(float(np.percentile(ms, 50)), 1),
                "p95 ms": round(float(np.percentile(ms, 95)), 1),
            }
        )
        print(f"  {name} {mode}: p50 {rows[-1]['p50 ms']} ms", file=sys.stderr, flush=True)
    return rows


def musique_inputs(idx: GraphIndex, n: int) -> tuple[list[str], list[str]]:
    questions = [q["question"] for q in json.loads(MUSIQUE.read_text(encoding="utf-8"))][:n]
    secs = idx.table("sections").filter(pl.col("uri").is_not_null())
    return questions, secs["uri"].sample(min(n, secs.height), seed=0).to_list()


def synthetic_inputs(idx: GraphIndex, n: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(1)
    titles = idx.entities["title"].to_list()
    pick = rng.integers(0, len(titles), (n, 2))
    questions = [
        f"How is {titles[a].title()} related to {titles[b].title()}?"
        if i % 2
        else f"What is known about {titles[a].title()}?"
        for i, (a, b) in enumerate(pick)
    ]
    secs = idx.table("sections").filter(pl.col("component_type") == "NOTE")
    return questions, secs["uri"].sample(min(n, secs.height), seed=0).to_list()


# One cold run, phase by phase, in a fresh interpreter (argv: output folder, question).
COLD_PHASES = r"""
import json, sys, time
t0, marks = time.perf_counter(), {}
def mark(name):
    global t0
    now = time.perf_counter(); marks[name] = round((now - t0) * 1000); t0 = now
import app.cli.main
mark("import cli ms")
from pipeline.config import load_settings
from pipeline.query import GraphIndex
mark("import query ms")
idx = GraphIndex.open(sys.argv[1], load_settings(None, {"output_dir": sys.argv[1]}))
idx.text_units
mark("open + tables ms")
idx.unit_vectors, idx.entity_vectors
mark("vectors ms")
idx.embed_query(sys.argv[2])
mark("embedder + encode ms")
result = idx.local_search(sys.argv[2])
mark("local search ms")
result.to_json(indent=2)
mark("json ms")
print(json.dumps({"embedder": type(idx.embedder).__name__, **marks}))
"""
QUESTION = "Who did Einstein work with?"


def cold(out: Path, runs: int) -> list[dict]:
    from app.cli.indexing import _prepare_queries
    from pipeline.config import load_settings
    from pipeline.vectors import vector_copies as vector_cache

    _prepare_queries(load_settings(None, {"output_dir": str(out)}))  # ONNX + copies
    cli = [sys.executable, "-m", "app.cli", "query", "--output", str(out), "local", QUESTION]
    rows = []
    for label, slow in (("ONNX + vector copies", False), ("torch + lancedb (before)", True)):
        env = dict(os.environ, XDG_CACHE_HOME=tempfile.mkdtemp()) if slow else dict(os.environ)
        walls, cpus = [], []
        for _ in range(runs + 1):
            if slow:  # no copies: this run reads through lancedb (and writes them again)
                shutil.rmtree(out / vector_cache.CACHE_DIR, ignore_errors=True)
            t, before = time.perf_counter(), _child_cpu()
            subprocess.run(cli, env=env, check=True, capture_output=True)
            walls.append(time.perf_counter() - t)
            cpus.append(_child_cpu() - before)
        if slow:
            shutil.rmtree(out / vector_cache.CACHE_DIR, ignore_errors=True)
        phases = subprocess.run(
            [sys.executable, "-c", COLD_PHASES, str(out), QUESTION],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        rows.append(
            {
                "path": label,
                "cold p50 s": round(statistics.median(walls[1:]), 2),  # the first warms disk
                "min s": round(min(walls[1:]), 2),
                # CPU seconds: what the wall time is on an idle machine (one busy thread)
                "cpu p50 s": round(statistics.median(cpus[1:]), 2),
                **json.loads(phases.stdout.splitlines()[-1]),
            }
        )
        print(f"  cold {label}: {rows[-1]['cold p50 s']} s", file=sys.stderr, flush=True)
    _prepare_queries(load_settings(None, {"output_dir": str(out)}))  # copies back
    return rows


def _child_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def serve_latency(out: Path, n: int) -> list[dict]:
    """Warm p50 per mode: `docgraph serve` in its own process over one kept-alive HTTP
    connection, against the same call in this process; every call asks a question neither
    side has seen (no query-vector cache hit on either side)."""
    import socket

    from app.serve.request import QueryRequest, run_query
    from app.serve.server import open_index
    from pipeline.config import load_settings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "app.cli", "serve", "--output", str(out), "--port", str(port)]
    server = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    index = open_index(str(out), load_settings(None, {"output_dir": str(out)}))
    uri = index.table("sections").filter(pl.col("uri").is_not_null())["uri"][0]
    modes = ("naive", "local", "global", "expand", "flow", "focus")
    try:
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port)
                conn.request("GET", "/health")
                conn.getresponse().read()
                break
            except OSError:
                assert server.poll() is None, "docgraph serve exited"
                time.sleep(0.2)
        rows = []
        for mode in modes:
            inproc, http_ms = [], []
            for i in range(n + 1):  # the first call of each mode pays its one-off reads
                body = {"query": uri if mode == "focus" else f"{QUESTION} ({mode} {i})"}
                t = time.perf_counter()
                run_query(index, mode, QueryRequest(**body)).to_json(indent=2)
                inproc.append((time.perf_counter() - t) * 1000)
                headers = {"Content-Type": "application/json"}
                t = time.perf_counter()
                conn.request("POST", f"/query/{mode}", json.dumps(body), headers)
                resp = conn.getresponse()
                resp.read()
                http_ms.append((time.perf_counter() - t) * 1000)
                assert resp.status == 200, (mode, resp.status)
            p50_in, p50_http = statistics.median(inproc[1:]), statistics.median(http_ms[1:])
            rows.append(
                {
                    "mode": mode,
                    "n": n,
                    "in-process p50 ms": round(p50_in, 1),
                    "HTTP p50 ms": round(p50_http, 1),
                    "HTTP - in-process ms": round(p50_http - p50_in, 1),
                }
            )
    finally:
        server.terminate()
        server.wait()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--musique", type=Path, help="output folder of an indexed MuSiQue corpus")
    ap.add_argument("--synthetic", type=Path, help="synthetic index folder (built if absent)")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--cold", type=Path, help="an output folder: cold `docgraph query` times")
    ap.add_argument("--serve", type=Path, help="an output folder: HTTP vs in-process p50")
    ap.add_argument("--runs", type=int, default=5, help="--cold: runs per path")
    args = ap.parse_args()
    if args.cold or args.serve:
        if args.cold:
            print(pl.DataFrame(cold(args.cold, args.runs)))
        if args.serve:
            print(pl.DataFrame(serve_latency(args.serve, args.queries)))
        return
    if not args.musique and not args.synthetic:
        ap.error("give --musique and/or --synthetic, or --cold / --serve")
    rows: list[dict] = []
    embedder = None
    if args.musique:
        idx = GraphIndex.open(args.musique)
        embedder = idx.embedder
        questions, uris = musique_inputs(idx, args.queries)
        rows += time_index("musique", idx, questions, uris)
    if args.synthetic:
        if not (args.synthetic / "synthetic.json").exists():
            from benchmarks.synthetic_index import build

            t = time.perf_counter()
            build(args.synthetic)
            print(f"built {args.synthetic} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        idx = GraphIndex.open(args.synthetic, embedder=embedder)
        counts = json.loads((args.synthetic / "synthetic.json").read_text())
        name = f"synthetic {counts['entities'] // 1000}k"
        questions, uris = synthetic_inputs(idx, args.queries)
        rows += time_index(name, idx, questions, uris)
    print(pl.DataFrame(rows))


if __name__ == "__main__":
    pl.Config.set_tbl_rows(50)
    pl.Config.set_tbl_hide_dataframe_shape(True)
    pl.Config.set_tbl_cols(20)
    pl.Config.set_tbl_width_chars(240)
    main()
