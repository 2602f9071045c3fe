"""The offline answer (pipeline/query/extractive.py): sentences chosen to answer, each cited."""

from __future__ import annotations

import pytest

from pipeline.query import GraphIndex
from pipeline.query.extractive import cited_answer


@pytest.fixture(scope="module")
def index(sample_run):
    return GraphIndex.open(sample_run[1])


def units(*texts: str) -> list[dict]:
    return [
        {"kind": "text_unit", "id": f"u{i}", "text": t, "document_title": f"Doc {i}"}
        for i, t in enumerate(texts)
    ]


def test_a_multi_hop_answer_follows_the_bridge_the_first_sentence_names(index):
    records = units(
        "The Bubye River is a tributary of the Limpopo River in Gwanda District, Zimbabwe.",
        "Abshir Ata Waterfall is a geological reserve in the south of Kyrgyzstan.",
        "Victoria Falls is a waterfall in southern Africa at the border of Zambia and Zimbabwe.",
    )
    q = "What is the name of the waterfall in the country where the Bubye River is found?"
    answer, cites = cited_answer(index, q, records)
    first, second = cites[0]["sentence"], cites[1]["sentence"]
    assert "Bubye" in first and "Victoria Falls" in second  # Zimbabwe carried it, not rank
    assert [c["id"] for c in cites[:2]] == ["u0", "u2"] and cites[1]["document_title"] == "Doc 2"
    assert answer.startswith(first) and second in answer


def test_a_when_question_prefers_the_sentence_with_a_year(index):
    records = units(
        "The observatory opened to visitors after a long restoration of its dome.",
        "The observatory was founded in 1874 by the city council.",
    )
    _, cites = cited_answer(index, "When was the observatory founded?", records)
    assert cites[0]["sentence"].endswith("1874 by the city council.")


def test_answers_stay_within_three_sentences_and_eighty_words(index):
    long = " ".join(["The members discussed many unrelated procedural matters"] * 12)
    records = units(
        long + " and finally approved the bridge budget of 12 million.",
        "The bridge budget was debated twice.",
        "Members of the bridge committee met weekly.",
        "The bridge opened to traffic in spring.",
    )
    answer, cites = cited_answer(index, "What bridge budget did the committee approve?", records)
    assert len(cites) <= 3 and len(answer.split()) <= 80
    cut = next(c["sentence"] for c in cites if c["id"] == "u0")
    assert cut.startswith("… ") and "approved the bridge budget of 12 million." in cut


def test_russian_case_forms_match_through_the_stemmer(index):
    records = units(
        "Погода в Петербурге была дождливой всю неделю.",
        "Столицей России является Москва, крупнейший город страны.",
    )
    answer, cites = cited_answer(index, "Какой город является столицей России?", records)
    assert cites[0]["id"] == "u1" and "Москва" in answer


def test_no_shared_term_no_answer(index):
    assert cited_answer(index, "quantum chromodynamics", units("Cats sleep a lot.")) == ("", [])


def test_the_sample_answers_where_marie_curie_worked(index):
    result = index.local_search("Where did Marie Curie work?")
    assert "Sorbonne" in result.citations[0]["sentence"]
    assert "Planck" not in result.answer  # the word "work" no longer outweighs the name
    assert all(c["kind"] == "text_unit" and c["document_title"] for c in result.citations)
    assert result.answer == " ".join(c["sentence"] for c in result.citations)
