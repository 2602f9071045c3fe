"""The extracted mention tables as the graph merge reads them.

Why its own module: reading the `extracted_entities` / `extracted_relationships` shards is
I/O (the Dagster asset calls it), kept apart from the pure merge; MENTION_COLUMNS is also the
column list the stage's asset loads (tests/test_stage_inputs.py checks it).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline import schemas
from pipeline.storage import store

# The columns of the extracted tables merge_graph (and the LLM summaries) read.
MENTION_COLUMNS = {
    "extracted_entities": ["text_unit_id", "title", "type", "description"],
    "extracted_relationships": [
        "text_unit_id",
        "source",
        "target",
        "type",
        "description",
        "weight",
    ],
}


def read_matching(root: str | Path, name: str, where: pl.Expr) -> pl.DataFrame:
    """The rows of mention table `name` (its MENTION_COLUMNS, strings) that match `where`,
    from every shard file of `root`, with `shard` (the file's) and `row` (its place in the
    file): the rows in the order read_mentions reads them, once
    sorted on (shard, row). A few columns of each file are read and filtered as they come:
    an incremental merge (pipeline.graph.merge_carry) reads only what a change touched. The
    row number is the scan's own (`row_index_name`): numbered after the scan, the filter
    could not be applied as the file is read (at 40k documents 0.088 s against 0.067 s for
    the 16 files of a table, warm)."""
    columns = MENTION_COLUMNS[name]
    parts = [
        pl.scan_parquet(f, row_index_name="row")
        .select("row", *columns)
        .filter(where)
        .with_columns(shard=pl.lit(f.stem))
        .collect()
        for f in store.table_files(root, name)
    ]
    return pl.concat([no_matching(name), *parts])


def no_matching(name: str) -> pl.DataFrame:
    """`read_matching`'s frame when no row matches."""
    empty = schemas.empty(name).select(MENTION_COLUMNS[name]).with_row_index("row")
    return empty.with_columns(shard=pl.lit("", dtype=pl.Utf8))


def read_mentions(root: str | Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The extracted entities and relationships of `root`, as merge_graph reads them: its
    columns only, the strings Categorical (one Categories for both tables, so their codes
    compare), a shard file at a time, streamed (a batch of rows cast at a time). A mention
    repeats its sentence, title and unit id: at 40k documents 2.4M rows hold 0.3M distinct
    sentences, 400 MB as strings; one 151 MB document's shard read whole as strings took
    +0.7 GB for a moment."""
    categories = pl.Categories.random()
    frames = []
    for name, columns in MENTION_COLUMNS.items():
        files = store.table_files(root, name)
        parts = [
            pl.scan_parquet(f)
            .select(columns)
            .with_columns(pl.col(pl.Utf8).cast(pl.Categorical(categories)))
            .collect(engine="streaming")
            for f in files
        ]
        empty = schemas.empty(name).select(columns)
        frames.append(pl.concat(parts) if parts else empty)
    return frames[0], frames[1]
