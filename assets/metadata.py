"""Materialization metadata shared by all assets, in Dagster's own entries: the row count and
column schema the catalog shows (`dagster/row_count`, `dagster/column_schema`), a table
preview, graph summaries, elapsed time.

Schemas are read from what is written (the conformed frame, the Parquet footers, the Lance
table), never listed here: the tables' columns change with pipeline.schemas. A sharded
table's schema is its definition's (`declared_schema`, from pipeline.schemas): Dagster
stores a range's materialization once per shard.
"""

from __future__ import annotations

import html
import json
import math
import time
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from dagster import MetadataValue, TableColumn, TableRecord, TableSchema

from pipeline import schemas
from pipeline.storage import store

ROW_COUNT = "dagster/row_count"
COLUMN_SCHEMA = "dagster/column_schema"
PREVIEW_ROWS = 5
CELL_CHARS = 80
# a cell is folded from its first CELL_CHARS x this characters: enough unless it is mostly
# whitespace (then it shows less before its "…")
FOLD_FACTOR = 4
# raw embeddings: hundreds of floats a row tell nothing in a preview (the schema lists them)
HIDDEN = frozenset({"vector"})
# kinds (the catalog's icons and filters): tables are polars frames written as Parquet,
# vector tables live in LanceDB; no asset runs DuckDB (only `docgraph query` does)
PARQUET_KINDS = frozenset({"polars", "parquet"})
LANCE_KINDS = frozenset({"lancedb"})


def column_schema(schema: pa.Schema) -> TableSchema:
    """Dagster's schema of an Arrow schema: every column with its Arrow type."""
    return TableSchema(columns=[TableColumn(f.name, str(f.type)) for f in schema])


def declared_schema(name: str) -> dict[str, Any]:
    """Definition metadata: the column schema of Parquet table `name` as pipeline.schemas
    declares it (what every file of the table is conformed to)."""
    return {COLUMN_SCHEMA: MetadataValue.table_schema(column_schema(schemas.TABLES[name]))}


def _cell(value: Any, width: int) -> str | int | float | bool | None:
    """One TableRecord value: numbers and booleans as they are, anything else as text (lists
    and structs as JSON), whitespace folded and cut to `width`. Not HTML-escaped: the UI shows
    table cells as text (React escapes them), where Markdown would render raw HTML."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):  # NaN is no JSON: the UI could not parse the record
        return value if math.isfinite(value) else str(value)
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    # folded from a prefix: folding only shortens, and a 151 MB document's text split into
    # words was 1.2 GB of strings
    folded = " ".join(text[: width * FOLD_FACTOR].split())
    if len(text) <= width * FOLD_FACTOR and len(folded) <= width:
        return folded
    return folded[: width - 1] + "…"


def table_preview(head: pa.Table, n: int = PREVIEW_ROWS, width: int = CELL_CHARS):
    """The first `n` rows of `head` as a Dagster table (vectors left out, cells shortened)."""
    head = head.select([name for name in head.schema.names if name not in HIDDEN]).slice(0, n)
    records = [TableRecord({k: _cell(v, width) for k, v in r.items()}) for r in head.to_pylist()]
    return MetadataValue.table(records, column_schema(head.schema))


def table_metadata(schema: pa.Schema, rows: int, head: pa.Table) -> dict[str, Any]:
    """Row count, column schema and preview of a table of `rows` rows whose first rows are
    `head`."""
    return {
        ROW_COUNT: rows,
        COLUMN_SCHEMA: MetadataValue.table_schema(column_schema(schema)),
        "preview": table_preview(head),
    }


def _as_written(df: pl.DataFrame, table: str | None) -> pa.Table:
    """The first rows of `df` as the IO manager writes them (schemas.conform) when `table` is
    one of its tables, else as the frame converts to Arrow.

    The rows are copied out first: a head of a list column keeps its whole child array, and
    converting that to Arrow took 10-90 ms a table at 40k documents (0.36 s of an edit)."""
    head = pl.from_dicts(df.head(PREVIEW_ROWS).to_dicts(), schema=df.schema)
    return schemas.conform(head, table) if table in schemas.TABLES else head.to_arrow()


def frame_metadata(
    df: pl.DataFrame, started: float, table: str | None = None, **extra: Any
) -> dict[str, Any]:
    """Metadata of an asset returning `df`, written as table `table` by the IO manager."""
    head = _as_written(df, table)
    return {
        **table_metadata(head.schema, df.height, head),
        "elapsed_s": round(time.perf_counter() - started, 3),
        **extra,
    }


def parquet_metadata(folder: str | Path, name: str) -> dict[str, Any]:
    """Metadata of table `name` as its Parquet files in `folder` hold it (every shard): the
    row count from the footers, the schema and first rows from the first files."""
    files = store.table_files(folder, name)
    if not files:
        empty = schemas.TABLES[name].empty_table() if name in schemas.TABLES else pa.table({})
        return table_metadata(empty.schema, 0, empty)
    head, rows = None, 0
    for path in files:
        rows += pq.read_metadata(path).num_rows
        if head is None or head.num_rows < PREVIEW_ROWS:
            first = next(pq.ParquetFile(path).iter_batches(batch_size=PREVIEW_ROWS), None)
            if first is not None:
                batch = pa.Table.from_batches([first])
                head = batch if head is None else pa.concat_tables([head, batch])
    schema = pq.read_schema(files[0])
    return table_metadata(schema, rows, head if head is not None else schema.empty_table())


def lance_metadata(folder: str | Path, name: str) -> dict[str, Any]:
    """Metadata of the Lance table `name` in `folder`: its row count, Arrow schema (the
    vector's width included) and first rows."""
    ds = store.lance_dataset(folder, name)
    if ds is None:
        raise FileNotFoundError(f"no Lance table {name} in {folder}")
    return table_metadata(ds.schema, ds.count_rows(), ds.head(PREVIEW_ROWS))


def _quantiles(values: pl.Series, prefix: str) -> dict[str, float | int]:
    values = values.drop_nulls()
    if values.is_empty():
        return {}
    return {
        f"{prefix}_min": int(values.min()),
        f"{prefix}_median": float(values.median()),
        f"{prefix}_p90": float(values.quantile(0.9, interpolation="nearest")),
        f"{prefix}_max": int(values.max()),
    }


def degree_summary(entities: pl.DataFrame) -> dict[str, Any]:
    """Min, median, p90 and max of the entities' `degree` (distinct neighbours, as GraphRAG's),
    and how many have none: a hub-dominated or disconnected graph shows here first. (It was
    counted from the relationships' endpoints: 0.16 s of an edit at 40k documents.)"""
    if "degree" not in entities.columns:
        return {}
    degree = entities["degree"]
    return {**_quantiles(degree, "degree"), "isolated_entities": int((degree == 0).sum())}


def link_resolution(edges: pl.DataFrame) -> dict[str, float | int]:
    """How many REFERS_TO links there are, how many found their target, and the rate."""
    links = edges.filter(pl.col("type") == "REFERS_TO")
    resolved = links.filter(pl.col("target_id").is_not_null()).height
    rate = resolved / links.height if links.height else 1.0
    return {"links": links.height, "links_resolved": resolved, "link_resolution_rate": rate}


def community_sizes(communities: pl.DataFrame) -> dict[str, Any]:
    """Per level: how many communities, and the min/median/p90/max of their sizes (member
    entities, or the `size` column when they are not listed)."""
    if "level" not in communities.columns or communities.is_empty():
        return {}
    if "entity_ids" in communities.columns:
        size = pl.col("entity_ids").list.len()
    elif "size" in communities.columns:
        size = pl.col("size")
    else:
        return {}
    per_level = (
        communities.group_by("level")
        .agg(
            pl.len().alias("communities"),
            size.min().alias("size_min"),
            size.median().alias("size_median"),
            size.quantile(0.9, interpolation="nearest").alias("size_p90"),
            size.max().alias("size_max"),
        )
        .sort("level")
    )
    return {
        "community_sizes": table_preview(per_level.to_arrow(), n=per_level.height),
        "community_levels": per_level.height,
    }


def _md_cell(value: Any, width: int) -> str:
    """One Markdown table cell: shortened, pipes escaped, and HTML escaped — document text is
    data, and the UI renders Markdown (raw HTML included)."""
    text = str(value).replace("\n", " ")
    text = text if len(text) <= width else text[: width - 1] + "…"
    return html.escape(text).replace("|", "\\|")


def markdown_preview(df: pl.DataFrame, n: int = 5, width: int = 60) -> str:
    """First `n` rows as a Markdown table, long cells shortened and pipes escaped (the
    failure lists: every failed document with its reason, up to 100)."""
    cols = [c for c in df.columns if c not in HIDDEN]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.head(n).select(cols).iter_rows():
        lines.append("| " + " | ".join(_md_cell(v, width) for v in row) + " |")
    return "\n".join(lines)


def counts_table(counts: dict[str, Any], header: tuple[str, str]):
    """`counts` (type -> rows, unit -> reason, ...) as a two-column Dagster table."""
    table = pa.table(
        {
            header[0]: pa.array([str(k) for k in counts], pa.string()),
            header[1]: pa.array(list(counts.values())),
        }
    )
    return table_preview(table, n=len(counts), width=200)


def failures_md(failures: pl.DataFrame) -> MetadataValue:
    """Every failed document (up to 100) with its stage, reason and fallback."""
    cols = failures.select("source_path", "stage", "reason", "fallback")
    return MetadataValue.md(markdown_preview(cols, n=100, width=200) if cols.height else "none")


def llm_delta(before: dict, after: dict) -> dict:
    """This step's LLM counters (the client may be shared by several steps of a process)."""
    out = {}
    for key, value in after.items():
        if key == "llm_by_stage":
            old = before.get(key, {})
            delta = {
                stage: {
                    k: v - old.get(stage, {}).get(k, 0) if isinstance(v, int | float) else v
                    for k, v in counts.items()
                }
                for stage, counts in value.items()
            }
            out[key] = MetadataValue.json(
                {stage: c for stage, c in delta.items() if any(c.values())}
            )
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = value - before.get(key, 0)
        else:
            out[key] = value
    return out
