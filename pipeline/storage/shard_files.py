"""The files of sharded tables: `<table>/<shard>.parquet` in a run's staging folder.

Why its own module: the per-document stages write and read one shard at a time, and one
shard may be one huge document, so they also write and read a shard a part at a time
(bounded Parquet row groups, a writer that appends parts and replaces the shard's file
atomically at the end). Whole tables, versions and publishing are pipeline.storage.store's.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import schemas
from pipeline.storage.files import atomic_path, atomic_write_bytes
from pipeline.storage.store import SCRATCH_DIR, parquet_options, read_manifest

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
    takes each frame out of `frames` and appends it (conformed to its table's schema) to its
    table's file, so a shard's rows
    need never be in memory at once (one huge document is one shard). Each file replaces the
    shard's old one atomically when the block ends cleanly; on an error none is replaced."""
    names = list(names)
    with arrow_parts(root, names, shard) as write_table:

        def write(frames: dict[str, pl.DataFrame]) -> None:
            for name in names:  # taken out of `frames`: a huge frame is freed once it is Arrow
                write_table(name, schemas.conform(frames.pop(name), name))

        yield write


@contextlib.contextmanager
def arrow_parts(
    root: str | Path, names: Iterable[str], shard: str
) -> Iterator[Callable[[str, pa.Table], None]]:
    """`shard_parts` for Arrow tables: `write(name, table)` appends `table`, of exactly
    table `name`'s schema, to its file."""
    if read_manifest(root) is not None:
        raise ValueError(f"{root} is a published output folder: write into a run's staging")
    names = list(names)
    with contextlib.ExitStack() as stack:
        writers = {}
        for name in names:  # renames at exit run after the writers close (LIFO)
            tmp = stack.enter_context(atomic_path(Path(root) / name / f"{shard}.parquet"))
            schema = schemas.TABLES[name]
            writer = pq.ParquetWriter(tmp, schema, **parquet_options(schema))
            stack.callback(writer.close)
            writers[name] = writer

        def write(name: str, table: pa.Table) -> None:
            writers[name].write_table(table, ROW_GROUP_ROWS)

        yield write
    for name in names:
        (Path(root) / f"{name}.parquet").unlink(missing_ok=True)  # it was one file before


def rewrite_shard(
    root: str | Path, name: str, shard: str, change: Callable[[pa.Table], pa.Table]
) -> None:
    """Write shard `shard` of the sharded table `name` again, with `change` made to each of
    its row groups, read and written one at a time as Arrow tables: no column is copied into
    a frame and back (a huge document's text, 150 MB, twice). Never written: written empty."""
    path = Path(root) / name / f"{shard}.parquet"
    schema = schemas.TABLES[name]
    with arrow_parts(root, [name], shard) as write:
        if path.exists():  # read to the end before the new file replaces it
            with pq.ParquetFile(path) as source:
                for group in range(source.num_row_groups):
                    table = change(source.read_row_group(group))
                    write(name, table.select(schema.names).cast(schema))


def retain_shards(root: str | Path, name: str, keys: list[str]) -> list[str]:
    """Delete the files of shards not in `keys` (left by a different shard count)."""
    folder = Path(root) / name
    doomed = [p for p in folder.glob("*.parquet") if p.stem not in set(keys)]
    for p in doomed:
        p.unlink(missing_ok=True)
    return sorted(p.stem for p in doomed)


def read_shard(
    root: str | Path, name: str, shard: str, columns: list[str] | None = None
) -> pl.DataFrame:
    """One shard of the sharded table `name`, its `columns` or all (its empty frame when
    never written)."""
    path = Path(root) / name / f"{shard}.parquet"
    if not path.exists():
        return schemas.empty(name).select(columns or pl.all())
    return pl.read_parquet(path, columns=columns)


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


def write_scratch(root: str | Path, name: str, shard: str, value: Any) -> Path:
    """Hand `value` (pickled) from one step of this run to a later one: shard `shard` of
    `name` in the run's scratch folder, which publishing removes (store.SCRATCH_DIR)."""
    path = Path(root) / SCRATCH_DIR / name / f"{shard}.pickle"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return path


def read_scratch(root: str | Path, name: str, shard: str) -> Any:
    """What `write_scratch` handed over for shard `shard` of `name` (this run's own
    file, never another's: staging starts without it), None when there is none."""
    path = Path(root) / SCRATCH_DIR / name / f"{shard}.pickle"
    try:
        return pickle.loads(path.read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        return None
