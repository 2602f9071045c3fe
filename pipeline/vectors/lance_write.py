"""Writing a Lance vector table whole, or changing only some of its rows (issue 49).

A table is laid out for being changed a little: fragments (data files) of at most
FRAGMENT_ROWS rows (fewer for long texts: FRAGMENT_TEXT_BYTES), each with a full-text index
segment of its own (the index made on the first fragment, a delta per further one).
Removing a row from a Lance file means rewriting the file, and the index segment of a
rewritten fragment is rewritten too (re-mapped), so a change costs the fragments it
touches, not the table. The rows are ordered so that the rows one change touches lie
together (the caller's order: pipeline.vectors.carry_over).

One segment per fragment is what keeps the index exact: a fragment whose rows are all
deleted leaves the dataset with its segment, and a compacted one re-maps its own segment
only, so no segment ever counts (or holds the words of) a row that is gone. A segment over
several fragments kept a dropped fragment's rows in its statistics and postings (BM25
scores then differed from a whole build's). docgraph's own queries do not use these
indexes (pipeline.lexical has its own); LanceDB readers such as GraphRAG do.

An update (`update`):
- rows removed or changed are deleted, and every fragment holding one is compacted at
  once (its deletions materialized) and its segment re-mapped: their text and vectors are
  in no file of the new version (the old version's files are cleaned up). But for the
  fragments the caller lets hold their deleted rows (`may_hold`: rows whose text is still
  in the corpus, pipeline.vectors.held_rows) while under HOLD_SHARE of their rows are
  deleted: Lance hides those rows (a deletion file) until their fragment is compacted;
- new and changed rows are appended as new fragments, a delta segment each; once
  MERGE_SMALL fragments hold under half a fragment's rows each (a run's appended rows,
  fragments shrunk by deletions), their rows are written again together;
- old Lance versions are removed: one version stays, as after a whole write.

Hard links: a run's folder starts as hard links of the published version's files. Lance
writes a new file for every change (data, deletion, index, manifest files are named anew;
`_versions/latest_version_hint.json` is replaced by a rename) and never opens an existing
file for writing; `own_files` still gives the run private copies of the `_versions` files,
the only ones Lance ever writes under an existing name (tests/test_vector_carry.py holds
the published version's files to their bytes).

Lance's own Python package (pylance) does the fragment-level work; LanceDB (lancedb) makes
the tables and the index, as every reader opens them.
"""

from __future__ import annotations

import itertools
import os
import shutil
import warnings
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

# Lance's Rust logger warns on every first write of a table; keep real errors only. Read
# when lance is first imported, which happens after this module is.
os.environ.setdefault("LANCE_LOG", "error")

# Rows per data file (and index segment). A change rewrites the fragments it touches: 16k
# rows of 384-wide vectors are ~27 MB, and re-mapping a segment of 16k 25-word texts took
# ~1 s on the loaded 2-core machine; smaller fragments mean more segments, each a lookup
# per full-text query (200k rows: 13 segments 11-17 ms a query, 4 segments 7-9 ms) and a
# slower whole build (200k rows indexed a fragment at a time: 11.9 s, at once: 8.8 s).
# Measured with synthetic texts (docs/scale.md, "Vector tables carried over").
FRAGMENT_ROWS = 16_384
# Text per fragment, for a table the caller cuts by its text (`write_whole`'s `text_bytes`):
# a table of long texts is then cut in fragments of fewer rows, so that its segments hold
# about this many bytes of text each. A segment's re-map costs by the words it holds: at 40k
# documents a one-row update of the text units (~780 characters a row) took 0.47-0.51 s in
# 16k-row fragments and 0.18 s in 4k-row ones, of the content nodes (~870) 0.45 s and 0.19
# s, while their whole writes took 4.0 -> 2.9 s and 2.4 -> 2.9 s (in a process of their
# own); in an edit's run, 0.86 -> 0.31-0.48 s and 0.93 -> 0.26-0.31 s at 5.3k and 4.8k rows.
# A table's rows per fragment are chosen at its whole write, from its first batch, and kept
# in its Lance config (FRAGMENT_KEY): every later change cuts and judges its fragments by
# them. Never under MIN_FRAGMENT_ROWS: every segment is a lookup per full-text query.
FRAGMENT_TEXT_BYTES = 4 * 2**20
MIN_FRAGMENT_ROWS = 1_024
FRAGMENT_KEY = "docgraph.fragment_rows"
# Fragments under half a table's rows per fragment written again together once this many
# pile up.
MERGE_SMALL = 4
# A fragment the caller lets hold deleted rows is compacted once this share of its rows is
# deleted: Lance's own default (compact_files' materialize_deletions_threshold).
HOLD_SHARE = 0.1
# Ids per delete predicate (an IN list): Lance parses the SQL text.
DELETE_IDS = 2_000
TEXT_INDEX = "text_idx"


def _lance():
    import lance

    return lance


def table_dir(lance_dir: str | Path, name: str) -> Path:
    return Path(lance_dir) / f"{name}.lance"


def _chunks(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[list[pa.RecordBatch]]:
    """The batches in chunks of at most `rows` rows (a batch split where it must)."""
    chunk: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        while batch.num_rows:
            take = batch.slice(0, rows - held)
            chunk.append(take)
            held += take.num_rows
            batch = batch.slice(take.num_rows)
            if held == rows:
                yield chunk
                chunk, held = [], 0
    if chunk:
        yield chunk


def write_whole(
    lance_dir: str | Path,
    name: str,
    batches: Iterable[pa.RecordBatch],
    schema: pa.Schema,
    fts: bool = True,
    text_bytes: int | None = None,
) -> int:
    """Lance table `name` made anew from record batches of `schema` (streamed: a fragment
    at a time), in fragments of FRAGMENT_ROWS rows, or fewer where `text_bytes` cuts it by
    its text (`fragment_rows`), each fragment's text indexed as a segment; only its latest
    Lance version kept. Returns the row count."""
    import lancedb

    path = table_dir(lance_dir, name)
    shutil.rmtree(path, ignore_errors=True)  # links into the last version: only unlinked
    Path(lance_dir).mkdir(parents=True, exist_ok=True)
    batches = iter(batches)
    first = next(batches, None)
    lancedb.connect(str(lance_dir)).create_table(name, schema=schema)
    per = fragment_rows(first, text_bytes)
    _lance().dataset(str(path)).update_config({FRAGMENT_KEY: str(per)})
    rows = _append(path, schema, itertools.chain([first] if first else [], batches), per, fts)
    cleanup(path)
    return rows


def fragment_rows(batch: pa.RecordBatch | None, text_bytes: int | None = None) -> int:
    """Rows per fragment for a table whose rows are like `batch`'s: FRAGMENT_ROWS, fewer
    where their text would pass `text_bytes` (never under MIN_FRAGMENT_ROWS)."""
    if text_bytes is None or batch is None or not batch.num_rows:
        return FRAGMENT_ROWS
    text = pa.compute.sum(pa.compute.binary_length(batch.column("text"))).as_py() or 0
    per = text_bytes * batch.num_rows // max(text, 1)
    return min(FRAGMENT_ROWS, max(MIN_FRAGMENT_ROWS, per))


def _rows_per_fragment(ds) -> int | None:
    """The table's rows per fragment (FRAGMENT_KEY), None for a table written before them;
    never over FRAGMENT_ROWS."""
    per = ds.config().get(FRAGMENT_KEY)
    return None if per is None else min(int(per), FRAGMENT_ROWS)


def _append(
    path: Path, schema: pa.Schema, batches: Iterable[pa.RecordBatch], per: int, fts=True
) -> int:
    """Append the batches a fragment (of `per` rows) at a time, each indexed as a segment of
    its own (the index made on the first one where the table had none); returns the rows
    appended. lancedb is imported only to make the index (~1.2 s of a carried run, which
    appends to a table that has one: pylance does the rest)."""
    lance = _lance()
    rows = 0
    for chunk in _chunks(batches, per):
        reader = pa.RecordBatchReader.from_batches(schema, iter(chunk))
        lance.dataset(str(path)).insert(reader, max_rows_per_file=per)
        rows += sum(b.num_rows for b in chunk)
        if not fts:
            continue
        ds = lance.dataset(str(path))
        if _segments(ds):
            ds.optimize.optimize_indices(num_indices_to_merge=0)
        else:
            import lancedb
            from lancedb.index import FTS

            tbl = lancedb.connect(str(path.parent)).open_table(path.name.removesuffix(".lance"))
            tbl.create_index("text", config=FTS(with_position=True), replace=True)
    return rows


def cleanup(path: Path) -> None:
    """Remove every Lance version of the table but the latest, and their files."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _lance().dataset(str(path)).cleanup_old_versions(
            older_than=timedelta(0), delete_unverified=True
        )


def own_files(path: Path) -> int:
    """Give the run its own copies of the table's files Lance may write under an existing
    name (its `_versions` folder), where they are hard links; returns how many were copied."""
    copied = 0
    folder = path / "_versions"
    for entry in folder.iterdir() if folder.is_dir() else ():
        if entry.is_file() and entry.stat().st_nlink > 1:
            tmp = entry.with_name(f".{entry.name}.own")
            shutil.copy2(entry, tmp)
            os.replace(tmp, entry)
            copied += 1
    return copied


FRAGMENT_OF = pl.DataFrame(schema={"id": pl.Utf8, "fragment": pl.Int64})


def fragments_of(path: Path) -> pl.DataFrame:
    """(id, fragment): each row's fragment."""
    table = _lance().dataset(str(path)).to_table(columns=["id"], with_row_address=True)
    fragment = (pl.col("_rowaddr").cast(pl.UInt64) // 2**32).cast(pl.Int64)
    return pl.from_arrow(table).select("id", fragment.alias("fragment"))


@dataclass(frozen=True)
class Layout:
    """How a table is cut: its live rows, fragments and index segments."""

    rows: int
    fragments: int
    segments: int
    largest: int = 0
    per: int | None = None  # rows per fragment (FRAGMENT_KEY); None: not recorded

    def fragmented(self) -> str | None:
        """Why the table should be written whole to be laid out again, or None: it should
        have a segment per fragment (a table from before this layout has one over all),
        and about as many fragments as a whole write makes (small ones are merged by
        `update`; twice as many, +8, is a layout gone wrong). A table whose rows per
        fragment are not recorded (written before they were) is judged by FRAGMENT_ROWS."""
        per = self.per or FRAGMENT_ROWS
        if self.rows and self.segments != self.fragments:
            return f"{self.segments} index segments for {self.fragments} fragments"
        if self.largest > per:
            return f"a fragment of {self.largest} rows"
        if self.fragments > 2 * -(-self.rows // per) + 8:
            return f"{self.fragments} fragments for {self.rows} rows"
        return None


def layout(path: Path) -> Layout:
    ds = _lance().dataset(str(path))
    sizes = [f.count_rows() for f in ds.get_fragments()]
    per = _rows_per_fragment(ds)
    return Layout(sum(sizes), len(sizes), len(_segments(ds)), max(sizes, default=0), per)


def _segments(ds) -> list[dict]:
    with warnings.catch_warnings():  # list_indices: the per-segment view
        warnings.simplefilter("ignore")
        return [i for i in ds.list_indices() if i["name"] == TEXT_INDEX]


def _ids_in(ids: list[str]) -> Iterator[str]:
    for at in range(0, len(ids), DELETE_IDS):
        quoted = ",".join("'" + i.replace("'", "''") + "'" for i in ids[at : at + DELETE_IDS])
        yield f"id IN ({quoted})"


def _delete(path: Path, ids: list[str]) -> int:
    """Delete rows `ids`; returns how many went. A fragment left with no row goes with its
    index segment, but the last segment stays when every fragment went (and with it the
    words of the rows): the index is dropped then, and made again by the next append."""
    ds = _lance().dataset(str(path))
    deleted = sum(ds.delete(p)["num_deleted_rows"] for p in _ids_in(sorted(ids)))
    ds = _lance().dataset(str(path))
    if deleted and not ds.get_fragments() and _segments(ds):
        ds.drop_index(TEXT_INDEX)
    return deleted


def update(
    path: Path,
    schema: pa.Schema,
    delete: list[str],
    append: Iterable[pa.RecordBatch],
    may_hold: Collection[int] = (),
) -> dict[str, Any]:
    """Change Lance table `path` in place: rows `delete` deleted (their fragments compacted
    and re-indexed, but those of `may_hold` under HOLD_SHARE deleted), the batches `append`
    appended and indexed; small fragments merged, old versions removed. Returns counts of
    what it did, and `held`: the fragments left holding deleted rows."""
    lance = _lance()
    own_files(path)
    done: dict[str, Any] = {"deleted": _delete(path, delete), "compacted": 0}
    ds = lance.dataset(str(path))
    per = _rows_per_fragment(ds) or FRAGMENT_ROWS
    touched = [
        f.fragment_id
        for f in ds.get_fragments()
        if f.metadata.deletion_file and not _holds(f, may_hold)
    ]
    if touched:  # their deletions materialized: the deleted text leaves the files
        keep = [f.fragment_id for f in ds.get_fragments() if f.fragment_id not in touched]
        ds.optimize.compact_files(
            target_rows_per_fragment=per,
            materialize_deletions=True,
            materialize_deletions_threshold=0.0,
            excluded_fragment_ids=keep,
        )
        done["compacted"] = len(touched)
    done["appended"] = _append(path, schema, append, per)
    done["merged"] = _merge_small(path, schema, per)
    frags = lance.dataset(str(path)).get_fragments()
    done["held"] = sorted(f.fragment_id for f in frags if f.metadata.deletion_file)
    cleanup(path)
    return done


def _holds(fragment, may_hold: Collection[int]) -> bool:
    """Whether `fragment`'s deleted rows may stay: it is one of `may_hold`, and under
    HOLD_SHARE of its rows are deleted."""
    if fragment.fragment_id not in may_hold:  # no deletion file read for it
        return False
    physical = fragment.metadata.physical_rows
    return physical - fragment.count_rows() < HOLD_SHARE * physical


def _merge_small(path: Path, schema: pa.Schema, per: int) -> int:
    """Write the rows of the fragments holding under `per` / 2 rows again together, once
    MERGE_SMALL of them have piled up (each fragment and its segment dropped, the rows
    appended a fragment at a time); returns how many fragments were merged."""
    ds = _lance().dataset(str(path))
    small = [f.fragment_id for f in ds.get_fragments() if f.count_rows() < per // 2]
    if len(small) < MERGE_SMALL:
        return 0
    rows = pa.concat_tables([ds.get_fragment(f).to_table() for f in small])
    _delete(path, rows["id"].to_pylist())
    _append(path, schema, rows.to_batches(), per)
    return len(small)
