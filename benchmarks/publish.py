"""What versioned publishing costs: the run's staging, checks and publish steps next to the
whole index time, and the per-search manifest check next to a search.

    python benchmarks/publish.py [--corpus musique|christmas_carol] [--work DIR]

Indexes the corpus (fresh folder), re-indexes it unchanged (the nightly case), then times
the pieces of publishing on the result: staging a version as links of the current one
(`store.begin`), the Lance-vs-Parquet check, the rename + manifest swap + prune, and the
`GraphIndex.latest()` stat each search makes, against a naive search.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.throughput import CORPORA  # noqa: E402


def _step_seconds(result) -> dict[str, float]:
    """Seconds per step of a run (its step success events carry their duration)."""
    return {
        e.step_key: e.event_specific_data.duration_ms / 1000
        for e in result.get_step_success_events()
    }


def _best(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="musique", choices=sorted(CORPORA))
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args(argv)

    from app.run import run_index
    from pipeline.query import GraphIndex
    from pipeline.storage import store, validate

    work = args.work or Path(tempfile.mkdtemp(prefix="publish-bench-"))
    inp, out = work / "input", work / "output"
    shutil.rmtree(work / "input", ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    CORPORA[args.corpus](inp)

    rows = []
    for label in ("first index (cold caches)", "re-index, unchanged input"):
        t = time.perf_counter()
        result = run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR")
        total = time.perf_counter() - t
        assert result.success
        steps = _step_seconds(result)
        checks = sum(v for k, v in steps.items() if k.endswith("_integrity"))
        rows.append((label, total, steps.get("published_index", 0.0), checks))

    units = store.read_table(out, "text_units").height
    print(f"corpus {args.corpus}: {units} text units, output {out}\n")
    print("| run | whole run s | published_index s | integrity checks s |")
    print("|---|---|---|---|")
    for label, total, publish, checks in rows:
        print(f"| {label} | {total:.1f} | {publish:.3f} | {checks:.2f} |")

    # the pieces, on a copy of the output (the lock is not needed: nobody else writes it)
    copy = work / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(out, copy)
    n = [0]

    def stage_and_publish() -> None:
        n[0] += 1
        store.begin(copy, f"bench-{n[0]:04d}")
        store.publish(copy, f"bench-{n[0]:04d}", keep=2)

    stage = _best(lambda: (store.begin(copy, "bench-stage"), shutil.rmtree(copy / "staging")))
    check = _best(lambda: validate.lance_problems(copy))
    cycle = _best(stage_and_publish)
    print("\n| piece | best of 5, ms |")
    print("|---|---|")
    print(f"| stage a version as links of the current one (store.begin) | {stage * 1e3:.1f} |")
    print(f"| Lance-vs-Parquet check (validate.lance_problems) | {check * 1e3:.1f} |")
    print(f"| stage + rename + manifest swap + prune (store.begin + publish) | {cycle * 1e3:.1f} |")

    index = GraphIndex.open(out)
    query = "Who founded the company that made the first commercial airliner?"
    index.naive_search(query)  # warm: tables, vectors, model, query vector
    search = [_best(lambda: index.naive_search(query), 1) for _ in range(50)]
    latest = _best(lambda: [index.latest() for _ in range(10_000)], 3) / 10_000
    print("\n| per search | µs |")
    print("|---|---|")
    print(f"| naive search (warm, p50 of 50) | {statistics.median(search) * 1e6:.0f} |")
    print(f"| GraphIndex.latest(): the manifest stat each search makes | {latest * 1e6:.1f} |")


if __name__ == "__main__":
    main()
