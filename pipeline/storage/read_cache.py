"""Columns of single-file tables kept in memory for the rest of an in-process run.

Why: the corpus-wide tables (entities, relationships, text units, communities, reports) are
read again by step after step of one run, each step reading the columns it needs: at 40k
documents a one-file edit made 200 Parquet reads (3.0 s), and 0.5-1.0 s of them were of
columns read before from the same file (the relationships' ids six times, their ends three).

A file is known by its device, inode, modification and change times and size: a run's
staging folder starts as hard links of the published version's files (the same inodes), and
every table is written as a new file renamed into place (a new inode), so a kept column is
never stale. The columns kept are bounded by bytes, the least recently read going first.
Reads keep columns only inside `keeping` (app.run, around an in-process run); everywhere else
(queries, steps in processes of their own) `read` goes to the file.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pyarrow as pa

# Bytes of columns an in-process run keeps. A one-file edit at 40k documents (in-run, the
# 2-core machine): reads 3.2 s with none kept; 2.87 s with 128 MB, 2.50 s with 256 MB, 2.58 s
# with 384 MB, 2.17 s with all (886 MB); peak RSS 1.57, 1.69, 1.68, 1.72 and 2.45 GB.
RUN_BYTES = 256 * 2**20


class _Kept:
    def __init__(self, budget: int):
        self.budget, self.bytes = budget, 0
        self.columns: OrderedDict[tuple, pl.Series] = OrderedDict()
        self.lock = threading.Lock()

    def read(self, path: Path, columns: list[str] | None) -> pl.DataFrame:
        file = identity(path)
        names = list(pl.read_parquet_schema(path)) if columns is None else list(columns)
        with self.lock:
            got = {c: self.columns.get((file, c)) for c in names}
            for c in names:
                if got[c] is not None:
                    self.columns.move_to_end((file, c))
        missing = [c for c in names if got[c] is None]
        if missing:
            fresh = pl.read_parquet(path, columns=missing)
            got.update((s.name, s) for s in fresh.get_columns())
            with self.lock:
                for s in fresh.get_columns():
                    self._keep((file, s.name), s)
        return pl.DataFrame([got[c] for c in names])

    def seed(self, file: tuple | None, columns: list[pl.Series], replaced: tuple | None) -> None:
        with self.lock:
            for key in [key for key in self.columns if key[0] == replaced]:
                self.bytes -= self.columns.pop(key).estimated_size()
            for s in columns:
                self._keep((file, s.name), s)

    def _keep(self, key: tuple, column: pl.Series) -> None:
        size = column.estimated_size()
        if size > self.budget or key in self.columns:
            return
        self.columns[key] = column
        self.bytes += size
        while self.bytes > self.budget:
            _, gone = self.columns.popitem(last=False)
            self.bytes -= gone.estimated_size()


def identity(path: Path) -> tuple | None:
    """What a file's kept columns are known by (None: no such file)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size)


_kept: _Kept | None = None


@contextmanager
def keeping(budget: int) -> Iterator[None]:
    """Reads inside keep up to `budget` bytes of columns; all let go on leaving."""
    global _kept
    _kept = _Kept(budget)
    try:
        yield
    finally:
        _kept = None


@contextmanager
def written(
    path: Path, frame: pl.DataFrame, table: pa.Table, skip: frozenset[str]
) -> Iterator[None]:
    """Around the write of `frame` (as Arrow `table`) to the Parquet file `path`: inside
    `keeping`, its columns but those in `skip` are then kept as if read from the new file,
    and those of the file it replaced let go (the steps after read the run's tables, not the
    base version's it replaced). The next steps of a run read the tables the one before
    wrote: at 40k documents an edit's checks, communities and reports read the graph's
    three tables again (0.3 s for the relationships alone). A column is the frame's own
    where the file gives it back as it is (no copy held beside the frame while it is
    written: the graph step's peak is the edit's), else converted from `table`; free text
    is read again by few steps, and would be most of the bytes kept (RUN_BYTES)."""
    replaced = identity(path)
    yield
    kept = _kept
    if kept is None:
        return
    back = pl.from_arrow(table.schema.empty_table()).schema
    own = {c for c in back if c in frame.columns and frame.schema[c] == back[c]}
    wanted = [c for c in back if c not in skip]
    named = [c for c in wanted if c not in own]
    converted = pl.from_arrow(table.select(named)) if named else pl.DataFrame()
    columns = [frame.get_column(c) if c in own else converted.get_column(c) for c in wanted]
    kept.seed(identity(path), columns, replaced)


def read(path: Path, columns: list[str] | None = None) -> pl.DataFrame:
    """The Parquet file `path` (only `columns` when given), its columns kept inside `keeping`."""
    kept = _kept
    if kept is None or columns == []:
        return pl.read_parquet(path, columns=columns)
    return kept.read(path, columns)
