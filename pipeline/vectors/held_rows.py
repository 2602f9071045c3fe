"""Deleted Lance rows left in their fragments while their text is still in the corpus
(issue 49).

Why: documents added to a corpus mention entities and relationships from all over it, and
each one mentioned again gets a new row (its text units, vector and often description
change). At 40k documents, adding 100 changed 2,083 of the 487k relationships, 122 of them
mentioned once before, and those lie in nearly every fragment (the rows are laid out by
their units' documents, pipeline.vectors.carry_over): materialising the deletions rewrote
31 of 33 fragments and re-mapped their full-text segments, 14.2 s (3.9 s without the
segments) of a 130 s run on the 2-core machine, for 0.4% of the rows.

A changed row's last version was made from its text units (text_unit_ids): when every one of
them is still a text unit of the corpus (a unit's id is a digest of its text, so an edited
or removed text leaves with its id), nothing a user removed is in that old row, and it may
stay in its fragment, hidden by Lance's deletion file, as Lance itself leaves deleted rows
until a compaction. The record (`<table>.held.parquet` beside the row digests) names each
fragment holding such rows and their units; a run in which one of those units is gone
compacts the fragment, so a document's deleted or replaced text still leaves every file in
the run that removes it. lance_write compacts a fragment anyway once HOLD_SHARE of its rows
are deleted.

What held rows change: until their fragment is compacted, the full-text statistics of its
segment (row count, lengths, term frequencies) still count them, so LanceDB's BM25 scores on
these two tables differ slightly from a whole write's (docgraph's own queries rank with
pipeline.lexical); their rows, vectors and full-text hits do not.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from pipeline.storage import store
from pipeline.storage.files import atomic_write_with
from pipeline.vectors.row_digests import DIGESTS_DIR

# The tables whose rows are made from text units listed on them (text_unit_ids); the text
# units' and content nodes' rows change only with their own text, the reports' table is
# small and mostly written whole.
HOLD_TABLES = ("entities", "relationships")
_EMPTY = pl.DataFrame(schema={"fragment": pl.Int64, "unit": pl.Utf8})


def record_path(root: str | Path, name: str) -> Path:
    return Path(root) / DIGESTS_DIR / f"{name}.held.parquet"


def read_record(root: str | Path, name: str) -> pl.DataFrame:
    """(fragment, unit): the fragments of table `name` holding deleted rows, with the text
    units those rows were made from (null: none); empty when there is no record."""
    path = record_path(root, name)
    return pl.read_parquet(path) if path.is_file() else _EMPTY


def drop_record(root: str | Path, name: str) -> None:
    """Forget the record before the table changes (a table written whole holds no deleted
    rows; a failed run's table is written whole by the next)."""
    record_path(root, name).unlink(missing_ok=True)


def write_record(root: str | Path, name: str, record: pl.DataFrame, held: Collection[int]) -> None:
    """Record what the fragments `held` (those left holding deleted rows) hold."""
    kept = record.filter(pl.col("fragment").is_in(list(held))).unique().sort(pl.all())
    if kept.is_empty():
        return
    path = record_path(root, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_with(path, lambda tmp: pq.write_table(kept.to_arrow(), tmp))


def may_hold(
    folder: Path, base: Path | None, name: str, deleted_at: pl.DataFrame
) -> tuple[set[int], pl.DataFrame]:
    """The fragments of table `name` in staging folder `folder` whose deleted rows may stay
    (lance_write.update's `may_hold`), and the record they would then have. `deleted_at`:
    (id, fragment) of the rows the run deletes; `base`: the version the run started from,
    whose rows those are."""
    if name not in HOLD_TABLES or base is None:
        return set(), _EMPTY
    present = store.read_table(folder, "text_units", ["id"]).get_column("id").implode()
    ids = deleted_at.get_column("id").implode()
    made_from = (
        pl.scan_parquet(store.table_files(base, name))
        .select("id", pl.col("text_unit_ids").alias("unit"))
        .filter(pl.col("id").is_in(ids))
        .collect()
        .explode("unit")
    )
    rows = deleted_at.join(made_from, on="id", how="left")
    gone = pl.col("unit").is_not_null() & ~pl.col("unit").is_in(present)
    lost = rows.filter(gone).get_column("id").implode()  # text no longer in the corpus
    lost_at = rows.filter(pl.col("id").is_in(lost)).get_column("fragment")
    kept = rows.filter(~pl.col("id").is_in(lost)).select("fragment", "unit")
    record = pl.concat([read_record(folder, name), kept])
    purge = set(record.filter(gone).get_column("fragment").to_list()) | set(lost_at.to_list())
    return set(record.get_column("fragment").to_list()) - purge, record
