"""Passage retrieval on MuSiQue (100 multi-hop questions, 1,890 passages): naive, local, expand.

    python benchmarks/retrieval.py                      # index into a temp folder, evaluate
    python benchmarks/retrieval.py --work /tmp/mq       # keep the index in /tmp/mq/output
    python benchmarks/retrieval.py --output DIR         # evaluate an existing index
    python benchmarks/retrieval.py --work /tmp/mq --reindex

Each corpus passage is one document, `<work>/input/{i:05d}.txt` = title + "\\n" + text,
indexed by the same asset graph `docgraph index` runs (assets.run.run_index). Gold
passages are the paragraphs with is_supporting == true, matched to the corpus on
(title, text). Recall@k per question = |gold ∩ top-k distinct passages| / |gold|,
averaged, x100. Ranked text units map to passages through document -> source_path.
Reference (data README): dense all-MiniLM-L6-v2 R@2 47.2, R@5 62.2, R@10 70.3.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data" / "musique"
KS = (2, 5, 10)
MODES = ("naive", "local", "expand")


def load_musique(data: Path = DATA) -> tuple[list[dict], list[dict], list[set[int]]]:
    corpus = json.loads((data / "musique_train_corpus.json").read_text(encoding="utf-8"))
    questions = json.loads((data / "musique_train.json").read_text(encoding="utf-8"))
    by_key: dict[tuple[str, str], list[int]] = {}
    for i, p in enumerate(corpus):
        by_key.setdefault((p["title"], p["text"]), []).append(i)
    gold: list[set[int]] = []
    for q in questions:
        g: set[int] = set()
        for p in q["paragraphs"]:
            if p["is_supporting"]:
                g.update(by_key.get((p["title"], p["paragraph_text"]), []))
        gold.append(g)
    return corpus, questions, gold


def write_inputs(corpus: list[dict], input_dir: Path) -> None:
    input_dir.mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(corpus):
        path = input_dir / f"{i:05d}.txt"
        text = p["title"] + "\n" + p["text"]
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def build_index(work: Path) -> Path:
    from assets.run import run_index

    corpus, _, _ = load_musique()
    write_inputs(corpus, work / "input")
    t0 = time.perf_counter()
    run_index(input_dir=str(work / "input"), output_dir=str(work / "output"))
    print(f"indexed {len(corpus)} passages in {time.perf_counter() - t0:.1f} s -> {work}/output")
    return work / "output"


def unit_to_passage(output: Path) -> dict[str, int]:
    """text unit id -> corpus passage index, via the unit's document's source file name."""
    from pipeline import store

    units = store.read_table(output, "text_units").select("id", "document_id")
    docs = store.read_table(output, "documents").select(
        pl.col("id").alias("document_id"), "source_path"
    )
    joined = units.join(docs, on="document_id", how="left")
    out: dict[str, int] = {}
    for uid, src in zip(joined["id"].to_list(), joined["source_path"].to_list(), strict=True):
        m = re.search(r"(\d{5})\.txt$", src or "")
        if m:
            out[uid] = int(m.group(1))
    return out


def evaluate(index, questions, gold, u2p, mode: str, depth: int = 30, **kwargs):
    """(recall@k dict, ms/query, per-question top-10 passages) for one search mode."""
    search = getattr(index, f"{mode}_search")
    search(questions[0]["question"], top_k=depth, **kwargs)  # warm caches (graph, vectors)
    sums = {k: 0.0 for k in KS}
    ranked_all: list[list[int]] = []
    t0 = time.perf_counter()
    for q, g in zip(questions, gold, strict=True):
        res = search(q["question"], top_k=depth, **kwargs)
        ranked: list[int] = []
        for uid in res.text_unit_ids:
            p = u2p.get(uid)
            if p is not None and p not in ranked:
                ranked.append(p)
        ranked_all.append(ranked[:10])
        for k in KS:
            sums[k] += len(g & set(ranked[:k])) / len(g) if g else 0.0
    ms = (time.perf_counter() - t0) * 1000 / len(questions)
    return {k: 100 * v / len(questions) for k, v in sums.items()}, ms, ranked_all


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--output", type=Path, help="evaluate this existing index folder")
    ap.add_argument("--work", type=Path, help="work folder (input/ and output/ inside)")
    ap.add_argument("--reindex", action="store_true", help="re-run indexing into --work")
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args(argv)

    from pipeline import store
    from pipeline.config import load_settings
    from pipeline.query import GraphIndex

    corpus, questions, gold = load_musique()
    if args.output:
        output = args.output
    else:
        work = args.work or Path(tempfile.mkdtemp(prefix="musique-"))
        output = work / "output"
        if args.reindex or not store.is_index(output):
            output = build_index(work)
    settings = load_settings(overrides={"output_dir": str(output)})
    index = GraphIndex.open(output, settings)
    u2p = unit_to_passage(output)
    print(
        f"index {output}: {index.text_units.height} text units, {index.entities.height} "
        f"entities, {index.relationships.height} relationships; "
        f"{len(questions)} questions, {sum(map(len, gold))} gold passages"
    )
    rows = []
    for mode in args.modes.split(","):
        rec, ms, _ = evaluate(index, questions, gold, u2p, mode)
        rows.append((mode, rec, ms))
    print()
    print("| mode   | R@2  | R@5  | R@10 | ms/query |")
    print("|--------|------|------|------|----------|")
    for mode, rec, ms in rows:
        print(f"| {mode:<6} | {rec[2]:4.1f} | {rec[5]:4.1f} | {rec[10]:4.1f} | {ms:8.1f} |")
    print("\nreference dense MiniLM (data README): R@2 47.2, R@5 62.2, R@10 70.3")


if __name__ == "__main__":
    main()
