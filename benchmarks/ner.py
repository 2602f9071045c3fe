"""Typed entity extraction on NEREL dev (94 Russian news documents, 29 entity classes):
the offline extractor's (type, name) set per document against the annotated one.

    python benchmarks/ner.py                       # ../shared/data/nerel/dev
    python benchmarks/ner.py --data DIR --types PERSON,ORGANIZATION

Each document (`*.txt`, brat `*.ann` beside it) is cut into text units as the index cuts
plain text: paragraphs packed up to `chunking.chunk_size` tokens. The extractor
(pipeline.extract, offline, default settings) runs on them; its entities of NEREL's classes
(its CONCEPT keyphrases are no named entity: left out) form the document's predicted set.
Gold: every `T` annotation, nested ones included. A name is compared by its words' stems
(pipeline.lexical's analyser: "Москвы" and "Москва" are one name), so an extractor is not
marked wrong for giving a lemma where the text has an inflected form; the line "exact
names" compares lower-cased names as written instead. Micro P/R/F1 over all documents'
(type, name) pairs, then per type (the most frequent gold types).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data" / "nerel" / "dev"
SHOWN_TYPES = 12


def gold_entities(ann: Path) -> set[tuple[str, str]]:
    """(type, surface name) of every entity annotation of a brat file."""
    out = set()
    for line in ann.read_text(encoding="utf-8").splitlines():
        if not line.startswith("T"):
            continue
        _, middle, name = line.split("\t", 2)
        out.add((middle.split(" ", 1)[0], name))
    return out


def units_of(text: str, max_tokens: int) -> list[str]:
    """Paragraphs packed into units of at most `max_tokens` tokens (a longer one alone)."""
    from pipeline.tokens import count_tokens

    units, cur, used = [], [], 0
    for para in (p.strip() for p in text.split("\n")):
        if not para:
            continue
        n = count_tokens(para)
        if cur and used + n > max_tokens:
            units.append("\n".join(cur))
            cur, used = [], 0
        cur.append(para)
        used += n
    if cur:
        units.append("\n".join(cur))
    return units


def name_key(name: str) -> str:
    from pipeline.lexical.analysis import term_frame

    terms = term_frame(pl.Series([name.replace("ё", "е")]), "en")["term"].to_list()
    return " ".join(terms) or name.lower().strip()


def score(pred: list[set], gold: list[set]) -> tuple[float, float, float]:
    tp = sum(len(p & g) for p, g in zip(pred, gold, strict=True))
    n_pred, n_gold = sum(map(len, pred)), sum(map(len, gold))
    prec = tp / n_pred if n_pred else 0.0
    rec = tp / n_gold if n_gold else 0.0
    return prec, rec, 2 * prec * rec / (prec + rec) if prec + rec else 0.0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA, help="folder of .txt + .ann files")
    args = ap.parse_args(argv)

    from pipeline.config import load_settings
    from pipeline.extract.nlp import NlpExtractor
    from pipeline.llm.prompts import NEREL_ENTITY_TYPES

    settings = load_settings()
    extractor = NlpExtractor(settings.extraction)
    docs = sorted(args.data.glob("*.txt"))
    gold, pred, gold_exact, pred_exact = [], [], [], []
    chars, elapsed = 0, 0.0
    for doc in docs:
        text = doc.read_text(encoding="utf-8")
        chars += len(text)
        units = units_of(text, settings.chunking.chunk_size)
        frame = pl.DataFrame({"id": [f"u{i}" for i in range(len(units))], "text": units})
        t0 = time.perf_counter()
        ents, _ = extractor.extract(frame)
        elapsed += time.perf_counter() - t0
        pred.append(
            {
                (t, name_key(n))
                for n, t in zip(ents["title"], ents["type"], strict=True)
                if t in NEREL_ENTITY_TYPES
            }
        )
        found = gold_entities(doc.with_suffix(".ann"))
        gold.append({(t, name_key(n)) for t, n in found})
        gold_exact.append({(t, n.lower()) for t, n in found})
        pred_exact.append(
            {
                (t, n.lower())
                for n, t in zip(ents["title"], ents["type"], strict=True)
                if t in NEREL_ENTITY_TYPES
            }
        )
    p, r, f = score(pred, gold)
    print(
        f"{len(docs)} documents, {chars:,} characters; extraction {elapsed:.1f} s "
        f"({chars / max(elapsed, 1e-9):,.0f} characters/s)"
    )
    print("\n| type | gold | predicted | P | R | F1 |\n|---|---:|---:|---:|---:|---:|")
    print(
        f"| **all (typed)** | {sum(map(len, gold))} | {sum(map(len, pred))} | "
        f"{100 * p:.1f} | {100 * r:.1f} | **{100 * f:.1f}** |"
    )
    p, r, f = score(pred_exact, gold_exact)
    print(f"| exact names | | | {100 * p:.1f} | {100 * r:.1f} | {100 * f:.1f} |")
    counts = Counter(t for g in gold for t, _ in g)
    for typ, n in counts.most_common(SHOWN_TYPES):
        pt = [{x for x in s if x[0] == typ} for s in pred]
        gt = [{x for x in s if x[0] == typ} for s in gold]
        p, r, f = score(pt, gt)
        print(
            f"| {typ} | {n} | {sum(map(len, pt))} | {100 * p:.1f} | {100 * r:.1f} | {100 * f:.1f} |"
        )


if __name__ == "__main__":
    main()
