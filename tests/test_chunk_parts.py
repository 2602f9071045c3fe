"""The chunks step writes a shard a row group at a time (one huge document is one shard): the
chunks, chunk_failures and documents files hold what chunking the shard whole and writing
each table whole gave, row for row, and the documents' texts are read only when needed."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_chunk_windows import _corpus, book, fail_half_way  # noqa: F401 - the fixture
from test_smart_chunking import _frames

from assets.chunking import CHUNK_TABLES, ShardChunks, _row_groups
from pipeline import schemas
from pipeline.chunking import units
from pipeline.chunking.documents import chunk_structured
from pipeline.compat.columns import set_text_unit_ids, with_text_unit_ids
from pipeline.config import ChunkingSettings
from pipeline.failures import failures_frame
from pipeline.storage import shard_files
from pipeline.structure.text import parse_text

KEY = "000"
INPUTS = ("documents", "sections", "content_nodes")


def _folder(tmp_path, name, docs, sections, nodes):
    """A run's folder with the frames as shard KEY (documents with every column)."""
    folder = tmp_path / name
    docs = pl.from_arrow(pa.Table.from_pylist(docs.to_dicts(), schema=schemas.DOCUMENTS))
    for table, frame in zip(INPUTS, (docs, sections, nodes), strict=True):
        shard_files.write_shard(folder, table, KEY, frame)
    return folder


def _read(folder) -> dict[str, pl.DataFrame]:
    names = ["chunks", "chunk_failures", "documents"]
    return {n: shard_files.read_shard(folder, n, KEY) for n in names}


def _whole(folder, settings: ChunkingSettings) -> dict[str, pl.DataFrame]:
    """The step as it was: the shard read and chunked whole, each table written whole."""
    docs = shard_files.read_shard(folder, "documents", KEY)
    rows: list[dict] = []
    frame = chunk_structured(
        docs,
        shard_files.read_shard(folder, "sections", KEY),
        shard_files.read_shard(folder, "content_nodes", KEY),
        settings,
        failures=rows,
    )
    shard_files.write_shard(folder, "documents", KEY, with_text_unit_ids(docs, frame))
    with shard_files.shard_parts(folder, CHUNK_TABLES, KEY) as write:
        write({"chunks": frame, "chunk_failures": failures_frame(rows, "chunk_failures")})
    return _read(folder)


def _in_parts(folder, settings: ChunkingSettings) -> dict[str, pl.DataFrame]:
    work = ShardChunks(folder, settings)
    with shard_files.shard_parts(folder, CHUNK_TABLES, KEY) as write:
        for frames in work.chunk(KEY):
            write(frames)
    return _read(folder)


@pytest.fixture
def small_parts(monkeypatch):
    """Frame parts of 7 units and row groups of 50 rows: a shard of a few hundred units is
    written in many parts, a row group made of several."""
    monkeypatch.setattr(units, "UNITS_PER_PART", 7)
    monkeypatch.setattr(shard_files, "ROW_GROUP_ROWS", 50)


@pytest.mark.parametrize("method", ["smart", "simple"])
def test_a_shard_written_in_parts_holds_what_it_held_whole(
    book,  # noqa: F811
    tmp_path,
    small_parts,
    method,
):
    """The book x2 structured, as plain paragraphs, a short one and one without structure
    (its text read from the shard's file): the same three tables, row groups of 50."""
    settings = ChunkingSettings(method=method)
    frames = _corpus(book)
    whole = _whole(_folder(tmp_path, "whole", *frames), settings)
    folder = _folder(tmp_path, "parts", *frames)
    parts = _in_parts(folder, settings)
    assert whole["chunks"].height > 200
    for name, frame in whole.items():
        assert parts[name].equals(frame), name
    groups = pq.ParquetFile(folder / "chunks" / f"{KEY}.parquet").metadata
    sizes = [groups.row_group(i).num_rows for i in range(groups.num_row_groups)]
    assert set(sizes[:-1]) == {50} and 0 < sizes[-1] <= 50


def test_a_failing_document_and_an_empty_shard(book, tmp_path, small_parts, monkeypatch):  # noqa: F811
    """A document whose smart chunking raises half-way: its plain units and its failure row,
    as whole; a shard without documents: empty tables."""
    fail_half_way(monkeypatch)
    frames = _corpus(book)
    whole = _whole(_folder(tmp_path, "whole", *frames), ChunkingSettings())
    parts = _in_parts(_folder(tmp_path, "parts", *frames), ChunkingSettings())
    assert whole["chunk_failures"]["document_id"].to_list() == ["doc-book"]
    for name, frame in whole.items():
        assert parts[name].equals(frame), name
    empty = [f.clear() for f in frames]
    parts = _in_parts(_folder(tmp_path, "empty", *empty), ChunkingSettings())
    assert all(frame.height == 0 for frame in parts.values())


def test_texts_are_not_read_when_every_document_has_structure(tmp_path, monkeypatch):
    docs, sections, nodes = _frames(
        [parse_text(f"doc-{i}", f"{i}.txt", "T", "One paragraph.\n\nAnother.") for i in range(3)]
    )
    folder = _folder(tmp_path, "run", docs, sections, nodes)

    def unread(self, key):
        raise AssertionError("the documents' texts were read")

    monkeypatch.setattr(ShardChunks, "_texts", unread)
    out = _in_parts(folder, ChunkingSettings())
    assert out["chunks"].height == 3
    assert out["documents"]["text_unit_ids"].list.len().to_list() == [1, 1, 1]


def test_text_unit_ids_set_in_arrow_are_the_frames():
    docs = pl.DataFrame({"id": ["a", "b", "c"], "text": ["x", "y", "z"]})
    units_ = pl.DataFrame(
        {"id": ["u2", "u1", "u3"], "document_id": ["a", "a", "c"], "seq": [1, 0, 0]}
    )
    expected = with_text_unit_ids(docs, units_)
    assert expected["text_unit_ids"].to_list() == [["u1", "u2"], [], ["u3"]]
    table = docs.with_columns(text_unit_ids=pl.lit(["old"])).to_arrow()
    assert pl.from_arrow(set_text_unit_ids(table, units_)).equals(expected)


def test_row_groups_join_parts_in_order():
    parts = [pl.DataFrame({"n": list(range(a, b))}) for a, b in [(0, 3), (3, 4), (4, 11)]]
    groups = list(_row_groups(parts, 4))
    assert [g["n"].to_list() for g in groups] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]
    assert list(_row_groups([], 4)) == []
