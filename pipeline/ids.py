"""Content-addressed ids: the same input always gets the same id, across runs and machines."""

from __future__ import annotations

import hashlib

import polars as pl


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stable_id(*parts: str) -> str:
    """Hash of the parts joined by a separator no text contains (32 hex chars)."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()[:32]


def stable_id_expr(*cols: str | pl.Expr) -> pl.Expr:
    """Vectorised stable_id over polars columns; equal to stable_id row by row."""
    exprs = [pl.col(c) if isinstance(c, str) else c for c in cols]
    joined = pl.concat_str([e.cast(pl.Utf8) + pl.lit("\x1f") for e in exprs])
    return joined.map_batches(
        lambda s: pl.Series([hashlib.sha256(v.encode("utf-8")).hexdigest()[:32] for v in s]),
        return_dtype=pl.Utf8,
    )


def carry_short_ids(frame: pl.DataFrame, previous: pl.DataFrame | None) -> pl.DataFrame:
    """`frame` with the human_readable_id each row had in `previous` (the last run's id,
    human_readable_id), and new rows numbered after the largest, in row order. Short ids
    are what reports and query contexts cite ("[Data: Entities (12)]"): numbered afresh on
    every run, one added entity renumbered every other and changed every report's text."""
    if previous is None or previous.is_empty():
        return frame
    old = previous.select("id", pl.col("human_readable_id").alias("_old"))
    start = int(previous["human_readable_id"].max()) + 1
    new = pl.col("_old").is_null()
    # the ids alone joined, in the frame's row order: joining the frame gathered every column
    # of it (490k relationships at 40k documents, each edit)
    short = (
        frame.select("id")
        .join(old, on="id", how="left", maintain_order="left")
        .select(
            pl.when(new)
            .then(new.cum_sum() - 1 + start)
            .otherwise(pl.col("_old"))
            .cast(pl.Int64)
            .alias("human_readable_id")
        )
    )
    return frame.with_columns(short.to_series())
