"""What a person reads: how much of what retrieval found reaches the offline answer, and how
the entity descriptions and reports of an index read.

    python benchmarks/answers.py --output /tmp/mq/output                      # MuSiQue
    python benchmarks/answers.py --output /tmp/xq/output --data ../shared/data/xquad_ru
    python benchmarks/answers.py --output data/output --descriptions-only     # any index

Answers: for every question of a set (`benchmarks/retrieval.py`'s loader: MuSiQue, HippoRAG's
layout or the common form of ../shared/data) and every mode, "answer holds gold" = the gold
answer or one of its aliases, normalised as SQuAD's evaluation does (lower case, punctuation
and English articles dropped, whitespace collapsed), occurs as whole words inside the
normalised offline `answer`; "context holds gold" = the same inside `context_text` (what an
LLM would be given). Yes/no questions are left out (their answer is not a span). Also the
mean sentences and words per answer and the share over 80 words.

Descriptions (`--descriptions` or `--descriptions-only`, any index): how the entity
descriptions and reports read, as `benchmarks/descriptions.py` scores them.
"""

from __future__ import annotations

import argparse
import re
import string
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from retrieval import DATA, load_dataset, searcher  # noqa: E402

MODES = ("naive", "local", "expand", "flow", "flow_quick")
MAX_WORDS = 80
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation) | set("«»„“”‘’–—…")


def normalise(text: str) -> str:
    """SQuAD's answer normalisation (lower, no punctuation or English articles, one space)."""
    text = "".join(ch for ch in text.lower().replace("ё", "е") if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def golds(question: dict) -> list[str]:
    """The gold answer and its aliases (MuSiQue `answer_aliases`, common form `aliases`)."""
    out = [question.get("answer") or ""]
    out += question.get("answer_aliases") or question.get("aliases") or []
    return [g for g in (normalise(x) for x in out) if g]


def holds(text: str, gold: list[str]) -> bool:
    padded = f" {normalise(text)} "
    return any(f" {g} " in padded for g in gold)


def is_yes_no(question: dict) -> bool:
    return normalise(question.get("answer") or "") in {"yes", "no", "да", "нет"}


def score_answers(index, questions: list[dict], modes) -> None:
    from pipeline.sentences import split_sentences

    print(f"{len(questions)} questions (yes/no left out)")
    print(
        "| mode       | answer holds gold | context holds gold | ratio | sent | words | >80 w "
        "| ms/q |\n|------------|-------------------|--------------------|-------|------|-------"
        "|-------|------|"
    )
    for mode in modes:
        search = searcher(index, mode)
        search(questions[0]["question"])  # warm caches
        ans = ctx = 0
        sents, wcount, over = [], [], 0
        t0 = time.perf_counter()
        for q in questions:
            res = search(q["question"])
            gold = golds(q)
            ans += holds(res.answer, gold)
            ctx += holds(res.context_text, gold)
            sents.append(len(split_sentences(res.answer)))
            n = len(res.answer.split())
            wcount.append(n)
            over += n > MAX_WORDS
        ms = (time.perf_counter() - t0) * 1000 / len(questions)
        n = len(questions)
        ratio = ans / ctx if ctx else 0.0
        print(
            f"| {mode:10s} | {100 * ans / n:17.1f} | {100 * ctx / n:18.1f} | {ratio:5.2f} "
            f"| {np.mean(sents):4.1f} | {np.mean(wcount):5.1f} | {over:5d} | {ms:4.0f} |"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--output", type=Path, required=True, help="an index folder")
    ap.add_argument("--data", type=Path, default=DATA, help="the question set (default MuSiQue)")
    ap.add_argument("--name", help="the set's <name> in that folder (default: its only one)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--descriptions", action="store_true", help="also score the descriptions")
    ap.add_argument("--descriptions-only", action="store_true", help="only the descriptions")
    args = ap.parse_args(argv)

    from pipeline.config import load_settings
    from pipeline.query import GraphIndex

    settings = load_settings(overrides={"output_dir": str(args.output)})
    index = GraphIndex.open(args.output, settings)
    if not args.descriptions_only:
        _, questions, _ = load_dataset(args.data, args.name)
        questions = [q for q in questions if not is_yes_no(q) and golds(q)]
        score_answers(index, questions, [m for m in args.modes.split(",") if m])
    if args.descriptions or args.descriptions_only:
        from descriptions import print_description_quality

        print_description_quality(args.output)


if __name__ == "__main__":
    main()
