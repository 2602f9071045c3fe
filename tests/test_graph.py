"""Graph merge: alias keys, titles, types, degree, stable ids, token limit, text_units."""

from __future__ import annotations

import polars as pl

from pipeline import schemas
from pipeline.config import GraphSettings
from pipeline.graph import encode_strings as graph
from pipeline.graph.merge import merge_graph
from pipeline.graph.titles import normalize_title, title_key
from pipeline.ids import stable_id
from pipeline.tokens import count_tokens


def _ents(rows):
    return pl.DataFrame(
        [
            {
                "text_unit_id": u,
                "title": t,
                "type": ty,
                "description": d,
                "extractor": "nlp",
                "model": "m",
                "prompt_hash": "",
            }
            for u, t, ty, d in rows
        ],
        schema={c: pl.Utf8 for c in schemas.EXTRACTED_ENTITIES.names},
    )


def _rels(rows):
    return pl.DataFrame(
        [
            {
                "text_unit_id": u,
                "source": s,
                "target": t,
                "type": ty,
                "description": d,
                "weight": w,
                "extractor": "nlp",
                "model": "m",
                "prompt_hash": "",
            }
            for u, s, t, ty, d, w in rows
        ],
        schema={
            **{c: pl.Utf8 for c in schemas.EXTRACTED_RELATIONSHIPS.names},
            "weight": pl.Float64,
        },
    )


ENTS = [
    ("u1", "Scrooge", "PERSON", "Scrooge said humbug."),
    ("u1", "Marley", "PERSON", "Marley was dead."),
    ("u2", "SCROOGE", "PERSON", "SCROOGE AND MARLEY."),
    ("u2", "Marley", "PERSON", "SCROOGE AND MARLEY."),
    ("u3", "Scrooge's", "CONCEPT", "Scrooge's nephew Fred came in."),
    ("u3", "Fred", "PERSON", "Scrooge's nephew Fred came in."),
    ("u3", "Scrooge", "PERSON", "Scrooge's nephew Fred came in."),
    ("u4", "London", "CITY", "Scrooge lived in London."),
    ("u4", "Scrooge", "PERSON", "Scrooge lived in London."),
]
RELS = [
    ("u1", "Marley", "Scrooge", "RELATED_TO", "Scrooge and Marley were partners.", 1.0),
    ("u2", "Marley", "SCROOGE", "RELATED_TO", "SCROOGE AND MARLEY.", 1.0),
    ("u3", "Fred", "Scrooge's", "RELATED_TO", "Scrooge's nephew Fred came in.", 0.5),
    ("u3", "Scrooge", "Scrooge's", "RELATED_TO", "self loop after merging", 1.0),
    ("u4", "London", "Scrooge", "RELATED_TO", "Scrooge lived in London.", 1.0),
    ("u4", "Scrooge", "London", "LIVES_IN", "Scrooge lived in London.", 1.0),
]
UNITS = pl.DataFrame({"id": ["u1", "u2", "u3", "u4", "u5"], "text": ["a", "b", "c", "d", "e"]})


def _merge(ents=ENTS, rels=RELS, units=UNITS, **kw):
    return merge_graph(_ents(ents), _rels(rels), units, GraphSettings(**kw))


def test_keys_and_display_forms():
    assert title_key("Scrooge") == title_key("SCROOGE") == title_key("Scrooge's") == "scrooge"
    assert title_key("The Bank of England") == title_key("Bank of England")
    assert title_key("U.S.") == title_key("US")
    assert title_key("«Москве»") == title_key("Москва")
    assert title_key("Ангелой Меркель") == title_key("Ангела Меркель")
    assert normalize_title("Scrooge's") == "Scrooge"
    assert normalize_title('  "Bank   of England" ') == "Bank of England"
    assert title_key("Café") == title_key("Cafe\u0301")  # NFKC-equal forms


def test_aliases_merged_title_type_frequency():
    ents, rels, _ = _merge()
    assert ents.columns == schemas.ENTITIES.names
    sc = ents.filter(pl.col("title") == "Scrooge").row(0, named=True)
    assert ents.filter(pl.col("title").str.to_lowercase() == "scrooge").height == 1
    assert sc["aliases"] == ["SCROOGE"]
    assert sc["type"] == "PERSON"  # 4 PERSON votes vs 1 CONCEPT
    assert sc["text_unit_ids"] == ["u1", "u2", "u3", "u4"]
    assert sc["frequency"] == 4
    assert sc["id"] == stable_id("scrooge")
    assert ents["human_readable_id"].to_list() == list(range(ents.height))
    assert ents["title"][0] == "Scrooge"  # most frequent first


def test_type_tie_prefers_named_type():
    ents, _, _ = _merge(
        ents=[("u1", "Ghost", "CONCEPT", "a"), ("u2", "Ghost", "PERSON", "b")], rels=[]
    )
    assert ents["type"].to_list() == ["PERSON"]


def test_relationships_merged_degree_no_dangling():
    ents, rels, _ = _merge()
    assert rels.columns == schemas.RELATIONSHIPS.names
    pairs = {(r["source"], r["target"], r["type"]): r for r in rels.iter_rows(named=True)}
    # "Marley"-"Scrooge" and "Marley"-"SCROOGE" are one undirected edge; the self-loop is gone
    assert pairs[("Marley", "Scrooge", "RELATED_TO")]["weight"] == 2.0
    assert pairs[("Marley", "Scrooge", "RELATED_TO")]["text_unit_ids"] == ["u1", "u2"]
    assert all(r["source"] != r["target"] for r in pairs.values())
    assert ("Scrooge", "London", "LIVES_IN") in pairs  # directed type keeps its direction
    assert ("London", "Scrooge", "RELATED_TO") in pairs
    assert rels.height == 4
    ids = set(ents["id"])
    assert set(rels["source_id"]) <= ids and set(rels["target_id"]) <= ids
    by_title = dict(zip(ents["title"], ents["id"], strict=True))
    for r in rels.iter_rows(named=True):
        assert by_title[r["source"]] == r["source_id"] and by_title[r["target"]] == r["target_id"]
    deg = dict(zip(ents["title"], ents["degree"], strict=True))
    assert deg == {"Scrooge": 3, "Marley": 1, "Fred": 1, "London": 1}
    r = pairs[("Marley", "Scrooge", "RELATED_TO")]
    assert r["combined_degree"] == 4
    assert r["id"] == stable_id("marley", "scrooge", "RELATED_TO")


def test_stable_across_runs_and_row_order():
    a = _merge()
    b = _merge(ents=list(reversed(ENTS)), rels=list(reversed(RELS)))
    for x, y in zip(a, b, strict=True):
        assert x.sort(x.columns[0]).equals(y.sort(y.columns[0]))
    assert a[0].equals(b[0]) and a[1].equals(b[1])


def test_description_token_limit_and_ranking():
    long = [
        (f"u{i}", "Scrooge", "PERSON", f"Sentence number {i} about Scrooge " + "x " * 20)
        for i in range(30)
    ]
    shared = [(f"v{i}", "Scrooge", "PERSON", "Scrooge is shared by many units.") for i in range(3)]
    units = pl.DataFrame({"id": [r[0] for r in long + shared], "text": "t"})
    ents, _, _ = _merge(ents=long + shared, rels=[], units=units, description_max_tokens=60)
    d = ents["description"][0]
    assert count_tokens(d) <= 60
    assert d.startswith("Scrooge is shared by many units.")  # most units first
    one = [("u", "A", "PERSON", "word " * 500)]
    ents, _, _ = _merge(
        ents=one, rels=[], units=pl.DataFrame({"id": ["u"]}), description_max_tokens=20
    )
    assert 0 < count_tokens(ents["description"][0]) <= 20


def test_text_units_filled():
    ents, rels, tu = _merge()
    assert tu["id"].to_list() == UNITS["id"].to_list()  # order and rows kept
    assert "text" in tu.columns
    row = dict(zip(tu["id"], tu["entity_ids"].to_list(), strict=True))
    ids = dict(zip(ents["title"], ents["id"], strict=True))
    assert row["u4"] == sorted([ids["Scrooge"], ids["London"]])
    assert row["u5"] == []
    rrow = dict(zip(tu["id"], tu["relationship_ids"].to_list(), strict=True))
    assert len(rrow["u4"]) == 2 and rrow["u5"] == []
    for e in ents.iter_rows(named=True):
        for u in e["text_unit_ids"]:
            assert e["id"] in row[u]


def test_relation_endpoint_without_entity_row_becomes_entity():
    ents, rels, _ = _merge(
        ents=[("u1", "Scrooge", "PERSON", "s")],
        rels=[("u1", "Scrooge", "Counting-house", "WORKS_AT", "Scrooge's counting-house.", 1.0)],
        units=pl.DataFrame({"id": ["u1"]}),
    )
    assert set(ents["title"]) == {"Scrooge", "Counting-house"}
    assert rels.height == 1


def test_an_endpoint_of_a_swapped_symmetric_relation_keeps_its_own_title():
    """A symmetric relation is stored with its ends in key order; an end no entity row names
    takes its title from its own side, not from the other end ("marley" titled "Scrooge")."""
    ents, rels, _ = _merge(
        ents=[],
        rels=[("u1", "Scrooge", "Marley", "RELATED_TO", "Scrooge and Marley.", 1.0)],
        units=pl.DataFrame({"id": ["u1"]}),
    )
    assert sorted(ents["title"]) == ["Marley", "Scrooge"]
    assert rels.select("source", "target").row(0) == ("Marley", "Scrooge")


def test_empty_inputs():
    ents, rels, tu = merge_graph(
        schemas.empty("extracted_entities"),
        schemas.empty("extracted_relationships"),
        UNITS,
        GraphSettings(),
    )
    assert ents.height == 0 and rels.height == 0
    assert ents.columns == schemas.ENTITIES.names and rels.columns == schemas.RELATIONSHIPS.names
    assert tu["entity_ids"].to_list() == [[]] * UNITS.height


def test_slices_do_not_change_the_output(monkeypatch):
    """Descriptions and id lists are built SLICE_ROWS rows at a time: any slicing gives
    the same tables."""
    whole = _merge(description_max_tokens=20)
    monkeypatch.setattr(graph, "SLICE_ROWS", 1)
    for a, b in zip(whole, _merge(description_max_tokens=20), strict=True):
        assert a.equals(b)


def test_null_fields():
    ents, rels, tu = _merge(
        ents=[
            ("u1", "Scrooge", None, None),
            ("u1", None, "PERSON", "no title: dropped"),
            (None, "Scrooge", "PERSON", "Scrooge, no unit."),
            ("u2", "...", "PERSON", "no key: dropped"),
        ],
        rels=[("u2", "Marley", "Scrooge", None, "", None), ("u2", None, "Marley", "X", "x", 1.0)],
        units=pl.DataFrame({"id": ["u1", "u2", None]}),
    )
    assert ents["title"].to_list() == ["Scrooge", "Marley"]
    sc, marley = ents.iter_rows(named=True)
    assert sc["type"] == "PERSON" and sc["description"] == "Scrooge, no unit."
    assert sc["text_unit_ids"] == [None, "u1"] and sc["frequency"] == 2
    assert marley["type"] == "CONCEPT" and marley["text_unit_ids"] == ["u2"]
    r = rels.row(0, named=True)
    assert rels.height == 1 and (r["type"], r["weight"], r["description"]) == (
        "RELATED_TO",
        1.0,
        "",
    )
    assert [len(x) for x in tu["entity_ids"]] == [1, 1, 0]
    assert [len(x) for x in tu["relationship_ids"]] == [0, 1, 0]
