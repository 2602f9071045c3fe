"""Which rows of a Lance vector table a run rewrites, and in what order rows are laid out
(issue 49).

A run's staging folder starts with the published version's Lance tables and their row
digests (pipeline.vectors.row_digests). `plan` compares the digests of the run's tables with
the recorded ones: a row is kept when both match; a row removed, or whose stored columns or
vector changed, is deleted (its fragment compacted: the old text and vector leave the
files, as a deleted text's vectors leave the embedding cache, docs/outputs.md) and, unless
removed, appended anew with new rows.

The table is written whole instead (and `whole` says why) when it or its digests are
missing or made under other settings, when its layout is off
(pipeline.vectors.lance_write.Layout; a table cut by its text, pipeline.vectors.lance
CUT_BY_TEXT, that was not), or when a carry-over would cost WHOLE_SHARE of a whole write or
more.

`order`: the rows of a table in the order they are laid out in Lance, so that the rows one
edit changes lie in few fragments: text units and content nodes by document; entities in
many text units (HUB_UNITS, which change with most edits) first, most units first, the
others by the document of their first unit; relationships beside their end entity that is
in more units (its vector changes every relationship of it) under relationship_vectors
"context", else as the entities, by their own units; reports by level.
`model_texts`: the texts whose embedding-cache vectors a carried row still stands for (the
cache's sweep keeps only what runs used).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.config import EmbeddingSettings
from pipeline.vectors import lance_write
from pipeline.vectors import vector_copies as vector_cache
from pipeline.vectors.lance import (
    CUT_BY_TEXT,
    EmbedderLike,
    entity_model_texts,
    node_units,
    vector_mode,
)
from pipeline.vectors.row_digests import read_digests
from pipeline.vectors.texts import embedding_text

# What a carry-over writes, in rows of a whole write: a row appended costs about one (its
# write and its share of an index segment), a row of a compacted fragment COMPACT_WEIGHT
# (rewritten and re-mapped, not re-tokenized). Past WHOLE_SHARE of the table's rows, the
# table is written whole (its vectors recomputed too). Measured by benchmarks/lance_carry.py
# on the 2k-document corpus's relationships x4 (126k rows, 8 fragments), the 2-core machine
# loaded: whole 114 us a row; compacted 40-87 us a row of the fragments compacted.
COMPACT_WEIGHT = 0.6
WHOLE_SHARE = 0.8
# Entities in this many text units or more are laid out together, most units first: on the
# 2k-document corpus they are 2.4% of the entities, and 38% of relationships have one as an
# end (each of those changes whenever the entity's units do).
HUB_UNITS = 8


@dataclass
class Plan:
    """What a run does to one Lance table. `whole`: why it is written whole (None: carried
    over). Otherwise `delete` the rows deleted, `append` those (made and) written anew."""

    name: str
    whole: str | None
    rows: int
    delete: list[str] = field(default_factory=list)
    append: list[str] = field(default_factory=list)
    # (id, fragment): where the rows `delete` lie
    deleted_at: pl.DataFrame = field(default_factory=lambda: lance_write.FRAGMENT_OF)


def plan(
    folder: str | Path,
    name: str,
    digests: pl.DataFrame,
    settings: str,
    only: pl.Series | None = None,
) -> Plan:
    """How Lance table `name` of the staging folder `folder` becomes the table whose rows'
    digests are `digests` (id, own, vec); `only`: the ids of the rows that may differ from
    the recorded digests (the others are the record's: pipeline.vectors.listed_digests)."""
    rows = digests.height
    lance_dir = Path(folder) / "lancedb"
    path = lance_write.table_dir(lance_dir, name)
    old = read_digests(folder, name, settings)
    if old is None:
        return Plan(name, "no row digests of the last version's table under these settings", rows)
    if not path.is_dir():
        return Plan(name, "the last version has no such Lance table", rows)
    shape = lance_write.layout(path)
    if shape.rows != old.height:
        return Plan(
            name, f"the Lance table holds {shape.rows} rows, its digests {old.height}", rows
        )
    if (reason := shape.fragmented()) is not None:
        return Plan(name, reason, rows)
    if shape.rows and shape.per is None and name in CUT_BY_TEXT:
        return Plan(
            name, "its fragments were not cut by their text (written before they were)", rows
        )
    if only is not None:  # the other rows are the same in both
        digests = digests.filter(pl.col("id").is_in(only.implode()))
        old = old.filter(pl.col("id").is_in(only.implode()))
    both = digests.join(old, on="id", how="full", suffix="_old", coalesce=True)
    now, before = pl.col("own").is_not_null(), pl.col("own_old").is_not_null()
    differs = pl.col("vec") != pl.col("vec_old")  # stored columns or vector inputs (vec holds own)
    changed = both.filter(now & (~before | differs))["id"]  # new rows and changed ones
    # the rows gone, then the changed rows the table holds (a set of the old table's ids to
    # look them up in took ~0.1 s per table at 40k documents)
    delete = pl.concat([both.filter(~now)["id"], both.filter(now & before & differs)["id"]])
    where = lance_write.fragments_of(path)
    deleted_at = where.filter(pl.col("id").is_in(delete.implode()))
    hit = deleted_at["fragment"].unique()
    compacted = where.filter(pl.col("fragment").is_in(hit.implode())).height
    cost = COMPACT_WEIGHT * compacted + changed.len()
    if rows and cost >= WHOLE_SHARE * max(rows, shape.rows):
        return Plan(name, f"a carry-over would write {cost:.0f} row-equivalents of {rows}", rows)
    return Plan(name, None, rows, delete.to_list(), changed.to_list(), deleted_at)


def order(
    name: str,
    frame: pl.DataFrame,
    units: pl.DataFrame | None = None,
    entities: pl.DataFrame | None = None,
    by_units: bool = False,
) -> pl.DataFrame:
    """`frame` (rows of table `name`) in its Lance layout order (see the module's doc).
    `units`: text units' (id, document_id), for entities and relationships; `entities`: the
    entities' (id, frequency) in their layout order, for relationships; `by_units`:
    relationships laid out as entities are, by their own units (their vectors do not hold
    their ends' units: relationship_vectors other than "context")."""
    if frame.height == 0:
        return frame
    if name in ("text_units", "content_nodes"):
        return frame.sort("document_id", "id", nulls_last=True)
    if name == "community_reports":
        return frame.sort("level", "community", "id", nulls_last=True)
    if name == "entities":
        key = _entity_key(frame, units)
    elif name == "relationships" and by_units:
        frame = frame.with_columns(
            pl.col("text_unit_ids").list.len().cast(pl.Int64).alias("frequency")
        )
        key = _entity_key(frame, units)
    elif name == "relationships":
        key = _relationship_key(frame, entities)
    else:
        return frame
    made = [] if name == "entities" or not by_units else ["frequency"]
    return (
        frame.with_columns(key)
        .sort("_hub", "_first", "_second", "id")
        .drop("_hub", "_first", "_second", *made)
    )


def _entity_key(frame: pl.DataFrame, units: pl.DataFrame | None) -> list[pl.Expr | pl.Series]:
    """Entities in HUB_UNITS units or more first, most first; the others by the document of
    their first unit, where the units' documents are known, else by that unit."""
    first = frame.select(pl.col("text_unit_ids").list.first().cast(pl.Utf8).alias("u"))
    home = first["u"]
    if units is not None:
        docs = units.select(pl.col("id").alias("u"), "document_id")
        found = first.join(docs, on="u", how="left", maintain_order="left")["document_id"]
        home = found.fill_null(home)
    hub = pl.col("frequency").fill_null(0) >= HUB_UNITS
    return [
        (~hub).alias("_hub"),
        pl.when(hub).then(-pl.col("frequency")).otherwise(0).alias("_first"),
        pl.when(hub).then(pl.lit(None, pl.Utf8)).otherwise(pl.lit(home)).alias("_second"),
    ]


def _relationship_key(frame: pl.DataFrame, entities: pl.DataFrame | None) -> list[pl.Expr]:
    """By the position (in the entities' layout) of the end in more text units."""
    if entities is None:
        return [pl.lit(0).alias("_hub"), pl.lit(0).alias("_first"), pl.lit("").alias("_second")]
    place = entities.select("id", pl.col("frequency").fill_null(0)).with_row_index("at")
    ends = frame.select("source_id", "target_id")
    for end in ("source", "target"):
        ends = ends.join(
            place.rename({"id": f"{end}_id", "frequency": f"{end}_n", "at": f"{end}_at"}),
            on=f"{end}_id",
            how="left",
            maintain_order="left",
        )
    last = 2**31  # an end that is no entity: after every other
    n_s, n_t = pl.col("source_n").fill_null(-1), pl.col("target_n").fill_null(-1)
    at_s, at_t = pl.col("source_at").fill_null(last), pl.col("target_at").fill_null(last)
    by_source = (n_s > n_t) | ((n_s == n_t) & (at_s <= at_t))
    anchor = ends.select(pl.when(by_source).then(at_s).otherwise(at_t).cast(pl.Int64))
    return [
        pl.lit(False).alias("_hub"),
        anchor.to_series().alias("_first"),
        pl.lit("").alias("_second"),
    ]


def carried_vectors(folder: Path, base: Path | None, name: str) -> tuple[list[str], np.ndarray]:
    """(ids, vectors) of Lance table `name` of the staging folder before it is changed: the
    published version's copy (pipeline.vectors.vector_copies) when that is of the same files,
    else read from Lance."""
    lance_dir = folder / "lancedb"
    if base is not None and vector_cache.fingerprint(base, name) == vector_cache.fingerprint(
        folder, name
    ):
        copy = vector_cache.load(base, name)
        if copy is not None:
            return copy
    found = vector_cache.lance_blocks(lance_dir, name)
    if found is None:
        return [], np.zeros((0, 0), dtype=np.float32)
    (n, dim), blocks = found
    ids: list[str] = []
    mat = np.empty((n, dim), dtype=np.float32)
    for block_ids, block in blocks:
        mat[len(ids) : len(ids) + len(block_ids)] = block
        ids += block_ids
    return ids, mat[: len(ids)]


def patched(
    carried: tuple[list[str], np.ndarray], drop: set[str], ids: list[str], vectors: np.ndarray
) -> tuple[list[str], np.ndarray]:
    """The carried (ids, vectors) without `drop`, and `ids` with their `vectors` (in no
    particular order: readers look rows up by id).

    In place where it can: a dropped row's slot takes a new row (an edit's changed rows keep
    their ids, a changed text's unit a new one), and the matrix is copied only for the
    difference between rows dropped and added. Copying the whole matrix took 0.27-0.35 s for
    28k entities on the loaded 2-core machine (10k documents; 0.68 s at 40k): fresh pages
    cost more than the copy."""
    old_ids, old = carried
    vectors = vectors.reshape(-1, old.shape[1]) if old.shape[0] else vectors
    if old.shape[0] == 0:
        return list(ids), vectors
    if not old.flags.writeable:
        old = old.copy()
    gone = pl.Series(old_ids, dtype=pl.Utf8).is_in(pl.Series(list(drop), dtype=pl.Utf8).implode())
    slots = np.flatnonzero(gone.to_numpy())
    out_ids = list(old_ids)
    reuse = min(len(slots), len(ids))
    for slot, new_id in zip(slots[:reuse], ids[:reuse], strict=True):
        out_ids[slot] = new_id
    old[slots[:reuse]] = vectors[:reuse]
    if reuse < len(slots):  # more rows dropped than added: the rest removed (a copy)
        keep = np.ones(len(out_ids), dtype=bool)
        keep[slots[reuse:]] = False
        return [i for i, k in zip(out_ids, keep, strict=True) if k], old[keep]
    if reuse < len(ids):  # more added: appended (a copy)
        return out_ids + list(ids[reuse:]), np.concatenate([old, vectors[reuse:]])
    return out_ids, old


def model_texts(
    output_dir: str | Path,
    name: str,
    frame: pl.DataFrame,
    embedder: EmbedderLike,
    settings: EmbeddingSettings,
    communities: pl.DataFrame | None = None,
) -> list[str]:
    """The texts `compute_vectors` gives the model (through the embedding cache) for these
    rows of table `name`: what a run that carries the rows over records as still used."""
    if frame.height == 0:
        return []
    if name == "entities":
        return entity_model_texts(frame, embedder, settings)
    if name == "content_nodes":
        if settings.node_vectors != "derived":
            return embedding_text(name, frame)
        held = node_units(output_dir, frame, None).list.len().to_numpy()
        return embedding_text(name, frame.filter(pl.Series(held == 0)))
    if vector_mode(name, settings, communities) == "text":
        return embedding_text(name, frame)
    return []
