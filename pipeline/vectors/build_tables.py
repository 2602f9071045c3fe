"""The index's five vector tables (text units, content nodes, entities, community reports,
relationships), those of one step together (the index job makes them in two: the units'
and content nodes', then the graph's; assets.vectors).

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

An incremental run (`carry=True`) carries rows over (issue 49): each table's row digests
(pipeline.vectors.row_digests) are compared with those the staging folder's table was
written with, and only new and changed rows get vectors and are written
(pipeline.vectors.carry_over plans it, pipeline.vectors.lance_write does it); a table with
too much changed is written whole, and `outcomes` says which and why. A carried table's
write holds only its new rows, so it always goes to the two threads, at any size: at 40k
documents the five writes (compacting the fragments a change touched) took 6.5 s of the
step one after another on the caller's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow as pa

from pipeline.config import EmbeddingSettings
from pipeline.storage import store
from pipeline.vectors import (
    carry_over,
    end_titles,
    held_rows,
    lance_write,
    listed_digests,
    row_digests,
)
from pipeline.vectors.lance import (
    BLOCK_ROWS,
    INPUT_COLUMNS,
    EmbedderLike,
    Known,
    build_vector_table,
    compute_vectors,
    lance_schema,
    model_label,
    vector_arrow,
)
from pipeline.vectors.static_titles import static_titles
from pipeline.vectors.texts import row_text

# Dependency order: content nodes and entities are derived from the text units' vectors,
# reports and relationships from the entities'.
VECTOR_TABLES = ("text_units", "content_nodes", "entities", "community_reports", "relationships")
# Vectors of the tables (rows x width x 4 bytes) up to which they are made side by side:
# MuSiQue's 58k rows are 89 MB of 384-wide vectors; 10k documents' 195k rows, 300 MB.
SIDE_BY_SIDE_BYTES = 128 * 2**20
# The tables each table's digests are made from (pipeline.vectors.row_digests), by the
# relationships' vector mode: "context" relationships hold their ends' whole vectors,
# "titles+units" only their title parts (ENTITY_TITLES), "text" neither.
DIGEST_DEPS = {
    "text_units": (),
    "content_nodes": ("text_units",),
    "entities": ("text_units",),
    "community_reports": ("entities",),
    "relationships": ("text_units", "entities"),
}
RELATIONSHIP_DEPS = {
    "context": DIGEST_DEPS["relationships"],
    end_titles.MODE: ("text_units", row_digests.ENTITY_TITLES),
    "text": (),
}


def _made_from(name: str, settings: EmbeddingSettings) -> tuple[str, ...]:
    """The tables whose digests (and vectors) table `name`'s are made from."""
    if name == "relationships":
        return RELATIONSHIP_DEPS[settings.relationship_vectors]
    return DIGEST_DEPS[name]


class _Digests:
    """Each table's row digests, made once: from its source table when this step builds it,
    else from the staging folder's record (or its source table, when that is missing).
    The entities' title digests are made from the entities, never recorded."""

    def __init__(
        self,
        folder: Path,
        read: Callable[[str], pl.DataFrame],
        key: str,
        settings: EmbeddingSettings,
    ):
        self.folder, self.read, self.key, self.settings = folder, read, key, settings
        self.made: dict[str, pl.DataFrame] = {}

    def of(self, name: str, frame: pl.DataFrame | None = None) -> pl.DataFrame:
        if name in self.made:
            return self.made[name]
        if name == row_digests.ENTITY_TITLES:
            entities = self.read("entities") if frame is None else frame
            titled = end_titles.titled_rows(entities, self.settings)
            self.made[name] = row_digests.title_digests(entities, titled)
            return self.made[name]
        if frame is None:
            recorded = row_digests.read_digests(self.folder, name, self.key)
            if recorded is not None:
                self.made[name] = recorded
                return recorded
            frame = self.read(name)
        known = {dep: self.of(dep) for dep in _made_from(name, self.settings)}
        holders = communities = None
        if name == "content_nodes":
            holders = store.read_table(self.folder, "text_units", ["id", "content_node_ids"])
        if name == "community_reports":
            communities = self.read("communities")
        mode = self.settings.relationship_vectors
        self.made[name] = row_digests.table_digests(
            name, frame, known, holders, communities, relationships=mode
        )
        return self.made[name]


def _settings_key(embedder: EmbedderLike, settings: EmbeddingSettings) -> str:
    static = settings.entity_vectors == "name+context" and static_titles(embedder, settings)
    titles = "static" if static else "model"
    return row_digests.settings_digest(
        model_label(embedder, settings), embedder.dim, settings, titles
    )


NO_BASE = "no earlier version to carry rows from"


def build_vector_tables_at_once(
    output_dir: str | Path,
    names: Iterable[str],
    embedder: EmbedderLike,
    settings: EmbeddingSettings,
    read: Callable[[str], pl.DataFrame] | None = None,
    whole: str | None = NO_BASE,
    outcomes: dict[str, dict] | None = None,
    base: Path | None = None,
    listed: dict[str, pl.Series] | None = None,
) -> Iterator[tuple[str, int]]:
    """The Lance tables `names` (of VECTOR_TABLES), yielding (name, rows) in VECTOR_TABLES'
    order once all are written. `read(table)` gives a source table (default: its
    INPUT_COLUMNS from `output_dir`); a vector table left out is read from Lance where
    another is made from its vectors. `whole`: why every row is made anew; None: carry
    unchanged rows over from the tables the folder holds (`base`: the published version it
    started from, whose vector copies are read where they match); `outcomes` gets each
    table's `carry_outcome`; `listed`: the rows the graph step merged again against `base`
    (pipeline.storage.changed_rows: the relationships' digests are patched from it,
    pipeline.vectors.listed_digests)."""
    if read is None:

        def read(table: str) -> pl.DataFrame:
            return read_source(output_dir, table)

    folder = store.resolve(output_dir)
    names = [name for name in VECTOR_TABLES if name in set(names)]
    rows = sum(store.table_rows(output_dir, name) for name in names)
    side_by_side = rows * embedder.dim * 4 <= SIDE_BY_SIDE_BYTES
    digests = _Digests(folder, read, _settings_key(embedder, settings), settings)
    known: Known = {}
    order_by: dict = {"by_units": settings.relationship_vectors != "context"}
    if "text_units" not in names and {"entities", "relationships"} & set(names):
        # their layout follows their units' documents (carry_over.order): read, not made here
        order_by["units"] = store.read_table(output_dir, "text_units", ["id", "document_id"])
    outcomes = {} if outcomes is None else outcomes
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="lance-write") as pool:
        written: dict[str, Future] = {}
        for at, name in enumerate(names):  # vectors here (the model is asked from here only)
            # the tables a later one of the step is made from (their vectors are kept for it)
            later = {dep for then in names[at + 1 :] for dep in _made_from(then, settings)}
            where = None  # the relationships' rows to hash again, where the list says
            if name == "relationships" and whole is None:
                where = listed_digests.relationships_to_hash(folder, base, listed, settings)
            frame, table_digests, only = _source_and_digests(
                output_dir, name, read, digests, where, listed, settings
            )
            if name == "entities" and "relationships" in names:  # from this frame, not re-read
                digests.of(row_digests.ENTITY_TITLES, frame)
            plan = (
                carry_over.plan(folder, name, table_digests, digests.key, only)
                if whole is None
                else carry_over.Plan(name, whole, frame.height)
            )
            outcomes[name] = carry_outcome(plan)
            if name == "relationships" and whole is None:
                hashed = "all" if only is None else "listed by the graph step and their kin"
                outcomes[name]["digests_hashed"] = f"{frame.height} rows: {hashed}"
            if only is not None and plan.whole is not None:  # written whole: every row read
                frame = read(name)
            if name == "text_units":
                order_by["units"] = frame.select("id", "document_id")
            if plan.whole is not None or name == "entities":  # carried: the new rows only
                frame = _ordered(name, frame, order_by)
            if name == "entities":  # the relationships' order follows the entities'
                order_by["ent"] = frame.select("id", "frequency")
            groups = read("communities") if name == "community_reports" else None
            if name == "relationships" and settings.relationship_vectors != "context":
                known.pop("entities", None)  # made from the units and titles alone
            if plan.whole is None:
                frame = _with_order(frame, plan, order_by)
            job = (_whole if plan.whole is not None else _carried)(
                folder,
                name,
                frame,
                groups,
                plan,
                embedder,
                settings,
                known,
                side_by_side,
                base,
                keep=name in later,
            )
            # a carried table's job holds only its new rows: it is written beside the next
            # table's digests and plan; a whole one as memory allows (the relationships',
            # the largest, here)
            beside = side_by_side and name != "relationships"
            submit = pool.submit if plan.whole is None or beside else _now
            written[name] = submit(_then_record, job, folder, name, table_digests, digests.key)
            del frame, groups, job
        for name in names:  # in dependency order, as Dagster wants them
            yield name, written[name].result()


def _source_and_digests(
    output_dir: str | Path,
    name: str,
    read: Callable[[str], pl.DataFrame],
    digests: _Digests,
    where: pl.Expr | None,
    listed: dict[str, pl.Series] | None,
    settings: EmbeddingSettings,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.Series | None]:
    """Table `name`'s source rows, the digests of all its rows, and the ids of the rows
    hashed again: with `where` (pipeline.vectors.listed_digests) only the rows it keeps are
    read and hashed, the others' digests are the record's; without it (None), every row."""
    if where is not None:
        assert listed is not None
        frame = read_source(output_dir, name, where)
        only = listed_digests.hashed_ids(frame, listed)
        units = digests.of("text_units")
        patched = listed_digests.patched_digests(
            digests.folder, digests.key, only, frame, units, settings
        )
        if patched is not None:
            return frame, patched, only
    frame = read(name)
    return frame, digests.of(name, frame), None


def _with_order(frame: pl.DataFrame, plan: carry_over.Plan, order_by: dict) -> pl.DataFrame:
    """A carried table's frame: its rows to write anew first, in layout order
    (carry_over.order; sorting the whole of a 500k-row table took 0.7 s), then the others."""
    redo = pl.col("id").is_in(pl.Series(plan.append, dtype=pl.Utf8).implode())
    todo = _ordered(plan.name, frame.filter(redo), order_by)
    return pl.concat([todo, frame.filter(~redo)])


def _ordered(name: str, frame: pl.DataFrame, order_by: dict) -> pl.DataFrame:
    """`frame` in its layout order (carry_over.order)."""
    units, ents, by_units = order_by.get("units"), order_by.get("ent"), order_by["by_units"]
    return carry_over.order(name, frame, units, ents, by_units=by_units)


def carry_outcome(plan: carry_over.Plan) -> dict:
    """The metadata of how a table was made: carried over or whole, and the rows each way."""
    if plan.whole is not None:
        return {
            "incremental": "whole",
            "incremental_reason": plan.whole,
            "rows_recomputed": plan.rows,
            "rows_carried": 0,
        }
    return {
        "incremental": "carried",
        "incremental_reason": f"{len(plan.delete)} rows deleted, {len(plan.append)} written",
        "rows_recomputed": len(plan.append),
        "rows_carried": plan.rows - len(plan.append),
    }


def _then_record(job: Callable[[], int], folder: Path, name: str, digests, key: str) -> int:
    """Run `job` (the table's write), then record the digests of the rows it now holds."""
    row_digests.drop_digests(folder, name)
    rows = job()
    row_digests.write_digests(folder, name, digests, key)
    return rows


def _whole(folder, name, frame, groups, plan, embedder, settings, known, side_by_side, base, keep):
    """The table written whole, as a first index does; returns its job. `keep`: a later
    table of the step is made from its vectors (they are put in `known`)."""
    # one after another, the nodes' vectors are made as their table is written, a block at
    # a time (pipeline.vectors.lance): no other table is made from them; the relationships'
    # always so (the largest: streamed, never whole in memory)
    vectors = (
        None
        if (name == "content_nodes" and not side_by_side) or name == "relationships"
        else compute_vectors(folder, name, frame, embedder, settings, groups, known)
    )
    if keep:
        known[name] = (frame["id"].to_list(), vectors)

    def job() -> int:
        held_rows.drop_record(folder, name)  # no deleted rows in a table written whole
        return build_vector_table(
            folder, name, frame, embedder, settings, groups, known=known, vectors=vectors
        )

    return job


def _carried(
    folder, name, frame, groups, plan, embedder, settings, known, side_by_side, base, keep
):
    """The table's new and changed rows made and written into the folder's table, the
    other rows left as they are; returns its job (`keep`: as `_whole`'s)."""
    redo = pl.col("id").is_in(pl.Series(plan.append, dtype=pl.Utf8).implode())
    todo = frame.filter(redo)
    vectors = compute_vectors(folder, name, todo, embedder, settings, groups, known)
    if (record_use := getattr(embedder, "record_use", None)) is not None:
        # the embedding cache keeps what the tables hold (its sweep keeps what runs used)
        record_use(
            carry_over.model_texts(folder, name, frame.filter(~redo), embedder, settings, groups)
        )
    if keep:  # the whole table's
        before = carry_over.carried_vectors(folder, base, name)
        known[name] = carry_over.patched(before, set(plan.delete), todo["id"].to_list(), vectors)
    model, created_at, dim = model_label(embedder, settings), datetime.now(UTC), embedder.dim

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, todo.height, BLOCK_ROWS):
            part = todo.slice(start, BLOCK_ROWS)
            vecs = vectors[start : start + BLOCK_ROWS]
            table = vector_arrow(name, part, row_text(name, part), vecs, dim, model, created_at)
            yield from table.to_batches()

    path = lance_write.table_dir(folder / store.LANCE_DIR, name)
    schema = lance_schema(name, dim)

    rows = plan.rows  # not the frame (it may hold only some rows; the job may run after the
    # caller let it go)

    def job() -> int:
        fragments, record = held_rows.may_hold(folder, base, name, plan.deleted_at)
        held_rows.drop_record(folder, name)
        done = lance_write.update(path, schema, plan.delete, batches(), fragments)
        held_rows.write_record(folder, name, record, done["held"])
        return rows

    return job


# A source table's list of text unit ids, read as codes (Categorical: one string per distinct
# id), streamed: only their means read them (pipeline.vectors.derive_vectors), and a 151 MB file's
# relationships list 5.4M ids, 0.26 GB as strings, held while their Lance table is written.
CODED_LIST = "text_unit_ids"


def read_source(output_dir: str | Path, table: str, where: pl.Expr | None = None) -> pl.DataFrame:
    """Source table `table`'s INPUT_COLUMNS, its CODED_LIST as codes (only the rows `where`
    keeps, when given: a filter over those columns)."""
    columns, files = INPUT_COLUMNS.get(table), store.table_files(output_dir, table)
    if where is None and (not files or columns is None or CODED_LIST not in columns):
        return store.read_table(output_dir, table, columns)
    scan = pl.scan_parquet(files).select(columns)
    if where is not None:
        scan = scan.filter(where)
    if CODED_LIST in columns:
        scan = scan.with_columns(pl.col(CODED_LIST).cast(pl.List(pl.Categorical)))
    return scan.collect(engine="streaming")


def _now(fn: Callable[..., int], *args, **kwargs) -> Future:
    """`fn` run here, as a done future (ThreadPoolExecutor.submit's shape)."""
    future: Future = Future()
    future.set_result(fn(*args, **kwargs))
    return future
