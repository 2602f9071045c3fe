"""The communities table: a hierarchy (head and vertex membership) as schemas.COMMUNITIES rows.

Why its own module: turning vertex numbers back into ids (members, the relationships and text
units each community holds, a stable id per community) is the same whether the hierarchy was
built from scratch or carried over, and is where the memory goes at scale. `period` is "" here:
the run date would make the output differ between runs; the communities asset stamps it
(pipeline.compat.columns.stamp_period, GraphRAG's date of ingest, kept while a community is
unchanged). The id is a hash of (level, member ids), so it is stable across runs.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.ids import stable_id_expr
from pipeline.schemas import TABLES


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
) -> pl.DataFrame:
    """communities frame with exactly schemas.COMMUNITIES columns, from the hierarchy's `head`
    (community, level, parent, children) and `vmembers` (community, v: index into `ids`, the
    sorted entity ids)."""

    # A community holds a relationship when it holds both ends, and a text unit when it
    # holds an entity the unit mentions. A vertex is in at most one community per level, so
    # a level is an array vertex -> community and both come from array lookups on integer
    # codes (a relationship's or text unit's rank among the sorted ids, so sorting codes
    # sorts ids), turned back into ids per community at the end. Joining the relationships
    # with every level's membership peaked at +0.4 GB at 40k documents; on strings, +1 GB.
    membership = vmembers.select("community", "v")
    members = membership.group_by("community").agg(
        pl.col("v").sort().alias("entity_ids"), pl.len().cast(pl.Int64).alias("size")
    )
    codes = pl.DataFrame({"id": ids}).with_row_index("v").with_columns(pl.col("v").cast(pl.Int64))
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
    members = _decode(members, "entity_ids", codes.select(pl.col("v").alias("code"), "id"))
    rel_ids = _decode(rel_ids, "relationship_ids", rel_names.rename({"r": "code"}))
    units = _decode(units, "text_unit_ids", unit_names.rename({"u": "code", "unit": "id"}))

    out = (
        head.join(members, on="community", how="inner")
        .join(rel_ids, on="community", how="left")
        .join(units, on="community", how="left")
        .with_columns(
            pl.col("relationship_ids").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))),
            pl.col("text_unit_ids").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))),
        )
        .with_columns(
            stable_id_expr(
                pl.lit("community"), pl.col("level"), pl.col("entity_ids").list.join(",")
            ).alias("id"),
            pl.col("community").alias("human_readable_id"),
            pl.format("Community {}", pl.col("community")).alias("title"),
            pl.lit("").alias("period"),
        )
        .sort("community")
    )
    return pl.from_arrow(  # type: ignore[return-value]
        out.select(TABLES["communities"].names).to_arrow().cast(TABLES["communities"])
    )
