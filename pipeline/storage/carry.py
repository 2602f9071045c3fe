"""Rows of unchanged documents carried over inside a shard that runs again (issue 49).

Why: a shard runs again when one of its files changed, and with 16 shards at 40k documents
that is 2,500 documents read, parsed, chunked and extracted again for a one-file edit: the
edit cost the size of the corpus. Rows are keyed by content-anchored ids (a document's id
hashes its relative path and its bytes; a text unit's its document's path, its text and
that text's occurrence), so the rows the published version the run started from (its base,
pipeline.storage.run_changes.base_version: immutable while the run writes into staging)
holds under an id of this run are the rows a full run computes again. Each per-document
stage takes those from the base and computes only the rest; `merge_in_order` then writes
the shard's rows in the order, and with the short ids, a full run of the shard writes.

Nothing is carried (`Carry.reason`) by a `--full` run, without a base, or into a shard the
base made with other per-document settings or another docgraph (`carry_digest`, recorded
per shard in the base's shards.json): a settings change computes every document again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipeline import schemas
from pipeline.ingest.shards import read_state
from pipeline.storage.run_changes import base_version
from pipeline.storage.shard_files import read_shard

# Columns `merge_in_order` reads beside a table's own: the key a row belongs to (a document
# or text unit id, in the order a full run takes them) and, where a table is written in
# passes (structure failures: every document's parse, then every document's
# cross-references), the pass.
KEY, PASS = "_carry_key", "_carry_pass"


class CarryError(ValueError):
    """A shard's base rows cannot be told apart by key: the shard is computed whole."""


@dataclass
class Carry:
    """One step's carry-over from the base version: `reason` says why nothing is carried
    (None: rows of a shard whose `digests` entry is `digest` may be). It counts, for the
    step's metadata, the rows it carried per table and the keys (documents or text units)
    carried and computed."""

    base: Path | None
    digest: str
    reason: str | None = None
    digests: dict[str, str] = field(default_factory=dict)
    carried: dict[str, int] = field(default_factory=dict)
    keys: list[int] = field(default_factory=lambda: [0, 0])  # carried, computed
    whole: dict[str, str] = field(default_factory=dict)  # shard -> why it ran whole

    def on(self, shard: str) -> bool:
        """Whether rows may be carried into `shard` (the base made it as this run would)."""
        if self.reason is not None or self.base is None:
            return False
        if self.digests.get(shard) != self.digest:
            self.whole[shard] = "per-document settings or docgraph changed since the base"
            return False
        return True

    def base_shard(self, table: str, shard: str, columns: list[str] | None = None):
        """Shard `shard` of sharded table `table` in the base (empty when there is none)."""
        if self.base is None:
            return schemas.empty(table).select(columns or pl.all())
        return read_shard(self.base, table, shard, columns)

    def kept(self, shard: str, ids: Iterable[str], table: str = "documents") -> set[str]:
        """Those of `ids` the base's shard of `table` holds, when rows may be carried."""
        if not self.on(shard):
            return set()
        held = self.base_shard(table, shard, ["id"]).get_column("id")
        return set(held.to_list()) & set(ids)

    def count(self, table: str, rows: int) -> None:
        self.carried[table] = self.carried.get(table, 0) + rows

    def count_keys(self, carried: int, computed: int) -> None:
        self.keys[0] += carried
        self.keys[1] += computed

    def metadata(self, table: str, rows: int, unit: str = "documents") -> dict:
        """The step's metadata for table `table` (`rows` written in the run's range):
        rows recomputed and carried, and whether and why nothing was carried."""
        carried = self.carried.get(table, 0)
        why = self.reason or "; ".join(f"shard {k}: {v}" for k, v in sorted(self.whole.items()))
        if not why and not self.keys[0]:
            why = f"no {unit} of the shards that ran is unchanged"
        return {
            "incremental": "carried" if self.keys[0] else "whole",
            "incremental_reason": why,
            "rows_recomputed": rows - carried,
            "rows_carried": carried,
            f"{unit}_carried": self.keys[0],
            f"{unit}_recomputed": self.keys[1],
        }


def open_carry(output_dir: str | Path, digest: str, full: bool = False) -> Carry:
    """The carry-over of a run of `output_dir` whose per-document settings and docgraph
    give `digest` (pipeline.ingest.shards.carry_digest); `full`: a `--full` run."""
    if full:
        return Carry(None, digest, "a full run: every document computed again")
    base = base_version(output_dir)
    if base is None:
        return Carry(None, digest, "no published version to carry rows from")
    digests = read_state(base).get("carry")
    if not isinstance(digests, dict) or not digests:
        return Carry(base, digest, "the base version records no per-document settings")
    return Carry(base, digest, None, digests)


def merge_in_order(
    name: str, order: pl.Series, carried: pl.DataFrame, fresh: pl.DataFrame
) -> pl.DataFrame:
    """Table `name`'s rows of one shard as a full run writes them: `carried` (from the base)
    and `fresh` (computed now) each have column KEY (no key in both), rows of a key in the
    order a full run makes them; the result is by PASS (where present), then by KEY's place
    in `order` (the keys as a full run takes them), then as each frame had them, with
    human_readable_id numbered 0.. over the shard (run_shards makes it corpus-wide)."""
    frames = [
        f.with_columns(pl.lit(i, pl.Int8).alias("_carry_src")).with_row_index("_carry_row")
        for i, f in enumerate((carried, fresh))
    ]
    rank = pl.DataFrame({KEY: order.cast(pl.Utf8)}).with_row_index("_carry_rank")
    rows = pl.concat(frames, how="vertical_relaxed").join(
        rank, on=KEY, how="left", maintain_order="left"
    )
    if rows.get_column("_carry_rank").null_count():
        raise CarryError(f"{name}: rows whose key is not among the shard's")
    by = [PASS] if PASS in rows.columns else []
    rows = rows.sort([*by, "_carry_rank", "_carry_src", "_carry_row"], maintain_order=True)
    if "human_readable_id" in rows.columns:
        rows = rows.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("human_readable_id"))
    return pl.from_arrow(schemas.conform(rows, name))  # type: ignore[return-value]


def keyed(frame: pl.DataFrame, column: str | pl.Expr) -> pl.DataFrame:
    """`frame` with KEY from `column` (a column name or an expression)."""
    expr = pl.col(column) if isinstance(column, str) else column
    return frame.with_columns(expr.cast(pl.Utf8).alias(KEY))


def base_rows(carry: Carry, table: str, shard: str, column: str, ids: Iterable[str]):
    """The base's rows of shard `shard` of `table` whose `column` is one of `ids`, read a
    row group at a time (only those rows held), keyed by `column`."""
    assert carry.base is not None
    path = carry.base / table / f"{shard}.parquet"
    wanted = [str(i) for i in ids]
    if not path.exists() or not wanted:
        return keyed(schemas.empty(table), column)
    frame = pl.scan_parquet(path).filter(pl.col(column).is_in(wanted)).collect()
    carry.count(table, frame.height)
    return keyed(frame, column)


# A documents row's record of its file's stat: path, size, modification time (ISO).
_STAT = ("source_path", "byte_size", "creation_date")


class KeptDocuments:
    """The loader's `keep` for one shard (pipeline.ingest.loader.load_entries): the base's
    rows of the files whose path and bytes (sha256) are the base's, i.e. of the same
    document ids, or whose path, size and modification time are; none when rows may not be
    carried into the shard."""

    def __init__(self, carry: Carry, shard: str):
        self.carry = carry
        self.frame = carry.base_shard("documents", shard) if carry.on(shard) else None
        rows = () if self.frame is None else self.frame.select("source_path", "sha256").rows()
        self.at = {row: i for i, row in enumerate(rows)}
        stats = [] if self.frame is None else self.frame.select(*_STAT).rows()
        self.stat_at = {row: i for i, row in enumerate(stats)}
        self.hits = 0

    def find(self, rel: str, sha: str) -> int | None:
        return self.at.get((rel, sha))

    def unread(self, rel: str, size: int, created: str) -> int | None:
        return self.stat_at.get((rel, size, created))

    def rows(self, at: list[int]) -> pl.DataFrame:
        assert self.frame is not None
        self.hits += len(at)
        self.carry.count("documents", len(at))
        return self.frame[at]

    def done(self, loaded: int) -> None:
        """The shard is loaded: `loaded` documents in all, `hits` of them carried."""
        self.carry.count_keys(self.hits, loaded - self.hits)
        self.frame = None
