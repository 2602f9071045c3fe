"""GraphRAG's columns that ours do not already hold: documents' text units, communities'
period. Polars (Arrow for a shard file's documents, read and written a row group at a time);
called by the assets where the data exists."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import polars as pl
import pyarrow as pa


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
    ids = text_unit_ids(documents.get_column("id"), units)
    return documents.drop("text_unit_ids", strict=False).with_columns(ids)


def set_text_unit_ids(documents: pa.Table, units: pl.DataFrame) -> pa.Table:
    """`with_text_unit_ids` on documents as Arrow (a shard file's row group): the new column
    is made in polars from the ids alone, so no other column is copied (a frame's round trip
    through Arrow copies a huge document's 150 MB text twice)."""
    ids = text_unit_ids(pl.Series("id", documents.column("id")), units).to_arrow()
    at = documents.schema.get_field_index("text_unit_ids")
    if at < 0:
        return documents.append_column("text_unit_ids", ids)
    return documents.set_column(at, "text_unit_ids", ids)


def text_unit_ids(document_ids: pl.Series, units: pl.DataFrame) -> pl.Series:
    """`text_unit_ids` of the documents `document_ids`, one list per document, in order."""
    ids = (
        units.select("id", "document_id", "seq")
        .sort("document_id", "seq")
        .group_by("document_id", maintain_order=True)
        .agg(pl.col("id").alias("_units"))
    )
    return (
        document_ids.to_frame("id")
        .join(ids, left_on="id", right_on="document_id", how="left", maintain_order="left")
        .select(pl.col("_units").fill_null(pl.lit([], dtype=pl.List(pl.Utf8))))
        .to_series()
        .alias("text_unit_ids")
    )
