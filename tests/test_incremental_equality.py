"""Issue 49's equality guard: after a seeded sequence of 20 edits, additions, deletions,
moves, a retitle and a title-form flip (tests/edit_sequence.py), with an incremental
`run_index` after every OPS_PER_RUN of them, every table of the index equals a full
re-index of the same input folder into a fresh output folder.

Why: the corpus-wide tail is being made incremental (carry unchanged rows over, recompute
only what an edit touched); a carried-over row that a full index would have computed
differently is silent corruption, and only a comparison with a full run can see it. The
corpus is small (200 short documents, 4 shards) so the runs stay quick, but built so that
edits reach rows of documents they did not touch (a test shows they do).

Allowed differences, each with its reason, are this module's constants: EXCLUDED columns,
TOLERANCE, UNORDERED tables (none), LANCE_EXCLUDED columns, VECTOR_TOLERANCE. The
POLICY_TABLES, communities and reports, are checked against the carry-over policy instead
(docs/incremental.md): a community's rows are what its members make them, every id it
lists exists, and every report reads as one assembled now from the same index (so it
names only entities that exist, and quotes nothing deleted).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import polars as pl
import pytest
from edit_sequence import FORM_A, FORM_B, N_DOCS, N_OPS, first_corpus, operations

from app.run import run_index
from pipeline.communities.reports.carry_digests import read_rows
from pipeline.communities.reports.offline import INPUT_COLUMNS as REPORT_INPUTS
from pipeline.communities.reports.offline import build_reports
from pipeline.communities.reports.reuse_unchanged import input_rows
from pipeline.config import load_settings
from pipeline.graph.titles import title_key
from pipeline.ids import stable_id
from pipeline.schemas import TABLES, VECTOR_TABLES
from pipeline.storage import store
from pipeline.vectors import end_titles, row_digests
from pipeline.vectors.build_tables import read_source
from pipeline.vectors.texts import row_text

# operations between two incremental runs: 2 keeps the test near a minute on the 2-core
# machine (an incremental run's fixed cost, Dagster's and the tail's, is ~3 s of CPU)
OPS_PER_RUN = 2
CONFIG = "storage:\n  shards: 4\n"

# Columns that may differ from a full re-index, and why (table -> {column: reason}).
EXCLUDED: dict[str, dict[str, str]] = {
    "entities": {
        "human_readable_id": "carried from run to run (pipeline.ids.carry_short_ids): reports "
        "and query contexts cite it, so a new entity is numbered after the largest"
    },
    "relationships": {"human_readable_id": "carried like entities' (carry_short_ids)"},
}
# Float columns compared within a tolerance, and why (table -> {column: tolerance}).
TOLERANCE: dict[str, dict[str, float]] = {
    # cosines of section vectors, rounded to 6 places: vectors may differ within
    # VECTOR_TOLERANCE (below), and a rounding may then fall the other way
    "same_topic_edges": {"weight": 1e-5},
}
# Tables whose stored row order may differ, and why: none. Every table's order is defined by
# the code writing it (a sharded table shard by shard, each in document and reading order;
# the tail's tables sorted), so a carried-over row must take the place a full run gives it.
UNORDERED: dict[str, str] = {}
# Columns that name a row of a table without an `id`, to say which rows differ and how
# (rows sharing them are paired in order); others: all scalar columns.
KEYS: dict[str, list[str]] = {
    "document_edges": ["source_id", "type", "marker_text"],
    "structure_edges": ["source_id", "type", "marker_text"],
    "same_topic_edges": ["source_id", "target_id"],
    "document_links": ["document_id", "source_id", "href"],
    "extracted_entities": ["text_unit_id", "title"],
    "extracted_relationships": ["text_unit_id", "source", "target", "type"],
}
# Tables compared with the carry-over policy rather than with the full index: communities
# keep the last run's hierarchy within graph.incremental_max_change, reports keep their
# text while their inputs are unchanged (docs/incremental.md).
POLICY_TABLES = ("communities", "community_reports")
# Lance columns that may differ, and why.
LANCE_EXCLUDED = {"created_at": "when the table was written (pipeline.vectors.lance)"}
# Vectors are compared within this: the full index embeds every text unit again in other
# batches (other padding), the incremental one reads most from its embedding cache.
VECTOR_TOLERANCE = 1e-5
SHOWN = 5  # differing rows a failure shows


# ------------------------------------------------------------------------------ runs


def _index(config: Path, inp: Path, out: Path, modes: list | None = None) -> float:
    """Index `inp` into `out` (incrementally when `out` holds an index): the seconds taken;
    each materialization's `incremental` metadata appended to `modes` ({asset: mode})."""
    start = time.perf_counter()
    result = run_index(str(config), str(inp), str(out), log_level="ERROR")
    assert result.success
    if modes is not None:
        events = [e.materialization for e in result.get_asset_materialization_events()]
        mode = {m.asset_key.to_user_string(): m.metadata.get("incremental") for m in events}
        ways = {
            key: [m.metadata[key].value for m in events if key in m.metadata]
            for key in ("input_rows", "digests_hashed")
        }
        modes.append({k: v.value for k, v in mode.items() if v is not None} | ways)
    return round(time.perf_counter() - start, 1)


def _rows_difference(out: Path) -> str:
    """'' when the reports' record of their input rows (carry_digests.ROWS, patched from
    the rows the graph step listed: pipeline.storage.changed_rows) is the rows hashed from
    the index's tables now; else how it differs. A row the list left out keeps its last
    hash, and the reports fed by it their stale text."""
    version = store.resolve(out)
    tables = [
        store.read_table(version, n, [*dict.fromkeys([*REPORT_INPUTS[n], "human_readable_id"])])
        for n in ("entities", "relationships", "text_units")
    ]
    by = ["kind", "k"]
    recorded, now = read_rows(version), input_rows(*tables)
    if recorded is None:
        return "no rows recorded"
    now = now.select(recorded.columns).sort(by)
    return table_difference("rows", recorded.sort(by), now, sides=("recorded", "hashed_now"))


def _digests_difference(out: Path, config: Path) -> str:
    """'' when the relationships' recorded row digests (patched from the rows the graph step
    listed: pipeline.vectors.listed_digests) are those made from the index's whole tables
    now; else how they differ. A row left out keeps a stale digest, and with it a stale
    vector the next runs never rewrite."""
    version = store.resolve(out)
    settings = load_settings(str(config)).embedding
    recorded = pl.read_parquet(row_digests.digest_path(version, "relationships"))
    units = row_digests.table_digests("text_units", read_source(version, "text_units"), {})
    ents = read_source(version, "entities")
    titles = row_digests.title_digests(ents, end_titles.titled_rows(ents, settings))
    known = {"text_units": units, row_digests.ENTITY_TITLES: titles}
    rels = read_source(version, "relationships")
    now = row_digests.table_digests(
        "relationships", rels, known, relationships=settings.relationship_vectors
    )
    return table_difference("relationship digests", recorded.sort("id"), now.sort("id"))


# The steps that carry rows over from the version a run started from (issue 49): each must
# have done so in the sequence's incremental runs, or the equality would prove nothing.
CARRYING = (
    "documents", "sections", "text_units", "entities", "relationships", "structure_edges",
    "same_topic_edges", "lexical_index", "text_units_vectors", "content_nodes_vectors",
    "entities_vectors", "relationships_vectors", "community_reports_vectors",
)  # fmt: skip


# tables of the first index kept to see what the operations changed
SNAPSHOT = ("documents", "content_nodes", "sections", "structure_edges", "same_topic_edges")


def _title(out: Path) -> str:
    """The title of the entity written as FORM_A and FORM_B (its id hashes their key)."""
    ents = store.read_table(out, "entities", ["id", "title"])
    return ents.filter(pl.col("id") == stable_id(title_key(FORM_A)))["title"].item()


@pytest.fixture(scope="module")
def indexes(shared_data: Path, tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("equality")
    inp, inc, full = base / "in", base / "incremental", base / "full"
    config = base / "docgraph.yaml"
    config.write_text(CONFIG)
    corpus = first_corpus(inp, shared_data / "musique" / "musique_train_corpus.json")
    times = {"first": _index(config, inp, inc)}
    titles = {"first": _title(inc)}
    first = {name: store.read_table(inc, name) for name in SNAPSHOT}
    log, runs, kinds, modes, rows, digests = [], [], operations(), [], [], []
    for at in range(0, N_OPS, OPS_PER_RUN):
        batch = kinds[at : at + OPS_PER_RUN]
        log += [getattr(corpus, f"op_{kind}")() for kind in batch]
        runs.append(_index(config, inp, inc, modes))
        log.append(f"-- incremental run {len(runs)}")
        rows.append(_rows_difference(inc))
        digests.append(_digests_difference(inc, config))
        if "form" in batch:
            titles["form"] = _title(inc)
    times["incremental"] = runs
    times["full"] = _index(config, inp, full)
    print(f"\nindex runs (s): {times}\n" + "\n".join(log))  # shown when a test fails
    return {
        "inc": inc,
        "full": full,
        "log": log,
        "titles": titles,
        "corpus": corpus,
        "first": first,
        "config": config,
        "modes": modes,
        "rows": rows,
        "digests": digests,
    }


def test_the_reports_input_rows_are_the_tables_rows_after_every_run(indexes):
    """Every incremental run recorded the reports' input rows as hashing the tables gives
    them, and some patched them from the graph step's list (else this proves nothing)."""
    assert not [p for p in indexes["rows"] if p], "\n\n".join(p for p in indexes["rows"] if p)
    ways = [w for m in indexes["modes"] for w in m["input_rows"]]
    assert "listed by the graph step hashed" in ways, ways


def test_the_relationship_digests_are_the_tables_after_every_run(indexes):
    """Every incremental run recorded the relationships' row digests as the whole tables
    make them, and some patched them from the graph step's list (else this proves nothing)."""
    found = [p for p in indexes["digests"] if p]
    assert not found, "\n\n".join(found)
    ways = [w for m in indexes["modes"] for w in m["digests_hashed"]]
    assert any("listed by the graph step" in w for w in ways), ways


def test_every_carrying_step_carried_rows_over_in_the_sequence(indexes):
    """The incremental runs took the carried paths (a step that always ran whole would pass
    the equality tests without testing the carry-over)."""
    carried = {name: [m.get(name) for m in indexes["modes"]] for name in CARRYING}
    assert all("carried" in modes for modes in carried.values()), carried


# ------------------------------------------------------------------------------ comparing


def _scalar(frame: pl.DataFrame) -> list[str]:
    return [c for c, t in frame.schema.items() if not isinstance(t, (pl.List, pl.Struct))]


def _keyed(frame: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """`frame` sorted on `key` (stably), with `_n` numbering rows that share a key."""
    return frame.sort(key, maintain_order=True, nulls_last=True).with_columns(
        pl.int_range(pl.len()).over(key).alias("_n")
    )


def _rows(frame: pl.DataFrame, n: int = SHOWN) -> str:
    def clip(value: object) -> str:
        text = repr(value)
        return text if len(text) <= 120 else text[:117] + "..."

    return "\n".join(
        "    " + ", ".join(f"{k}={clip(v)}" for k, v in row.items() if k != "_n")
        for row in frame.head(n).iter_rows(named=True)
    )


def table_difference(
    name: str,
    inc: pl.DataFrame,
    full: pl.DataFrame,
    ordered: bool = True,
    tolerance: dict[str, float] | None = None,
    sides: tuple[str, str] = ("incremental", "full"),
) -> str:
    """'' when the tables hold the same rows (in the same order when `ordered`; the columns
    of `tolerance` within it), else a message naming the columns and a few rows that differ
    (`sides`: what the two tables are)."""
    if inc.columns != full.columns:
        return f"{name}: columns {inc.columns} != the {sides[1]} table's {full.columns}"
    loose = [c for c in tolerance or {} if c in inc.columns]
    if not ordered:
        by = [c for c in _scalar(inc) if c not in loose] + loose
        inc, full = (f.sort(by, maintain_order=True, nulls_last=True) for f in (inc, full))
    exact = _exact_difference(name, inc.drop(loose), full.drop(loose), ordered, sides)
    if exact:
        return exact
    parts = []
    for c in loose:
        off = (inc[c] - full[c]).abs()
        far = off > tolerance[c]
        if far.any():
            rows = inc.with_columns(full[c].alias(f"{c}__{sides[1]}")).filter(far)
            parts.append(
                f"{name}: column {c!r} differs by more than {tolerance[c]} in {far.sum()} rows,"
                f" e.g.\n{_rows(rows)}"
            )
    return "\n".join(parts)


def _exact_difference(
    name: str, inc: pl.DataFrame, full: pl.DataFrame, ordered: bool, sides: tuple[str, str]
) -> str:
    if inc.equals(full):
        return ""
    if _keyed(inc, _scalar(inc)).equals(_keyed(full, _scalar(full))):
        if not ordered:
            return ""
        at = next(i for i in range(inc.height) if inc[i].rows() != full[i].rows())
        return (
            f"{name}: same rows in another order; first difference at row {at}:\n"
            f"  {sides[0]}: {inc[at].rows(named=True)}\n  {sides[1]}: {full[at].rows(named=True)}"
        )
    parts = [f"{name}: {inc.height} rows in the {sides[0]} table, {full.height} in the {sides[1]}"]
    ids = "id" in inc.columns and inc["id"].n_unique() == inc.height
    key = ["id"] if ids else [c for c in KEYS.get(name, _scalar(inc)) if c in inc.columns]
    a, b, on = _keyed(inc, key), _keyed(full, key), key + ["_n"]
    suffix = f"__{sides[1]}"
    both = a.join(b, on=on, suffix=suffix, maintain_order="left")
    for c in inc.columns:  # rows of one key with other values: name the columns
        if c in on:
            continue
        pairs = zip(both[c].to_list(), both[c + suffix].to_list(), strict=True)
        mask = pl.Series([x != y for x, y in pairs], dtype=pl.Boolean)
        if mask.any():
            diff = both.filter(mask).select(*on, c, c + suffix)
            parts.append(f"  column {c!r} differs in {mask.sum()} rows, e.g.\n{_rows(diff)}")
    only_inc = a.join(b.select(on), on=on, how="anti", nulls_equal=True)
    only_full = b.join(a.select(on), on=on, how="anti", nulls_equal=True)
    if only_inc.height:
        parts.append(f"  {only_inc.height} rows only in the {sides[0]} table:\n{_rows(only_inc)}")
    if only_full.height:
        parts.append(f"  {only_full.height} rows only in the {sides[1]} table:\n{_rows(only_full)}")
    return "\n".join(parts)


def test_a_difference_names_the_table_the_columns_and_the_rows() -> None:
    """The comparison itself (no index): what it lets pass and what a failure says."""
    full = pl.DataFrame(
        {"id": ["a", "b", "c"], "n": [1, 2, 3], "w": [0.5, 0.25, 0.125], "ids": [["x"], [], ["y"]]}
    )
    assert table_difference("t", full, full.clone()) == ""
    assert table_difference("t", full.reverse(), full, ordered=False) == ""
    assert "another order" in table_difference("t", full.reverse(), full)
    changed = full.with_columns(pl.when(pl.col("id") == "b").then(9).otherwise("n").alias("n"))
    text = table_difference("t", changed, full)
    assert text.startswith("t:") and "column 'n' differs in 1 rows" in text and "n__full=2" in text
    listed = full.with_columns(pl.Series("ids", [["x"], ["z"], ["y"]]))
    assert "column 'ids' differs in 1 rows" in table_difference("t", listed, full)
    fewer = table_difference("t", full.head(2), full)
    assert "1 rows only in the full table" in fewer and "id='c'" in fewer
    plain = full.drop("id")  # no id column and no KEYS: rows keyed by their scalar values
    assert "rows only in the incremental table" in table_difference("e", changed.drop("id"), plain)
    links = pl.DataFrame(
        {"source_id": ["s", "s"], "type": ["REFERS_TO"] * 2, "marker_text": ["a", "b"]}
    ).with_columns(target_id=pl.Series([None, "t"], dtype=pl.Utf8))
    stale = links.with_columns(target_id=pl.lit(None, dtype=pl.Utf8))
    text = table_difference("structure_edges", stale, links)  # keyed by KEYS
    assert "column 'target_id' differs in 1 rows" in text and "marker_text='b'" in text
    moved = full.with_columns(pl.col("w") + 1e-6)
    assert table_difference("t", moved, full, tolerance={"w": 1e-5}) == ""
    assert "'w' differs by more than 1e-07" in table_difference(
        "t", moved, full, tolerance={"w": 1e-7}
    )
    assert "columns" in table_difference("t", full.drop("w"), full)


def _without(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    return frame.drop(list(EXCLUDED.get(name, {})))


def test_the_sequence_did_what_it_says(indexes) -> None:
    """The operations changed what they claim (else the comparison below proves little)."""
    log, titles = indexes["log"], indexes["titles"]
    ops = [line for line in log if not line.startswith("--")]
    assert len(ops) == N_OPS and {line.split()[0] for line in ops} >= {
        "append",
        "replace",
        "delete",
        "add",
        "move",
        "retitle",
        "flip",
    }
    assert titles == {"first": FORM_A, "form": FORM_B}


def _untouched(indexes) -> tuple[set[str], set[str], set[str]]:
    """(documents, sections, content nodes) that no operation changed: the same id before
    the operations and after them (a document's id hashes its path and its bytes)."""
    first, inc = indexes["first"], indexes["inc"]
    docs = set(first["documents"]["id"]) & set(store.read_table(inc, "documents")["id"])
    sections, nodes = (
        set(first[t].filter(pl.col("document_id").is_in(docs))["id"])
        for t in ("sections", "content_nodes")
    )
    return docs, sections, nodes


def test_the_operations_reach_rows_of_documents_they_did_not_touch(indexes) -> None:
    """What an incremental tail must not miss happened in the sequence: rows that belong to
    documents no operation touched changed with the others (so carrying such rows over
    unchanged fails the comparison)."""
    first, inc = indexes["first"], indexes["inc"]
    docs, sections, nodes = _untouched(indexes)
    assert N_DOCS // 2 < len(docs) < N_DOCS, len(docs)
    # a link of an untouched document resolves elsewhere (its target added, moved, retitled
    # or deleted)
    key = ["source_id", "marker_text", "target_id", "metadata"]
    links = [
        t.filter(pl.col("type") == "REFERS_TO", pl.col("source_id").is_in(nodes)).select(key)
        for t in (first["structure_edges"], store.read_table(inc, "structure_edges"))
    ]
    redo = "the sequence no longer shows it: change tests/edit_sequence.py until it does"
    assert links[0].join(links[1], on=key, how="anti").height > 0, f"no link changed; {redo}"
    # a SAME_TOPIC edge between untouched sections comes or goes
    edges = [
        t.filter(pl.col("source_id").is_in(sections), pl.col("target_id").is_in(sections))
        for t in (first["same_topic_edges"], store.read_table(inc, "same_topic_edges"))
    ]
    pair = ["source_id", "target_id"]
    same = edges[0].select(pair).sort(pair).equals(edges[1].select(pair).sort(pair))
    assert not same, f"no SAME_TOPIC edge changed; {redo}"
    # a relationship held only by untouched documents' text units takes the new title
    units = set(store.read_table(inc, "text_units").filter(pl.col("document_id").is_in(docs))["id"])
    renamed = store.read_table(inc, "relationships").filter(
        pl.col("text_unit_ids").list.eval(pl.element().is_in(units)).list.all(),
        (pl.col("source") == FORM_B) | (pl.col("target") == FORM_B),
    )
    assert renamed.height > 0, f"no relationship of untouched documents renamed; {redo}"


def test_every_table_equals_a_full_reindex(indexes) -> None:
    inc, full = indexes["inc"], indexes["full"]
    problems = []
    for name in TABLES:
        if name in POLICY_TABLES:
            continue
        a, b = store.read_table(inc, name), store.read_table(full, name)
        a, b = _without(name, a), _without(name, b)
        ordered, loose = name not in UNORDERED, TOLERANCE.get(name)
        problems.append(table_difference(name, a, b, ordered, loose))
    problems = [p for p in problems if p]
    assert not problems, "\n\n".join(problems) + "\n\noperations:\n" + "\n".join(indexes["log"])


# ------------------------------------------------------------------------------ policy

_REFS = re.compile(r"(Entities|Relationships|Sources) \(([^)]*)\)")


def _refs(text: str) -> dict[str, set[int]]:
    """The short ids a report cites ("[Data: Entities (2, 14, +more); Relationships (7)]")."""
    out: dict[str, set[int]] = {}
    for kind, ids in _REFS.findall(text):
        out.setdefault(kind, set()).update(int(i) for i in re.findall(r"\d+", ids))
    return out


def _joins_titles(title: str, names: set[str]) -> bool:
    """Whether `title` is names joined as compose_text.join_titles joins them ("A, B and C")."""
    ends = {0}
    for at in range(len(title) + 1):
        if at not in ends:
            continue
        for name in names:
            if title.startswith(name, at):
                stop = at + len(name)
                if stop == len(title):
                    return True
                for sep in (", ", " and "):
                    if title.startswith(sep, stop):
                        ends.add(stop + len(sep))
    return False


def community_problems(out: Path) -> list[str]:
    """What breaks the carry-over policy in the communities of index `out`: each community's
    rows are what its members make them (table.communities_table: a relationship with both
    ends inside, a text unit of a member, the id a hash of level and members), the hierarchy
    nests (children partition their parent, a level's communities are disjoint), and every
    id it lists exists."""
    com = store.read_table(out, "communities")
    ents = store.read_table(out, "entities", ["id", "text_unit_ids"])
    rels = store.read_table(out, "relationships", ["id", "source_id", "target_id"])
    units = set(store.read_table(out, "text_units", ["id"])["id"])
    unit_of = dict(ents.iter_rows())
    ends = {r: (s, t) for r, s, t in rels.iter_rows()}
    rows = {r["community"]: r for r in com.iter_rows(named=True)}
    bad = []
    for c, r in rows.items():
        members = set(r["entity_ids"])
        if missing := members - set(unit_of):
            bad.append(f"community {c} lists {len(missing)} entities that do not exist")
        if missing := set(r["relationship_ids"]) - set(ends):
            bad.append(f"community {c} lists {len(missing)} relationships that do not exist")
        if missing := set(r["text_unit_ids"]) - units:
            bad.append(f"community {c} lists {len(missing)} text units that do not exist")
        inside = sorted(i for i, (s, t) in ends.items() if s in members and t in members)
        held = sorted({u for e in members & set(unit_of) for u in unit_of[e]})
        expected = {
            "entity_ids": sorted(members),
            "relationship_ids": inside,
            "text_unit_ids": held,
            "size": len(members),
            "id": stable_id("community", str(r["level"]), ",".join(r["entity_ids"])),
            "human_readable_id": c,
            "title": f"Community {c}",
        }
        for column, value in expected.items():
            if r[column] != value:
                bad.append(f"community {c}: {column} is not what its members make it")
        if r["parent"] != -1 and (
            r["parent"] not in rows
            or c not in rows[r["parent"]]["children"]
            or rows[r["parent"]]["level"] != r["level"] - 1
        ):
            bad.append(f"community {c}: parent {r['parent']} does not hold it")
        kids = [set(rows[k]["entity_ids"]) for k in r["children"] if k in rows]
        if r["children"] and (
            len(kids) != len(r["children"])
            or set().union(*kids) != members
            or sum(map(len, kids)) != len(members)
        ):
            bad.append(f"community {c}: its children do not partition it")
    for level in com["level"].unique().to_list():
        lists = com.filter(pl.col("level") == level)["entity_ids"].to_list()
        if sum(map(len, lists)) != len(set().union(*map(set, lists))):
            bad.append(f"level {level}: an entity is in two communities")
    return bad


def report_problems(out: Path, gone: set[str]) -> list[str]:
    """What breaks the policy in the reports of index `out`: one report per community, with
    its community's number, level, parent, children and size; every entity and relationship
    it cites by short id exists; every entity it names by title in its title and findings
    is a member of its community (offline reports name members and their relationships); no
    sentence of `gone` (removed from every document) is quoted."""
    com = store.read_table(out, "communities")
    rep = store.read_table(out, "community_reports")
    ents = store.read_table(out, "entities", ["id", "human_readable_id", "title"])
    rel_short = set(
        store.read_table(out, "relationships", ["human_readable_id"])["human_readable_id"]
    )
    ent_short, title_of = (
        set(ents["human_readable_id"]),
        dict(ents.select("id", "title").iter_rows()),
    )
    rows = {r["community"]: r for r in com.iter_rows(named=True)}
    bad = []
    if sorted(rep["community"]) != sorted(rows):
        bad.append("the reports' communities are not the communities")
    for r in rep.iter_rows(named=True):
        c = rows.get(r["community"])
        if c is None:
            bad.append(f"report {r['community']}: no such community")
            continue
        for column in ("level", "parent", "children", "size"):
            if r[column] != c[column]:
                bad.append(f"report {r['community']}: {column} is not its community's")
        if r["id"] != stable_id("report", c["id"]):
            bad.append(f"report {r['community']}: its id is not its community's")
        refs = _refs(r["full_content"])
        if missing := refs.get("Entities", set()) - ent_short:
            bad.append(f"report {r['community']} cites entities {sorted(missing)}: none exist")
        if missing := refs.get("Relationships", set()) - rel_short:
            bad.append(f"report {r['community']} cites relationships {sorted(missing)}")
        names = {title_of[e] for e in c["entity_ids"] if e in title_of}
        if names and not _joins_titles(r["title"], names):
            bad.append(f"report {r['community']}: title {r['title']!r} names a non-member")
        for finding in r["findings"]:
            head = finding["summary"].split(" — ", 1)[0]
            if names and head not in names:
                bad.append(f"report {r['community']}: finding {head!r} is not a member")
        text = " ".join(r["full_content"].split())
        # a quote may be clipped (compose_text._clip): its first words are enough
        if quoted := [g for g in gone if " ".join(g.split())[:60] in text]:
            bad.append(f"report {r['community']} quotes removed text: {quoted[0]!r}")
    return bad


def test_communities_and_reports_follow_the_carry_over_policy(indexes) -> None:
    inc, full, gone = indexes["inc"], indexes["full"], indexes["corpus"].gone()
    for out in (full, inc):  # the full index shows that the checks hold at all
        problems = community_problems(out) + report_problems(out, gone)
        assert not problems, f"{out.name}:\n" + "\n".join(problems[:20])
    for name in ("entities", "relationships"):  # carried short ids stay unique
        short = store.read_table(inc, name, ["human_readable_id"])["human_readable_id"]
        assert short.n_unique() == short.len(), f"{name}: a human_readable_id repeats"
    # new entities join their neighbours' communities: the top level covers what a full
    # index's does (every entity with a relationship)
    levels = [
        set().union(
            *store.read_table(o, "communities").filter(pl.col("level") == 0)["entity_ids"].to_list()
        )
        for o in (inc, full)
    ]
    assert levels[0] == levels[1], (
        f"{len(levels[0] - levels[1])} entities only in the incremental index's top level, "
        f"{len(levels[1] - levels[0])} only in the full index's"
    )


def test_every_report_is_what_its_community_makes_it(indexes) -> None:
    """A report kept from an earlier run (its inputs unchanged: reuse_unchanged) reads as
    one assembled now from the same index's tables: no stale name, quote or reference."""
    settings = load_settings(indexes["config"]).reports
    for out in (indexes["full"], indexes["inc"]):
        tables = [store.read_table(out, n) for n in ("communities", "entities", "relationships")]
        units = store.read_table(out, "text_units")
        fresh = build_reports(*tables, units, settings)
        stored = store.read_table(out, "community_reports")
        sides = ("stored", "assembled_now")
        problem = table_difference(f"community_reports of {out.name}", stored, fresh, sides=sides)
        assert not problem, problem


# ------------------------------------------------------------------------------ Lance


def lance_table(out: Path, name: str) -> pl.DataFrame:
    """Lance table `name` of the current version of `out`, sorted by id (Lance keeps no
    row order a reader may rely on), without the columns LANCE_EXCLUDED allows to differ."""
    import lancedb

    db = lancedb.connect(str(store.resolve(out) / store.LANCE_DIR))
    frame = pl.from_arrow(db.open_table(name).to_arrow())
    return frame.drop(list(LANCE_EXCLUDED)).sort("id")


def lance_difference(name: str, inc: pl.DataFrame, full: pl.DataFrame) -> str:
    """'' when both hold the same ids and columns, equal values, vectors within
    VECTOR_TOLERANCE; else what differs."""
    if inc.columns != full.columns:
        return f"lance {name}: columns {inc.columns} != full index's {full.columns}"
    if inc["id"].to_list() != full["id"].to_list():
        a, b = set(inc["id"]), set(full["id"])
        return (
            f"lance {name}: {len(a - b)} ids only in the incremental index "
            f"(e.g. {sorted(a - b)[:SHOWN]}), {len(b - a)} only in the full one "
            f"(e.g. {sorted(b - a)[:SHOWN]})"
        )
    parts = []
    other = [c for c in inc.columns if c not in ("id", "vector")]
    text = table_difference(
        f"lance {name}", inc.select("id", *other), full.select("id", *other), True
    )
    if text:
        parts.append(text)
    va, vb = (f["vector"].to_numpy() for f in (inc, full))
    off = abs(va - vb).max(axis=1) if len(va) else va
    if len(off) and off.max() > VECTOR_TOLERANCE:
        worst = off.argsort()[::-1][:SHOWN]
        shown = ", ".join(f"{inc['id'][int(i)]} ({off[i]:.2g})" for i in worst)
        parts.append(
            f"lance {name}: {(off > VECTOR_TOLERANCE).sum()} vectors differ by more than "
            f"{VECTOR_TOLERANCE}, e.g. {shown}"
        )
    return "\n".join(parts)


def test_the_lance_tables_equal_a_full_reindex(indexes) -> None:
    inc, full = indexes["inc"], indexes["full"]
    problems = []
    for name in VECTOR_TABLES:
        a, b = lance_table(inc, name), lance_table(full, name)
        if name == "community_reports":  # rows follow the reports (carry-over policy)
            for out, frame in ((inc, a), (full, b)):
                own = store.read_table(out, name).sort("id")
                own = own.select("id", row_text(name, own), "community", "level")
                problems.append(
                    table_difference(
                        f"lance {name} of {out.name}",
                        frame.select(own.columns),
                        own,
                        sides=("lance", "reports"),
                    )
                )
            same = set(a["id"]) & set(b["id"])  # the same members: the same derived vector
            a, b = (f.filter(pl.col("id").is_in(same)).select("id", "vector") for f in (a, b))
        problems.append(lance_difference(name, a, b))
    problems = [p for p in problems if p]
    assert not problems, "\n\n".join(problems) + "\n\noperations:\n" + "\n".join(indexes["log"])
