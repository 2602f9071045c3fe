"""The vector layer: one LanceDB table per semantic table, explicit Arrow schema, FTS on text.

What gets embedded is chosen per table: a text unit's own text; for entities,
relationships and reports a short rendering ("title (TYPE): description", "a -> b:
description", the report truncated) because short strings embed ~5x faster than
passages and the head of a description carries most of its meaning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline import schemas, store
from pipeline.tokens import truncate_tokens

# Token caps on the embedded text (the stored `text` column is the same string).
ENTITY_TOKENS = 100
RELATIONSHIP_TOKENS = 100
REPORT_TOKENS = 256
TEXT_UNIT_TOKENS = 512


class EmbedderLike(Protocol):
    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _truncate(texts: list[str], max_tokens: int) -> list[str]:
    # Cheap prefilter: a string of <= max_tokens characters cannot exceed max_tokens tokens.
    return [t if len(t) <= max_tokens else truncate_tokens(t, max_tokens) for t in texts]


def embedding_text(name: str, frame: pl.DataFrame) -> list[str]:
    """The string embedded (and full-text indexed) for each row of table `name`."""
    if frame.height == 0:
        return []
    if name == "text_units":
        texts = frame["text"].fill_null("").to_list()
        return _truncate(texts, TEXT_UNIT_TOKENS)
    if name == "entities":
        texts = frame.select(
            pl.concat_str(
                pl.col("title").fill_null(""),
                pl.lit(" ("),
                pl.col("type").fill_null(""),
                pl.lit("): "),
                pl.col("description").fill_null(""),
            )
        ).to_series()
        return _truncate(texts.to_list(), ENTITY_TOKENS)
    if name == "relationships":
        texts = frame.select(
            pl.concat_str(
                pl.col("source").fill_null(""),
                pl.lit(" -> "),
                pl.col("target").fill_null(""),
                pl.lit(": "),
                pl.col("description").fill_null(""),
            )
        ).to_series()
        return _truncate(texts.to_list(), RELATIONSHIP_TOKENS)
    if name == "community_reports":
        texts = frame.select(
            pl.when(pl.col("full_content").fill_null("") != "")
            .then(pl.col("full_content"))
            .otherwise(pl.concat_str(pl.col("title"), pl.lit("\n"), pl.col("summary")))
            .fill_null("")
        ).to_series()
        return _truncate(texts.to_list(), REPORT_TOKENS)
    raise ValueError(f"no vector table {name!r}; known: {sorted(schemas.VECTOR_TABLES)}")


def vector_arrow(name: str, frame: pl.DataFrame, embedder: EmbedderLike) -> pa.Table:
    """Table `name`'s rows with their vectors, as Arrow in the explicit vector schema."""
    dim = embedder.dim
    schema = schemas.vector_schema(dim, schemas.VECTOR_TABLES[name])
    texts = embedding_text(name, frame)
    vecs = np.asarray(embedder.embed(texts), dtype=np.float32).reshape(len(texts), dim)
    vector = pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel(), pa.float32()), dim)
    columns: dict[str, pa.Array] = {
        "id": pa.array(frame["id"].to_list() if frame.height else [], pa.string()),
        "text": pa.array(texts, pa.string()),
        "vector": vector,
    }
    for col, typ in schemas.VECTOR_TABLES[name]:
        values = frame[col].to_list() if frame.height else []
        columns[col] = pa.array(values, typ)
    return pa.table(columns, schema=schema)


def build_vector_table(
    output_dir: str | Path, name: str, frame: pl.DataFrame, embedder: EmbedderLike
) -> int:
    """Embed `frame` (rows of table `name`) into Lance table `name`; returns the row count."""
    table = vector_arrow(name, frame, embedder)
    store.write_lance(output_dir, name, table)
    return table.num_rows


def build_vector_tables(
    output_dir: str | Path,
    text_units: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    community_reports: pl.DataFrame,
    embedder: EmbedderLike,
) -> dict[str, int]:
    frames = {
        "text_units": text_units,
        "entities": entities,
        "relationships": relationships,
        "community_reports": community_reports,
    }
    return {name: build_vector_table(output_dir, name, f, embedder) for name, f in frames.items()}


def read_vectors(output_dir: str | Path, name: str) -> tuple[list[str], np.ndarray]:
    """(ids, (n, dim) float32 matrix) of Lance table `name`; empty when the table is absent."""
    path = Path(output_dir) / store.LANCE_DIR
    if not path.exists():
        return [], np.zeros((0, 0), dtype=np.float32)
    import lancedb

    db = lancedb.connect(str(path))
    if name not in _table_names(db):
        return [], np.zeros((0, 0), dtype=np.float32)
    arrow = db.open_table(name).to_arrow().select(["id", "vector"])
    ids = arrow["id"].to_pylist()
    vec = arrow["vector"].combine_chunks()
    dim = vec.type.list_size
    mat = vec.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    return ids, mat.reshape(len(ids), dim)


def _table_names(db) -> list[str]:
    names = db.list_tables()
    return list(getattr(names, "tables", names))
