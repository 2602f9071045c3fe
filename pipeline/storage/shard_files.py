"""The files of sharded tables: `<table>/<shard>.parquet` in a run's staging folder.

Why its own module: the per-document stages write and read one shard at a time, and one
shard may be one huge document, so they also write and read a shard a part at a time
(bounded Parquet row groups, a writer that appends parts and replaces the shard's file
atomically at the end). Whole tables, versions and publishing are pipeline.storage.store's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from pipeline import schemas
from pipeline.storage.files import atomic_path
from pipeline.storage.store import read_manifest

# Parquet row groups of a shard file: a reader can stream a shard a group at a time (a huge
# document is one shard); 16k rows of chunks is ~13 MB of text
ROW_GROUP_ROWS = 16_384


def write_shard(root: str | Path, name: str, shard: str, df: pl.DataFrame) -> Path:
    """Write shard `shard` of the sharded table `name`, atomically (the other shards stay)."""
    with shard_parts(root, [name], shard) as write:
        write({name: df})
    return Path(root) / name / f"{shard}.parquet"


@contextlib.contextmanager
def shard_parts(
    root: str | Path, names: Iterable[str], shard: str
) -> Iterator[Callable[[dict[str, pl.DataFrame]], None]]:
    """Write shard `shard` of the sharded tables `names` a part at a time: `write(frames)`
    appends each frame (conformed to its table's schema) to its table's file, so a shard's rows
    need never be in memory at once (one huge document is one shard). Each file replaces the
    shard's old one atomically when the block ends cleanly; on an error none is replaced."""
    if read_manifest(root) is not None:
        raise ValueError(f"{root} is a published output folder: write into a run's staging")
    names = list(names)
    with contextlib.ExitStack() as stack:
        writers = {}
        for name in names:  # renames at exit run after the writers close (LIFO)
            tmp = stack.enter_context(atomic_path(Path(root) / name / f"{shard}.parquet"))
            writer = pq.ParquetWriter(tmp, schemas.TABLES[name], compression="zstd")
            stack.callback(writer.close)
            writers[name] = writer

        def write(frames: dict[str, pl.DataFrame]) -> None:
            for name in names:
                writers[name].write_table(schemas.conform(frames[name], name), ROW_GROUP_ROWS)

        yield write
    for name in names:
        (Path(root) / f"{name}.parquet").unlink(missing_ok=True)  # it was one file before


def retain_shards(root: str | Path, name: str, keys: list[str]) -> list[str]:
    """Delete the files of shards not in `keys` (left by a different shard count)."""
    folder = Path(root) / name
    doomed = [p for p in folder.glob("*.parquet") if p.stem not in set(keys)]
    for p in doomed:
        p.unlink(missing_ok=True)
    return sorted(p.stem for p in doomed)


def read_shard(root: str | Path, name: str, shard: str) -> pl.DataFrame:
    """One shard of the sharded table `name` (its empty frame when never written)."""
    path = Path(root) / name / f"{shard}.parquet"
    return pl.read_parquet(path) if path.exists() else schemas.empty(name)


def read_shard_parts(
    root: str | Path, name: str, shard: str, rows: int, columns: list[str] | None = None
) -> Iterator[pl.DataFrame]:
    """One shard of the sharded table `name`, `rows` rows at a time (read a row group at a
    time: a huge document's shard is never whole in memory); nothing when never written."""
    path = Path(root) / name / f"{shard}.parquet"
    if not path.exists():
        return
    for batch in pq.ParquetFile(path).iter_batches(batch_size=rows, columns=columns):
        yield pl.from_arrow(batch)  # type: ignore[misc]
