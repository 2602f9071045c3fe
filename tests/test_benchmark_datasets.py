"""benchmarks/retrieval.py reads any multi-hop set in HippoRAG's layout, not only MuSiQue:
HotpotQA's corpus is a mapping title -> sentences and its gold is `supporting_facts`,
2WikiMultihopQA's corpus a list with the same kind of gold. A held-out set must score
through the same code path as the shared one."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.retrieval import dataset_name, load_dataset, main  # noqa: E402

PASSAGES = {
    "Ada Lovelace": [
        "Ada Lovelace was an English mathematician.",
        " She wrote the first algorithm for the Analytical Engine.",
    ],
    "Analytical Engine": [
        "The Analytical Engine was designed by Charles Babbage.",
        " It was never completed.",
    ],
    "Charles Babbage": ["Charles Babbage was born in London in 1791."],
    "Lovelace (crater)": ["Lovelace is a crater on the Moon."],
    "Difference engine": ["A difference engine is a mechanical calculator."],
    "Marie Curie": ["Marie Curie was a physicist and chemist born in Warsaw."],
}
QUESTION = "Where was the designer of the engine Ada Lovelace wrote an algorithm for born?"


def _write(folder: Path, name: str, questions: list, corpus) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(questions), encoding="utf-8")
    (folder / f"{name}_corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    return folder


def _hotpot(folder: Path) -> Path:
    questions = [
        {
            "_id": "q1",
            "question": QUESTION,
            "answer": "London",
            "supporting_facts": [
                ["Ada Lovelace", 1],
                ["Analytical Engine", 0],
                ["Charles Babbage", 0],
            ],
            "context": [[t, s] for t, s in PASSAGES.items()],
        },
        {
            "_id": "q2",
            "question": "Which crater is named Lovelace?",
            "answer": "a crater on the Moon",
            "supporting_facts": [["Lovelace (crater)", 0]],
        },
    ]
    return _write(folder, "hotpotqa_train", questions, PASSAGES)


def test_hotpotqa_layout_joins_sentences_and_reads_gold_from_supporting_facts(tmp_path):
    data = _hotpot(tmp_path / "hotpot")
    assert dataset_name(data) == "hotpotqa_train"
    corpus, questions, gold = load_dataset(data)
    titles = [p["title"] for p in corpus]
    assert titles == list(PASSAGES)
    assert corpus[0]["text"] == (
        "Ada Lovelace was an English mathematician. She wrote the first algorithm for the "
        "Analytical Engine."
    )
    assert [q["question"] for q in questions] == [QUESTION, "Which crater is named Lovelace?"]
    assert gold == [{0, 1, 2}, {3}]


def test_musique_and_2wiki_layouts(tmp_path):
    corpus = [{"title": t, "text": "".join(s)} for t, s in PASSAGES.items()]
    # MuSiQue: gold on title and text together (a repeated title elsewhere is no gold)
    repeated = [*corpus, {"title": "Ada Lovelace", "text": "Another Ada Lovelace."}]
    musique = [
        {
            "question": QUESTION,
            "paragraphs": [
                {"idx": 0, "title": "Ada Lovelace", "paragraph_text": corpus[0]["text"],
                 "is_supporting": True},
                {"idx": 1, "title": "Marie Curie", "paragraph_text": corpus[5]["text"],
                 "is_supporting": False},
            ],
        }
    ]  # fmt: skip
    data = _write(tmp_path / "mq", "musique_train", musique, repeated)
    assert load_dataset(data)[2] == [{0}]
    wiki = [{"question": QUESTION, "supporting_facts": [["Charles Babbage", 0]]}]
    data = _write(tmp_path / "wiki", "2wikimultihopqa", wiki, corpus)
    assert load_dataset(data)[2] == [{2}]


def test_a_folder_of_two_sets_needs_a_name(tmp_path):
    data = _hotpot(tmp_path / "two")
    _write(data, "other", [], [])
    with pytest.raises(SystemExit, match="--name"):
        dataset_name(data)
    assert load_dataset(data, "hotpotqa_train")[2] == [{0, 1, 2}, {3}]


def test_the_benchmark_scores_a_hotpotqa_set_end_to_end(tmp_path, capsys):
    """Indexed by the real asset graph, scored by passage: dense ranks all six passages in
    its top 10, so its R@10 is 100 only if every gold title maps to its passage file."""
    data = _hotpot(tmp_path / "hotpot")
    main(["--data", str(data), "--work", str(tmp_path / "work"), "--modes", "dense,local",
          "--budgets", ""])  # fmt: skip
    out = capsys.readouterr().out
    assert "2 questions, 4 gold passages" in out
    assert "tune" not in out  # another set is held out as a whole
    rows = {line.split("|")[1].strip(): line.split("|") for line in out.splitlines()
            if line.startswith("| dense") or line.startswith("| local")}  # fmt: skip
    assert float(rows["dense"][4]) == 100.0  # R@10
    assert 0.0 <= float(rows["local"][3]) <= 100.0
