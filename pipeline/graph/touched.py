"""What a run changed in the entity merge's input, as the merge keys and relationship ids
whose rows may change: the first step of an incremental merge (pipeline.graph.merge_carry).

Why by rows and not by text units: a shard that ran is read both as the base version holds
it and as the run wrote it, and the mention rows (and the units' homes: the document and
section titles a unit is in, with its position) that differ are what changed. That holds
however extraction behaves: a unit whose id stayed (its id hashes its path and text) but
whose mentions or position moved is caught too, and a unit that changed nothing the merge
reads touches nothing.

Keys and relationship ids are computed as the merge computes them (pipeline.graph.titles'
key, pipeline.graph.encode_mentions' symmetric types and self-loops), from strings: an
entity's id is `stable_id(key)`, a relationship's `stable_id(source key, target key, type)`.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline import schemas
from pipeline.graph.encode_mentions import SYMMETRIC_TYPES
from pipeline.graph.mention_tables import MENTION_COLUMNS
from pipeline.graph.titles import key_map, unit_titles
from pipeline.ids import stable_id_expr
from pipeline.storage.run_changes import RunChanges

ENTITY_COLUMNS = MENTION_COLUMNS["extracted_entities"]
RELATION_COLUMNS = MENTION_COLUMNS["extracted_relationships"]


def with_keys(ee: pl.DataFrame) -> pl.DataFrame:
    """Entity mention rows (ENTITY_COLUMNS, strings) with `key`, their title's merge key;
    rows without one (no title, or a title of punctuation) dropped, as the merge drops them."""
    ee = ee.with_columns(pl.col(c).cast(pl.Utf8) for c in ENTITY_COLUMNS)
    km = key_map(ee.get_column("title")).select(title="surface", key="key")
    return ee.join(km, on="title", how="left", maintain_order="left").filter(
        pl.col("key").is_not_null() & (pl.col("key") != "")
    )


def with_ends(er: pl.DataFrame) -> pl.DataFrame:
    """Relation mention rows (RELATION_COLUMNS, strings) with their ends' keys `sk`, `tk` (a
    symmetric type's in key order) and `rid`, the id of the relationship they merge into;
    rows the merge drops (an end without a key, a self-loop) dropped."""
    er = er.with_columns(
        pl.col(c).cast(pl.Float64 if c == "weight" else pl.Utf8) for c in RELATION_COLUMNS
    )
    surfaces = pl.concat([er.get_column("source"), er.get_column("target")])
    km = key_map(surfaces).select("surface", "key")
    er = (
        er.join(
            km.rename({"surface": "source", "key": "a"}),
            on="source",
            how="left",
            maintain_order="left",
        )
        .join(
            km.rename({"surface": "target", "key": "b"}),
            on="target",
            how="left",
            maintain_order="left",
        )
        .filter(
            pl.col("a").is_not_null()
            & pl.col("b").is_not_null()
            & (pl.col("a") != "")
            & (pl.col("b") != "")
            & (pl.col("a") != pl.col("b"))
        )
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
    """The shards that ran, both sides, and what differs between them. `run_ee`/`run_er`:
    the run's mention rows of those shards (with keys); `base_ee`: the base's entity
    mentions there (for the sentences they share with other shards); `keys`: merge keys
    whose entity rows may change; `rids`: relationship ids whose rows may change;
    `sentences`: evidence sentences of entity mentions that differ (either side); `units`:
    text units with differing mention rows (either side)."""

    run_ee: pl.DataFrame
    run_er: pl.DataFrame
    base_ee: pl.DataFrame
    keys: pl.Series
    rids: pl.Series
    sentences: pl.Series
    units: pl.Series


def touched(changes: RunChanges) -> Touched:
    """What changed between the base version's and the run's files of the shards that ran."""
    shards = sorted(changes.shards)

    def both(table: str, columns: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
        def read(frame: pl.DataFrame, shard: str) -> pl.DataFrame:
            return frame.select(columns).with_row_index("row").with_columns(shard=pl.lit(shard))

        run = [read(changes.run_shard(table, s), s) for s in shards]
        base = [read(changes.base_shard(table, s), s) for s in shards]
        empty = read(schemas.empty(table), "")
        return pl.concat([empty, *run]), pl.concat([empty, *base])

    run_ee, base_ee = (with_keys(f) for f in both("extracted_entities", ENTITY_COLUMNS))
    run_er, base_er = (with_ends(f) for f in both("extracted_relationships", RELATION_COLUMNS))
    ee = _both_ways(run_ee, base_ee, [*ENTITY_COLUMNS, "key"])
    er = _both_ways(run_er, base_er, [*RELATION_COLUMNS, "sk", "tk", "rid"])
    keys = pl.concat(
        [ee.get_column("key"), er.get_column("sk"), er.get_column("tk"), _home_keys(changes)]
    )
    sentences = ee.get_column("description").drop_nulls()
    return Touched(
        run_ee=run_ee,
        run_er=run_er,
        base_ee=base_ee,
        keys=keys.unique().sort(),
        rids=er.get_column("rid").unique().sort(),
        sentences=sentences.filter(sentences != "").unique().sort(),
        units=pl.concat([ee.get_column("text_unit_id"), er.get_column("text_unit_id")])
        .unique()
        .sort(),
    )


def _both_ways(a: pl.DataFrame, b: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
    """`cols` of the rows of `a` or `b` the other does not hold as often."""
    a, b = a.select(cols), b.select(cols)
    return pl.concat([_differing(a, b), _differing(b, a)])


def _differing(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """Rows of `a` that `b` does not hold as often (rows as a multiset)."""
    cols = a.columns
    ca = a.group_by(cols).len()
    cb = b.group_by(cols).len()
    return ca.join(cb, on=[*cols, "len"], how="anti", nulls_equal=True).drop("len")


def _home_keys(changes: RunChanges) -> pl.Series:
    """Keys of the document and section titles whose units or positions (`unit_titles`, the
    merge's `homes`) differ in the shards that ran: an entity of that name ranks its
    sentences from there first."""

    def homes(read) -> pl.DataFrame:
        parts = []
        for s in sorted(changes.shards):
            units = read("chunks", s).select("id", "document_id", "section_id", "seq")
            docs = read("documents", s).select("id", "title")
            sections = read("sections", s).select("id", "path")
            parts.append(unit_titles(units, docs, sections))
        schema = {"text_unit_id": pl.Utf8, "title": pl.Utf8, "seq": pl.Int64}
        return pl.concat(
            [pl.DataFrame(schema=schema), *(p.select(list(schema)).cast(schema) for p in parts)]
        )

    run, base = homes(changes.run_shard), homes(changes.base_shard)
    titles = _both_ways(run, base, run.columns).get_column("title")
    keys = key_map(titles).get_column("key")
    return keys.filter(keys != "")
