"""GraphRAG's columns that ours do not already hold: documents' text units, communities'
period. Polars; called by the assets where the data exists."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import polars as pl


def run_date() -> str:
    """Today's UTC date, ISO 8601: GraphRAG's `period` (the date of ingest); the date of
    `$SOURCE_DATE_EPOCH` when set (reproducible builds' convention: rebuilding an index
    then gives the same tables on any day)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    now = datetime.fromtimestamp(int(epoch), UTC) if epoch.isdigit() else datetime.now(UTC)
    return now.date().isoformat()


def stamp_period(
    communities: pl.DataFrame, previous: pl.DataFrame | None, today: str | None = None
) -> pl.DataFrame:
    """Communities with `period` filled, as GraphRAG's incremental update reads it: the
    run's date for a new community; a community with the same id as last run's (same level
    and members: carried over unchanged) keeps the period it had, so a re-run does not make
    every community look new."""
    today = today or run_date()
    if communities.is_empty():
        return communities
    kept = (
        previous.select("id", pl.col("period").alias("_kept")).filter(pl.col("_kept") != "")
        if previous is not None and not previous.is_empty()
        else pl.DataFrame(schema={"id": pl.Utf8, "_kept": pl.Utf8})
    )
    return (
        communities.join(kept.unique("id"), on="id", how="left", maintain_order="left")
        .with_columns(pl.col("_kept").fill_null(today).alias("period"))
        .drop("_kept")
    )


def with_text_unit_ids(documents: pl.DataFrame, units: pl.DataFrame) -> pl.DataFrame:
    """Documents with `text_unit_ids`: the ids of their units (`units`: id, document_id,
    seq), in reading order; [] for a document that has none."""
    ids = (
        units.sort("document_id", "seq")
        .group_by("document_id", maintain_order=True)
        .agg(pl.col("id").alias("_units"))
    )
    return (
        documents.drop("text_unit_ids", strict=False)
        .join(ids, left_on="id", right_on="document_id", how="left", maintain_order="left")
        .with_columns(
            pl.col("_units").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))).alias("text_unit_ids")
        )
        .drop("_units")
    )
