"""Columns kept across reads of one in-process run (pipeline.storage.read_cache): a table read
again comes from memory, a table written again is never read stale (its columns as written,
its free text from the new file), what a write keeps is what the file gives back, and the
bytes kept stay bounded."""

from __future__ import annotations

import polars as pl
from polars.testing import assert_frame_equal

from pipeline import schemas
from pipeline.storage import read_cache, store


def _entities(n: int, tag: str) -> pl.DataFrame:
    given = pl.DataFrame(
        {
            "id": [f"{tag}{i}" for i in range(n)],
            "title": [f"title {tag} {i}" for i in range(n)],
            "description": [f"{tag} description {i} " * 5 for i in range(n)],
        }
    )
    schema = schemas.empty("entities").schema
    return given.select(
        pl.col(c) if c in given.columns else pl.lit(None, dtype).alias(c)
        for c, dtype in schema.items()
    )


def _counting_reads(monkeypatch) -> list:
    reads = []
    real = pl.read_parquet

    def counted(source, *args, **kwargs):
        reads.append(kwargs.get("columns"))
        return real(source, *args, **kwargs)

    monkeypatch.setattr(read_cache.pl, "read_parquet", counted)
    return reads


def test_kept_columns_are_read_once_and_never_stale(tmp_path, monkeypatch) -> None:
    reads = _counting_reads(monkeypatch)
    store.write_table(tmp_path, "entities", _entities(50, "a"))
    with read_cache.keeping(2**20):
        first = store.read_table(tmp_path, "entities", ["id", "title"])
        again = store.read_table(tmp_path, "entities", ["title", "id", "description"])
        assert reads == [["id", "title"], ["description"]]  # only the column not read before
        assert_frame_equal(again.select("id", "title"), first)
        whole = store.read_table(tmp_path, "entities")  # every column, in the file's order
        assert whole.columns == schemas.TABLES["entities"].names
        # a table written again (a new file renamed into place): its columns as written,
        # its free text read from the new file
        reads.clear()
        store.write_table(tmp_path, "entities", _entities(50, "b"))
        fresh = store.read_table(tmp_path, "entities", ["id", "title", "description"])
        assert fresh["id"][0] == "b0" and fresh["description"][0].startswith("b description")
        assert reads == [["description"]]
    reads.clear()
    store.read_table(tmp_path, "entities", ["id"])  # outside a run nothing is kept
    store.read_table(tmp_path, "entities", ["id"])
    assert reads == [["id"], ["id"]]


def test_kept_bytes_stay_within_the_budget(tmp_path, monkeypatch) -> None:
    reads = _counting_reads(monkeypatch)
    store.write_table(tmp_path, "entities", _entities(2000, "a"))
    sizes = store.read_table(tmp_path, "entities", ["description", "title"]).estimated_size()
    budget = sizes - 1  # room for the descriptions or the titles, not both
    with read_cache.keeping(budget):
        store.read_table(tmp_path, "entities", ["description"])
        store.read_table(tmp_path, "entities", ["title"])  # the descriptions go
        kept = read_cache._kept
        assert kept is not None and kept.bytes <= budget
        assert [key[1] for key in kept.columns] == ["title"]
        store.read_table(tmp_path, "entities", ["description"])
    assert reads[-1] == ["description"]


def test_what_a_write_keeps_is_what_the_file_gives_back(sample_run, tmp_path, monkeypatch) -> None:
    """Every single-file table of a real index, written again inside a run: the columns kept
    (the frame's own, or converted where the schema's type differs) equal a read of the new
    file, values and types; only its free text is read."""
    version = store.resolve(sample_run[1])
    names = [n for n in schemas.TABLES if (version / f"{n}.parquet").is_file()]
    assert {"entities", "relationships", "text_units", "communities"} <= set(names)
    for name in names:
        frame = pl.read_parquet(version / f"{name}.parquet")
        if "human_readable_id" in frame.columns:  # a column the schema's type converts
            frame = frame.with_columns(pl.col("human_readable_id").cast(pl.Int32))
        reads = _counting_reads(monkeypatch)
        with read_cache.keeping(2**30):
            path = store.write_table(tmp_path, name, frame)
            kept = store.read_table(tmp_path, name)  # every column: kept, or read (free text)
        free = [c for c in frame.columns if c in store.FREE_TEXT]
        assert reads == ([free] if free else [])
        monkeypatch.undo()
        assert_frame_equal(kept, pl.read_parquet(path), check_exact=True)
        assert kept.height == frame.height
