"""Query module over a small hand-built index (real MiniLM vectors, real Lance tables)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from pipeline.config import Settings
from pipeline.ids import stable_id
from pipeline.query import GraphIndex, SearchResult
from pipeline.storage import store
from pipeline.vectors.embed import get_embedder
from pipeline.vectors.lance import build_vector_tables

# (document title, text). The bridge case: the question names the Krellmont Bridge; the
# unit saying where its architect was born shares no words with the question and is
# linked to it only through the entity ZORBLAT QUINTESSA.
DOCS = [
    ("Krellmont Bridge", "The Krellmont Bridge was designed by the architect Zorblat Quintessa."),
    ("Quintessa", "Quintessa kept bees and grew tomatoes on a farm in Vrenholm as a child."),
    ("Golden Gate", "The Golden Gate Bridge was designed by the engineer Joseph Strauss."),
    ("Architects", "Many famous bridge architects were born in Italy and studied in Rome."),
    ("Birthplaces", "Where an architect was born often shaped the bridges they designed."),
    ("Brooklyn", "The Brooklyn Bridge architect John Roebling was born in Mühlhausen."),
    ("Bridges", "A bridge architect plans the structure of large bridges."),
    ("Photosynthesis", "Photosynthesis converts light energy into chemical energy in plants."),
    ("Crash", "The stock market crashed in 1929, starting the Great Depression."),
    ("Eiffel", "The Eiffel Tower in Paris was built by Gustave Eiffel's company in 1889."),
]

ENTITIES = [  # title, type, description, aliases, doc indexes
    ("KRELLMONT BRIDGE", "LOCATION", "A bridge designed by Zorblat Quintessa.", [], [0]),
    ("ZORBLAT QUINTESSA", "PERSON", "An architect.", ["Quintessa"], [0, 1]),
    ("VRENHOLM", "LOCATION", "A farming village.", [], [1]),
    ("GOLDEN GATE BRIDGE", "LOCATION", "A suspension bridge.", [], [2]),
    ("JOSEPH STRAUSS", "PERSON", "An engineer.", [], [2]),
    ("JOHN ROEBLING", "PERSON", "Architect of the Brooklyn Bridge.", [], [5]),
    ("MÜHLHAUSEN", "LOCATION", "A town in Germany.", [], [5]),
    ("EIFFEL TOWER", "LOCATION", "A tower in Paris.", [], [9]),
    ("PARIS", "LOCATION", "Capital of France.", [], [9]),
]

RELATIONSHIPS = [  # source, target, description, doc indexes
    ("KRELLMONT BRIDGE", "ZORBLAT QUINTESSA", "The bridge was designed by Quintessa.", [0]),
    ("ZORBLAT QUINTESSA", "VRENHOLM", "Quintessa grew up on a farm in Vrenholm.", [1]),
    ("GOLDEN GATE BRIDGE", "JOSEPH STRAUSS", "Strauss designed the bridge.", [2]),
    ("EIFFEL TOWER", "PARIS", "The tower stands in Paris.", [9]),
]

COMMUNITIES = [  # community, level, parent, title, entity titles, summary
    (0, 0, -1, "Krellmont Bridge and Zorblat Quintessa", [0, 1, 2],
     "The Krellmont Bridge was designed by the architect Zorblat Quintessa of Vrenholm."),
    (1, 0, -1, "Golden Gate Bridge and Joseph Strauss", [3, 4],
     "Joseph Strauss was the engineer who designed the Golden Gate Bridge."),
    (2, 0, -1, "Photosynthesis in plants", [],
     "Photosynthesis converts sunlight into chemical energy stored by plant leaves."),
    (3, 0, -1, "Eiffel Tower in Paris", [7, 8],
     "The Eiffel Tower, built in 1889, is the landmark of Paris."),
]  # fmt: skip


def _build(root) -> None:
    doc_ids = [stable_id("doc", t) for t, _ in DOCS]
    documents = pl.DataFrame(
        {
            "id": doc_ids,
            "human_readable_id": list(range(len(DOCS))),
            "title": [t for t, _ in DOCS],
            "source_path": [f"input/{i:02d}.txt" for i in range(len(DOCS))],
            "mime_type": "text/plain",
            "sha256": "",
            "byte_size": [len(x) for _, x in DOCS],
            "n_pages": 1,
            "language": "en",
            "metadata": "{}",
            "text": [x for _, x in DOCS],
            "creation_date": "",
            "warnings": [[] for _ in DOCS],
        }
    )
    unit_ids = [stable_id(d, x) for d, (_, x) in zip(doc_ids, DOCS, strict=True)]
    ent_ids = [stable_id(e[0]) for e in ENTITIES]
    entities = pl.DataFrame(
        {
            "id": ent_ids,
            "human_readable_id": list(range(len(ENTITIES))),
            "title": [e[0] for e in ENTITIES],
            "type": [e[1] for e in ENTITIES],
            "description": [e[2] for e in ENTITIES],
            "aliases": [e[3] for e in ENTITIES],
            "text_unit_ids": [[unit_ids[i] for i in e[4]] for e in ENTITIES],
            "frequency": [len(e[4]) for e in ENTITIES],
            "degree": 1,
        },
        schema_overrides={"aliases": pl.List(pl.Utf8)},
    )
    by_title = dict(zip([e[0] for e in ENTITIES], ent_ids, strict=True))
    relationships = pl.DataFrame(
        {
            "id": [stable_id(r[0], r[1]) for r in RELATIONSHIPS],
            "human_readable_id": list(range(len(RELATIONSHIPS))),
            "source": [r[0] for r in RELATIONSHIPS],
            "target": [r[1] for r in RELATIONSHIPS],
            "source_id": [by_title[r[0]] for r in RELATIONSHIPS],
            "target_id": [by_title[r[1]] for r in RELATIONSHIPS],
            "type": "RELATED",
            "description": [r[2] for r in RELATIONSHIPS],
            "weight": 1.0,
            "combined_degree": 2,
            "text_unit_ids": [[unit_ids[i] for i in r[3]] for r in RELATIONSHIPS],
        }
    )
    ent_units = {ent_ids[i]: [unit_ids[j] for j in e[4]] for i, e in enumerate(ENTITIES)}
    unit_ents = [[ent_ids[i] for i, e in enumerate(ENTITIES) if j in e[4]] for j in range(10)]
    text_units = pl.DataFrame(
        {
            "id": unit_ids,
            "human_readable_id": list(range(len(DOCS))),
            "text": [x for _, x in DOCS],
            "n_tokens": [len(x.split()) for _, x in DOCS],
            "document_id": doc_ids,
            "section_id": "",
            "content_node_ids": [[] for _ in DOCS],
            "pages": [[1] for _ in DOCS],
            "seq": 0,
            "entity_ids": unit_ents,
            "relationship_ids": [[] for _ in DOCS],
        },
        schema_overrides={
            "content_node_ids": pl.List(pl.Utf8),
            "relationship_ids": pl.List(pl.Utf8),
        },
    )
    comm_units = [
        sorted({u for i in c[4] for u in ent_units[ent_ids[i]]}) or [unit_ids[7]]
        for c in COMMUNITIES
    ]
    communities = pl.DataFrame(
        {
            "id": [stable_id("c", str(c[0])) for c in COMMUNITIES],
            "human_readable_id": [c[0] for c in COMMUNITIES],
            "community": [c[0] for c in COMMUNITIES],
            "level": [c[1] for c in COMMUNITIES],
            "parent": [c[2] for c in COMMUNITIES],
            "children": [[] for _ in COMMUNITIES],
            "title": [c[3] for c in COMMUNITIES],
            "entity_ids": [[ent_ids[i] for i in c[4]] for c in COMMUNITIES],
            "relationship_ids": [[] for _ in COMMUNITIES],
            "text_unit_ids": comm_units,
            "size": [len(c[4]) for c in COMMUNITIES],
            "period": "",
        },
        schema_overrides={
            "children": pl.List(pl.Int64),
            "relationship_ids": pl.List(pl.Utf8),
            "entity_ids": pl.List(pl.Utf8),
        },
    )
    reports = communities.select(
        "id", "human_readable_id", "community", "level", "parent", "children", "title", "size",
        "period",
    ).with_columns(
        summary=pl.Series([c[5] for c in COMMUNITIES]),
        rating=pl.lit(5.0),
        rating_explanation=pl.lit(""),
        findings=pl.Series(
            [[{"summary": c[5], "explanation": c[5]}] for c in COMMUNITIES],
        ),
        full_content=pl.Series([f"# {c[3]}\n\n{c[5]}" for c in COMMUNITIES]),
        full_content_json=pl.lit("{}"),
    )  # fmt: skip
    for name, frame in [
        ("documents", documents),
        ("text_units", text_units),
        ("entities", entities),
        ("relationships", relationships),
        ("communities", communities),
        ("community_reports", reports),
    ]:
        store.write_table(root, name, frame)
    build_vector_tables(
        root, text_units, entities, relationships, reports, get_embedder(Settings().embedding)
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> GraphIndex:
    root = tmp_path_factory.mktemp("index")
    _build(root)
    return GraphIndex.open(root, Settings(output_dir=str(root)))


QUESTION = "Where was the architect of the Krellmont Bridge born?"


def _titles(index: GraphIndex, unit_ids: list[str]) -> list[str]:
    info = index.unit_info.select("id", "document_title")
    title = dict(zip(info["id"].to_list(), info["document_title"].to_list(), strict=True))
    return [title[u] for u in unit_ids]


def test_naive_ranks_the_obvious_unit_first(index: GraphIndex):
    res = index.naive_search("How do plants turn light into chemical energy?", top_k=3)
    assert isinstance(res, SearchResult) and res.mode == "naive"
    assert _titles(index, res.text_unit_ids)[0] == "Photosynthesis"
    assert "Photosynthesis converts light energy" in res.answer
    assert res.context_text.startswith("-----Texts-----")
    top = res.records[0]
    assert top["kind"] == "text_unit" and top["document_title"] == "Photosynthesis"
    assert top["source_path"] == "input/07.txt" and top["pages"] == [1]
    assert top["human_readable_id"] == 7 and top["score"] > 0.5
    scores = [r["score"] for r in res.records]
    assert scores == sorted(scores, reverse=True)


def test_local_search_reaches_a_unit_only_the_graph_links(index: GraphIndex):
    k = 3
    dense = _titles(index, index.naive_search(QUESTION, top_k=len(DOCS)).text_unit_ids)
    # The bridge passage is not among the dense top-k (no shared words or meaning)...
    assert "Quintessa" not in dense[:k] and dense.index("Quintessa") >= 5
    local = index.local_search(QUESTION, top_k=k)
    titles = _titles(index, local.text_unit_ids)
    # ... but local search reaches it through KRELLMONT BRIDGE -> ZORBLAT QUINTESSA.
    assert "Quintessa" in titles and "Krellmont Bridge" in titles
    assert any("name match" in t and "krellmont bridge" in t for t in local.trace)
    ents = [r for r in local.records if r["kind"] == "entity"]
    assert ents[0]["title"] == "KRELLMONT BRIDGE" and ents[0]["matched_name"]
    assert "ZORBLAT QUINTESSA" in [e["title"] for e in ents]
    for section in ("Entities", "Relations", "Summaries", "Texts"):
        assert f"-----{section}-----" in local.context_text
    rels = [r for r in local.records if r["kind"] == "relationship"]
    assert rels and rels[0]["title"] == "KRELLMONT BRIDGE -> ZORBLAT QUINTESSA"
    reps = [r for r in local.records if r["kind"] == "report"]
    assert reps[0]["title"] == "Krellmont Bridge and Zorblat Quintessa"
    assert 0 < local.context_tokens <= index.settings.query.max_context_tokens


def test_records_carry_provenance(index: GraphIndex):
    res = index.local_search(QUESTION)
    assert {r["kind"] for r in res.records} == {"entity", "relationship", "report", "text_unit"}
    for r in res.records:
        assert r["id"] and r["human_readable_id"] is not None
        assert r["document_id"] and r["document_title"]
        assert r["source_path"].startswith("input/") and r["pages"] == [1]
    json.dumps(res.to_dict())  # serialisable as is


def test_name_match_is_accent_and_case_insensitive_longest_first(index: GraphIndex):
    matches = index.match_entities("who lived in muhlhausen near the Golden Gate Bridge")
    keys = [m.key for m in matches]
    assert keys == ["muhlhausen", "golden gate bridge"]  # not also a bare "bridge"
    assert [m.proper for m in matches] == [False, True]
    assert index.match_entities("what did quintessa build")[0].key == "quintessa"  # alias
    # Document titles are names too (rows are text unit rows).
    titles = index.match_titles("Is the Golden Gate like the Eiffel?")
    assert [(m.key, m.row) for m in titles] == [("golden gate", 2), ("eiffel", 9)]


def test_global_search_rates_sorts_and_drops_zeros(index: GraphIndex):
    res = index.global_search("Who designed famous bridges?")
    ratings = [r["rating"] for r in res.records]
    assert ratings == sorted(ratings, reverse=True) and all(0 < x <= 10 for x in ratings)
    titles = [r["title"] for r in res.records]
    assert titles[0] in {"Krellmont Bridge and Zorblat Quintessa",
                         "Golden Gate Bridge and Joseph Strauss"}  # fmt: skip
    assert "Photosynthesis in plants" not in titles  # rated 0 and dropped
    assert any("dropped" in t for t in res.trace)
    assert res.answer.startswith("- ") and "[report" in res.answer
    assert res.records[0]["source_path"].startswith("input/")
    assert index.global_search("bridges", level=0).records
    assert "levels present: [0]" in index.global_search("bridges", level=3).answer


def test_errors_and_empty_index(index: GraphIndex, tmp_path):
    for bad in ("", "   "):
        with pytest.raises(ValueError, match="empty query"):
            index.naive_search(bad)
        with pytest.raises(ValueError, match="empty query"):
            index.local_search(bad)
    with pytest.raises(FileNotFoundError, match="docgraph index"):
        GraphIndex.open(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="docgraph index"):
        GraphIndex.open(tmp_path)  # exists, but holds no index
    for name in ("documents", "text_units", "entities"):
        store.write_table(tmp_path, name, store.read_table(tmp_path, name))
    empty = GraphIndex.open(tmp_path, Settings(output_dir=str(tmp_path)))
    for mode in ("naive", "local", "global"):
        res = getattr(empty, f"{mode}_search")("anything")
        assert "empty" in res.answer and res.text_unit_ids == [] and res.records == []


def test_deterministic(index: GraphIndex):
    a = index.local_search(QUESTION).to_dict()
    b = index.local_search(QUESTION).to_dict()
    assert a == b
    v = index.unit_vectors
    assert v.shape == (len(DOCS), 384) and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
