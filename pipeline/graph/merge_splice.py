"""An incremental merge's rows (pipeline.graph.merge_carry) put together with the base
version's into the three tables a whole merge writes, equal to them.

Why its own module: what a replaced row changes in the rows kept is not in the rows merged
again, and is fixed here from the tables themselves: an entity's degree is its count of
distinct neighbours over the relationships now (so it is counted over the spliced
relationships, not over the mentions read); a kept relationship with a replaced end gets
its new combined degree; a text unit's entity and relationship ids are the inverse of the
rows' text_unit_ids, so only the units a replaced row lists (now or before) get new lists.
Rows are then ordered as `merge_graph` orders them: entities by frequency (descending),
title, id; relationships by weight (descending), source title, target title, type, id
(the merge sorts on codes of those strings, which sort as the strings do), the kept
relationships left where they are and the new ones put in among them.
"""

from __future__ import annotations

from typing import NamedTuple

import polars as pl

from pipeline.graph.merge_carry import Recomputed
from pipeline.graph.touched import join_ends

LISTS = ("entity_ids", "relationship_ids")
_STRINGS = pl.List(pl.Utf8)


class Spliced(NamedTuple):
    """The three tables, per table how many rows were merged again (`recomputed`), patched
    (relationships whose combined degree changed with an end's degree) or kept, and the
    text units whose rows may differ from the base's (given new lists, new, removed, or of
    a document the run added)."""

    entities: pl.DataFrame
    relationships: pl.DataFrame
    text_units: pl.DataFrame
    counts: dict[str, dict[str, int]]
    units_redone: pl.Series


def splice(
    r: Recomputed, chunks: pl.DataFrame, base_lists: pl.DataFrame, added: list[str]
) -> Spliced:
    """The tables of `r`'s rows over the base version's; `chunks`: the run's text units in
    path order (what the merge numbers them in); `base_lists`: the base's text units (id,
    entity_ids, relationship_ids); `added`: the documents the run added (a unit of an edited
    document may keep its id, its text's, while its document's id and place change)."""
    moved = [f.height for f in r.moved]
    r = r.with_moved()
    ids = r.ids.to_list()
    kept = r.base_relationships.filter(~pl.col("id").is_in(r.rids.to_list()))
    rels = _in_order(kept, r.relationships.select(kept.columns))
    ents = _entities(r, rels, ids)
    rels, patched = _combined_degrees(rels, ents, ids)
    units, again = _text_units(r, chunks, base_lists)
    gone = base_lists.get_column("id").filter(
        ~base_lists.get_column("id").is_in(units["id"].implode())
    )
    relisted = int(units.get_column("id").is_in(again.implode()).sum())
    counts = {
        "entities": {**_count(ents.height, r.entities.height), "rows_units_renamed": moved[0]},
        "relationships": {
            **_count(rels.height, r.relationships.height),
            "rows_units_renamed": moved[1],
            "rows_degree_updated": patched,
        },
        "text_units": _count(units.height, relisted),
    }
    edited = chunks.filter(pl.col("document_id").is_in(pl.Series(added, dtype=pl.Utf8).implode()))
    return Spliced(ents, rels, units, counts, pl.concat([again, gone, edited["id"]]))


def _count(rows: int, recomputed: int) -> dict[str, int]:
    return {"rows_recomputed": recomputed, "rows_carried": rows - recomputed}


def _entities(r: Recomputed, rels: pl.DataFrame, ids: list[str]) -> pl.DataFrame:
    """Base entities with the replaced ones' new rows, their degrees counted over `rels`."""
    ends = pl.concat(
        [rels.select(a="source_id", b="target_id"), rels.select(a="target_id", b="source_id")]
    )
    degree = (
        ends.filter(pl.col("a").is_in(ids))
        .unique()
        .group_by("a")
        .agg(pl.len().cast(pl.Int64).alias("new_degree"))
        .rename({"a": "id"})
    )
    columns = r.base_entities.columns
    new = (
        r.entities.join(degree, on="id", how="left", maintain_order="left")
        .with_columns(degree=pl.col("new_degree").fill_null(0).cast(pl.Int64))
        .select(columns)
    )
    kept = r.base_entities.filter(~pl.col("id").is_in(ids))
    return pl.concat([kept, new]).sort(
        ["frequency", "title", "id"], descending=[True, False, False]
    )


def _combined_degrees(
    rels: pl.DataFrame, ents: pl.DataFrame, ids: list[str]
) -> tuple[pl.DataFrame, int]:
    """`rels` with the combined degree of those with an end in `ids` counted again from
    `ents`' degrees, in place (the rows keep their order); how many rows it changed."""
    end = pl.col("source_id").is_in(ids) | pl.col("target_id").is_in(ids)
    at = rels.select(pl.arg_where(end)).to_series()
    touched = rels[at].select("source_id", "target_id", "combined_degree")
    ends = join_ends(touched, ents.select("id", "degree"), ("source_id", "target_id"), ("sd", "td"))
    new = (ends["sd"] + ends["td"]).cast(pl.Int64)
    patched = int((new != touched["combined_degree"]).sum())
    combined = rels["combined_degree"].clone().scatter(at, new)
    return rels.with_columns(combined), patched


# The relationships' order (the merge's): weight descending, then source and target titles,
# type and id ascending; the id makes it total.
ORDER = ("weight", "source", "target", "type", "id")
DESCENDING = [True, False, False, False, False]
# New rows up to which they are put in place by binary search, past which all are sorted:
# at 40k documents (487k relationships) 35 rows took 8 ms against the sort's 170 ms, 3,000
# rows 0.22 s against 0.23 s (and make a frame of 6k slices).
INSERT_ROWS = 1_000


def _in_order(kept: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """`kept` (rows in ORDER: the base version's) with the rows `new` put where a sort of
    both would put them, by binary search, the kept rows never moved: sorting all 490k
    relationships at 40k documents, every column gathered, took ~0.6 s of an edit's graph
    step. Past INSERT_ROWS new rows, or with a null or NaN key (the merge makes none), all
    are sorted."""
    both = [kept.select(ORDER), new.select(ORDER)]
    if (
        new.height > INSERT_ROWS
        or any(f.null_count().sum_horizontal().item() for f in both)
        or any(f["weight"].is_nan().any() for f in both)
    ):
        return pl.concat([kept, new]).sort(ORDER, descending=DESCENDING)
    new = new.sort(ORDER, descending=DESCENDING)
    columns = [kept.get_column(c) for c in ORDER]

    def key(i: int) -> tuple:
        weight, *rest = (c[i] for c in columns)
        return (-weight, *rest)

    parts, start, low = [], 0, 0
    for j, (weight, *rest) in enumerate(new.select(ORDER).iter_rows()):
        target, high = (-weight, *rest), kept.height
        while low < high:  # the first kept row after the new one
            mid = (low + high) // 2
            if key(mid) < target:
                low = mid + 1
            else:
                high = mid
        parts += [kept.slice(start, low - start), new.slice(j, 1)]
        start = low
    # one piece: written in 71 slices (35 new rows), an edit's process peaked ~50 MB higher
    return pl.concat([*parts, kept.slice(start)]).rechunk()


def _text_units(
    r: Recomputed, chunks: pl.DataFrame, base_lists: pl.DataFrame
) -> tuple[pl.DataFrame, pl.Series]:
    """`chunks` with their entity and relationship ids: the base's, but for the units a
    replaced row lists now and did not before, or listed before and does not now, and
    units the base did not have; and the ids of those units. (A hub merged again lists
    thousands of units, and the lists of all of them were rebuilt: 10k of 45k units at 40k
    documents, where one unit's changed.)"""
    old_rows = [
        r.base_entities.filter(pl.col("id").is_in(r.ids.to_list())),
        r.base_relationships.filter(pl.col("id").is_in(r.rids.to_list())),
    ]
    moved = [_moved(old_rows[0], r.entities), _moved(old_rows[1], r.relationships)]
    new_units = chunks.get_column("id").filter(
        ~chunks.get_column("id").is_in(base_lists.get_column("id").to_list())
    )
    again = pl.concat([*moved, new_units]).drop_nulls().unique().to_list()
    lists = base_lists.filter(pl.col("id").is_in(again))
    relisted = [
        _relisted(lists, "entity_ids", r.ids, r.entities, again),
        _relisted(lists, "relationship_ids", r.rids, r.relationships, again),
    ]
    redone = (
        pl.DataFrame({"id": again}, schema={"id": pl.Utf8})
        .join(relisted[0], on="id", how="left")
        .join(relisted[1], on="id", how="left")
    )
    lists = pl.concat([base_lists.filter(~pl.col("id").is_in(again)).select("id", *LISTS), redone])
    units = chunks.drop([c for c in LISTS if c in chunks.columns])
    empty = pl.lit([], dtype=_STRINGS)
    units = units.join(lists, on="id", how="left", maintain_order="left").with_columns(
        pl.col(c).fill_null(empty) for c in LISTS
    )
    return units, pl.Series("id", again, dtype=pl.Utf8)


def _moved(before: pl.DataFrame, now: pl.DataFrame) -> pl.Series:
    """The text units that one of the rows lists `now` and did not `before` (by id), or the
    other way round: the units whose lists change with them."""
    pairs = [f.select("id", unit="text_unit_ids").explode("unit") for f in (before, now)]
    one_side = [pairs[0].join(pairs[1], on=["id", "unit"], how="anti", nulls_equal=True)]
    one_side.append(pairs[1].join(pairs[0], on=["id", "unit"], how="anti", nulls_equal=True))
    return pl.concat(one_side).get_column("unit")


def _relisted(
    lists: pl.DataFrame, column: str, replaced: pl.Series, rows: pl.DataFrame, units: list[str]
) -> pl.DataFrame:
    """(id, `column`) of text units `units`: the ids their base list holds but `replaced`,
    and those of `rows` (the replaced rows now) that list them; sorted, as the merge's."""
    kept = (
        lists.select("id", item=column)
        .explode("item")
        .filter(pl.col("item").is_not_null() & ~pl.col("item").is_in(replaced.to_list()))
    )
    now = (
        rows.select(item="id", id="text_unit_ids")
        .explode("id")
        .filter(pl.col("id").is_in(units))
        .select("id", "item")
    )
    return (
        pl.concat([kept, now])
        .group_by("id")
        .agg(pl.col("item").unique().sort().alias(column))
        .with_columns(pl.col(column).cast(_STRINGS))
    )
