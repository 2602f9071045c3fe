"""Extractive community reports on a small hand-made story graph with obvious clusters."""

from __future__ import annotations

import json
import random
import re
import time

import polars as pl
import pytest

from pipeline.communities.leiden import hierarchical_leiden
from pipeline.communities.reports.offline import build_reports
from pipeline.config import GraphSettings, ReportSettings
from pipeline.ids import stable_id
from pipeline.schemas import TABLES, conform
from pipeline.tokens import count_tokens

UNITS = [
    "Scrooge and Marley were partners for many years. Marley died seven years ago, "
    "and Scrooge was his sole executor.",
    "Bob Cratchit worked for Scrooge in a cold counting-house. Cratchit's son Tiny Tim was ill.",
    "Fred invited Scrooge to Christmas dinner. Scrooge refused Fred and Cratchit laughed.",
    "Tiny Tim blessed everyone at the Cratchit table.\n\nScrooge became a second father "
    "to Tiny Tim.",
    "Fezziwig held a Christmas ball for Dick Wilkins and the young apprentices. "
    "Belle danced with Dick Wilkins at Fezziwig's ball.",
    "Belle left Scrooge because he loved gold more than her.",
    "Иван Петров встретил Марию в Москве. Мария и Иван Петров поженились весной.",
]
# title, type, description, aliases, units
ENTITIES = [
    ("Scrooge", "PERSON", "Scrooge and Marley were partners for many years.", [], [0, 1, 2, 3, 5]),
    ("Marley", "PERSON", "Marley died seven years ago.", [], [0]),
    (
        "Cratchit",
        "PERSON",
        "Bob Cratchit worked for Scrooge in a cold counting-house.",
        [],
        [1, 2, 3],
    ),
    ("Tiny Tim", "PERSON", "Cratchit's son Tiny Tim was ill.", [], [1, 3]),
    ("Fred", "PERSON", "Fred invited Scrooge to Christmas dinner.", [], [2]),
    ("Fezziwig", "PERSON", "Fezziwig held a Christmas ball.", [], [4]),
    ("Belle", "PERSON", "", [], [4, 5]),
    ("Dick Wilkins", "PERSON", "Dick Wilkins was an apprentice.", [], [4]),
    ("Иван Петров", "PERSON", "Иван Петров встретил Марию в Москве.", [], [6]),
    ("Мария", "PERSON", "", ["Марию"], [6]),
    ("Lonely", "THING", "Nobody relates to it.", [], []),
]
# source, target, weight, description
RELATIONS = [
    ("Scrooge", "Marley", 3.0, "Scrooge and Marley were partners for many years."),
    ("Scrooge", "Cratchit", 3.0, "Bob Cratchit worked for Scrooge in a cold counting-house."),
    ("Cratchit", "Tiny Tim", 3.0, "Cratchit's son Tiny Tim was ill."),
    ("Fred", "Scrooge", 2.0, "Fred invited Scrooge to Christmas dinner."),
    ("Scrooge", "Tiny Tim", 2.0, "Scrooge became a second father to Tiny Tim."),
    ("Fred", "Cratchit", 1.0, "Scrooge refused Fred and Cratchit laughed."),
    ("Marley", "Cratchit", 1.0, ""),
    ("Fezziwig", "Dick Wilkins", 1.0, "Fezziwig held a Christmas ball for Dick Wilkins."),
    ("Belle", "Dick Wilkins", 1.0, "Belle danced with Dick Wilkins at Fezziwig's ball."),
    ("Fezziwig", "Belle", 1.0, "Belle danced with Dick Wilkins at Fezziwig's ball."),
    ("Belle", "Scrooge", 0.3, "Belle left Scrooge because he loved gold more than her."),
    ("Иван Петров", "Мария", 1.0, "Иван Петров встретил Марию в Москве."),
]
CLUSTER_A = {"Scrooge", "Marley", "Cratchit", "Tiny Tim", "Fred"}
CLUSTER_B = {"Fezziwig", "Belle", "Dick Wilkins"}
CLUSTER_C = {"Иван Петров", "Мария"}


def _eid(title: str) -> str:
    return stable_id("entity", title.casefold())


@pytest.fixture(scope="module")
def graph() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    text_units = pl.DataFrame(
        {
            "id": [f"unit{i}" for i in range(len(UNITS))],
            "human_readable_id": list(range(len(UNITS))),
            "text": UNITS,
            "entity_ids": [[_eid(e[0]) for e in ENTITIES if i in e[4]] for i in range(len(UNITS))],
        }
    )
    degree = {e[0]: 0 for e in ENTITIES}
    for s, t, _, _ in RELATIONS:
        degree[s] += 1
        degree[t] += 1
    entities = pl.DataFrame(
        {
            "id": [_eid(e[0]) for e in ENTITIES],
            "human_readable_id": [100 + i for i in range(len(ENTITIES))],
            "title": [e[0] for e in ENTITIES],
            "type": [e[1] for e in ENTITIES],
            "description": [e[2] for e in ENTITIES],
            "aliases": [e[3] for e in ENTITIES],
            "text_unit_ids": [[f"unit{i}" for i in e[4]] for e in ENTITIES],
            "frequency": [len(e[4]) for e in ENTITIES],
            "degree": [degree[e[0]] for e in ENTITIES],
        },
        schema_overrides={"aliases": pl.List(pl.Utf8), "text_unit_ids": pl.List(pl.Utf8)},
    )
    relationships = pl.DataFrame(
        {
            "id": [f"rel{i}" for i in range(len(RELATIONS))],
            "human_readable_id": [200 + i for i in range(len(RELATIONS))],
            "source": [r[0] for r in RELATIONS],
            "target": [r[1] for r in RELATIONS],
            "source_id": [_eid(r[0]) for r in RELATIONS],
            "target_id": [_eid(r[1]) for r in RELATIONS],
            "type": ["RELATED"] * len(RELATIONS),
            "description": [r[3] for r in RELATIONS],
            "weight": [r[2] for r in RELATIONS],
        }
    )
    return entities, relationships, text_units


def _titles(entities: pl.DataFrame) -> dict[str, str]:
    return dict(zip(entities["id"].to_list(), entities["title"].to_list(), strict=True))


@pytest.fixture(scope="module")
def built(graph):
    entities, relationships, text_units = graph
    communities = hierarchical_leiden(entities, relationships, GraphSettings())
    reports = build_reports(communities, entities, relationships, text_units, ReportSettings())
    return communities, reports


def _by_cluster(communities: pl.DataFrame, entities: pl.DataFrame) -> dict[str, int]:
    titles = _titles(entities)
    out = {}
    for c, members in zip(
        communities["community"].to_list(), communities["entity_ids"].to_list(), strict=True
    ):
        names = {titles[m] for m in members}
        for key, cluster in (("A", CLUSTER_A), ("B", CLUSTER_B), ("C", CLUSTER_C)):
            if names == cluster:
                out[key] = c
    return out


def test_fixture_has_the_three_obvious_communities(graph, built) -> None:
    communities, _ = built
    assert set(_by_cluster(communities, graph[0])) == {"A", "B", "C"}
    assert len(communities) == 3


def test_schema_and_columns_copied(built) -> None:
    communities, reports = built
    assert reports.columns == TABLES["community_reports"].names
    assert conform(reports, "community_reports").schema == TABLES["community_reports"]
    assert len(reports) == len(communities)
    joined = communities.join(reports, on="community", suffix="_r")
    for col in ("level", "parent", "children", "size", "period"):
        assert joined[col].to_list() == joined[f"{col}_r"].to_list()
    assert reports["human_readable_id"].to_list() == reports["community"].to_list()
    assert joined["id_r"].to_list() == [stable_id("report", i) for i in joined["id"].to_list()]


def _row(reports: pl.DataFrame, community: int) -> dict:
    return reports.filter(pl.col("community") == community).row(0, named=True)


def test_reports_mention_the_right_members(graph, built) -> None:
    entities = graph[0]
    communities, reports = built
    ids = _by_cluster(communities, entities)
    for key, cluster in (("A", CLUSTER_A), ("B", CLUSTER_B), ("C", CLUSTER_C)):
        row = _row(reports, ids[key])
        names = re.split(r", | and ", row["title"])
        assert set(names) <= cluster and len(names) == min(3, len(cluster))
        mentioned = {n for n in cluster if n.casefold() in row["summary"].casefold()}
        assert len(mentioned) >= 2, row["summary"]
        for f in row["findings"]:
            head = f["summary"].split(" — ")[0]
            assert head in cluster, f
    a = _row(reports, ids["A"])
    assert a["title"].startswith("Scrooge")  # highest weighted degree inside A
    assert a["findings"][0]["summary"].startswith("Scrooge — PERSON, linked to ")
    assert "Scrooge" in a["summary"] and "Marley" in a["summary"]
    c = _row(reports, ids["C"])
    assert "Иван Петров" in c["summary"]  # Cyrillic evidence; "Марию" matched through an alias
    assert c["title"] in ("Иван Петров and Мария", "Мария and Иван Петров")


def test_ratings_follow_size_and_weight(graph, built) -> None:
    communities, reports = built
    ids = _by_cluster(communities, graph[0])
    rating = {k: _row(reports, c)["rating"] for k, c in ids.items()}
    assert rating["A"] > rating["B"] > rating["C"] > 0
    assert reports["rating"].max() == 10.0
    assert reports["rating"].is_between(0, 10).all()
    a = _row(reports, ids["A"])
    assert a["rating_explanation"].startswith("10.0: 5 entities, 7 relations")
    assert "over 5 text units" in a["rating_explanation"]
    assert "top 34% by weight" in a["rating_explanation"]


_REF = re.compile(r"\[Data: ([^\]]*)\]")
_PART = re.compile(r"(Entities|Relationships|Sources) \(([^)]*)\)")


def _refs(text: str) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for block in _REF.findall(text):
        for kind, ids in _PART.findall(block):
            out.setdefault(kind, set()).update(
                int(i) for i in ids.split(", ") if i and i != "+more"
            )
    return out


def test_findings_reference_valid_ids(graph, built) -> None:
    entities, relationships, _ = graph
    communities, reports = built
    e_hrid = dict(entities.select("id", "human_readable_id").iter_rows())
    r_hrid = dict(relationships.select("id", "human_readable_id").iter_rows())
    for comm, report in zip(
        communities.iter_rows(named=True), reports.iter_rows(named=True), strict=True
    ):
        assert comm["community"] == report["community"]
        members = {e_hrid[e] for e in comm["entity_ids"]}
        rels = {r_hrid[r] for r in comm["relationship_ids"]}
        assert 1 <= len(report["findings"]) <= ReportSettings().max_findings
        for f in report["findings"]:
            assert f["summary"] and f["explanation"]
            refs = _refs(f["explanation"])
            assert refs.get("Entities"), f
            assert refs["Entities"] <= members
            assert refs.get("Relationships", set()) <= rels
    # A's strongest relationship appears as a finding or as a member's evidence
    ids = _by_cluster(communities, entities)
    text = " ".join(f["explanation"] for f in _row(reports, ids["A"])["findings"])
    assert "Scrooge and Marley were partners" in text


def test_max_findings_setting(graph, built) -> None:
    communities, _ = built
    for n in (1, 2):
        reports = build_reports(communities, *graph, ReportSettings(max_findings=n))
        assert reports["findings"].list.len().max() == n


def test_full_content_and_token_limit(graph, built) -> None:
    communities, reports = built
    for row in reports.iter_rows(named=True):
        md = row["full_content"]
        assert md.startswith(f"# {row['title']}\n\n{row['summary']}\n\n")
        for f in row["findings"]:
            assert f"## {f['summary']}\n\n{f['explanation']}" in md
        assert count_tokens(md) <= ReportSettings().max_report_tokens
    small = build_reports(communities, *graph, ReportSettings(max_report_tokens=25))
    for full, cut in zip(reports["full_content"], small["full_content"], strict=True):
        assert count_tokens(cut) <= 25
        assert full.startswith(cut) and len(cut) < len(full)
    # the structured columns are not truncated
    assert small["findings"].to_list() == reports["findings"].to_list()


def test_json_parses_and_matches_columns(built) -> None:
    _, reports = built
    for row in reports.iter_rows(named=True):
        doc = json.loads(row["full_content_json"])
        assert sorted(doc) == ["findings", "rating", "rating_explanation", "summary", "title"]
        for key in ("title", "summary", "rating", "rating_explanation", "findings"):
            assert doc[key] == row[key]
        assert "\\u" not in row["full_content_json"]  # ensure_ascii=False keeps Cyrillic


def test_deterministic_and_order_independent(graph, built) -> None:
    entities, relationships, text_units = graph
    communities, reports = built
    again = build_reports(communities, entities, relationships, text_units, ReportSettings())
    assert again.equals(reports)
    shuffled = build_reports(
        communities.sample(fraction=1.0, shuffle=True, seed=3),
        entities.sample(fraction=1.0, shuffle=True, seed=4),
        relationships.sample(fraction=1.0, shuffle=True, seed=5),
        text_units.sample(fraction=1.0, shuffle=True, seed=6),
        ReportSettings(),
    )
    assert shuffled.equals(reports)


def test_parent_communities_get_reports_too(graph) -> None:
    entities, relationships, text_units = graph
    communities = hierarchical_leiden(entities, relationships, GraphSettings(max_cluster_size=3))
    assert communities["level"].max() >= 1  # A (5 members) is split
    reports = build_reports(communities, entities, relationships, text_units, ReportSettings())
    assert reports["community"].to_list() == communities["community"].to_list()
    assert reports["level"].to_list() == communities["level"].to_list()
    titles = _titles(entities)
    for comm, rep in zip(
        communities.iter_rows(named=True), reports.iter_rows(named=True), strict=True
    ):
        names = {titles[e] for e in comm["entity_ids"]}
        assert set(re.split(r", | and ", rep["title"])) <= names
        if comm["children"]:
            # the parent's summary covers members of more than one child
            kids = communities.filter(pl.col("community").is_in(comm["children"]))
            hit = [
                any(titles[e] in rep["summary"] for e in members)
                for members in kids["entity_ids"].to_list()
            ]
            assert sum(hit) >= 2, rep["summary"]


def test_reports_gathered_in_slices_and_batches_equal_those_gathered_at_once(
    graph, monkeypatch
) -> None:
    """gather_frames joins the communities' units to their sources a few at a time
    (UNITS_PER_SLICE) and scores candidates a batch of communities at a time, each batch
    with its own mentions and sources only: the reports equal those of one slice and one
    batch, on a hierarchy where a unit belongs to communities of every level."""
    from pipeline.communities.reports import gather_frames

    entities, relationships, text_units = graph
    communities = hierarchical_leiden(entities, relationships, GraphSettings(max_cluster_size=3))
    settings = ReportSettings()
    monkeypatch.setattr(gather_frames, "UNITS_PER_SLICE", 10**9)
    monkeypatch.setattr(gather_frames, "CANDIDATE_BATCH_PAIRS", 10**9)
    whole = build_reports(communities, entities, relationships, text_units, settings)
    monkeypatch.setattr(gather_frames, "UNITS_PER_SLICE", 2)
    monkeypatch.setattr(gather_frames, "CANDIDATE_BATCH_PAIRS", 3)
    sliced = build_reports(communities, entities, relationships, text_units, settings)
    assert sliced.equals(whole)
    assert whole["summary"].str.contains("Scrooge").any()


def test_sorted_pairs_are_polars_unique_and_sort() -> None:
    """find_evidence._sorted_pairs (one 64-bit key) gives the distinct (src, e) pairs in
    order, as polars' unique over the two columns and a sort do, up to the largest codes."""
    from pipeline.communities.reports.find_evidence import _sorted_pairs

    rng = random.Random(7)
    top = 2**32 - 1
    values = [(rng.choice([0, 1, 5, top]), rng.choice([0, 2, 9, top])) for _ in range(200)]
    pairs = pl.DataFrame(values, schema={"src": pl.UInt32, "e": pl.UInt32}, orient="row")
    assert _sorted_pairs(pairs).equals(pairs.unique().sort("src", "e"))


def test_empty_and_sparse_inputs(graph) -> None:
    entities, relationships, text_units = graph
    empty_comms = pl.from_arrow(TABLES["communities"].empty_table())
    out = build_reports(empty_comms, entities, relationships, text_units, ReportSettings())
    assert out.is_empty() and out.columns == TABLES["community_reports"].names
    # a community whose members have no descriptions and no text still gets a report
    communities = hierarchical_leiden(entities, relationships, GraphSettings())
    bare = entities.with_columns(pl.lit("").alias("description"))
    no_text = text_units.with_columns(pl.lit("").alias("text"))
    no_desc = relationships.with_columns(pl.lit("").alias("description"))
    out = build_reports(communities, bare, no_desc, no_text, ReportSettings())
    assert len(out) == len(communities)
    assert out["summary"].str.starts_with("A community of ").all()
    assert (out["findings"].list.len() > 0).all()


def test_scale_thousands_of_communities() -> None:
    rng = random.Random(0)
    n_groups, group = 1500, 4  # 1,500 communities of 4 entities, chains of 3 text units
    ids, titles, unit_rows, ent_units = [], [], [], []
    src, dst = [], []
    for g in range(n_groups):
        base = len(ids)
        names = [f"Person{g}x{k}" for k in range(group)]
        ids += [stable_id("e", n) for n in names]
        titles += names
        ent_units += [[f"u{g}"] for _ in names]
        text = " ".join(
            f"{names[a]} met {names[b]} near the river {rng.randint(1, 9)}."
            for a in range(group)
            for b in range(a + 1, group)
        )
        unit_rows.append((f"u{g}", text, ids[base:]))
        for a in range(group):
            for b in range(a + 1, group):
                src.append(ids[base + a])
                dst.append(ids[base + b])
    entities = pl.DataFrame(
        {
            "id": ids,
            "human_readable_id": list(range(len(ids))),
            "title": titles,
            "type": ["PERSON"] * len(ids),
            "description": [f"{t} lives near the river." for t in titles],
            "text_unit_ids": ent_units,
            "degree": [group - 1] * len(ids),
        }
    )
    relationships = pl.DataFrame(
        {
            "id": [f"r{i}" for i in range(len(src))],
            "human_readable_id": list(range(len(src))),
            "source_id": src,
            "target_id": dst,
            "description": ["They met." for _ in src],
            "weight": [1.0] * len(src),
        }
    )
    text_units = pl.DataFrame(
        {
            "id": [u[0] for u in unit_rows],
            "human_readable_id": list(range(len(unit_rows))),
            "text": [u[1] for u in unit_rows],
            "entity_ids": [u[2] for u in unit_rows],
        }
    )
    communities = hierarchical_leiden(entities, relationships, GraphSettings())
    assert len(communities) == n_groups
    count_tokens("warm up the tokenizer")
    start = time.perf_counter()
    reports = build_reports(communities, entities, relationships, text_units, ReportSettings())
    elapsed = time.perf_counter() - start
    assert len(reports) == n_groups
    assert elapsed < 10, elapsed  # ~0.5 s on 2 idle cores
    assert reports["summary"].str.contains("met").all()


def test_reports_of_unchanged_communities_are_kept_from_the_last_run(
    graph, tmp_path, monkeypatch
) -> None:
    """A report is a function of its community's rows in the inputs: a re-run keeps the last
    run's report of every community whose digest is unchanged, gathers only the others, and
    the result is the table a full build writes. The sidecar must describe the very rows of the last
    table (an LLM run's reports, a table never written) and come from this polars."""
    from pipeline.communities.reports import offline as reports_module
    from pipeline.communities.reports.offline import report_table
    from pipeline.communities.reports.reuse_unchanged import DIGESTS, read_sidecar, write_sidecar

    entities, relationships, text_units = graph
    communities = hierarchical_leiden(entities, relationships, GraphSettings(max_cluster_size=3))
    settings = ReportSettings()
    first = report_table(communities, entities, relationships, text_units, settings)
    assert first.kept == 0
    write_sidecar(tmp_path, first.reports, first.digests)
    args = (communities, entities, relationships, text_units, settings)

    again = report_table(*args, first.reports, read_sidecar(tmp_path))
    assert again.kept == first.reports.height and again.reports.equals(first.reports)

    # a unit added before all others renumbers them; a report never shows a unit's number,
    # only their order counts (it breaks ties): every report is kept, as a build writes it
    first_unit = text_units.head(1).with_columns(
        pl.lit("u-new").alias("id"), pl.lit("An unrelated note.").alias("text")
    )
    renumbered = pl.concat([first_unit, text_units]).with_columns(
        pl.int_range(pl.len()).alias("human_readable_id")
    )
    args_r = (communities, entities, relationships, renumbered, settings)
    moved = report_table(*args_r, first.reports, read_sidecar(tmp_path))
    assert moved.kept == first.reports.height and moved.reports.equals(build_reports(*args_r))

    # one entity's description changes: its communities (every level) are rebuilt
    ix = entities["title"].to_list().index("Fezziwig")
    changed = entities.with_columns(
        pl.when(pl.int_range(pl.len()) == ix)
        .then(pl.lit("Fezziwig kept a warehouse full of polonium."))
        .otherwise(pl.col("description"))
        .alias("description")
    )
    args = (communities, changed, relationships, text_units, settings)
    gathered: list[int] = []  # the digests come from the inputs: only these are gathered
    real_gather = reports_module.gather
    monkeypatch.setattr(
        reports_module, "gather", lambda c, *a: gathered.append(c.height) or real_gather(c, *a)
    )
    edit = report_table(*args, first.reports, read_sidecar(tmp_path))
    holding = communities.filter(pl.col("entity_ids").list.contains(_eid("Fezziwig"))).height
    assert 0 < holding < communities.height and gathered == [holding]
    assert edit.kept == communities.height - holding
    assert edit.reports.equals(build_reports(*args))
    assert "polonium" in " ".join(edit.reports["full_content"].to_list())

    # a new community elsewhere moves every rating percentile: texts are kept, every
    # rating is today's (the communities carried over, as an incremental run does)
    new = [("Alpha Ledger", "ORG", "Alpha Ledger audits Beta Bank."), ("Beta Bank", "ORG", "")]
    grown = pl.concat(
        [
            entities,
            pl.DataFrame(
                {
                    "id": [_eid(t) for t, _, _ in new],
                    "human_readable_id": [300, 301],
                    "title": [t for t, _, _ in new],
                    "type": [k for _, k, _ in new],
                    "description": [d for _, _, d in new],
                    "aliases": [[], []],
                    "text_unit_ids": [[], []],
                    "frequency": [0, 0],
                    "degree": [1, 1],
                },
                schema=entities.schema,
            ),
        ]
    )
    rel = {"id": ["rel99"], "human_readable_id": [299], "source": ["Alpha Ledger"]}
    rel |= {"target": ["Beta Bank"], "source_id": [_eid("Alpha Ledger")]}
    rel |= {"target_id": [_eid("Beta Bank")], "type": ["RELATED"]}
    rel |= {"description": ["Alpha Ledger audits Beta Bank."], "weight": [9.0]}
    more = pl.concat([relationships, pl.DataFrame(rel, schema=relationships.schema)])
    carried = hierarchical_leiden(
        grown, more, GraphSettings(max_cluster_size=3), previous=communities
    )
    assert carried.height > communities.height
    args = (carried, grown, more, text_units, settings)
    added = report_table(*args, first.reports, read_sidecar(tmp_path))
    assert added.kept == communities.height and added.reports.equals(build_reports(*args))
    old = first.reports.select("community", "rating_explanation")
    moved = added.reports.join(old, on="community").filter(
        pl.col("rating_explanation") != pl.col("rating_explanation_right")
    )
    assert moved.height > 0  # percentiles moved, and the kept reports show today's

    # rows the sidecar does not describe (an LLM run rewrote them) are never kept
    llm = first.reports.with_columns(pl.lit("An LLM report.").alias("summary"))
    assert report_table(*args, llm, read_sidecar(tmp_path)).kept == 0
    write_sidecar(tmp_path, llm, None)  # what an LLM run leaves: no sidecar
    assert not (tmp_path / DIGESTS).exists() and read_sidecar(tmp_path) is None
    # digests of another polars version mean nothing here
    write_sidecar(tmp_path, first.reports, first.digests)
    other = read_sidecar(tmp_path).with_columns(pl.lit("0.0.1").alias("polars"))
    assert report_table(*args, first.reports, other).kept == 0
    # a damaged or foreign sidecar costs the reuse, never the reports
    foreign = read_sidecar(tmp_path).drop("row_hash")
    assert report_table(*args, first.reports, foreign).kept == 0
    (tmp_path / DIGESTS).write_bytes(b"not parquet")
    assert read_sidecar(tmp_path) is None


def test_sentence_mentions_are_kept_per_source_from_the_last_run(graph, tmp_path, monkeypatch):
    """The evidence sidecar holds each source's sentence mentions: a source whose text and
    candidates (with their surface forms) did not change is neither split nor matched again,
    the reports are exactly those of a build without it, and a changed text or alias is
    matched afresh."""
    from pipeline.communities.reports import evidence_cache, find_evidence
    from pipeline.communities.reports.offline import report_table

    entities, relationships, text_units = graph
    communities = hierarchical_leiden(entities, relationships, GraphSettings(max_cluster_size=3))
    args = (communities, entities, relationships, text_units, ReportSettings())
    first = report_table(*args)
    evidence_cache.write_evidence(tmp_path, first.evidence)
    cache = evidence_cache.read_evidence(tmp_path)
    assert cache is not None and cache.height == first.evidence.height > 0

    split: list[int] = []  # the sources split: for matching, then for the shown sentences
    real = find_evidence.sentence_pool

    def pool(sources: pl.DataFrame) -> pl.DataFrame:
        if "key" in sources.columns:  # a gather's (a unit's view splits its text too)
            split.append(sources.height)
        return real(sources)

    monkeypatch.setattr(find_evidence, "sentence_pool", pool)
    again = report_table(*args, None, None, cache)
    assert again.reports.equals(first.reports)
    assert split[0] == 0  # every source's mentions came from the sidecar
    assert again.evidence.sort("kind", "key").equals(cache.sort("kind", "key"))

    # the sidecar is read: mentions blanked there change the reports
    blank = cache.with_columns(pl.lit([], pl.List(pl.UInt32)).alias(c) for c in ("at", "pos"))
    assert not report_table(*args, None, None, blank).reports.equals(first.reports)

    # an alias that a unit names, a new unit text: those sources are matched again
    ix = entities["title"].to_list().index("Tiny Tim")
    aliased = entities.with_columns(
        pl.when(pl.int_range(pl.len()) == ix)
        .then(pl.lit(["counting-house"], pl.List(pl.Utf8)))
        .otherwise(pl.col("aliases"))
        .alias("aliases")
    )
    units = text_units.with_columns(
        pl.when(pl.col("id") == "unit1")
        .then(pl.lit("Tiny Tim and Scrooge walked home. Cratchit followed Tiny Tim quietly."))
        .otherwise(pl.col("text"))
        .alias("text")
    )
    for changed in (
        (communities, aliased, relationships, text_units),
        (communities, entities, relationships, units),
    ):
        split.clear()
        built = report_table(*changed, ReportSettings(), None, None, cache)
        assert built.reports.equals(build_reports(*changed, ReportSettings()))
        assert not built.reports.equals(first.reports)  # the change shows
        assert 0 < split[0] < cache.height
    # a sidecar of another polars, or damaged, costs the reuse only
    first.evidence.with_columns(pl.lit("0.0.1").alias("polars")).write_parquet(
        tmp_path / evidence_cache.EVIDENCE
    )
    assert evidence_cache.read_evidence(tmp_path) is None
    (tmp_path / evidence_cache.EVIDENCE).write_bytes(b"not parquet")
    assert evidence_cache.read_evidence(tmp_path) is None
    evidence_cache.write_evidence(tmp_path, None)
    assert not (tmp_path / evidence_cache.EVIDENCE).exists()


def _first_run(graph, folder):
    """Communities of `graph` and their reports, whose digests and input rows are written
    to `folder` as a run leaves them."""
    from pipeline.communities.reports import carry_digests
    from pipeline.communities.reports.offline import report_table
    from pipeline.communities.reports.reuse_unchanged import write_sidecar

    communities = hierarchical_leiden(*graph[:2], GraphSettings(max_cluster_size=3))
    first = report_table(communities, *graph, ReportSettings())
    write_sidecar(folder, first.reports, first.digests)
    carry_digests.write_rows(folder, first.rows)
    return communities, first


def test_report_digests_are_carried_where_no_input_row_changed(graph, tmp_path) -> None:
    """A community's digest is the last run's when its row, the rows it names, its units'
    order and the settings are the same: the carried digests are those computed afresh, and
    a changed row, a reordering of units or other settings are computed again."""
    from pipeline.communities.reports import carry_digests
    from pipeline.communities.reports.offline import report_table
    from pipeline.communities.reports.reuse_unchanged import read_sidecar

    entities, relationships, text_units = graph
    communities, first = _first_run(graph, tmp_path)
    settings = ReportSettings()
    last = carry_digests.read_rows(tmp_path)
    assert last is not None and last.height == entities.height + relationships.height + 7

    def run(ents, units, settings=settings):
        args = (communities, ents, relationships, units, settings, first.reports)
        built = report_table(*args, read_sidecar(tmp_path), None, last)
        fresh = report_table(*args[:5])
        assert built.digests.equals(fresh.digests) and built.reports.equals(fresh.reports)
        return built.digests_carried

    assert run(entities, text_units) == communities.height
    # one entity's description: the communities that hold it (every level) are computed again
    changed = entities.with_columns(
        pl.when(pl.col("title") == "Belle")
        .then(pl.lit("Belle kept a shop."))
        .otherwise(pl.col("description"))
        .alias("description")
    )
    holding = communities.filter(pl.col("entity_ids").list.contains(_eid("Belle"))).height
    assert holding > 0 and run(changed, text_units) == communities.height - holding
    # units renumbered in the same order are carried; swapped, none is
    shifted = text_units.with_columns(pl.col("human_readable_id") + 10)
    assert run(entities, shifted) == communities.height
    swapped = text_units.with_columns(pl.col("human_readable_id").reverse())
    assert run(entities, swapped) == 0
    assert run(entities, text_units, ReportSettings(max_findings=2)) == 0
    (tmp_path / carry_digests.ROWS).write_bytes(b"not parquet")
    assert carry_digests.read_rows(tmp_path) is None


def test_a_unit_whose_edit_names_no_one_keeps_its_reports(graph, tmp_path) -> None:
    """An edit that renames a unit (its text changed) where no changed sentence names one of
    its entities: the unit's communities keep their digests and reports, which equal those
    built afresh; a changed sentence naming a member has them built again."""
    from pipeline.communities.reports import carry_digests
    from pipeline.communities.reports.offline import report_table
    from pipeline.communities.reports.reuse_unchanged import read_sidecar

    entities, relationships, text_units = graph
    communities, first = _first_run(graph, tmp_path)
    settings = ReportSettings()
    holding = communities.filter(pl.col("text_unit_ids").list.contains("unit1")).height
    assert holding > 0

    def edited(added: str) -> int:
        units = text_units.with_columns(
            pl.when(pl.col("id") == "unit1").then(pl.lit("unit1b")).otherwise("id").alias("id"),
            pl.when(pl.col("id") == "unit1")
            .then(pl.col("text") + added)
            .otherwise("text")
            .alias("text"),
        )
        renamed = pl.element().replace("unit1", "unit1b")
        comms = communities.with_columns(pl.col("text_unit_ids").list.eval(renamed.sort()))
        listed = {  # as the graph step lists them: the unit's entities (their unit lists)
            "entities": entities.filter(pl.col("text_unit_ids").list.contains("unit1"))["id"],
            "relationships": pl.Series([], dtype=pl.Utf8),
            "text_units": pl.Series(["unit1", "unit1b"]),
        }
        args = (comms, entities, relationships, units, settings, first.reports)
        last = carry_digests.read_rows(tmp_path)
        built = report_table(*args, read_sidecar(tmp_path), None, last, listed)
        fresh = report_table(*args[:5])
        assert built.reports.equals(fresh.reports)
        assert built.rows.sort("kind", "k").equals(fresh.rows.sort("kind", "k"))
        return built.digests_carried

    assert edited(" The weather was fine.") == communities.height
    assert edited(" Tiny Tim laughed.") == communities.height - holding


def test_only_a_gone_unit_and_a_new_one_with_its_view_and_number_pair() -> None:
    """`same_evidence` pairs a unit gone today with a new unit at its reference number and
    with its hash; a unit in both runs is never paired, whatever took its old number."""
    from pipeline.communities.reports.carry_digests import same_evidence

    def frame(rows):
        schema = {"kind": pl.UInt8, "k": pl.Utf8, "h": pl.UInt64, "order": pl.Int64}
        return pl.DataFrame(rows, schema=schema, orient="row")

    last = frame([(0, "e", 1, None), (2, "gone", 5, 1), (2, "kept", 6, 2)])
    rows = frame([(0, "e", 1, None), (2, "new", 5, 1), (2, "other", 6, 2), (2, "kept", 7, 3)])
    listed = frame([(2, k, 0, 0) for k in ("gone", "new", "other", "kept")]).select("kind", "k")
    changed, renamed = same_evidence(rows, listed, last)
    assert renamed.rows() == [("gone", "new")]
    assert sorted(changed["k"]) == ["kept", "other"]


def test_a_report_reads_only_its_own_communitys_rows(graph, tmp_path) -> None:
    """A community's candidate sentences are those of its own rows (members' descriptions,
    its relationships, its units). A sentence naming a member in a non-member's description
    (or in a relationship of another community) was its evidence once: the report then
    depended on rows its digest does not cover (at 10k documents a kept report differed from
    a fresh build after an edit) and on which communities were gathered together."""
    from pipeline.communities.reports.offline import report_table
    from pipeline.communities.reports.reuse_unchanged import read_sidecar, write_sidecar

    entities, relationships, text_units = graph
    communities = hierarchical_leiden(entities, relationships, GraphSettings(max_cluster_size=3))
    settings = ReportSettings()
    first = report_table(communities, entities, relationships, text_units, settings)
    write_sidecar(tmp_path, first.reports, first.digests)
    # an outsider linked to members by relationships another community holds, naming the
    # most of them at once (a sentence naming one member lost to the members' own)
    held = set(communities["relationship_ids"].explode().drop_nulls().to_list())
    titles = _titles(entities)
    linked: dict[tuple[int, str], list[str]] = {}
    for community, members in communities.select("community", "entity_ids").iter_rows():
        for r, s, t in relationships.select("id", "source_id", "target_id").iter_rows():
            for member, other in ((s, t), (t, s)):
                if r in held and member in members and other not in members:
                    linked.setdefault((community, titles[other]), []).append(titles[member])
    (_, outsider), named = max(linked.items(), key=lambda kv: len(kv[1]))
    assert len(named) >= 2
    told = f"{outsider} wrote to {', '.join(named)} about the harbour tax every single winter."
    changed = entities.with_columns(
        pl.when(pl.col("title") == outsider)
        .then(pl.lit(told))
        .otherwise(pl.col("description"))
        .alias("description")
    )
    args = (communities, changed, relationships, text_units, settings)
    edit = report_table(*args, first.reports, read_sidecar(tmp_path))
    fresh = build_reports(*args)
    assert edit.kept > 0 and edit.reports.equals(fresh)
    # the outsider's sentence shows only in the reports of communities that hold it
    shown = fresh.join(communities.select("community", "entity_ids"), on="community")
    for content, ids in shown.select("full_content", "entity_ids").iter_rows():
        assert ("harbour tax" in content) <= (_eid(outsider) in ids)
    # reports gathered in any company are those a build of all of them gives
    again = report_table(*args)
    write_sidecar(tmp_path, again.reports, again.digests)
    sidecar = read_sidecar(tmp_path)
    for keep in (sidecar.gather_every(2), sidecar.gather_every(2, offset=1)):
        some = report_table(*args, again.reports, keep)
        assert 0 < some.kept < fresh.height and some.reports.equals(fresh)


def test_sentences_whose_member_weights_sum_alike_tie_whatever_the_float_order() -> None:
    """find_evidence.candidates: a sentence naming members of weights 0.1, 0.2 and 0.4 and
    one naming a member of weight 0.7 score alike (their sums differ in the last bit only),
    so the better-ranked member decides, as it does when polars sums either in another
    order (a kept report once differed from a fresh one so)."""
    from pipeline.communities.reports.find_evidence import candidates

    summed = pl.Series([0.1, 0.2, 0.4]).sum()
    assert summed != 0.7  # the float sums this test is about differ
    u32 = pl.UInt32
    scored = pl.DataFrame(
        {"community": [0] * 4, "e": [0, 1, 2, 3], "rank": [0, 1, 2, 3], "mw": [0.7, 0.1, 0.2, 0.4]},
        schema={"community": u32, "e": u32, "rank": u32, "mw": pl.Float64},
    )
    mentions = pl.DataFrame(
        {"sid": [0, 0, 0, 1], "src": [0] * 4, "e": [1, 2, 3, 0]},
        schema={"sid": u32, "src": u32, "e": u32},
    )
    pool = pl.DataFrame(
        {"sid": [0, 1], "length": [100, 100], "sentence": ["three members", "one member"]},
        schema={"sid": u32, "length": pl.Int64, "sentence": pl.Utf8},
    )
    own = pl.DataFrame({"community": [0], "src": [0]}, schema={"community": u32, "src": u32})
    best = candidates(mentions, scored, pool, own)
    assert best.get_column("sentence").to_list() == ["one member", "three members"]
