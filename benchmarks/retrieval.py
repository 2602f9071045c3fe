"""Passage retrieval on MuSiQue (100 multi-hop questions, 1,890 passages), every query mode;
or on another set (`--data`): HippoRAG's layout (HotpotQA, 2WikiMultihopQA) or the common form
of ../shared/data (`norm_corpus.json` + `norm_questions.json`: grb_novel, xquad_ru, ...).

    python benchmarks/retrieval.py --data ../shared/data/grb_novel --work /tmp/grb

    python benchmarks/retrieval.py                      # index into a temp folder, evaluate
    python benchmarks/retrieval.py --work /tmp/mq       # keep the index in /tmp/mq/output
    python benchmarks/retrieval.py --output DIR         # evaluate an existing index
    python benchmarks/retrieval.py --work /tmp/mq --reindex
    python benchmarks/retrieval.py --output DIR --modes dense,local --budgets ""
    python benchmarks/retrieval.py --data DIR [--name hotpotqa_train] --work /tmp/hq

Each corpus passage is one document, `<work>/input/{i:05d}.txt` = title + "\\n" + text,
indexed by the same asset graph `docgraph index` runs (app.run.run_index). Gold
passages are the paragraphs with is_supporting == true, matched to the corpus on
(title, text). Recall@k per question = |gold ∩ top-k distinct passages| / |gold|,
averaged, x100. Ranked text units map to passages through document -> source_path.

Modes: `bm25` is the lexical reference, computed in the same run: bm25s over each passage's
title + "\\n" + text with the index's own analyser (pipeline/lexical); `dense` is the
issue's reference, computed in the same run: the index's embedding
model (all-MiniLM-L6-v2) over each passage's title + "\\n" + text, cosine, one ranking per
passage (vectors cached next to the index); `naive` is the index's own hybrid search over
text units (the same text, chunked), `naive_dense` the same with `query.lexical_weight: 0`
(the dense side alone); local, expand, flow, flow_quick are the graph modes.
Every search runs with the default settings (top_k_units 10), as a user would get them, so
"ctx tok" is the mean context an LLM would be given. Rows: all questions; on MuSiQue also
the first 50 ("tune": the only ones any weight was chosen on) and the last 50 ("held out").
Another set (`--data DIR`: `<name>.json` and `<name>_corpus.json`, see `load_dataset`) is
held out as a whole: no weight was chosen on it. The paired bootstrap (10,000 resamples of
the questions, seed 0) gives each mode's R@5 minus dense's with a 95% percentile interval.
The budget curve runs local at several context budgets and scores only the text units that
made it into the context (R@5 and all-gold-in-context).
Reference (data README): dense all-MiniLM-L6-v2 R@2 47.2, R@5 62.2, R@10 70.3.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data" / "musique"
KS = (2, 5, 10)
MODES = ("bm25", "dense", "naive_dense", "naive", "local", "expand", "flow", "flow_quick")
NORM_CORPUS, NORM_QUESTIONS = "norm_corpus.json", "norm_questions.json"
SPLITS = (("all", slice(0, None)), ("tune", slice(0, 50)), ("held out", slice(50, None)))
MUSIQUE = "musique_train"
BUDGETS = (1000, 1500, 2000, 2500, 4000, 8000)
RESAMPLES = 10_000


def dataset_name(data: Path) -> str:
    """The question set in folder `data`: the `<name>` of its one `<name>_corpus.json`, or
    the folder's name for a set in the common form."""
    if (data / NORM_CORPUS).is_file():
        return data.name
    names = sorted(p.name.removesuffix("_corpus.json") for p in data.glob("*_corpus.json"))
    names = [n for n in names if (data / f"{n}.json").is_file()]
    if len(names) != 1:
        raise SystemExit(
            f"{data}: expected one <name>.json with its <name>_corpus.json, found "
            f"{names or 'none'}; name the set with --name"
        )
    return names[0]


def load_dataset(
    data: Path = DATA, name: str | None = None
) -> tuple[list[dict], list[dict], list[set[int]]]:
    """(corpus [{title, text}], questions, gold passage indices per question) of a multi-hop
    set in HippoRAG's layout: `<name>.json` and `<name>_corpus.json`. The corpus is a list of
    {title, text} (MuSiQue, 2WikiMultihopQA) or a mapping title -> its sentences (HotpotQA).
    A question's gold passages are its paragraphs with is_supporting (MuSiQue, matched on
    title and text together: titles repeat) or the passages titled in its supporting_facts
    (HotpotQA, 2WikiMultihopQA)."""
    if (data / NORM_CORPUS).is_file():
        return load_norm(data)
    name = name or dataset_name(data)
    raw = json.loads((data / f"{name}_corpus.json").read_text(encoding="utf-8"))
    if isinstance(raw, dict):
        raw = [
            {"title": t, "text": "".join(s) if isinstance(s, list) else str(s)}
            for t, s in raw.items()
        ]
    corpus = [{"title": p["title"], "text": p["text"]} for p in raw]
    questions = json.loads((data / f"{name}.json").read_text(encoding="utf-8"))
    by_key: dict[tuple[str, str], list[int]] = {}
    by_title: dict[str, list[int]] = {}
    for i, p in enumerate(corpus):
        by_key.setdefault((p["title"], p["text"]), []).append(i)
        by_title.setdefault(p["title"], []).append(i)
    gold: list[set[int]] = []
    for q in questions:
        g: set[int] = set()
        if "paragraphs" in q:
            for p in q["paragraphs"]:
                if p.get("is_supporting"):
                    g.update(by_key.get((p["title"], p["paragraph_text"]), []))
        for fact in q.get("supporting_facts", []):
            g.update(by_title.get(fact[0], []))
        gold.append(g)
    return corpus, questions, gold


def load_norm(data: Path) -> tuple[list[dict], list[dict], list[set[int]]]:
    """A set in the common form: corpus [{id, title, text}], questions with gold_ids."""
    corpus = json.loads((data / NORM_CORPUS).read_text(encoding="utf-8"))
    questions = json.loads((data / NORM_QUESTIONS).read_text(encoding="utf-8"))
    pos = {p["id"]: i for i, p in enumerate(corpus)}
    gold = [{pos[g] for g in q["gold_ids"] if g in pos} for q in questions]
    return [{"title": p["title"], "text": p["text"]} for p in corpus], questions, gold


def write_inputs(corpus: list[dict], input_dir: Path) -> None:
    input_dir.mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(corpus):
        path = input_dir / f"{i:05d}.txt"
        text = p["title"] + "\n" + p["text"]
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def build_index(work: Path, corpus: list[dict]) -> Path:
    from app.run import run_index

    write_inputs(corpus, work / "input")
    t0 = time.perf_counter()
    run_index(input_dir=str(work / "input"), output_dir=str(work / "output"))
    print(f"indexed {len(corpus)} passages in {time.perf_counter() - t0:.1f} s -> {work}/output")
    return work / "output"


def unit_to_passage(output: Path) -> dict[str, int]:
    """text unit id -> corpus passage index, via the unit's document's source file name."""
    from pipeline.storage import store

    units = store.read_table(output, "text_units").select("id", "document_id")
    docs = store.read_table(output, "documents").select(
        pl.col("id").alias("document_id"), "source_path"
    )
    joined = units.join(docs, on="document_id", how="left")
    out: dict[str, int] = {}
    for uid, src in zip(joined["id"].to_list(), joined["source_path"].to_list(), strict=True):
        m = re.search(r"(\d+)\.txt$", src or "")
        if m:
            out[uid] = int(m.group(1))
    return out


@dataclass
class Run:
    """One mode over the questions: per-question recall at each k, tokens, ms/query."""

    mode: str
    recall: dict[int, np.ndarray]  # k -> per-question recall in [0, 1]
    tokens: np.ndarray  # per-question context tokens
    ms: float


def recall_at(ranked: list[int], gold: set[int]) -> dict[int, float]:
    return {k: len(gold & set(ranked[:k])) / len(gold) if gold else 0.0 for k in KS}


def passages(unit_ids: list[str], u2p: dict[str, int]) -> list[int]:
    """Distinct passages of a ranked unit list, in rank order."""
    out: list[int] = []
    for uid in unit_ids:
        p = u2p.get(uid)
        if p is not None and p not in out:
            out.append(p)
    return out


def dense_vectors(index, corpus: list[dict], cache: Path) -> np.ndarray:
    """The passages' title + text vectors from the index's embedder (cached in `cache`)."""
    emb = index.embedder
    key = cache.with_suffix(".json")
    meta = {"model": emb.model_id, "n": len(corpus)}
    if cache.exists() and key.exists() and json.loads(key.read_text()) == meta:
        return np.load(cache)
    vecs = emb.embed([p["title"] + "\n" + p["text"] for p in corpus])
    np.save(cache, vecs)
    key.write_text(json.dumps(meta))
    return vecs


def run_dense(index, corpus, questions, gold, cache: Path) -> Run:
    """The issue's dense reference: cosine over whole passages, top 10 as the context."""
    from pipeline.query.scoring import top_indices
    from pipeline.tokens import count_tokens

    mat = dense_vectors(index, corpus, cache)
    ntok = [count_tokens(p["title"] + "\n" + p["text"]) for p in corpus]
    rec = {k: np.zeros(len(questions)) for k in KS}
    tokens = np.zeros(len(questions))
    t0 = time.perf_counter()
    for i, (q, g) in enumerate(zip(questions, gold, strict=True)):
        top = top_indices(mat @ index.embed_query(q["question"]), 10).tolist()
        for k, v in recall_at(top, g).items():
            rec[k][i] = v
        tokens[i] = sum(ntok[p] for p in top)
    ms = (time.perf_counter() - t0) * 1000 / len(questions)
    return Run("dense", rec, tokens, ms)


def run_bm25(corpus, questions, gold) -> Run:
    """The lexical reference: BM25 (bm25s, the index's analyser) over whole passages."""
    import polars as pl

    from pipeline.lexical.bm25 import LexicalIndex
    from pipeline.query.scoring import top_indices
    from pipeline.tokens import count_tokens

    texts = [p["title"] + "\n" + p["text"] for p in corpus]
    lex = LexicalIndex.build([str(i) for i in range(len(corpus))], pl.Series(texts))
    ntok = [count_tokens(t) for t in texts]
    rec = {k: np.zeros(len(questions)) for k in KS}
    tokens = np.zeros(len(questions))
    t0 = time.perf_counter()
    for i, (q, g) in enumerate(zip(questions, gold, strict=True)):
        top = top_indices(lex.scores(q["question"]), 10).tolist()
        for k, v in recall_at(top, g).items():
            rec[k][i] = v
        tokens[i] = sum(ntok[p] for p in top)
    ms = (time.perf_counter() - t0) * 1000 / len(questions)
    return Run("bm25", rec, tokens, ms)


def searcher(index, mode: str):
    if mode == "flow_quick":
        return lambda q: index.flow_search(q, quick=True)
    if mode == "naive_dense":
        query = index.settings.query.model_copy(update={"lexical_weight": 0.0})
        dense = type(index).open(
            index.output_root, index.settings.model_copy(update={"query": query})
        )
        return dense.naive_search
    return getattr(index, f"{mode}_search")


def evaluate(index, questions, gold, u2p, mode: str) -> Run:
    """Recall of the mode's ranked text units, its context tokens and ms/query."""
    search = searcher(index, mode)
    search(questions[0]["question"])  # warm caches (graph, vectors, stores)
    rec = {k: np.zeros(len(questions)) for k in KS}
    tokens = np.zeros(len(questions))
    t0 = time.perf_counter()
    for i, (q, g) in enumerate(zip(questions, gold, strict=True)):
        res = search(q["question"])
        for k, v in recall_at(passages(res.text_unit_ids, u2p), g).items():
            rec[k][i] = v
        tokens[i] = res.context_tokens
    ms = (time.perf_counter() - t0) * 1000 / len(questions)
    return Run(mode, rec, tokens, ms)


def bootstrap(diff: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, ...]:
    """Mean of paired per-question differences and its 95% percentile bootstrap interval."""
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, diff.size, size=(resamples, diff.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(lo), float(hi)


def budget_curve(index, questions, gold, u2p, budgets) -> list[tuple[int, float, float, float]]:
    """(budget, R@5 over the units in the context, all gold in context %, mean tokens) of
    local search at each context budget (the setting local reads, swapped on the index)."""
    from pipeline.config import QuerySettings

    field = (
        "local_context_tokens"
        if "local_context_tokens" in QuerySettings.model_fields
        else "max_context_tokens"
    )
    base = index.settings
    rows = []
    try:
        for b in budgets:
            query = base.query.model_copy(update={field: b})
            index.settings = base.model_copy(update={"query": query})
            r5, full, tok = [], [], []
            for q, g in zip(questions, gold, strict=True):
                res = index.local_search(q["question"])
                units = [r["id"] for r in res.records if r["kind"] == "text_unit"]
                got = passages(units, u2p)
                r5.append(recall_at(got, g)[5])
                full.append(float(g <= set(got)) if g else 0.0)
                tok.append(res.context_tokens)
            rows.append((b, 100 * np.mean(r5), 100 * np.mean(full), float(np.mean(tok))))
    finally:
        index.settings = base
    return rows


def print_tables(runs: list[Run], n: int, splits=SPLITS) -> None:
    dense = next((r for r in runs if r.mode == "dense"), None)
    for name, sl in splits:
        idx = np.arange(n)[sl]
        print(f"\n{name} ({idx.size} questions)")
        print("| mode       |   R@2 |   R@5 |  R@10 | ms/query | ctx tok | R@5 - dense [95% CI]  |")
        print("|------------|-------|-------|-------|----------|---------|-----------------------|")
        for r in runs:
            rec = {k: 100 * r.recall[k][idx].mean() for k in KS}
            ci = ""
            if dense is not None and r is not dense:
                m, lo, hi = bootstrap(100 * (r.recall[5][idx] - dense.recall[5][idx]))
                ci = f"{m:+5.1f} [{lo:+5.1f}, {hi:+5.1f}]"
            print(
                f"| {r.mode:<10} | {rec[2]:5.1f} | {rec[5]:5.1f} | {rec[10]:5.1f} | "
                f"{r.ms:8.1f} | {r.tokens[idx].mean():7.0f} | {ci:<21} |"
            )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--output", type=Path, help="evaluate this existing index folder")
    ap.add_argument("--work", type=Path, help="work folder (input/ and output/ inside)")
    ap.add_argument("--reindex", action="store_true", help="re-run indexing into --work")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument(
        "--budgets",
        default=",".join(map(str, BUDGETS)),
        help="local context budgets of the recall/tokens curve ('' skips it)",
    )
    ap.add_argument(
        "--data", type=Path, default=DATA, help="folder of the question set (default: MuSiQue)"
    )
    ap.add_argument("--name", help="the set's <name> in that folder (default: its only one)")
    args = ap.parse_args(argv)

    from pipeline.config import load_settings
    from pipeline.query import GraphIndex
    from pipeline.storage import store

    name = args.name or dataset_name(args.data)
    corpus, questions, gold = load_dataset(args.data, name)
    splits = SPLITS if name == MUSIQUE else SPLITS[:1]
    questions = [q for q, g in zip(questions, gold, strict=True) if g]  # gold found in corpus
    gold = [g for g in gold if g]
    if args.output:
        output = args.output
    else:
        work = args.work or Path(tempfile.mkdtemp(prefix=f"{name}-"))
        output = work / "output"
        if args.reindex or not store.is_index(output):
            output = build_index(work, corpus)
    settings = load_settings(overrides={"output_dir": str(output)})
    index = GraphIndex.open(output, settings)
    u2p = unit_to_passage(output)
    print(
        f"index {output}: {index.text_units.height} text units, {index.entities.height} "
        f"entities, {index.relationships.height} relationships; "
        f"{len(questions)} questions, {sum(map(len, gold))} gold passages"
    )
    runs = []
    for mode in [m for m in args.modes.split(",") if m]:
        if mode == "bm25":
            runs.append(run_bm25(corpus, questions, gold))
        elif mode == "dense":
            cache = Path(output).resolve().parent / "dense_passage_vectors.npy"
            runs.append(run_dense(index, corpus, questions, gold, cache))
        else:
            runs.append(evaluate(index, questions, gold, u2p, mode))
    print_tables(runs, len(questions), splits)
    budgets = [int(b) for b in args.budgets.split(",") if b]
    if budgets:
        print(f"\nlocal: recall / context tokens by budget ({len(gold)} questions, context units)")
        print("| budget | R@5  | all gold in ctx % | ctx tok |")
        print("|--------|------|-------------------|---------|")
        for b, r5, full, tok in budget_curve(index, questions, gold, u2p, budgets):
            print(f"| {b:6d} | {r5:4.1f} | {full:17.1f} | {tok:7.0f} |")
    if name == MUSIQUE:
        print("\nreference dense MiniLM (data README): R@2 47.2, R@5 62.2, R@10 70.3")
    print("ms/query: wall time on this machine (inflated when other work shares the CPU)")


if __name__ == "__main__":
    main()
