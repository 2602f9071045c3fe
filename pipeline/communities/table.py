"""The communities table: a hierarchy (head and vertex membership) as schemas.COMMUNITIES rows.

Why its own module: turning vertex numbers back into ids (members, the relationships and text
units each community holds, a stable id per community) is the same whether the hierarchy was
built from scratch or carried over, and is where the memory goes at scale. `period` is "" here:
the run date would make the output differ between runs; the communities asset stamps it
(pipeline.compat.columns.stamp_period, GraphRAG's date of ingest, kept while a community is
unchanged). The id is a hash of (level, member ids), so it is stable across runs.

After an edit (`Reuse`): a community whose id the last table has (same level, same members)
and none of whose members' text units or relationships changed holds the same relationships
and text units as it did, so its lists are the last table's; only the other communities'
are computed (at 40k documents the lists of every community took 3.1 s of a 3.7 s step,
for a handful of changed rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.ids import stable_id_expr
from pipeline.schemas import TABLES
from pipeline.storage import store

LISTS = ["relationship_ids", "text_unit_ids"]


@dataclass
class Reuse:
    """What the last version lets a run keep: its communities' lists (id + LISTS) and the
    entities whose text units or relationships changed since it (`changed`, ids);
    `communities_table` sets `kept` to the number of communities whose lists it kept."""

    lists: pl.DataFrame
    changed: pl.Series
    kept: int = 0


def reuse_from(
    base: Path,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    previous: Path,
    listed: dict[str, pl.Series] | None = None,
) -> Reuse:
    """The Reuse of version `base` (its entities and relationships are what its communities
    table, `previous`'s, was built from) for a run whose graph is `entities` (id,
    text_unit_ids) and `relationships` (id, source_id, target_id): an entity changed when
    its text unit list did, or it was added or removed, or a relationship at either of its
    ends was (same id, ends and all, or else changed). `listed`: the rows that may differ
    from `base`'s (pipeline.storage.changed_rows), so that only those are compared."""
    lists = pl.read_parquet(store.table_files(previous, "communities"), columns=["id", *LISTS])
    if listed is not None:
        return Reuse(lists, _listed_ends(base, relationships, listed))

    def differ(now: pl.DataFrame, then: pl.DataFrame, cols: list[str]) -> pl.DataFrame:
        """Rows of either whose id the other lacks or holds with other `cols` values."""
        both = now.join(then, on="id", how="full", suffix="_then", coalesce=False)
        return both.filter(
            pl.any_horizontal(
                pl.col("id").is_null(),
                pl.col("id_then").is_null(),
                *(pl.col(c).ne_missing(pl.col(f"{c}_then")) for c in cols),
            )
        )

    ends = ["id", "source_id", "target_id"]
    ent = differ(
        entities.select(pl.col("id").cast(pl.Utf8), "text_unit_ids"),
        store.read_table(base, "entities", ["id", "text_unit_ids"]),
        ["text_unit_ids"],
    )
    rel = differ(
        relationships.select(pl.col(ends).cast(pl.Utf8)),
        store.read_table(base, "relationships", ends),
        ends[1:],
    )
    changed = (
        pl.concat(
            [
                rel.get_column(c)
                for c in ("source_id", "target_id", "source_id_then", "target_id_then")
            ]
            + [ent.get_column("id"), ent.get_column("id_then")]
        )
        .drop_nulls()
        .unique()
    )
    return Reuse(lists, changed)


def _listed_ends(base: Path, relationships: pl.DataFrame, listed: dict[str, pl.Series]):
    """The entities listed and the ends, then and now, of the relationships listed: every
    other row is the base's (changed_rows), its text units and ends included."""
    rids = listed["relationships"].implode()
    ends = ["source_id", "target_id"]
    # scanned, filtered: the run's steps have let go of the base's columns (read_cache.written)
    then = (
        store.scan_table(base, "relationships")
        .select("id", *ends)
        .filter(pl.col("id").is_in(rids))
        .collect()
    )
    now = relationships.filter(pl.col("id").cast(pl.Utf8).is_in(rids))
    parts = [f.get_column(c).cast(pl.Utf8) for f in (then, now) for c in ends]
    return pl.concat([listed["entities"].cast(pl.Utf8), *parts]).unique()


def _decode(frame: pl.DataFrame, column: str, names: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its list column `column` of integer codes turned into the ids `names`
    (code, id) gives them, in the same order."""
    return frame.with_columns(
        frame.select(pl.col(column).list.eval(pl.element().cast(pl.Int64)))
        .with_row_index("row")
        .explode(column)
        .join(names, left_on=column, right_on="code", how="left", maintain_order="left")
        .group_by("row", maintain_order=True)
        .agg(pl.col("id").drop_nulls())
        .get_column("id")
        .alias(column)
    )


def communities_table(
    ids: pl.Series,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    head: pl.DataFrame,
    vmembers: pl.DataFrame,
    reuse: Reuse | None = None,
) -> pl.DataFrame:
    """communities frame with exactly schemas.COMMUNITIES columns, from the hierarchy's `head`
    (community, level, parent, children) and `vmembers` (community, v: index into `ids`, the
    sorted entity ids); with `reuse`, unchanged communities' lists are the last table's."""
    membership = vmembers.select("community", "v")
    codes = pl.DataFrame({"id": ids}).with_row_index("v").with_columns(pl.col("v").cast(pl.Int64))
    members = membership.group_by("community").agg(
        pl.col("v").sort().alias("entity_ids"), pl.len().cast(pl.Int64).alias("size")
    )
    members = _decode(members, "entity_ids", codes.select(pl.col("v").alias("code"), "id"))
    rows = head.join(members, on="community", how="inner").with_columns(
        stable_id_expr(
            pl.lit("community"), pl.col("level"), pl.col("entity_ids").list.join(",")
        ).alias("id")
    )
    kept = _kept_lists(rows, membership, codes, reuse)
    if reuse is not None:
        reuse.kept = kept.height
    todo = rows.filter(~pl.col("community").is_in(kept.get_column("community").implode()))
    if len(todo) < len(rows):  # only the communities not kept: their members' rows
        inner = membership.filter(pl.col("community").is_in(todo.get_column("community").implode()))
        names = ids.gather(inner.get_column("v").unique()).implode()
        entities = entities.filter(pl.col("id").cast(pl.Utf8).is_in(names))
        relationships = relationships.filter(
            pl.col("source_id").cast(pl.Utf8).is_in(names)
            & pl.col("target_id").cast(pl.Utf8).is_in(names)
        )
        membership = inner
    rel_ids, units = _lists(ids, codes, entities, relationships, head, membership)
    out = (
        rows.join(rel_ids, on="community", how="left")
        .join(units, on="community", how="left")
        .update(kept, on="community", how="left")
        .with_columns(
            pl.col("relationship_ids").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))),
            pl.col("text_unit_ids").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))),
            pl.col("community").alias("human_readable_id"),
            pl.format("Community {}", pl.col("community")).alias("title"),
            pl.lit("").alias("period"),
        )
        .sort("community")
    )
    return pl.from_arrow(  # type: ignore[return-value]
        out.select(TABLES["communities"].names).to_arrow().cast(TABLES["communities"])
    )


def _kept_lists(
    rows: pl.DataFrame, membership: pl.DataFrame, codes: pl.DataFrame, reuse: Reuse | None
) -> pl.DataFrame:
    """(community, LISTS) of the communities whose lists `reuse` keeps (none without it)."""
    schema = {"community": pl.Int64, **{c: pl.List(pl.Utf8) for c in LISTS}}
    if reuse is None:
        return pl.DataFrame(schema=schema)
    changed_v = codes.filter(pl.col("id").is_in(reuse.changed.cast(pl.Utf8).implode()))["v"]
    hit = membership.filter(pl.col("v").is_in(changed_v.implode()))["community"].unique()
    return (
        rows.filter(~pl.col("community").is_in(hit.implode()))
        .select("community", "id")
        .join(reuse.lists.select(pl.col("id").cast(pl.Utf8), *LISTS), on="id", how="inner")
        .select(
            pl.col("community").cast(pl.Int64), *(pl.col(c).cast(pl.List(pl.Utf8)) for c in LISTS)
        )
    )


def _lists(
    ids: pl.Series,
    codes: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    head: pl.DataFrame,
    membership: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(community, relationship_ids) and (community, text_unit_ids) of the communities in
    `membership`: the relationships with both ends in one, the text units of its members."""

    # A community holds a relationship when it holds both ends, and a text unit when it
    # holds an entity the unit mentions. A vertex is in at most one community per level, so
    # a level is an array vertex -> community and both come from array lookups on integer
    # codes (a relationship's or text unit's rank among the sorted ids, so sorting codes
    # sorts ids), turned back into ids per community at the end. Joining the relationships
    # with every level's membership peaked at +0.4 GB at 40k documents; on strings, +1 GB.
    rels = (
        relationships.select(pl.col("id", "source_id", "target_id").cast(pl.Utf8))
        .with_columns(pl.col("id").rank("dense").cast(pl.Int64).alias("r"))
        .join(codes.rename({"id": "source_id", "v": "su"}), on="source_id")
        .join(codes.rename({"id": "target_id", "v": "tu"}), on="target_id")
    )
    rel_names = rels.select("r", "id").unique("r")
    unit_of = (
        entities.select(pl.col("id").cast(pl.Utf8), "text_unit_ids")
        .join(codes, on="id")
        .select("v", pl.col("text_unit_ids").alias("unit"))
        .explode("unit")
        .drop_nulls("unit")
        .with_columns(pl.col("unit").rank("dense").cast(pl.Int64).alias("u"))
    )
    unit_names = unit_of.select("u", "unit").unique("u")
    su, tu, r = (rels.get_column(c).to_numpy() for c in ("su", "tu", "r"))
    del rels
    uv, uu = unit_of.get_column("v").to_numpy(), unit_of.get_column("u").to_numpy()
    del unit_of
    # a (community, code) pair as one sortable integer: distinct pairs by np.unique
    rw, uw = int(r.max(initial=0)) + 1, int(uu.max(initial=0)) + 1
    rel_keys, unit_keys = [], []
    levels = membership.join(head.select("community", "level"), on="community")
    for level in levels.partition_by("level"):
        if level.get_column("v").is_duplicated().any():
            raise ValueError("a vertex in two communities of one level")
        comm = np.full(len(ids), -1, dtype=np.int64)
        comm[level.get_column("v").to_numpy()] = level.get_column("community").to_numpy()
        cs, ct, cu = comm[su], comm[tu], comm[uv]
        inside, held = (cs >= 0) & (cs == ct), cu >= 0
        rel_keys.append(np.unique(cs[inside] * rw + r[inside]))
        unit_keys.append(np.unique(cu[held] * uw + uu[held]))
    del su, tu, r, uv, uu, levels

    def lists(keys: list[np.ndarray], width: int, name: str) -> pl.DataFrame:
        """community -> its codes (sorted: the keys are), as list column `name`."""
        key = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
        pairs = pl.DataFrame({"community": key // width, "code": key % width})
        return pairs.group_by("community", maintain_order=True).agg(pl.col("code").alias(name))

    rel_ids, units = lists(rel_keys, rw, "relationship_ids"), lists(unit_keys, uw, "text_unit_ids")
    del rel_keys, unit_keys
    rel_ids = _decode(rel_ids, "relationship_ids", rel_names.rename({"r": "code"}))
    units = _decode(units, "text_unit_ids", unit_names.rename({"u": "code", "unit": "id"}))
    return rel_ids, units
