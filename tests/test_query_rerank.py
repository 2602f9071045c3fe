"""Relevance ranking of graph-proposed text units (pipeline/query/rerank.py) on the sample index."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.config import load_settings
from pipeline.query import GraphIndex
from pipeline.query.flow.context import UNIT_GRAPH_WEIGHT
from pipeline.query.rerank import fuse, rank_units, title_bridges

BIRTH_Q = "Where was Marie Curie born?"


@pytest.fixture(scope="module")
def index(sample_index):
    _, out, _, _ = sample_index
    return GraphIndex.open(out)


def _unit(index: GraphIndex, doc_title: str, holds: str) -> str:
    """Id of the unit of document `doc_title` whose text holds `holds`."""
    info = index.unit_info
    for uid, title, text in zip(info["id"], info["document_title"], info["text"], strict=True):
        if title == doc_title and holds in text:
            return uid
    raise AssertionError(f"no unit of {doc_title!r} holding {holds!r}")


def test_fuse_compresses_the_graph_tail_and_keeps_cosine_when_no_graph():
    graph, sims = np.array([4.0, 1.0, 0.0]), np.array([0.1, 0.7, 0.5])
    linear = fuse(graph, sims, 0.5, power=1.0)
    root = fuse(graph, sims, 0.5, power=0.5)
    assert linear[0] > linear[1]  # a raw score 4x larger wins ...
    assert root[1] > root[0]  # ... its square root (2x) does not beat a far closer unit
    assert np.allclose(fuse(np.zeros(3), sims, 0.5), 0.5 * sims)


def test_answer_unit_cited_once_outranks_an_unrelated_unit_cited_often(index):
    answer = _unit(index, "Marie Curie", "Marie Curie was born")
    unrelated = _unit(index, "The Nobel Prize in the early twentieth century", "Alfred Nobel")
    cited = [unrelated, answer]  # citation order: the often-cited unit first
    scores = {unrelated: 4.0, answer: 1.0}  # cited by four kept entities' worth, vs one
    by_citation, _, _ = rank_units(index, BIRTH_Q, cited, scores, graph_weight=1.0)
    assert by_citation[0] == unrelated  # the old order, citation counts only
    ranked, info, _ = rank_units(index, BIRTH_Q, cited, scores, graph_weight=UNIT_GRAPH_WEIGHT)
    assert ranked.index(answer) < ranked.index(unrelated)
    assert (
        info[answer]["graph"] == 1.0
        and info[unrelated]["graph"] == 4.0
        and info[answer]["dense"] > info[unrelated]["dense"]
    )
    assert [info[u]["score"] for u in ranked] == sorted(
        (info[u]["score"] for u in ranked), reverse=True
    )


def test_dense_candidates_join_what_the_graph_missed(index):
    answer = _unit(index, "Marie Curie", "Marie Curie was born")
    other = _unit(index, "Albert Einstein", "Ulm")
    alone, _, _ = rank_units(index, BIRTH_Q, [other], {other: 5.0}, graph_weight=0.3)
    assert alone == [other]
    ranked, info, _ = rank_units(
        index, BIRTH_Q, [other], {other: 5.0}, graph_weight=0.3, dense_candidates=2
    )
    assert answer in ranked and info[answer]["graph"] == 0.0


def test_title_bridges_lift_the_named_document_just_below_its_namer(index):
    rows = index.unit_row
    bohr = rows[_unit(index, "Niels Bohr", "Copenhagen")]
    rutherford = rows[_unit(index, "Ernest Rutherford", "Brightwater")]
    nobel = rows[_unit(index, "The Nobel Prize in the early twentieth century", "Alfred Nobel")]
    assert "Rutherford" in index.text_units["text"][bohr]
    scores = np.full(index.text_units.height, 0.1)
    scores[bohr], scores[nobel], scores[rutherford] = 1.0, 0.5, 0.05
    out, named = title_bridges(index, scores, seeds=1, weight=10.0)
    assert "ernest rutherford" in named and "niels bohr" not in named  # not its own title
    assert out[nobel] < out[rutherford] < out[bohr]  # raised, but never above its namer
    assert out[bohr] == scores[bohr] and out[nobel] == scores[nobel]  # Bohr does not name it
    lifted = np.flatnonzero(out != scores)
    assert rutherford in lifted and (out[lifted] < out[bohr]).all()
    same, none = title_bridges(index, scores, seeds=1, weight=0.0)
    assert np.array_equal(same, scores) and none == []


def test_flow_units_are_ranked_by_relevance_with_both_signals(index):
    r = index.flow_search(BIRTH_Q)
    units = [x for x in r.records if x["kind"] == "text_unit"]
    assert units and {"graph", "dense"} <= set(units[0])
    assert units[0]["id"] == _unit(index, "Marie Curie", "Marie Curie was born")
    assert any(t.startswith("text units: ") and "relevance" in t for t in r.trace)
    # the seed behaviour is kept: analysis, nodes, facts and the diagram are still there
    assert r.data["analysis"]["entities"] and r.data["nodes"]
    assert "```mermaid\ngraph LR" in r.context_text


def test_local_pays_for_the_ranked_units_first_within_its_budget(sample_index):
    _, out, _, _ = sample_index
    settings = load_settings()
    small = GraphIndex.open(
        out,
        settings.model_copy(
            update={"query": settings.query.model_copy(update={"local_context_tokens": 700})}
        ),
    )
    res = small.local_search(BIRTH_Q)
    units = [x for x in res.records if x["kind"] == "text_unit"]
    assert res.context_tokens <= 700
    assert units and units[0]["id"] == res.text_unit_ids[0]
    big = GraphIndex.open(out).local_search(BIRTH_Q)
    assert big.context_tokens > res.context_tokens  # the default budget (2,500) holds more
    assert big.text_unit_ids[:3] == res.text_unit_ids[:3]  # the budget never changes the rank


def test_a_long_bridged_document_lifts_only_its_best_units(index, monkeypatch):
    import pipeline.query.rerank as rerank

    info = index.unit_info
    curie = [i for i, t in enumerate(info["document_title"]) if t == "Marie Curie"]
    namer = next(
        i
        for i, (t, text) in enumerate(zip(info["document_title"], info["text"], strict=True))
        if t != "Marie Curie" and "Marie Curie" in text
    )
    assert len(curie) == 2  # the sample's Marie Curie document has two units
    scores = np.full(index.text_units.height, 0.05)
    scores[namer], scores[curie[0]], scores[curie[1]] = 1.0, 0.2, 0.1
    monkeypatch.setattr(rerank, "UNITS_PER_TITLE", 1)
    out, named = title_bridges(index, scores, seeds=1, weight=0.5)
    assert "marie curie" in named
    assert out[curie[0]] == pytest.approx(0.7) and out[curie[1]] == scores[curie[1]]
