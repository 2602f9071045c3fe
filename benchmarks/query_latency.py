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
"""

from __future__ import annotations

import argparse
import json
import sys
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--musique", type=Path, help="output folder of an indexed MuSiQue corpus")
    ap.add_argument("--synthetic", type=Path, help="synthetic index folder (built if absent)")
    ap.add_argument("--queries", type=int, default=40)
    args = ap.parse_args()
    if not args.musique and not args.synthetic:
        ap.error("give --musique and/or --synthetic")
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
    main()
