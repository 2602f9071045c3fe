"""The BM25 side's library: bm25s (what pipeline/lexical uses) against Lance's own full-text
index, on the same texts, each in a process of its own (peak RSS is per process).

    python benchmarks/lexical.py                 # 45,000 units (~40k documents' worth)
    python benchmarks/lexical.py --units 100000

Texts: MuSiQue passages (title + text), repeated with a unique suffix each up to `--units`
(the 40k-document scale run holds 44,785 text units). Queries: MuSiQue's 100 questions.
Reported per library: build seconds (analysis included: bm25s through docgraph's analyser,
Lance through its own English stemming tokenizer), the index's size on disk, the process's
peak RSS, and ms per query: a top-10 for Lance, a score for every unit for bm25s (what the
query modes mix with the cosine).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data" / "musique"


def texts_and_questions(n: int) -> tuple[list[str], list[str]]:
    corpus = json.loads((DATA / "musique_train_corpus.json").read_text(encoding="utf-8"))
    base = [p["title"] + "\n" + p["text"] for p in corpus]
    texts = [f"{base[i % len(base)]} v{i}" for i in range(n)]
    questions = json.loads((DATA / "musique_train.json").read_text(encoding="utf-8"))
    return texts, [q["question"] for q in questions]


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def run_bm25s(texts: list[str], questions: list[str], work: Path) -> dict:
    import polars as pl

    from pipeline.lexical.bm25 import LexicalIndex

    t0 = time.perf_counter()
    index = LexicalIndex.build([str(i) for i in range(len(texts))], pl.Series(texts))
    index.save(work / "bm25s")
    built = time.perf_counter() - t0
    index = LexicalIndex.load(work / "bm25s")
    index.scores(questions[0])
    t0 = time.perf_counter()
    for q in questions:
        index.scores(q)
    return {"build_s": built, "disk_mb": folder_mb(work / "bm25s"), "query_ms": _ms(t0, questions)}


def run_lance(texts: list[str], questions: list[str], work: Path) -> dict:
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS

    t0 = time.perf_counter()
    db = lancedb.connect(str(work / "lance"))
    table = db.create_table(
        "units", data=pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})
    )
    table.create_index("text", config=FTS(with_position=False, stem=True, language="English"))
    built = time.perf_counter() - t0
    table.search(questions[0], query_type="fts").limit(10).to_list()
    t0 = time.perf_counter()
    for q in questions:
        table.search(q, query_type="fts").limit(10).to_list()
    return {"build_s": built, "disk_mb": folder_mb(work / "lance"), "query_ms": _ms(t0, questions)}


def _ms(t0: float, questions: list[str]) -> float:
    return (time.perf_counter() - t0) * 1000 / len(questions)


def one(library: str, n: int) -> None:
    """Run one library in this process and print its figures as JSON."""
    texts, questions = texts_and_questions(n)
    with tempfile.TemporaryDirectory(prefix="lexical-") as tmp:
        figures = (run_bm25s if library == "bm25s" else run_lance)(texts, questions, Path(tmp))
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(figures))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--units", type=int, default=45_000)
    ap.add_argument("--one", choices=["bm25s", "lance"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return one(args.one, args.units)
    print(f"{args.units:,} units, 100 MuSiQue questions\n")
    print("| library | build s | on disk MB | peak RSS MB | ms / query |")
    print("|---|---:|---:|---:|---:|")
    for library in ("bm25s", "lance"):
        out = (
            subprocess.run(
                [sys.executable, __file__, "--one", library, "--units", str(args.units)],
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        f = json.loads(out)
        print(
            f"| {library} | {f['build_s']:.1f} | {f['disk_mb']:.0f} | {f['peak_rss_mb']:.0f} | "
            f"{f['query_ms']:.1f} |"
        )


if __name__ == "__main__":
    main()
