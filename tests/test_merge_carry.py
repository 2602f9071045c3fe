"""The incremental merge (pipeline.graph.merge_carry + merge_splice) against the whole merge
of the same input, on a synthetic sharded corpus whose mention rows are written directly:
sentences repeated across documents (with other keys beside them in some), titles that flip
with an edit, relation ends no entity row names, symmetric types, fractional weights,
documents titled by an entity's name. A seeded sequence of edits, additions and deletions,
each run carried over the last one's tables."""

from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from pipeline import schemas
from pipeline.config import GraphSettings, LlmSettings
from pipeline.graph import merge_carry
from pipeline.graph.merge_carry import Recomputed, merge_whole, path_ordered_chunks, recompute
from pipeline.graph.merge_splice import LISTS, splice
from pipeline.graph.summarize_llm import summarize_descriptions
from pipeline.ids import carry_short_ids, stable_id
from pipeline.llm.client import LlmClient
from pipeline.llm.fake_server import FakeLlm
from pipeline.storage import store
from pipeline.storage.run_changes import RunChanges, row_changes

SHARDS = 4
FIRST = ["Ada", "Charles", "Mary", "Michael", "George", "Emmy", "Lise", "Niels"]
LAST = ["Lovelace", "Babbage", "Somerville", "Faraday", "Boole", "Noether", "Meitner"]
PLACES = ["London", "Paris", "Cambridge", "Turin", "Berlin", "Vienna", "Oslo", "Lyon"]
NAMES = [(f"{f} {ln}", "PERSON") for f in FIRST[:5] for ln in LAST[:5]] + [
    (p, "CITY") for p in PLACES
]
SETTINGS = GraphSettings()


def _variants(name: str) -> list[str]:
    """Display forms of one key: the name, upper case, with an article, possessive."""
    return [name, name, name.upper(), f"the {name}", f"{name}'s"]


class Corpus:
    """Documents (path -> title and units of sentence ids) over a bank of sentences, each
    with its mentions; the same sentence gives the same mentions wherever it stands but for
    an extra mention some units add (a unit-dependent extraction)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.bank: list[tuple[str, list[tuple[str, str]], list[tuple]]] = []
        for i in range(40):
            self.bank.append(self._sentence(i))
        self.bank.append(("A sentence that names no one.", [], []))  # units without mentions
        self.docs: dict[str, dict] = {}
        self.serial = 0
        for _ in range(14):
            self.add()

    def _sentence(self, i: int):
        rng = self.rng
        picks = rng.sample(NAMES, rng.choice([2, 2, 3]))
        shown = [(rng.choice(_variants(n)), t) for n, t in picks]
        text = f"Sentence {i}: " + " met ".join(s for s, _ in shown) + "."
        rels = []
        for a in range(len(shown)):
            for b in range(a + 1, len(shown)):
                kind = rng.choice(["RELATED_TO", "RELATED_TO", "WORKED_WITH"])
                rels.append((shown[a][0], shown[b][0], kind, rng.choice([1.0, 0.5, 1 / 3])))
        if rng.random() < 0.15:  # an end no entity row names
            rels.append((shown[0][0], f"Ghost {i % 3}", "RELATED_TO", 0.5))
        return text, shown, rels

    def add(self) -> str:
        self.serial += 1
        path = f"d{self.serial:03d}.txt"
        rng = self.rng
        title = rng.choice([n for n, _ in NAMES] + ["Notes", "Letters"])
        units = [self._unit() for _ in range(rng.choice([2, 3]))]
        if self.serial % 4 == 0:  # a unit without mentions: gone with its document
            units.append([(40, None)])
        self.docs[path] = {"title": title, "units": units}
        return path

    def _unit(self) -> list[tuple[int, str | None]]:
        """(sentence, an extra name this unit's extraction adds beside it, or None), 1-3."""
        return [
            (self.rng.randrange(len(self.bank)), "Turin" if self.rng.random() < 0.3 else None)
            for _ in range(self.rng.choice([1, 2, 3]))
        ]

    def edit(self) -> str:
        path = self.rng.choice(sorted(self.docs))
        doc = self.docs[path]
        op = self.rng.choice(["replace", "append", "insert", "title", "flip"])
        if op == "replace":
            doc["units"][self.rng.randrange(len(doc["units"]))] = self._unit()
        elif op == "append":
            doc["units"][-1] = [*doc["units"][-1], (self.rng.randrange(len(self.bank)), None)]
        elif op == "insert":  # every later unit moves (its position in its document)
            doc["units"].insert(0, self._unit())
        elif op == "title":
            doc["title"] = self.rng.choice([n for n, _ in NAMES])
        else:  # a display form outnumbers the others: the entity's title changes
            name, kind = self.rng.choice(NAMES)
            text = f"Flip {self.serial} {len(doc['units'])}: {name.upper()} again."
            self.bank.append((text, [(name.upper(), kind)] * 3, []))
            doc["units"].append([(len(self.bank) - 1, None)] * 2)
        return path

    def delete(self) -> str:
        path = self.rng.choice(sorted(self.docs))
        del self.docs[path]
        return path

    def shard_of(self, path: str) -> str:
        return f"{int(path[1:4]) % SHARDS:03d}"

    def write_shard(self, root: Path, shard: str) -> None:
        tables: dict[str, list[dict]] = {n: [] for n in TABLES}
        for path in sorted(p for p in self.docs if self.shard_of(p) == shard):
            self._rows(path, self.docs[path], tables)
        for name, rows in tables.items():
            frame = pl.DataFrame(rows, schema=TABLES[name], orient="row")
            folder = root / name
            folder.mkdir(parents=True, exist_ok=True)
            pq.write_table(_conformed(frame, name), folder / f"{shard}.parquet")

    def _rows(self, path: str, doc: dict, t: dict[str, list]) -> None:
        doc_id = stable_id("doc", path, doc["title"], str(doc["units"]))
        t["documents"].append({"id": doc_id, "title": doc["title"], "source_path": path})
        for seq, unit in enumerate(doc["units"]):
            texts = [self.bank[s][0] for s, _ in unit]
            section = [doc["title"], f"Part {seq % 2}"]
            sec_id = stable_id(path, *section)
            if seq < 2:
                t["sections"].append({"id": sec_id, "document_id": doc_id, "path": section})
            text = " ".join(texts)
            uid = stable_id(path, text)
            t["chunks"].append(
                {"id": uid, "text": text, "document_id": doc_id, "section_id": sec_id, "seq": seq}
            )
            for s, extra in unit:
                sentence, shown, rels = self.bank[s]
                for title, kind in shown + ([(extra, "CITY")] if extra else []):
                    t["extracted_entities"].append(
                        {"text_unit_id": uid, "title": title, "type": kind, "description": sentence}
                    )
                for a, b, kind, w in rels:
                    t["extracted_relationships"].append(
                        {
                            "text_unit_id": uid,
                            "source": a,
                            "target": b,
                            "type": kind,
                            "description": sentence,
                            "weight": w,
                        }
                    )


TABLES = {
    "documents": {"id": pl.Utf8, "title": pl.Utf8, "source_path": pl.Utf8},
    "sections": {"id": pl.Utf8, "document_id": pl.Utf8, "path": pl.List(pl.Utf8)},
    "chunks": {
        "id": pl.Utf8,
        "text": pl.Utf8,
        "document_id": pl.Utf8,
        "section_id": pl.Utf8,
        "seq": pl.Int64,
    },
    "extracted_entities": {
        "text_unit_id": pl.Utf8,
        "title": pl.Utf8,
        "type": pl.Utf8,
        "description": pl.Utf8,
    },
    "extracted_relationships": {
        "text_unit_id": pl.Utf8,
        "source": pl.Utf8,
        "target": pl.Utf8,
        "type": pl.Utf8,
        "description": pl.Utf8,
        "weight": pl.Float64,
    },
}


def _conformed(frame: pl.DataFrame, name: str):
    schema = schemas.TABLES[name]
    dtypes = pl.from_arrow(schema.empty_table()).schema
    missing = [pl.lit(None, dtype=d).alias(c) for c, d in dtypes.items() if c not in frame.columns]
    lists = [c for c in LISTS if c in dtypes]
    frame = frame.with_columns(missing).with_columns(
        pl.lit([], dtype=pl.List(pl.Utf8)).alias(c) for c in lists
    )
    return frame.select(list(dtypes)).to_arrow().cast(schema)


def _whole(folder: Path, base: Path | None, llm=None):
    """The whole merge of `folder`, short ids carried from `base` as the asset does."""
    chunks = path_ordered_chunks(folder)
    ents, rels, units, mentions = merge_whole(folder, chunks, SETTINGS)
    if llm is not None:
        ents, rels, _ = summarize_descriptions(ents, rels, *mentions, llm, SETTINGS)
    if base is not None:
        short = ["id", "human_readable_id"]
        ents = carry_short_ids(ents, store.read_table(base, "entities", short))
        rels = carry_short_ids(rels, store.read_table(base, "relationships", short))
    return ents, rels, units


def _write_graph(folder: Path, ents, rels, units) -> None:
    store.write_table(folder, "entities", ents)
    store.write_table(folder, "relationships", rels)
    store.write_table(folder, "text_units", units)


def _carried(folder: Path, base: Path, shards: set[str], max_share: float = 1.0, llm=None):
    """The incremental merge as the asset runs it (in LLM mode: the rows merged again
    summarised before they are spliced)."""
    shards = frozenset(shards)
    changes = RunChanges(folder, base, None, shards, row_changes(folder, base, shards))
    chunks = path_ordered_chunks(folder)
    part = recompute(changes, chunks, SETTINGS, max_share)
    if isinstance(part, str):
        return part
    assert isinstance(part, Recomputed)
    if llm is not None:
        ents, rels, _ = summarize_descriptions(
            part.entities, part.relationships, *part.mentions, llm, SETTINGS
        )
        part = dataclasses.replace(part, entities=ents, relationships=rels)
    docs = [store.read_table(f, "documents", ["id"])["id"] for f in (folder, base)]
    added = docs[0].filter(~docs[0].is_in(docs[1].implode())).to_list()
    ents, rels, units, counts, units_redone = splice(
        part, chunks, store.read_table(base, "text_units", ["id", *LISTS]), added
    )
    short = ["id", "human_readable_id"]
    ents = carry_short_ids(ents, part.base_entities.select(short))
    rels = carry_short_ids(rels, part.base_relationships.select(short))
    listed = {"entities": part.ids, "relationships": part.rids, "text_units": units_redone}
    return ents, rels, units, counts, listed


def _same(got: pl.DataFrame, want: pl.DataFrame, name: str) -> None:
    got = pl.from_arrow(schemas.conform(got, name))
    want = pl.from_arrow(schemas.conform(want, name))
    assert got.columns == want.columns, name
    assert got.height == want.height, name
    for c in want.columns:
        assert got.get_column(c).equals(want.get_column(c)), (name, c)


def _same_graph(got, want) -> None:
    """The merge's three tables (entities, relationships, text_units) equal."""
    for name, a, b in zip(("entities", "relationships", "text_units"), got, want, strict=False):
        _same(a, b, name)


def _carried_equals_whole(run, base, shards):
    """The run's rows merged carried over from `base` equal its whole merge: (carried, whole)."""
    got = _carried(run, base, shards)
    assert not isinstance(got, str), got
    want = _whole(run, base)
    _same_graph(got, want)
    _listed_covers_the_change(base, got)
    return got, want


# Columns an unlisted row may change in (pipeline.storage.changed_rows): a unit's number,
# a relationship's combined degree when an end's degree changed (the end is listed).
UNLISTED_MAY_CHANGE = {"text_units": ["human_readable_id"], "relationships": ["combined_degree"]}


def _listed_covers_the_change(base: Path, got) -> None:
    """Every row of the three tables that is not the base version's (new, gone or
    different) is among the keys the graph step lists for the steps after it."""
    names = ("entities", "relationships", "text_units")
    for name, now in zip(names, got[:3], strict=True):
        before = store.read_table(base, name)
        now = pl.from_arrow(schemas.conform(now, name)).drop(UNLISTED_MAY_CHANGE.get(name, []))
        before = before.drop(UNLISTED_MAY_CHANGE.get(name, []))
        differ = pl.concat(
            [
                now.join(before, on=now.columns, how="anti", nulls_equal=True)["id"],
                before.join(now, on="id", how="anti")["id"],
            ]
        )
        unlisted = differ.filter(~differ.is_in(got[4][name].implode()))
        assert unlisted.is_empty(), (name, unlisted.to_list()[:5])


@pytest.fixture
def start(tmp_path):
    corpus = Corpus(seed=7)
    root = tmp_path / "v0"
    for s in range(SHARDS):
        corpus.write_shard(root, f"{s:03d}")
    _write_graph(root, *_whole(root, None))
    return corpus, root


def _next(tmp_path: Path, base: Path, corpus: Corpus, paths: list[str], i: int) -> tuple[Path, set]:
    """A run folder: the base's files, the shards of `paths` written again."""
    folder = tmp_path / f"v{i}"
    shutil.copytree(base, folder)
    shards = {corpus.shard_of(p) for p in paths}
    for s in shards:
        corpus.write_shard(folder, s)
    return folder, shards


@pytest.mark.parametrize("read_all", [0.0, 1.0], ids=["every-mention-read", "units-read"])
def test_a_seeded_sequence_of_changes_merges_as_a_whole_merge(
    start, tmp_path, monkeypatch, read_all
):
    """Read as the units touched ask, or every mention read at once (merge_carry.READ_ALL_SHARE:
    what a change that names hubs reads)."""
    monkeypatch.setattr(merge_carry, "READ_ALL_SHARE", read_all)
    corpus, base = start
    rng = random.Random(3)
    recomputed = carried = renamed = 0
    for i in range(1, 21):
        op = rng.choice(["edit", "edit", "edit", "add", "delete"])
        paths = [getattr(corpus, op)() for _ in range(rng.choice([1, 1, 2]))]
        folder, shards = _next(tmp_path, base, corpus, paths, i)
        got, _ = _carried_equals_whole(folder, base, shards)
        ents, rels, units, counts, _ = got
        recomputed += counts["entities"]["rows_recomputed"]
        carried += counts["entities"]["rows_carried"]
        renamed += counts["entities"]["rows_units_renamed"]
        _write_graph(folder, ents, rels, units)
        base = folder
    assert carried > 0 and recomputed > 0 and renamed > 0


def test_a_unit_renamed_by_an_edit_moves_its_keys_rows(start, tmp_path):
    """A sentence naming no one appended to a unit: the unit's id changes (its text did), its
    mentions do not, so its keys' and relationships' rows are the base's with the new unit
    id, not merged again from every mention; a unit whose sentence changed merges its keys."""
    corpus, base = start
    path = sorted(corpus.docs)[0]
    corpus.docs[path]["units"][0] = [*corpus.docs[path]["units"][0], (40, None)]
    folder, shards = _next(tmp_path, base, corpus, [path], 1)
    got, _ = _carried_equals_whole(folder, base, shards)
    counts = got[3]
    assert counts["entities"]["rows_units_renamed"] == counts["entities"]["rows_recomputed"] > 0
    assert counts["relationships"]["rows_units_renamed"] > 0
    _write_graph(folder, *got[:3])
    corpus.docs[path]["units"][0] = [*corpus.docs[path]["units"][0], (3, None)]
    again, shards = _next(tmp_path, folder, corpus, [path], 2)
    counts = _carried_equals_whole(again, folder, shards)[0][3]
    assert counts["entities"]["rows_recomputed"] > counts["entities"]["rows_units_renamed"]


def test_a_repeated_sentence_counts_its_keys_over_the_corpus(start, tmp_path):
    """A sentence that stands in two documents with another key beside it in each (an
    extraction that depends on the unit): deleting one document changes how many keys the
    sentence is evidence of, and so the description of a key only the other names."""
    corpus, base = start
    n = len(corpus.bank)
    pair = [("Ada Lovelace", "PERSON"), ("Charles Babbage", "PERSON")]
    lake = ("Lake Geneva", "LOCATION")
    corpus.bank += [
        ("Shared: Ada Lovelace met Charles Babbage at the engine.", pair, []),
        ("Lake Geneva is a lake.", [lake], []),
        ("Paris met Turin.", [lake, ("Paris", "CITY"), ("Turin", "CITY")], []),
    ]
    one, two = corpus.add(), corpus.add()
    corpus.docs[one]["units"] = [[(n, "Cambridge")]]
    corpus.docs[two]["units"] = [[(n, "Lake Geneva"), (n + 1, None), (n + 2, None)]]
    folder, _ = _next(tmp_path, base, corpus, [one, two], 1)
    _write_graph(folder, *_whole(folder, base))
    del corpus.docs[one]
    run, shards = _next(tmp_path, folder, corpus, [one], 2)
    got, want = _carried_equals_whole(run, folder, shards)
    lake_id = stable_id("lake geneva")
    before, after = (
        store.read_table(folder, "entities").filter(pl.col("id") == lake_id)["description"],
        want[0].filter(pl.col("id") == lake_id)["description"],
    )
    assert before.item() != after.item()  # the case is exercised: the order moved
    assert got[3]["entities"]["rows_carried"] > 0


def test_a_sentence_repeated_elsewhere_counts_the_keys_there(start, tmp_path):
    """A touched key's sentence also stands in a document nothing touched, with another key
    there: its centrality counts that key, so it is read though no touched key is there."""
    corpus, base = start
    n = len(corpus.bank)
    emmy = ("Emmy Noether", "PERSON")
    corpus.bank += [
        ("Emmy Noether is a mathematician.", [emmy], []),
        ("Short one.", [], []),
        ("A somewhat longer note about Vienna.", [emmy, ("Vienna", "CITY")], []),
    ]
    one, two = corpus.add(), corpus.add()
    corpus.docs[one] = {
        "title": "Letters",
        "units": [[(n, None), (n + 1, "Emmy Noether"), (n + 2, None)]],
    }
    corpus.docs[two] = {"title": "Letters", "units": [[(n + 1, "Lise Meitner")]]}
    folder, _ = _next(tmp_path, base, corpus, [one, two], 1)
    _write_graph(folder, *_whole(folder, base))
    corpus.docs[one]["units"].append([(n, None)])
    run, shards = _next(tmp_path, folder, corpus, [one], 2)
    _carried_equals_whole(run, folder, shards)


def test_a_moved_row_is_merged_again_when_its_neighbours_or_sentences_change(start, tmp_path):
    """Rows whose mentions only moved to a renamed unit are merged again when something
    else reaches them: a sentence whose count of keys changed elsewhere (a deleted
    document's extra mention beside it), a relationship whose end's title flipped."""
    corpus, base = start
    n = len(corpus.bank)
    zed, yan = ("Zed Alpha", "PERSON"), ("Yan Beta", "PERSON")
    corpus.bank += [
        ("A shared line.", [], []),
        ("Zed Alpha met Yan Beta.", [zed, yan], [("Zed Alpha", "Yan Beta", "RELATED_TO", 1.0)]),
        ("ZED ALPHA again.", [("ZED ALPHA", "PERSON")] * 3, []),
    ]
    one, two, three = corpus.add(), corpus.add(), corpus.add()
    corpus.docs[one]["units"] = [[(n, "Paris"), (n + 1, None)]]
    corpus.docs[two]["units"] = [[(n, "Oslo")]]
    folder, _ = _next(tmp_path, base, corpus, [one, two, three], 1)
    _write_graph(folder, *_whole(folder, base))
    corpus.docs[one]["units"][0].append((40, None))  # renamed: Paris, Zed, Yan moved
    del corpus.docs[two]  # the shared line is now evidence of Paris only
    corpus.docs[three]["units"].append([(n + 2, None)])  # Zed's title flips
    run, shards = _next(tmp_path, folder, corpus, [one, two, three], 2)
    got, want = _carried_equals_whole(run, folder, shards)
    counts = got[3]
    assert counts["entities"]["rows_units_renamed"] < counts["entities"]["rows_recomputed"]
    zed_id = stable_id("zed alpha")
    assert want[0].filter(pl.col("id") == zed_id)["title"].item() == "ZED ALPHA"


def test_llm_summaries_of_the_rows_merged_again_equal_the_whole_merge_s(start, tmp_path):
    """LLM mode: only the rows merged again are summarised (the fake model answers with an
    item's first descriptions, whatever else its call holds), the others keep theirs."""
    corpus, base = start
    rng = random.Random(5)
    with FakeLlm() as srv:
        llm = LlmClient(LlmSettings(base_url=srv.base_url, api_key=None, max_retries=0), None)
        _write_graph(base, *_whole(base, None, llm))
        for i in range(1, 5):
            op = rng.choice(["edit", "add", "delete"])
            folder, shards = _next(tmp_path, base, corpus, [getattr(corpus, op)()], i)
            srv.reset_counters()
            got = _carried(folder, base, shards, llm=llm)
            assert srv.requests  # the rows merged again include summarised ones
            _same_graph(got, _whole(folder, base, llm))
            _write_graph(folder, *got[:3])
            base = folder


def test_too_large_a_change_asks_for_the_whole_merge(start, tmp_path):
    corpus, base = start
    paths = [corpus.add() for _ in range(4)]
    folder, shards = _next(tmp_path, base, corpus, paths, 1)
    reason = _carried(folder, base, shards, max_share=0.01)
    assert isinstance(reason, str) and "incremental_merge_max_share" in reason


def test_a_replaced_row_relists_only_the_units_it_joins_or_leaves():
    """A unit's entity and relationship ids are the inverse of the rows' text_unit_ids: a
    row merged again changes the lists of the units it now lists and did not, or listed and
    does not now, and no other (a hub merged again lists thousands of units)."""
    from pipeline.graph.merge_splice import _text_units

    ents = pl.DataFrame(
        {"id": ["hub", "e1", "e2"], "text_unit_ids": [["u1", "u2", "u3"], ["u1"], ["u2"]]}
    )
    rels = pl.DataFrame({"id": ["r1"], "text_unit_ids": [["u1", "u3"]]})
    base_lists = pl.DataFrame(
        {
            "id": ["u1", "u2", "u3"],
            "entity_ids": [["e1", "hub"], ["e2", "hub"], ["hub"]],
            "relationship_ids": [["r1"], [], ["r1"]],
        }
    )
    # the hub leaves u3 and joins u4 (new); e1 is gone; r1 leaves u1
    new_ents = pl.DataFrame({"id": ["hub"], "text_unit_ids": [["u1", "u2", "u4"]]})
    new_rels = pl.DataFrame({"id": ["r1"], "text_unit_ids": [["u3"]]})
    r = Recomputed(
        base=Path("."),
        base_entities=ents,
        base_relationships=rels,
        ids=pl.Series(["hub", "e1"]),
        rids=pl.Series(["r1"]),
        entities=new_ents,
        relationships=new_rels,
        mentions=(pl.DataFrame(), pl.DataFrame()),
        units_read=0,
        moved=(new_ents.clear(), new_rels.clear()),
    )
    chunks = pl.DataFrame({"id": ["u1", "u2", "u3", "u4"]})
    units, again = _text_units(r, chunks, base_lists)
    lists = {row["id"]: (row["entity_ids"], row["relationship_ids"]) for row in units.to_dicts()}
    assert lists == {
        "u1": (["hub"], []),
        "u2": (["e2", "hub"], []),
        "u3": ([], ["r1"]),
        "u4": (["hub"], []),
    }
    assert sorted(again) == ["u1", "u3", "u4"]  # e1 gone, r1 left; the hub left; new


def test_only_units_added_removed_or_extracted_again_are_compared(tmp_path):
    """`touched` reads, in a shard carried by text unit (the same carry digest in the base's
    and the run's shards.json), only the rows of units added or removed and of those whose
    extraction failed in the base (they are extracted again, their rows change although
    their ids do not); a shard the base made otherwise is compared whole."""
    from pipeline.graph.touched import _compared_units
    from pipeline.ingest.shards import write_state
    from pipeline.storage.run_changes import RowChanges

    base, run = tmp_path / "base", tmp_path / "run"
    for folder in (base, run):
        folder.mkdir()
    (base / "extraction_failures").mkdir()  # the one column `touched` reads of it
    pl.DataFrame({"text_unit_id": ["u-failed"]}).write_parquet(
        base / "extraction_failures" / "000.parquet"
    )
    write_state(base, 2, {"000": "a", "001": "b"}, "digest-1")
    write_state(run, 2, {"000": "a2"}, "digest-1")  # 000 ran with the base's settings
    write_state(run, 2, {"001": "b2"}, "digest-2")  # 001 with others
    rows = {"chunks": RowChanges(frozenset({"u-new"}), frozenset({"u-gone"}))}
    changes = RunChanges(run, base, None, frozenset({"000", "001"}), rows)
    carried, units = _compared_units(changes)
    assert carried == {"000"}
    assert set(units.to_list()) == {"u-new", "u-gone", "u-failed"}


@pytest.mark.parametrize("nulls", [False, True])
def test_new_relationships_are_put_where_a_sort_puts_them(nulls):
    """The kept relationships stay in their (sorted) order and the new ones are put in by
    binary search: the same rows and order as sorting both, with ties on every key but the
    id, new rows before the first kept row and after the last; a null title sorts all."""
    from pipeline.graph.merge_splice import DESCENDING, ORDER, _in_order

    rng = random.Random(7)
    rows = [
        {
            "weight": float(rng.choice([1, 1, 2, 3.5])),
            "source": rng.choice(["Ada", "Ada", "Bea", "Émile"]),
            "target": rng.choice(["Oslo", "Paris", "Zürich"]),
            "type": rng.choice(["LOCATED_IN", "WORKS_AT"]),
            "id": f"r{i:03d}",
            "combined_degree": i,
        }
        for i in range(300)
    ]
    if nulls:
        rows[5]["source"] = None
    every = pl.DataFrame(rows)
    ordered = every.sort(ORDER, descending=DESCENDING, nulls_last=False)
    new_ids = {ordered["id"][0], ordered["id"][-1]} | set(rng.sample(every["id"].to_list(), 40))
    is_new = pl.col("id").is_in(sorted(new_ids))
    kept = ordered.filter(~is_new)
    new = every.filter(is_new).sample(fraction=1.0, shuffle=True, seed=3)
    assert _in_order(kept, new).equals(ordered)
