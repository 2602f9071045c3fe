"""What a run changed, against the published version it started from: the corpus-wide
tail's input for recomputing only what an edit touched (issue 49).

A run's staging folder starts as hard links of the current version (pipeline.storage.store
`begin`); the per-document stages then replace the files of the shards they ran. So a
sharded table's shard whose file is still the base version's (same inode, or same bytes
where links were impossible) holds the same rows, and the rows that changed are found by
comparing only the other shards' files with the base's. Ids are content-anchored (a text
unit's or a section's id hashes its document's path and its own text; a document's, the
file's bytes), so "added" and "removed" ids are exactly what the tail must add and drop.

The tail runs whole (`whole` says why) when there is no base version, when the base was
built with other tail settings or another docgraph (pipeline.ingest.find_stale's digest),
or when a table the tail carries over is missing from it.
"""

from __future__ import annotations

import filecmp
import os
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipeline.ingest.find_stale import TAIL_FILE, recorded_tail
from pipeline.schemas import empty
from pipeline.storage import store

# The sharded tables whose rows the tail reads, by what they are keyed on.
SHARDED = ("documents", "sections", "content_nodes", "chunks")
MENTIONS = ("extracted_entities", "extracted_relationships")


@dataclass(frozen=True)
class RowChanges:
    """Ids of one sharded table's rows added and removed by the run."""

    added: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()

    @property
    def count(self) -> int:
        return len(self.added) + len(self.removed)


@dataclass(frozen=True)
class RunChanges:
    """The run folder against its base version. `whole`: why the tail cannot carry rows
    over (None when it can); `shards`: the shards whose files differ from the base's;
    `rows`: per sharded table (SHARDED), the ids added and removed."""

    folder: Path
    base: Path | None
    whole: str | None
    shards: frozenset[str] = frozenset()
    rows: dict[str, RowChanges] = field(default_factory=dict)

    def of(self, table: str) -> RowChanges:
        return self.rows.get(table, RowChanges())

    def unchanged(self, table: str) -> bool:
        """Whether table `table`'s files in the run folder are the base version's (same
        inode, or else same bytes), so its rows are: False without a base."""
        return self.base is not None and same_table(self.folder, self.base, table)

    def base_shard(self, table: str, shard: str, columns=None) -> pl.DataFrame:
        """Shard `shard` of sharded table `table` in the base version (empty: none); only
        `columns` when given."""
        if self.base is None:
            return _empty(table, columns)
        return _read_shard(self.base, table, shard, columns)

    def run_shard(self, table: str, shard: str, columns=None) -> pl.DataFrame:
        """Shard `shard` of sharded table `table` as the run wrote it (empty: none)."""
        return _read_shard(self.folder, table, shard, columns)


def base_version(output_dir: str | Path) -> Path | None:
    """The published version a run of `output_dir` starts from (None: nothing published)."""
    current = store.resolve(output_dir)
    return current if store.read_manifest(output_dir) is not None else None


def run_changes(
    folder: str | Path, output_dir: str | Path, tail_digest: str, full: bool = False
) -> RunChanges:
    """What the run in staging folder `folder` changed against `output_dir`'s published
    version; `tail_digest`: the run's tail settings (pipeline.ingest.find_stale
    `tail_settings_digest`), compared with the one the base recorded. `full` (`docgraph
    index --full`): nothing is carried over, whatever changed."""
    folder = Path(folder)
    base = base_version(output_dir)
    whole = "a full run (--full)" if full else _whole_reason(base, tail_digest)
    if whole is not None:
        return RunChanges(folder, base, whole)
    assert base is not None
    shards = frozenset(s for t in SHARDED + MENTIONS for s in _changed_shards(folder, base, t))
    return RunChanges(folder, base, None, shards, row_changes(folder, base, shards))


def row_changes(folder: Path, base: Path, shards: frozenset[str]) -> dict[str, RowChanges]:
    """Per sharded table, the ids shards `shards` of `folder` add to the base's and drop."""
    rows = {}
    for table in SHARDED:
        added, removed = set(), set()
        for shard in shards:
            new = set(_read_shard(folder, table, shard, ["id"]).get_column("id").to_list())
            old = set(_read_shard(base, table, shard, ["id"]).get_column("id").to_list())
            added |= new - old
            removed |= old - new
        rows[table] = RowChanges(frozenset(added), frozenset(removed))
    return rows


def same_table(folder: Path, base: Path, table: str) -> bool:
    """Whether table `table` has the same files in `folder` as in `base` (same inode, or
    else same bytes: see `same_file`); True when neither has any."""
    ours = {p.name: p for p in store.table_files(folder, table)}
    theirs = {p.name: p for p in store.table_files(base, table)}
    return ours.keys() == theirs.keys() and all(same_file(p, theirs[n]) for n, p in ours.items())


def _whole_reason(base: Path | None, tail_digest: str) -> str | None:
    if base is None:
        return "no published version to carry rows from"
    if recorded_tail(base) != tail_digest:
        return f"the tail settings or docgraph changed since the base version ({TAIL_FILE})"
    missing = [t for t in SHARDED + MENTIONS if not store.table_files(base, t)]
    if missing:
        return f"the base version lacks {', '.join(missing)}"
    return None


def _changed_shards(folder: Path, base: Path, table: str) -> list[str]:
    """The shards of `table` whose file in `folder` is not the base's (added, removed or
    rewritten: same inode, or else same bytes, is unchanged)."""
    ours = {p.stem: p for p in store.table_files(folder, table)}
    theirs = {p.stem: p for p in store.table_files(base, table)}
    return sorted(
        s for s in ours.keys() | theirs.keys() if not same_file(ours.get(s), theirs.get(s))
    )


def same_file(a: Path | None, b: Path | None) -> bool:
    """Whether the two files are one (same inode) or hold the same bytes; a file that is
    not there is the same only as another that is not."""
    if a is not None and not a.exists():
        a = None
    if b is not None and not b.exists():
        b = None
    if a is None or b is None:
        return a is b
    sa, sb = os.stat(a), os.stat(b)
    if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
        return True
    return sa.st_size == sb.st_size and filecmp.cmp(a, b, shallow=False)


def _read_shard(root: Path, table: str, shard: str, columns=None) -> pl.DataFrame:
    path = store.table_path(root, table) / f"{shard}.parquet"
    if not path.exists():
        return _empty(table, columns)
    return pl.read_parquet(path, columns=columns)


def _empty(table: str, columns=None) -> pl.DataFrame:
    frame = empty(table)
    return frame.select(columns) if columns else frame
