"""The graph's three vector tables (entities, relationships, community reports) in one step.

They come last in an index, when the embedding worker is done and one core would otherwise
idle: each is a few tenths of a second of vector arithmetic, then a Lance write and a
full-text index, both single-threaded in Lance and outside the GIL. The entity vectors are
made first (relationship and report vectors are derived from them, here from memory rather
than read back), then the tables are written side by side: entities' and reports' on a
thread each, relationships' (streamed in blocks) on the caller's. MuSiQue's three: 3.2 s
one after another, 2.2 s side by side.

Side by side holds the three tables' rows and vectors at once, so it is done only while
their vectors fit SIDE_BY_SIDE_BYTES; past that (10k documents and more, where the tail is
a small part of the run and memory is the bound) the tables are made one after another,
each source table read just before its own and dropped after it.
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
    read_vectors,
)

GRAPH_TABLES = ("entities", "relationships", "community_reports")
# Vectors of the three tables (rows x width x 4 bytes) up to which they are made side by side:
# MuSiQue's 54k rows are 83 MB of 384-wide vectors; 10k documents' 173k rows, 265 MB.
SIDE_BY_SIDE_BYTES = 128 * 2**20


def build_graph_tables(
    output_dir: str | Path,
    names: Iterable[str],
    embedder: EmbedderLike,
    settings: EmbeddingSettings,
    read: Callable[[str], pl.DataFrame] | None = None,
) -> Iterator[tuple[str, int]]:
    """The Lance tables `names` (of GRAPH_TABLES), yielding (name, rows) in GRAPH_TABLES'
    order once all are written. `read(table)` gives a source table (default: its
    INPUT_COLUMNS from `output_dir`); a graph table left out is read from its Lance table
    where another needs its vectors."""
    if read is None:

        def read(table: str) -> pl.DataFrame:
            return store.read_table(output_dir, table, INPUT_COLUMNS.get(table))

    names = [name for name in GRAPH_TABLES if name in set(names)]
    rows = sum(store.table_rows(output_dir, name) for name in names)
    side_by_side = rows * embedder.dim * 4 <= SIDE_BY_SIDE_BYTES
    known: Known = {"text_units": read_vectors(output_dir, "text_units")}
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="lance-write") as pool:
        submit = pool.submit if side_by_side else _now
        written: dict[str, Future] = {}
        # vectors here (the model, if any, is asked from this thread only), writes there
        for name in ("entities", "community_reports"):
            if name not in names:
                continue
            frame = read(name)
            groups = read("communities") if name == "community_reports" else None
            vectors = compute_vectors(output_dir, name, frame, embedder, settings, groups, known)
            if name == "entities":  # relationship and report vectors are made from these
                known[name] = (frame["id"].to_list(), vectors)
            written[name] = submit(
                build_vector_table, output_dir, name, frame, embedder, settings, vectors=vectors
            )
            del frame, groups, vectors  # one after another: gone once written
        if "relationships" in names:
            written["relationships"] = _now(
                build_vector_table, output_dir, "relationships", read("relationships"),
                embedder, settings, known=known,
            )  # fmt: skip
        for name in names:  # in dependency order, as Dagster wants them
            yield name, written[name].result()


def _now(fn: Callable[..., int], *args, **kwargs) -> Future:
    """`fn` run here, as a done future (ThreadPoolExecutor.submit's shape)."""
    future: Future = Future()
    future.set_result(fn(*args, **kwargs))
    return future
