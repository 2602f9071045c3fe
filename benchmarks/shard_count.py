"""How the shard count (`storage.shards`) trades a full run's overhead against the work an
incremental run redoes:

    python benchmarks/shard_count.py [--shards 1 4 16 64] [--corpus musique|sample]

For each count, the corpus is indexed into a fresh folder (a full run: every shard), then one
file is edited and indexed again (its shard and the tail). Printed: both wall times, the
documents the edit run re-parsed (its shard's), and the Dagster events the full run wrote
(one planned and one actual materialization per shard and per-document asset).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.throughput import SHARED, write_musique  # noqa: E402


def write_sample(target: Path) -> None:
    from app.cli.demo import write_sample_corpus

    write_sample_corpus(target)


CORPORA = {"musique": write_musique, "sample": write_sample}


def bench(n: int, inp: Path, work: Path) -> dict:
    from dagster import DagsterInstance

    from app.run import run_index
    from pipeline.ingest import shards
    from pipeline.storage import store

    out = work / f"out{n}"
    config = work / f"shards{n}.yaml"
    config.write_text(f"storage:\n  shards: {n}\n")
    instance = DagsterInstance.ephemeral()
    started = time.perf_counter()
    full = run_index(str(config), str(inp), str(out), instance=instance, log_level="ERROR")
    full_s = time.perf_counter() - started
    assert full.success
    events = len(instance.all_logs(full.run_id))
    target = sorted(inp.rglob("*.*"))[len(list(inp.rglob("*.*"))) // 2]
    target.write_text(target.read_text(encoding="utf-8") + "\nOne more sentence.\n")
    rel = target.relative_to(inp).as_posix()
    started = time.perf_counter()
    edit = run_index(str(config), str(inp), str(out), instance=instance, log_level="ERROR")
    edit_s = time.perf_counter() - started
    assert edit.success
    docs = store.read_table(out, "documents")
    shard = shards.shard_of(rel, n)
    redone = sum(shards.shard_of(p, n) == shard for p in docs["source_path"])
    return {"n": n, "full_s": full_s, "edit_s": edit_s, "redone": redone, "events": events}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shards", nargs="+", type=int, default=[1, 4, 16, 64])
    parser.add_argument("--corpus", choices=list(CORPORA), default="musique")
    args = parser.parse_args()
    if args.corpus == "musique" and not SHARED.is_dir():
        raise SystemExit(f"the musique corpus needs {SHARED}")
    work = Path(tempfile.mkdtemp(prefix="docgraph-shards-"))
    rows = []
    for n in args.shards:  # a fresh copy of the corpus each time: the edit changes it
        inp = work / f"in{n}"
        CORPORA[args.corpus](inp)
        rows.append(bench(n, inp, work))
    shutil.rmtree(work, ignore_errors=True)
    print(f"\n## {args.corpus}: full run vs one-file edit, by shard count")
    print("| shards | full run s | edit run s | docs re-parsed by the edit | events (full run) |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']} | {r['full_s']:.1f} | {r['edit_s']:.1f} | {r['redone']} | {r['events']} |"
        )


if __name__ == "__main__":
    main()
