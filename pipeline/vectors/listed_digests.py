"""The relationships' row digests in an edit, patched from the graph step's list of the rows
it merged again (pipeline.storage.changed_rows), not made again from the whole table (issue 49).

Why: to find the few relationships a one-file edit at 40k documents changes, their Lance
table's step read all 487k source rows (0.45 s, +0.29 GB at its peak), hashed them and
compared every digest with the last run's (0.36 s, +0.15 GB), on the run's critical path,
while the graph step lists the rows it merged again.

A relationship's digests (pipeline.vectors.row_digests) are made from its own row, its text
units' digests and, under relationship_vectors "titles+units" (the default), its ends'
title digests. These can differ from the base version's only for a listed relationship
(merged again, or gone), one with a listed end (an entity merged again: its title part may
come or go) and one a listed text unit holds (a unit that differs: so may its digest).
Every other row's digests are the recorded ones, when the folder's record is the base
version's (the same file). Those rows are read and hashed again and patched into the
record; the others are never read. Under "context" a relationship takes its ends' whole
digests, which follow their units, and under "text" the record of the embedding cache
needs every row's text: both are hashed whole, as before.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.config import EmbeddingSettings
from pipeline.storage import store
from pipeline.storage.run_changes import same_file
from pipeline.vectors import end_titles, row_digests

NAME = "relationships"


def relationships_to_hash(
    folder: Path,
    base: Path | None,
    listed: dict[str, pl.Series] | None,
    settings: EmbeddingSettings,
) -> pl.Expr | None:
    """Which relationships' digests may differ from those recorded in `folder` (the
    module's doc), as a filter of their rows (read in one scan with their columns), or None:
    no list, a record that is not the base version's, or a vector mode whose digests are
    made whole."""
    if listed is None or base is None or settings.relationship_vectors != end_titles.MODE:
        return None
    if not same_file(row_digests.digest_path(folder, NAME), row_digests.digest_path(base, NAME)):
        return None
    held = (
        pl.scan_parquet(store.table_files(folder, "text_units"))
        .select("id", "relationship_ids")
        .filter(pl.col("id").is_in(listed["text_units"].implode()))
        .select(pl.col("relationship_ids").explode().alias("id"))
        .collect()["id"]
    )
    ids = pl.concat([listed[NAME].cast(pl.Utf8), held.cast(pl.Utf8)]).implode()
    ends = listed["entities"].cast(pl.Utf8).implode()
    return (
        pl.col("id").is_in(ids) | pl.col("source_id").is_in(ends) | pl.col("target_id").is_in(ends)
    )


def hashed_ids(frame: pl.DataFrame, listed: dict[str, pl.Series]) -> pl.Series:
    """The ids whose digests `patched_digests` makes again: the rows read (`frame`) and the
    listed ones gone since the base version."""
    return pl.concat([listed[NAME].cast(pl.Utf8), frame["id"].cast(pl.Utf8)]).unique()


def patched_digests(
    folder: Path,
    key: str,
    only: pl.Series,
    frame: pl.DataFrame,
    units: pl.DataFrame,
    settings: EmbeddingSettings,
) -> pl.DataFrame | None:
    """The digests of every relationship: those recorded in `folder` (under settings digest
    `key`), the rows `only` names hashed again from `frame` (their rows that still exist;
    `units`: the text units' digests); None when the record was made under other settings
    (the vector settings changed since the base version: every row is hashed)."""
    recorded = row_digests.read_digests(folder, NAME, key)
    if recorded is None:
        return None
    ends = pl.concat([frame["source_id"], frame["target_id"]]).drop_nulls().unique()
    entities = (
        pl.scan_parquet(store.table_files(folder, "entities"))
        .select("id", "title", "type", "frequency")
        .filter(pl.col("id").is_in(ends.implode()))
        .collect()
    )
    titles = row_digests.title_digests(entities, end_titles.titled_rows(entities, settings))
    known = {"text_units": units, row_digests.ENTITY_TITLES: titles}
    fresh = row_digests.table_digests(NAME, frame, known, relationships=end_titles.MODE)
    kept = recorded.filter(~pl.col("id").is_in(only.implode()))
    return pl.concat([kept, fresh])
