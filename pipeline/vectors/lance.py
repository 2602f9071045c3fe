"""The vector layer: one LanceDB table per semantic table, explicit Arrow schema, FTS on text.

Vectors: text units are embedded by the model — that is the floor of indexing time. The
other tables are many times more numerous (MuSiQue: 1.9k units, 18k entities, 32k
relations, 4k reports), so by default they are derived rather than embedded whole
(EmbeddingSettings): an entity is its embedded *title* (a few tokens, ~5x cheaper than a
passage) plus the mean of the vectors of the text units it occurs in; a relationship is its
two entities plus its units; a report is the mean of its members. Set a table's mode to
"text" to embed its rendering instead (better on a GPU, slow on a CPU).

Content nodes (node search, "only TABLE nodes"): by default (`node_vectors: derived`) a
PARAGRAPH or LIST_ITEM node takes the mean vector of the text units that hold it (no model
call: prose is what the units already embed), and every other node type (TABLE, CAPTION,
HEADING, FIGURE, CODE, NOTE, ...) embeds its own text (its description when it has no text).

Here: each table's vectors (embedded or derived), its Lance table (schema, rows, writing
in blocks) and reading vectors back; the text a row embeds is pipeline.vectors.texts, the
arithmetic of derived vectors pipeline.vectors.derive.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline import schemas
from pipeline.config import EmbeddingSettings
from pipeline.storage import store
from pipeline.vectors import cache as vector_cache
from pipeline.vectors.derive import embedded_titles, lookup, mean_vectors, normalise
from pipeline.vectors.static_titles import title_vectors
from pipeline.vectors.static_titles import wanted as static_wanted
from pipeline.vectors.texts import embedding_text

# Node types whose vector is derived from their text units under node_vectors="derived".
DERIVED_NODE_TYPES = ("PARAGRAPH", "LIST_ITEM")
# The columns of a source table its vector table is built from, in any mode (the others:
# every column); the asset loads only these. tests/test_stage_inputs.py checks it.
INPUT_COLUMNS = {
    "text_units": ["id", "text", "n_tokens", "document_id"],
    "entities": ["id", "title", "type", "description", "frequency", "text_unit_ids"],
    "relationships": [
        "id",
        "source",
        "target",
        "description",
        "source_id",
        "target_id",
        "text_unit_ids",
    ],
}


class EmbedderLike(Protocol):
    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


# Rows of derived vectors computed at a time: the temporaries (end points, unit means) of a
# 136k-relationship table are ~200 MB each when computed whole.
BLOCK_ROWS = 16_384


def compute_vectors(
    output_dir: str | Path,
    name: str,
    frame: pl.DataFrame,
    texts: list[str],
    embedder: EmbedderLike,
    settings: EmbeddingSettings,
    communities: pl.DataFrame | None = None,
) -> np.ndarray:
    """(n, dim) vectors of table `name`'s rows, embedded or derived as the settings say."""
    dim = embedder.dim
    if name == "content_nodes":
        return node_vectors(output_dir, frame, texts, embedder, settings)
    mode = {
        "entities": settings.entity_vectors,
        "relationships": settings.relationship_vectors,
        "community_reports": settings.report_vectors if communities is not None else "text",
    }.get(name, "text")
    if mode == "text" or frame.height == 0:
        return np.asarray(embedder.embed(texts), dtype=np.float32).reshape(len(texts), dim)
    if name == "entities":
        unit_ids, unit_vecs = read_vectors(output_dir, "text_units")
        vecs = mean_vectors(frame["text_unit_ids"], unit_ids, unit_vecs, dim)
        named, titles = embedded_titles(frame, settings.title_min_units)
        if len(named):
            vecs[named] += title_vectors(titles, embedder, settings)
        return normalise(vecs)
    if name == "relationships":
        return np.concatenate(list(_relationship_blocks(output_dir, frame, dim)))
    # community_reports: the mean of the member entities' vectors
    ent_ids, ent_vecs = read_vectors(output_dir, "entities")
    members = frame.select("community").join(
        communities.select("community", "entity_ids"), on="community", how="left"
    )["entity_ids"]
    return mean_vectors(members, ent_ids, ent_vecs, dim)


def entity_model_texts(
    entities: pl.DataFrame, embedder: EmbedderLike, settings: EmbeddingSettings
) -> list[str]:
    """The texts `compute_vectors` gives the model for these entities."""
    if settings.entity_vectors == "text":
        return embedding_text("entities", entities)
    if static_wanted(embedder, settings):
        return []
    return embedded_titles(entities, settings.title_min_units)[1]


def _relationship_blocks(
    output_dir: str | Path, frame: pl.DataFrame, dim: int
) -> Iterator[np.ndarray]:
    """Derived relationship vectors (source + target entity + mean of its text units),
    BLOCK_ROWS rows at a time: only one block's temporaries exist at once."""
    unit_ids, unit_vecs = read_vectors(output_dir, "text_units")
    ent_ids, ent_vecs = read_vectors(output_dir, "entities")
    for at in range(0, frame.height, BLOCK_ROWS):
        part = frame.slice(at, BLOCK_ROWS)
        block = lookup(part["source_id"], ent_ids, ent_vecs, dim)
        block += lookup(part["target_id"], ent_ids, ent_vecs, dim)
        block += mean_vectors(part["text_unit_ids"], unit_ids, unit_vecs, dim)
        yield normalise(block)


def node_vectors(
    output_dir: str | Path,
    nodes: pl.DataFrame,
    texts: list[str],
    embedder: EmbedderLike,
    settings: EmbeddingSettings,
    text_units: pl.DataFrame | None = None,
) -> np.ndarray:
    """(n, dim) content-node vectors: PARAGRAPH/LIST_ITEM nodes derived from the text units
    holding them (units' `content_node_ids`, vectors from the text_units Lance table), other
    nodes (and prose held by no unit) embedded; everything embedded when node_vectors="text"."""
    dim = embedder.dim
    n = nodes.height
    out = np.zeros((n, dim), dtype=np.float32)
    embed_rows = np.arange(n)
    if settings.node_vectors == "derived" and n:
        if text_units is None:
            text_units = store.read_table(output_dir, "text_units")
        unit_ids, unit_vecs = read_vectors(output_dir, "text_units")
        holders = (
            text_units.select(pl.col("id").alias("unit"), pl.col("content_node_ids").alias("node"))
            .explode("node")
            .drop_nulls("node")
            .group_by("node")
            .agg(pl.col("unit").sort())
        )
        members = (
            nodes.select(pl.col("id").alias("node"), "node_type")
            .join(holders, on="node", how="left", maintain_order="left")
            .with_columns(
                pl.when(pl.col("node_type").is_in(DERIVED_NODE_TYPES))
                .then(pl.col("unit"))
                .otherwise(pl.lit(None, dtype=pl.List(pl.Utf8)))
                .alias("unit")
            )
        )["unit"]
        if unit_ids:
            out = mean_vectors(members.fill_null([]), unit_ids, unit_vecs, dim)
        embed_rows = np.flatnonzero(~out.any(axis=1))
    if len(embed_rows):
        vecs = embedder.embed([texts[i] for i in embed_rows.tolist()])
        out[embed_rows] = np.asarray(vecs, dtype=np.float32).reshape(len(embed_rows), dim)
    return out


def lance_schema(name: str, dim: int) -> pa.Schema:
    """The Arrow schema of Lance table `name`: its columns, then VECTOR_PROVENANCE."""
    return schemas.vector_schema(dim, schemas.VECTOR_TABLES[name] + schemas.VECTOR_PROVENANCE)


def model_label(embedder: EmbedderLike, settings: EmbeddingSettings) -> str:
    """The name of the model that made the vectors, as configured (the packaged model by its
    name, a local model folder by its folder name: the machine's layout is not the table's
    business); a caller's own embedder by its `model_id`."""
    from pipeline.vectors.embed import resolve_model

    model = str(getattr(embedder, "model_id", "") or settings.model)
    if model == resolve_model(settings.model):
        model = settings.model
    return Path(model).name if os.path.isabs(model) else model


def vector_arrow(
    name: str,
    frame: pl.DataFrame,
    texts: list[str],
    vecs: np.ndarray,
    dim: int,
    model: str = "",
    created_at: datetime | None = None,
) -> pa.Table:
    """Table `name`'s rows with their vectors, as Arrow in the explicit vector schema; every
    row records the embedding `model` and when the table was made (`created_at`, UTC)."""
    schema = lance_schema(name, dim)
    vector = pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel(), pa.float32()), dim)
    columns: dict[str, pa.Array] = {
        "id": pa.array(frame["id"].to_list() if frame.height else [], pa.string()),
        "text": pa.array(texts, pa.string()),
        "vector": vector,
    }
    for col, typ in schemas.VECTOR_TABLES[name]:
        values = frame[col].to_list() if frame.height else []
        columns[col] = pa.array(values, typ)
    n = len(texts)
    columns["embedding_model"] = pa.array([model] * n, pa.string())
    stamp = created_at or datetime.now(UTC)
    columns["created_at"] = pa.array([stamp] * n, schema.field("created_at").type)
    return pa.table(columns, schema=schema)


def build_vector_table(
    output_dir: str | Path,
    name: str,
    frame: pl.DataFrame,
    embedder: EmbedderLike,
    settings: EmbeddingSettings | None = None,
    communities: pl.DataFrame | None = None,
) -> int:
    """Vectors for `frame` (rows of table `name`) into Lance table `name`; returns the row
    count. Derived modes read the text_units (and entities) Lance tables: build those first."""
    settings = settings or EmbeddingSettings()
    dim = embedder.dim
    model, created_at = model_label(embedder, settings), datetime.now(UTC)
    if name == "relationships" and settings.relationship_vectors == "context":
        # the largest table (501k rows at 40k documents): vectors and texts (not embedded,
        # stored for the full-text index) made a block at a time, never whole in memory
        blocks = _relationship_blocks(output_dir, frame, dim) if frame.height else iter(())

        def texts_of(part: pl.DataFrame, at: int) -> list[str]:
            return embedding_text(name, part)
    else:
        texts = embedding_text(name, frame)
        vecs = compute_vectors(output_dir, name, frame, texts, embedder, settings, communities)
        blocks = (vecs[at : at + BLOCK_ROWS] for at in range(0, len(vecs), BLOCK_ROWS))

        def texts_of(part: pl.DataFrame, at: int) -> list[str]:
            return texts[at : at + part.height]

    def batches() -> Iterator[pa.RecordBatch]:
        at = 0
        for vecs in blocks:
            part = frame.slice(at, len(vecs))
            table = vector_arrow(name, part, texts_of(part, at), vecs, dim, model, created_at)
            yield from table.to_batches()
            at += len(vecs)

    store.write_lance(output_dir, name, batches(), lance_schema(name, dim))
    return frame.height


def build_vector_tables(
    output_dir: str | Path,
    text_units: pl.DataFrame,
    entities: pl.DataFrame,
    relationships: pl.DataFrame,
    community_reports: pl.DataFrame,
    embedder: EmbedderLike,
    settings: EmbeddingSettings | None = None,
    communities: pl.DataFrame | None = None,
) -> dict[str, int]:
    """All four tables, in dependency order (derived vectors read the earlier ones)."""
    frames = {
        "text_units": text_units,
        "entities": entities,
        "relationships": relationships,
        "community_reports": community_reports,
    }
    return {
        name: build_vector_table(output_dir, name, f, embedder, settings, communities)
        for name, f in frames.items()
    }


def read_vectors(output_dir: str | Path, name: str) -> tuple[list[str], np.ndarray]:
    """(ids, (n, dim) float32 matrix) of Lance table `name`; empty when the table is absent."""
    path = store.resolve(output_dir) / store.LANCE_DIR
    if not path.exists():
        return [], np.zeros((0, 0), dtype=np.float32)
    if (copy := vector_cache.load(path.parent, name)) is not None:
        return copy  # no lancedb import: most of a cold query's time (pipeline.vectors.cache)
    import lancedb

    db = lancedb.connect(str(path))
    if name not in lance_table_names(db):
        return [], np.zeros((0, 0), dtype=np.float32)
    # only the two columns: the text column of a large table is most of its bytes
    arrow = db.open_table(name).search().select(["id", "vector"]).limit(None).to_arrow()
    ids = arrow["id"].to_pylist()
    vec = arrow["vector"].combine_chunks()
    dim = vec.type.list_size
    mat = vec.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    vector_cache.save(path.parent, name, ids, mat.reshape(len(ids), dim))
    return ids, mat.reshape(len(ids), dim)


def lance_table_names(db) -> list[str]:
    names = db.list_tables()
    return list(getattr(names, "tables", names))
