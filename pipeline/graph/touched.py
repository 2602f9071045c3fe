"""What a run changed in the entity merge's input, as the merge keys and relationship ids
whose rows may change: the first step of an incremental merge (pipeline.graph.merge_carry).

Why by rows and not by text units: a shard that ran is read both as the base version holds
it and as the run wrote it, and the mention rows (and the units' homes: the document and
section titles a unit is in, with its position) that differ are what changed. That holds
however extraction behaves: a unit whose id stayed (its id hashes its path and text) but
whose mentions or position moved is caught too, and a unit that changed nothing the merge
reads touches nothing. Where the shard's extraction rows were carried by text unit (the base
made the shard as this run does), only the rows of the units added, removed or extracted
again (failed in the base) are read: the others are the base's rows, copied.

Keys and relationship ids are computed as the merge computes them (pipeline.graph.titles'
key, pipeline.graph.encode_mentions' symmetric types and self-loops), from strings: an
entity's id is `stable_id(key)`, a relationship's `stable_id(source key, target key, type)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline import schemas
from pipeline.graph.encode_mentions import SYMMETRIC_TYPES
from pipeline.graph.mention_tables import MENTION_COLUMNS
from pipeline.graph.titles import key_map, unit_titles
from pipeline.ids import stable_id_expr
from pipeline.ingest.shards import read_state
from pipeline.storage import store
from pipeline.storage.run_changes import RunChanges

ENTITY_COLUMNS = MENTION_COLUMNS["extracted_entities"]
RELATION_COLUMNS = MENTION_COLUMNS["extracted_relationships"]


class KeyCache:
    """Merge keys of surface titles, each computed once: `title_key` is Python per string,
    and an incremental merge keys the rows it reads a batch at a time."""

    def __init__(self) -> None:
        self.known = pl.DataFrame(schema={"surface": pl.Utf8, "key": pl.Utf8})

    def of(self, titles: pl.Series) -> pl.DataFrame:
        """(surface, key) of (at least) every distinct title of `titles`."""
        new = titles.drop_nulls().unique()
        new = new.filter(~new.is_in(self.known.get_column("surface").to_list()))
        if new.len():
            self.known = pl.concat([self.known, key_map(new).select("surface", "key")])
        return self.known


def with_keys(ee: pl.DataFrame, keys: KeyCache | None = None) -> pl.DataFrame:
    """Entity mention rows (ENTITY_COLUMNS, strings) with `key`, their title's merge key;
    rows without one (no title, or a title of punctuation) dropped, as the merge drops them."""
    ee = ee.with_columns(pl.col(c).cast(pl.Utf8) for c in ENTITY_COLUMNS)
    km = (keys or KeyCache()).of(ee.get_column("title")).select(title="surface", key="key")
    return ee.join(km, on="title", how="left", maintain_order="left").filter(
        pl.col("key").is_not_null() & (pl.col("key") != "")
    )


def join_ends(
    frame: pl.DataFrame, lookup: pl.DataFrame, ends: tuple[str, str], names: tuple[str, str]
) -> pl.DataFrame:
    """`frame` with, for each column of `ends`, `lookup`'s second column where its first
    equals it, named as `names` says (left joins: every row kept, in its order)."""
    key, value = lookup.columns
    for end, name in zip(ends, names, strict=True):
        frame = frame.join(
            lookup.rename({key: end, value: name}), on=end, how="left", maintain_order="left"
        )
    return frame


def with_ends(er: pl.DataFrame, keys: KeyCache | None = None) -> pl.DataFrame:
    """Relation mention rows (RELATION_COLUMNS, strings) with their ends' keys `sk`, `tk` (a
    symmetric type's in key order) and `rid`, the id of the relationship they merge into;
    rows the merge drops (an end without a key, a self-loop) dropped."""
    er = er.with_columns(
        pl.col(c).cast(pl.Float64 if c == "weight" else pl.Utf8) for c in RELATION_COLUMNS
    )
    surfaces = pl.concat([er.get_column("source"), er.get_column("target")])
    km = (keys or KeyCache()).of(surfaces)
    er = join_ends(er, km, ("source", "target"), ("a", "b")).filter(
        pl.col("a").is_not_null()
        & pl.col("b").is_not_null()
        & (pl.col("a") != "")
        & (pl.col("b") != "")
        & (pl.col("a") != pl.col("b"))
    )
    kind = pl.col("type").fill_null("RELATED_TO")
    swap = kind.is_in(list(SYMMETRIC_TYPES)) & (pl.col("a") > pl.col("b"))
    return (
        er.with_columns(
            sk=pl.when(swap).then("b").otherwise("a"), tk=pl.when(swap).then("a").otherwise("b")
        )
        .with_columns(rid=stable_id_expr("sk", "tk", kind))
        .drop("a", "b")
    )


def entity_ids(keys: pl.Series) -> pl.DataFrame:
    """(key, id) of merge keys."""
    return keys.to_frame("key").with_columns(id=stable_id_expr("key"))


@dataclass(frozen=True)
class Touched:
    """What differs between the base version's and the run's files of the shards that ran.
    `keys`: merge keys whose entity rows may change; `rids`: relationship ids whose rows may
    change; `units`: text units with differing mention rows (either side) and the renamed
    ones; `sentences`: evidence sentences of the entity mentions that differ (either side);
    `base_ee`: the base's entity mentions of those sentences in the shards that ran, with
    keys (how many keys each sentence was evidence of before). `renamed` (old, new): text
    units the run replaced by one at the same place (file and position) whose mentions and
    homes are compared as the old one's; `moved_keys` / `moved_rids`: keys and relationships
    not in `keys` / `rids` with mentions in a renamed unit: only their units' ids changed."""

    keys: pl.Series
    rids: pl.Series
    units: pl.Series
    sentences: pl.Series
    base_ee: pl.DataFrame
    renamed: pl.DataFrame
    moved_keys: pl.Series
    moved_rids: pl.Series


def touched(changes: RunChanges) -> Touched:
    """What changed between the base version's and the run's files of the shards that ran:
    rows compared as strings, keys computed for the rows that differ only. In a shard whose
    rows were carried by text unit, only the rows of units that may differ are compared
    (`_compared_units`). A unit an edit gave a new id (its text changed) is compared as the
    one it replaced (`_renamed`): a key whose mentions are the same there is moved, not
    changed (an edit to one sentence of a unit naming a hub changes the hub's unit list
    only, where merging it again reads all of its mentions)."""
    assert changes.base is not None
    shards, base, run = sorted(changes.shards), changes.base, changes.folder
    carried, units = _compared_units(changes)

    def read(root: Path, table: str, compared: bool = True) -> pl.DataFrame:
        columns = MENTION_COLUMNS[table]
        only = pl.col("text_unit_id").is_in(units.implode())
        parts = [
            _shard(root, table, s, columns, only if compared and s in carried else None)
            for s in shards
        ]
        return pl.concat([schemas.empty(table).select(columns), *parts])

    (homes, places), (base_homes, base_places) = (_places(r, shards) for r in (run, base))
    renamed = _renamed(changes, places, base_places)
    cache = KeyCache()
    mentions = [(read(run, t), read(base, t)) for t in MENTION_COLUMNS]
    ee, er = (_both_ways(now, _rename(before, renamed)) for now, before in mentions)
    ee, er = with_keys(ee, cache), with_ends(er, cache)
    home_diff = _both_ways(homes, _rename(base_homes, renamed)).get_column("title")
    home_keys = key_map(home_diff).get_column("key")
    keys = pl.concat([ee.get_column("key"), er.get_column("sk"), er.get_column("tk"), home_keys])
    keys = keys.filter(keys != "").unique().sort()
    rids = er.get_column("rid").unique().sort()
    moved_keys, moved_rids = _in_renamed(mentions, renamed, cache)
    sentences = ee.get_column("description").drop_nulls()
    sentences = sentences.filter(sentences != "").unique().sort()
    return Touched(
        keys=keys,
        rids=rids,
        units=pl.concat([ee["text_unit_id"], er["text_unit_id"], renamed["old"], renamed["new"]])
        .unique()
        .sort(),
        sentences=sentences,
        base_ee=with_keys(
            read(base, "extracted_entities", compared=False).filter(
                pl.col("description").is_in(sentences.implode())
            ),
            cache,
        ),
        renamed=renamed,
        moved_keys=moved_keys.filter(~moved_keys.is_in(keys.implode())),
        moved_rids=moved_rids.filter(~moved_rids.is_in(rids.implode())),
    )


def _compared_units(changes: RunChanges) -> tuple[set[str], pl.Series]:
    """(the shards that ran whose rows were carried by text unit, the text units whose
    mention rows there may differ from the base's). A shard the base made as this run does
    (the same carry digest in both shards.json) kept the extraction rows of every unit the
    base holds but those whose extraction failed there (pipeline.extract.kept_units): its
    rows can differ only for units added or removed, and those tried again. Comparing every
    row of the shards that ran took 2.3 s of a run adding 100 documents at 40k (they ran
    all 16)."""
    assert changes.base is not None
    before, now = (read_state(r).get("carry", {}) for r in (changes.base, changes.folder))
    carried = {s for s in changes.shards if before.get(s) and before.get(s) == now.get(s)}
    chunks = changes.of("chunks")
    failed = [
        changes.base_shard("extraction_failures", s, ["text_unit_id"]).get_column("text_unit_id")
        for s in sorted(carried)
    ]
    units = pl.concat(
        [pl.Series(sorted(chunks.added | chunks.removed), dtype=pl.Utf8), *failed]
    ).unique()
    return carried, units


def _shard(
    root: Path, table: str, shard: str, columns: list[str], where: pl.Expr | None = None
) -> pl.DataFrame:
    """`columns` of shard `shard` of sharded table `table` in `root` (none: no rows), only
    the rows matching `where` when given."""
    path = store.table_path(root, table) / f"{shard}.parquet"
    if not path.exists():
        return schemas.empty(table).select(columns)
    if where is not None:
        return pl.scan_parquet(path).select(columns).filter(where).collect()
    return pl.read_parquet(path, columns=columns)


def _both_ways(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """The distinct rows of `a` or `b` that the other does not hold as often (rows as
    multisets), compared by a 64-bit hash of each row: a group-by and join on every string
    column took ~10x longer. A changed row goes unseen only if it has the hash of another
    row that changed the other way (about 2^-64 a pair); an unchanged row that shares a
    changed one's hash is reported too, which only merges a row more."""
    h = pl.struct(a.columns).hash()
    a, b = a.with_columns(_h=h), b.with_columns(_h=h)
    counts = pl.concat(
        [a.group_by("_h").agg(n=pl.len()), b.group_by("_h").agg(n=-pl.len().cast(pl.Int64))],
        how="vertical_relaxed",
    )
    moved = counts.group_by("_h").agg(pl.col("n").sum()).filter(pl.col("n") != 0)
    rows = pl.concat([a, b]).filter(pl.col("_h").is_in(moved.get_column("_h").implode()))
    return rows.unique(maintain_order=True).drop("_h")


# The columns of the units' homes and places (`_places`).
HOMES = {"text_unit_id": pl.Utf8, "title": pl.Utf8, "seq": pl.Int64}
PLACES = {"text_unit_id": pl.Utf8, "source_path": pl.Utf8, "seq": pl.Int64}


def _places(root: Path, shards: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Of the text units of `shards` in `root`: their homes (`unit_titles`: the document
    and section titles an entity of that name ranks its sentences from first) and places
    (the file and position in it)."""
    homes, places = [pl.DataFrame(schema=HOMES)], [pl.DataFrame(schema=PLACES)]
    for s in shards:
        units = _shard(root, "chunks", s, ["id", "document_id", "section_id", "seq"])
        docs = _shard(root, "documents", s, ["id", "title", "source_path"])
        sections = _shard(root, "sections", s, ["id", "path"])
        homes.append(unit_titles(units, docs, sections).select(list(HOMES)).cast(HOMES))
        at = units.join(docs.select(document_id="id", source_path="source_path"), on="document_id")
        places.append(
            at.select(text_unit_id="id", source_path="source_path", seq="seq").cast(PLACES)
        )
    return pl.concat(homes), pl.concat(places)


def _renamed(changes: RunChanges, places: pl.DataFrame, base_places: pl.DataFrame) -> pl.DataFrame:
    """(old, new): each text unit the run removed paired with the unit it added at the same
    place (file and position in it): the unit an edit of its text renamed."""
    chunks = changes.of("chunks")
    old = base_places.filter(pl.col("text_unit_id").is_in(sorted(chunks.removed)))
    new = places.filter(pl.col("text_unit_id").is_in(sorted(chunks.added)))
    return old.join(new, on=["source_path", "seq"]).select(
        old="text_unit_id", new="text_unit_id_right"
    )


def _rename(frame: pl.DataFrame, renamed: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its old text units' ids replaced by the new ones'."""
    unit = pl.col("text_unit_id")
    return frame.with_columns(unit.replace(renamed.get_column("old"), renamed.get_column("new")))


def _in_renamed(
    mentions: list[tuple[pl.DataFrame, pl.DataFrame]], renamed: pl.DataFrame, cache: KeyCache
) -> tuple[pl.Series, pl.Series]:
    """The keys and relationship ids with a mention in a renamed unit, either side."""
    in_old = pl.col("text_unit_id").is_in(renamed.get_column("old").implode())
    in_new = pl.col("text_unit_id").is_in(renamed.get_column("new").implode())
    (ee, ee_b), (er, er_b) = mentions
    ee = with_keys(pl.concat([ee.filter(in_new), ee_b.filter(in_old)]), cache)
    er = with_ends(pl.concat([er.filter(in_new), er_b.filter(in_old)]), cache)
    keys = pl.concat([ee.get_column("key"), er.get_column("sk"), er.get_column("tk")])
    return keys.unique().sort(), er.get_column("rid").unique().sort()


def moved_rows(
    ents: pl.DataFrame, rels: pl.DataFrame, ids, rids, renamed: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Base rows `ids` of `ents` and `rids` of `rels`, whose mentions only moved to renamed
    units (`Touched`), with those units' new ids in their sorted lists: a row is a function
    of its mentions, its units' places and homes and its neighbours, none of which a
    renaming changes (degrees are counted again with the others')."""
    old, new = renamed.get_column("old"), renamed.get_column("new")
    units = pl.col("text_unit_ids").list.eval(pl.element().replace(old, new).sort())
    return (
        ents.filter(pl.col("id").is_in(list(ids))).with_columns(units),
        rels.filter(pl.col("id").is_in(list(rids))).with_columns(units),
    )


def held_moved(t: Touched, ents_b: pl.DataFrame, rels_b: pl.DataFrame) -> tuple[set, set]:
    """The moved keys and relationship ids (`Touched`) whose rows the base version holds."""
    held = ents_b.get_column("id").implode()
    keys = entity_ids(t.moved_keys).filter(pl.col("id").is_in(held)).get_column("key")
    rids = t.moved_rids.filter(t.moved_rids.is_in(rels_b.get_column("id").implode()))
    return set(keys.to_list()), set(rids.to_list())
