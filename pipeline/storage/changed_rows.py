"""The rows a corpus-wide step merged again or removed, against the run's base version,
handed from the step that wrote them to the steps after it (issue 49).

Why: a later step keeps a hash of every input row it read, to tell what changed since the
last run (the reports' `community_reports_view_rows.parquet`): hashing the 490k relationships,
64k entities and 45k text units of a 40k-document index took 0.5 s of a one-file edit, and
comparing them with the last run's 0.26 s more, although the graph step knows which rows
it merged again. A list names, per table, the keys of the rows that may differ from the
base version's, removed ones included; every other row is the base version's row, but for
a text unit's human_readable_id (numbered afresh in path order) and the combined degree of
a relationship with a listed end (tests/test_merge_carry.py checks this after every
change of a seeded sequence).

A list is stamped with the run that wrote it and the base version it is against: a list
left in a folder by another run (a published version holds its run's), or read against
another base, is never used.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.storage.files import atomic_write_with

FILE = "changed_rows.parquet"
_RUN, _BASE, _TABLES = b"docgraph.run", b"docgraph.base", b"docgraph.tables"


def write(folder: Path, run_id: str, base: Path | None, keys: dict[str, pl.Series] | None) -> None:
    """The list of `keys` (table -> keys of the rows that may differ from `base`'s), for
    the steps after this one in run `run_id`; None: no list (the step ran whole)."""
    path = folder / FILE
    if keys is None or base is None:
        path.unlink(missing_ok=True)
        return
    frame = pl.concat(
        [pl.DataFrame(schema={"table": pl.Utf8, "key": pl.Utf8})]
        + [
            ids.cast(pl.Utf8).alias("key").to_frame().select(pl.lit(t).alias("table"), "key")
            for t, ids in keys.items()
        ]
    )
    stamp = {_RUN: run_id.encode(), _BASE: base.name.encode(), _TABLES: ",".join(keys).encode()}
    table = frame.to_arrow().replace_schema_metadata(stamp)
    atomic_write_with(path, lambda tmp: pq.write_table(table, tmp))


def read(folder: Path, run_id: str, base: Path) -> dict[str, pl.Series] | None:
    """The list run `run_id` wrote in `folder` against `base` (every table it covers, with
    the keys listed for it), or None (none, another run's or another base's, unreadable)."""
    path = folder / FILE
    if not path.is_file():
        return None
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException):
        return None
    stamp = table.schema.metadata or {}
    if (stamp.get(_RUN), stamp.get(_BASE)) != (run_id.encode(), base.name.encode()):
        return None
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    names = [n for n in stamp.get(_TABLES, b"").decode().split(",") if n]
    return {
        name: frame.filter(pl.col("table") == name).get_column("key").alias(name) for name in names
    }
