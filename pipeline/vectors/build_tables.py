"""The index's five vector tables (text units, content nodes, entities, community reports,
relationships) in one step.

They come last in an index, once the embedding worker is done and one core would otherwise
idle: each is a little vector arithmetic (the text units' vectors come from the embedding
cache, the others are derived from them by default), then a Lance write and a full-text
index, both single-threaded in Lance and outside the GIL. So the vectors are made here, in
dependency order (nodes and entities from the units' vectors, reports and relationships from
the entities'; from memory, not read back), and the tables are written side by side on two
threads, the relationships' (streamed in blocks) on the caller's. MuSiQue: see docs/scale.md.

Side by side holds the tables' rows and vectors at once, so it is done only while their
vectors fit SIDE_BY_SIDE_BYTES; past that (10k documents and more, where the tail is a small
part of the run and memory is the bound) the tables are made one after another, each source
table read just before its own and dropped after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import polars as pl

from pipeline.config import EmbeddingSettings
from pipeline.storage import store
from pipeline.vectors.lance import (
    INPUT_COLUMNS,
    EmbedderLike,
    Known,
    build_vector_table,
    compute_vectors,
)

# Dependency order: content nodes and entities are derived from the text units' vectors,
# reports and relationships from the entities'.
VECTOR_TABLES = ("text_units", "content_nodes", "entities", "community_reports", "relationships")
# Vectors of the tables (rows x width x 4 bytes) up to which they are made side by side:
# MuSiQue's 58k rows are 89 MB of 384-wide vectors; 10k documents' 195k rows, 300 MB.
SIDE_BY_SIDE_BYTES = 128 * 2**20


def build_vector_tables_at_once(
    output_dir: str | Path,
    names: Iterable[str],
    embedder: EmbedderLike,
    settings: EmbeddingSettings,
    read: Callable[[str], pl.DataFrame] | None = None,
) -> Iterator[tuple[str, int]]:
    """The Lance tables `names` (of VECTOR_TABLES), yielding (name, rows) in VECTOR_TABLES'
    order once all are written. `read(table)` gives a source table (default: its
    INPUT_COLUMNS from `output_dir`); a vector table left out is read from Lance where
    another is made from its vectors."""
    if read is None:

        def read(table: str) -> pl.DataFrame:
            return read_source(output_dir, table)

    names = [name for name in VECTOR_TABLES if name in set(names)]
    rows = sum(store.table_rows(output_dir, name) for name in names)
    side_by_side = rows * embedder.dim * 4 <= SIDE_BY_SIDE_BYTES
    known: Known = {}
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="lance-write") as pool:
        submit = pool.submit if side_by_side else _now
        written: dict[str, Future] = {}
        # vectors here (the model, if any, is asked from this thread only), writes there
        for name in (name for name in names if name != "relationships"):
            frame = read(name)
            groups = read("communities") if name == "community_reports" else None
            # one after another, the nodes' vectors are made as their table is written, a
            # block at a time (pipeline.vectors.lance): no other table is made from them
            vectors = (
                None
                if name == "content_nodes" and not side_by_side
                else compute_vectors(output_dir, name, frame, embedder, settings, groups, known)
            )
            if name in ("text_units", "entities"):  # the later tables are made from these
                known[name] = (frame["id"].to_list(), vectors)
            written[name] = submit(
                build_vector_table,
                output_dir,
                name,
                frame,
                embedder,
                settings,
                known=known,
                vectors=vectors,
            )
            del frame, groups, vectors  # one after another: gone once written
        if "relationships" in names:
            written["relationships"] = _now(
                build_vector_table, output_dir, "relationships", read("relationships"),
                embedder, settings, known=known,
            )  # fmt: skip
        for name in names:  # in dependency order, as Dagster wants them
            yield name, written[name].result()


# A source table's list of text unit ids, read as codes (Categorical: one string per distinct
# id), streamed: only their means read them (pipeline.vectors.derive_vectors), and a 151 MB file's
# relationships list 5.4M ids, 0.26 GB as strings, held while their Lance table is written.
CODED_LIST = "text_unit_ids"


def read_source(output_dir: str | Path, table: str) -> pl.DataFrame:
    """Source table `table`'s INPUT_COLUMNS, its CODED_LIST as codes."""
    columns, files = INPUT_COLUMNS.get(table), store.table_files(output_dir, table)
    if not files or columns is None or CODED_LIST not in columns:
        return store.read_table(output_dir, table, columns)
    coded = pl.col(CODED_LIST).cast(pl.List(pl.Categorical))
    return pl.scan_parquet(files).select(columns).with_columns(coded).collect(engine="streaming")


def _now(fn: Callable[..., int], *args, **kwargs) -> Future:
    """`fn` run here, as a done future (ThreadPoolExecutor.submit's shape)."""
    future: Future = Future()
    future.set_result(fn(*args, **kwargs))
    return future
