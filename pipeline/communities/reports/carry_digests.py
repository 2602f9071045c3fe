"""The digests of reports' inputs (reuse_unchanged) carried over for communities none of
whose rows changed, computed afresh only for the others.

Why: `community_digests` explodes every community's members, relationships and text units
at every level and joins each with its row's hash (1.3 s of an edit at 40k documents),
although an edit changes the rows of a few communities. A community's digest is a function
of its own row (report id, size, period, its lists of ids; its number when untitled), of
the hashes of the rows its lists name, of the order of its units' reference numbers and of
the report settings. So the last run's digest holds when its shape (`shapes`: the row and
the settings) is the same, no row it names changed (`changed_keys`: the hashes of every
input row, `input_rows`, against the last run's, in the sidecar `ROWS`), the units that
are in both runs keep their relative order (checked once over all of them), and an untitled
community keeps its number. Hashes are polars' (the sidecar records the version).

When the graph step lists the rows it merged again (pipeline.storage.changed_rows) and the
last run's rows are those of the version the list is against, today's rows are the last
run's with only the listed rows hashed again (`patched_rows`: hashing every row took 0.5 s
and comparing them 0.26 s of an edit at 40k documents), and the listed rows are the changed
ones.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.communities.reports.find_evidence import hrid
from pipeline.communities.reports.reuse_unchanged import (
    community_digests,
    input_rows,
    settings_salt,
)
from pipeline.config import ReportSettings
from pipeline.ids import stable_id_expr
from pipeline.storage.files import read_hashes, write_hashes

ROWS = "community_reports_view_rows.parquet"
# The sidecar's name before a unit's hash was its view (`input_rows`): removed when the new
# one is written; the docgraph that wrote it finds none then, and hashes every row.
_OLD_ROWS = "community_reports_rows.parquet"
_SEED = 20_237
_LISTS = ("entity_ids", "relationship_ids", "text_unit_ids")


def digests_of(
    communities: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    settings: ReportSettings,
    sidecar: pl.DataFrame | None = None,
    last_rows: pl.DataFrame | None = None,
    listed: dict[str, pl.Series] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(digests: id, digest, shape, untitled, community; today's input rows; how many
    digests were carried over from `sidecar`, the last run's digests, and `last_rows`, its
    input rows). `listed`: the rows that may differ from those `last_rows` hash
    (changed_rows), given only when `last_rows` are the rows of the version it is against."""
    renamed = None
    if last_rows is not None and listed is not None:
        rows, changed = patched_rows(last_rows, entities, relationships, text_units, listed)
        changed = None if _units_moved(rows, last_rows) else changed
        if changed is not None:
            changed, renamed = same_evidence(rows, changed, last_rows)
    else:
        rows = input_rows(entities, relationships, text_units)
        changed = changed_keys(rows, last_rows)
    shape = shapes(communities, settings)
    known = _carriable(sidecar)
    if changed is None or known is None:
        fresh = community_digests(communities, rows, settings)
        return fresh.join(shape, on=["community", "id"]).select(*_OUT), rows, 0
    # each list searched in place: exploding them (2.5M ids at 40k documents) took 0.26 s
    # of an edit's run, the search 0.02-0.05 s
    touched = communities.filter(
        pl.any_horizontal(
            pl.col(column)
            .list.eval(pl.element().is_in(changed.filter(pl.col("kind") == kind)["k"].implode()))
            .list.any()
            for kind, column in enumerate(_LISTS)
        )
    ).select("community")
    carried = (
        _shapes_before(communities, shape, renamed, settings)
        .join(touched, on="community", how="anti")
        .join(known, on=["id", "shape"])
        .filter(~pl.col("untitled") | (pl.col("community") == pl.col("last_community")))
        .drop("shape")
        .join(shape, on=["community", "id"])
        .select(*_OUT)
    )
    todo = communities.join(carried.select("community"), on="community", how="anti")
    fresh = community_digests(todo, rows, settings).join(shape, on=["community", "id"])
    out = pl.concat([carried, fresh.select(*_OUT)])
    order = communities.select("community")  # the communities' order, as a full build gives
    return (
        order.join(out, on="community", maintain_order="left").select(*_OUT),
        rows,
        carried.height,
    )


def _shapes_before(
    communities: pl.DataFrame,
    shape: pl.DataFrame,
    renamed: pl.DataFrame | None,
    settings: ReportSettings,
) -> pl.DataFrame:
    """The communities' shapes with the units `renamed` (old, new: `same_evidence`) back
    under their old ids, as the last run's sidecar holds them (lists sorted, as built)."""
    if renamed is None or renamed.is_empty():
        return shape
    old, new = renamed.get_column("old"), renamed.get_column("new")
    units = pl.col("text_unit_ids")
    back = communities.with_columns(units.list.eval(pl.element().replace(new, old).sort()))
    return shapes(back, settings)


_OUT = ["id", "digest", "shape", "untitled", "community"]


def shapes(communities: pl.DataFrame, settings: ReportSettings) -> pl.DataFrame:
    """(community, id, shape): a hash of each community's row as a report reads it (report
    id, size, period, its lists of ids) and of the report settings."""
    return communities.select(
        "community",
        stable_id_expr(pl.lit("report"), "id").alias("id"),
        pl.struct(
            stable_id_expr(pl.lit("report"), "id"),
            "size",
            "period",
            *_LISTS,
            pl.lit(settings_salt(settings), pl.UInt64).alias("salt"),
        )
        .hash(_SEED)
        .alias("shape"),
    )


def changed_keys(rows: pl.DataFrame, last: pl.DataFrame | None) -> pl.DataFrame | None:
    """(kind, k): the input rows added, removed or changed since the last run; None when
    nothing can be carried (no last rows, or units in both runs changed their order)."""
    if last is None or _units_moved(rows, last):
        return None
    # keys as hashes, looked up in hash sets: a join of the two tables' string keys took
    # as long as the digests it saved
    row, key = pl.struct("kind", "k", "h").hash(_SEED), pl.struct("kind", "k").hash(_SEED)
    changed = rows.filter(~row.is_in(last.select(row).to_series().implode()))
    removed = last.filter(~key.is_in(rows.select(key).to_series().implode()))
    return pl.concat([changed.select("kind", "k"), removed.select("kind", "k")])


def _units_moved(rows: pl.DataFrame, last: pl.DataFrame) -> bool:
    """Whether the text units in both runs' rows changed their relative order."""
    units = (
        last.filter(pl.col("kind") == 2)
        .select("k", pl.col("order").alias("last"))
        .join(rows.filter(pl.col("kind") == 2).select("k", "order"), on="k")
        .sort("last")
    )
    return units.select(
        (pl.col("last").n_unique() < pl.len())
        | pl.col("last").is_null().any()
        | (pl.col("order").diff() <= 0).any()
        | pl.col("order").is_null().any()
    ).item()


def patched_rows(
    last: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    text_units: pl.DataFrame,
    listed: dict[str, pl.Series],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(today's input rows, the changed ones: kind, k) from the last run's rows `last`:
    only the rows `listed` are hashed again, and the relationships with a listed end (a
    relationship's hash holds its ends'); every unit's order is today's."""
    ents = listed["entities"]
    ends = pl.col("source_id").is_in(ents.implode()) | pl.col("target_id").is_in(ents.implode())
    rels = pl.concat([listed["relationships"], relationships.filter(ends).get_column("id")])
    keys = (ents, rels, listed["text_units"])
    changed = pl.concat(
        [
            pl.DataFrame({"k": k.cast(pl.Utf8)}).select(pl.lit(kind, pl.UInt8).alias("kind"), "k")
            for kind, k in enumerate(keys)
        ]
    ).unique()
    picked = relationships.filter(pl.col("id").is_in(rels.implode()))
    units = text_units.filter(pl.col("id").is_in(listed["text_units"].implode()))
    named = units.get_column("entity_ids").explode().drop_nulls()  # for the units' views
    held = pl.concat([ents, picked["source_id"], picked["target_id"], named]).implode()
    fresh = input_rows(entities.filter(pl.col("id").is_in(held)), picked, units).join(
        changed, on=["kind", "k"], how="semi"
    )
    rows = pl.concat([last.join(changed, on=["kind", "k"], how="anti"), fresh.select(last.columns)])
    # a listed row whose hash is the last run's changed nothing a report reads (an entity
    # whose text units were renamed: reports do not read its list)
    same = fresh.join(last, on=["kind", "k", "h"], how="semi").select("kind", "k")
    changed = changed.join(same, on=["kind", "k"], how="anti")
    today = text_units.select(pl.col("id").alias("k"), hrid(text_units).alias("today"))
    units = (
        rows.filter(pl.col("kind") == 2)
        .join(today, on="k", how="left")
        .with_columns(pl.col("today").alias("order"))
        .drop("today")
    )
    return pl.concat([rows.filter(pl.col("kind") != 2), units]), changed


def same_evidence(
    rows: pl.DataFrame, changed: pl.DataFrame, last: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(changed, renamed: old, new) with each text unit of `last` that a new unit of `rows`
    replaced at its reference number with the same hash (its view: `input_rows`; an edit to
    sentences naming none of its entities) taken as unchanged: a report reads no more of a
    unit than that and its number."""
    units = changed.filter(pl.col("kind") == 2).get_column("k").implode()
    before, now = (f.filter((pl.col("kind") == 2) & pl.col("k").is_in(units)) for f in (last, rows))
    # a unit gone today, and one new today (a unit in both runs is compared with itself)
    old = before.filter(~pl.col("k").is_in(now.get_column("k").implode()))
    new = now.filter(~pl.col("k").is_in(before.get_column("k").implode()))
    old = old.select(old="k", order="order", h="h")
    new = new.select(new="k", order="order", h="h")
    renamed = old.join(new, on=["order", "h"]).drop_nulls("order").select("old", "new")
    both = pl.concat([renamed["old"], renamed["new"]]).implode()
    return changed.filter((pl.col("kind") != 2) | ~pl.col("k").is_in(both)), renamed


def _carriable(sidecar: pl.DataFrame | None) -> pl.DataFrame | None:
    """(id, shape, digest, untitled, last_community) of the last run's digests."""
    if sidecar is None or not {*_OUT, "polars"} <= set(sidecar.columns) or sidecar.is_empty():
        return None
    if sidecar["polars"][0] != pl.__version__:
        return None  # other hashes
    return sidecar.select(
        "id", "shape", "digest", "untitled", pl.col("community").alias("last_community")
    ).drop_nulls("shape")


def read_rows(folder: Path) -> pl.DataFrame | None:
    return read_hashes(folder / ROWS, ("kind", "k", "h", "order"))


def write_rows(folder: Path, rows: pl.DataFrame | None) -> None:
    """Today's input rows, atomically; None: the sidecar goes."""
    write_hashes(folder / ROWS, rows)
    (folder / _OLD_ROWS).unlink(missing_ok=True)
