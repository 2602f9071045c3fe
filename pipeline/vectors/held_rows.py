"""Deleted Lance rows left in their fragments while their text is still in the corpus
(issue 49).

Why: documents added to a corpus mention entities and relationships from all over it, and
each one mentioned again gets a new row (its text units, vector and often description
change). At 40k documents, adding 100 changed 2,083 of the 487k relationships, 122 of them
mentioned once before, and those lie in nearly every fragment (the rows are laid out by
their units' documents, pipeline.vectors.carry_over): materialising the deletions rewrote
31 of 33 fragments and re-mapped their full-text segments, 14.2 s (3.9 s without the
segments) of a 130 s run on the 2-core machine, for 0.4% of the rows.

A changed row's last version was made from its text units (text_unit_ids; a report's, its
community's; a content node's, those holding it): when the text of every one of them is
still in the corpus, nothing a user removed is in that old row, and it may stay in its
fragment, hidden by Lance's deletion file, as Lance itself leaves deleted rows until a
compaction. A unit's id is a digest of its
text, so an edited text leaves with its id; but an edit that only adds text (a journal, a
chat log, notes appended to) leaves the old unit's text in its file, within its text or one
of its units now (`_moved`), and those units stand for it from then on. The record
(`<table>.held.parquet` beside the row digests) names each fragment holding such rows and
their units; a run in which the text of one of those units leaves its file compacts the
fragment, so a document's deleted or replaced text still leaves every file in the run that
removes it. lance_write compacts a fragment anyway once HOLD_SHARE of its rows are deleted.

Reports were compacted on every edit before: a report's vector is the mean of its members'
entity vectors, so an edit changes the reports of every community above a changed entity,
the largest top-level ones included, and their rows lie in every fragment of the table.

What held rows change: until their fragment is compacted, the full-text statistics of its
segment (row count, lengths, term frequencies) still count them, so LanceDB's BM25 scores on
these tables differ slightly from a whole write's (docgraph's own queries rank with
pipeline.lexical); their rows, vectors and full-text hits do not.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from pipeline.storage import read_cache, store
from pipeline.storage.files import atomic_write_with
from pipeline.vectors.row_digests import DIGESTS_DIR

# The tables whose rows are made from text units: their own (text units), those listed on
# them (text_unit_ids), on their community (reports), or those holding them (content nodes).
HOLD_TABLES = ("text_units", "content_nodes", "entities", "relationships", "community_reports")
_EMPTY = pl.DataFrame(schema={"fragment": pl.Int64, "unit": pl.Utf8})
_MOVED = pl.DataFrame(schema={"unit": pl.Utf8, "successor": pl.Utf8})


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
    rows = deleted_at.join(_made_from(base, name, deleted_at.get_column("id")), on="id", how="left")
    record = read_record(folder, name)
    present = store.read_table(folder, "text_units", ["id"]).get_column("id").implode()
    units = pl.concat([rows.get_column("unit"), record.get_column("unit")]).drop_nulls().unique()
    absent = units.filter(~units.is_in(present))
    moved = _moved_since(folder, base)
    gone = pl.col("unit").is_in(absent.filter(~absent.is_in(moved["unit"].implode())).implode())
    lost = rows.filter(gone).get_column("id").implode()  # text no longer in the corpus
    lost_at = rows.filter(pl.col("id").is_in(lost)).get_column("fragment")
    held = pl.concat([record, rows.filter(~pl.col("id").is_in(lost)).select("fragment", "unit")])
    purge = set(held.filter(gone).get_column("fragment").to_list()) | set(lost_at.to_list())
    held = _successors(held, moved)
    return set(held.get_column("fragment").to_list()) - purge, held


def _made_from(base: Path, name: str, ids: pl.Series) -> pl.DataFrame:
    """(id, unit): the text units the rows `ids` of table `name` in version `base` were made
    from. A report's are its community's: its members' units, which hold their descriptions
    and every relationship between them (a relationship's units are units of both its ends,
    pipeline.graph.encode_mentions), the evidence it quotes and its sub-communities'. A row
    `base` does not have gets the unit "", which no corpus has: its fragment is compacted."""
    if name == "text_units":
        made, listed = pl.DataFrame({"id": ids, "unit": ids}), ids
    elif name == "content_nodes":
        made = _holders(base, ids)
        listed = made.get_column("id")
    else:
        if name == "community_reports":
            reports = _rows(base, name, ["id", "community"], "id", ids)
            lists = _rows(
                base,
                "communities",
                ["community", "text_unit_ids"],
                "community",
                reports["community"],
            )
            made = reports.join(lists, on="community").drop("community")
        else:
            made = _rows(base, name, ["id", "text_unit_ids"], "id", ids)
        listed = made.get_column("id")  # before exploding: an empty list drops its row
        made = made.explode("text_unit_ids").rename({"text_unit_ids": "unit"})
    unknown = ids.filter(~ids.is_in(listed.implode()))
    return pl.concat([made, pl.DataFrame({"id": unknown, "unit": ""})])


def _holders(base: Path, ids: pl.Series) -> pl.DataFrame:
    """(id, unit): the text units of version `base` holding each content node `ids`: its
    text lies within them (a paragraph cut in two, across two), and a derived vector is their
    mean (pipeline.vectors.lance.node_units). None for a node with a description (text of
    its own) or no holder: `_made_from` gives it the unit ""."""
    plain = _rows(base, "content_nodes", ["id", "description"], "id", ids)
    plain = plain.filter(pl.col("description").fill_null("") == "").get_column("id")
    units = pl.scan_parquet(store.table_files(base, "text_units"))
    held = units.select(pl.col("content_node_ids").alias("id"), pl.col("id").alias("unit"))
    return held.explode("id").filter(pl.col("id").is_in(plain.implode())).collect()


def _rows(root: Path, name: str, columns: list[str], key: str, values: pl.Series) -> pl.DataFrame:
    """Table `name`'s `columns` of the rows whose `key` is one of `values`."""
    scan = pl.scan_parquet(store.table_files(root, name)).select(columns)
    return scan.filter(pl.col(key).is_in(values.unique().implode())).collect()


def _moved_since(folder: Path, base: Path) -> pl.DataFrame:
    """`_moved` of the text units of version `base` that staging folder `folder` no longer
    has, made once for the tables a run holds rows of (the text units files' identities say
    when it holds)."""
    global _last
    files = (store.table_path(folder, "text_units"), store.table_path(base, "text_units"))
    key = tuple((str(f), read_cache.identity(f)) for f in files)
    with _lock:
        if _last is None or _last[0] != key:
            was = store.read_table(base, "text_units", ["id"]).get_column("id")
            now = store.read_table(folder, "text_units", ["id"]).get_column("id")
            _last = (key, _moved(folder, base, was.filter(~was.is_in(now.implode()))))
        return _last[1]


_lock = threading.Lock()
_last: tuple[tuple, pl.DataFrame] | None = None


def _moved(folder: Path, base: Path, absent: pl.Series) -> pl.DataFrame:
    """(unit, successor): the text units `absent` (units of version `base` the run's folder
    no longer has) whose text their file still holds within one of its units (an edit that
    only added text: a unit's id is a digest of its text, so the unit it grew into has
    another; a unit's text is its file's, after its headings); `successor`: each of that
    file's units now, which hold the text from here on (a later run that removes one of
    them checks it again). Files past the MOVED_ bounds are not checked."""
    if absent.is_empty():
        return _MOVED
    old = _rows(base, "text_units", ["id", "text", "document_id"], "id", absent)
    paths = _rows(base, "documents", ["id", "source_path"], "id", old["document_id"])
    old = old.join(paths.rename({"id": "document_id"}), on="document_id")
    files = ["id", "source_path", "byte_size"]
    docs = _rows(folder, "documents", files, "source_path", old["source_path"])
    checked = docs.join(old.group_by("source_path").len(), on="source_path").filter(
        (pl.col("byte_size") <= MOVED_FILE_BYTES)
        & (pl.col("byte_size") * pl.col("len") <= MOVED_SEARCH_BYTES)
    )
    units = _rows(folder, "text_units", ["id", "document_id", "text"], "document_id", checked["id"])
    units = units.join(
        checked.select(document_id="id", source_path="source_path"), on="document_id"
    )
    now = {
        path: (ids, _APART.join(texts))
        for path, ids, texts in units.group_by("source_path").agg("id", "text").iter_rows()
    }
    pairs = [
        (unit, successor)
        for unit, text, path in old.select("id", "text", "source_path").iter_rows()
        if path in now and _APART not in text and text in now[path][1]
        for successor in now[path][0]
    ]
    return pl.DataFrame(pairs, schema=_MOVED.schema, orient="row")


# What `_moved` reads and searches at most, bounds rather than fitted figures: the units of
# files of MOVED_FILE_BYTES or fewer (it holds ~3 copies of their text: Arrow, Python, joined;
# tens of MB against a 40k edit's 1.7 GB peak), and MOVED_SEARCH_BYTES of searching per file
# (its size times its old units; str's search runs at GB/s). An edit that only adds to a
# note replaces a unit or two of kilobytes; past the bounds, its rows are compacted.
MOVED_FILE_BYTES = 16 * 2**20
MOVED_SEARCH_BYTES = 256 * 2**20
_APART = "\x00"  # between a file's units: a text that holds it is not searched


def _successors(held: pl.DataFrame, moved: pl.DataFrame) -> pl.DataFrame:
    """`held` (fragment, unit) with each moved unit replaced by its successors."""
    stays = held.filter(~pl.col("unit").is_in(moved["unit"].implode()).fill_null(False))
    carried = held.join(moved, on="unit").select("fragment", pl.col("successor").alias("unit"))
    return pl.concat([stays, carried])
