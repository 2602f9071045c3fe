"""Where tables live: atomic Parquet files and LanceDB tables under one output root.

A Parquet write goes to a temporary file in the same folder and is renamed over the
old one, so a crash mid-write leaves the previous table intact. Lance writes are
versioned by Lance itself: an overwrite becomes visible only when it commits.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import schemas
from pipeline.files import atomic_write_with

LANCE_DIR = "lancedb"
# Lance's Rust logger warns on every first write of a table; keep real errors only. Read
# when lancedb is first imported, which happens after this module is.
os.environ.setdefault("LANCEDB_LOG", "error")


def table_path(root: str | Path, name: str) -> Path:
    return Path(root) / f"{name}.parquet"


def write_table(root: str | Path, name: str, df: pl.DataFrame) -> Path:
    """Write `df` as table `name` (conformed to its schema), atomically."""
    return write_arrow(root, name, schemas.conform(df, name))


def write_arrow(root: str | Path, name: str, table: pa.Table) -> Path:
    path = table_path(root, name)
    atomic_write_with(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    return path


def read_table(root: str | Path, name: str, columns: list[str] | None = None) -> pl.DataFrame:
    """Table `name` (only `columns`, when given); its empty frame when it was never written."""
    path = table_path(root, name)
    if not path.exists():
        frame = schemas.empty(name)
        return frame.select(columns) if columns else frame
    return pl.read_parquet(path, columns=columns)


def lance_db(root: str | Path):
    import lancedb

    path = Path(root) / LANCE_DIR
    path.mkdir(parents=True, exist_ok=True)
    return lancedb.connect(str(path))


def write_lance(root: str | Path, name: str, table: pa.Table, fts: bool = True):
    """Replace Lance table `name` with `table` (its schema is explicit) and index its text."""
    from lancedb.index import FTS

    db = lance_db(root)
    tbl = db.create_table(name, data=table, schema=table.schema, mode="overwrite")
    if fts and table.num_rows:
        tbl.create_index("text", config=FTS(with_position=True), replace=True)
    return tbl
