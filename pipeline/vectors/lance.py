"""The vector layer: one LanceDB table per semantic table, explicit Arrow schema, FTS on text.

The stored (full-text indexed) `text` is a short rendering per table: a text unit's own
text, "title (TYPE): description", "a -> b: description", the report truncated.

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
import scipy.sparse as sp

from pipeline import schemas
from pipeline.config import EmbeddingSettings
from pipeline.storage import store
from pipeline.tokens import truncate_tokens
from pipeline.vectors import cache as vector_cache

# Token caps on the embedded text (the stored `text` column is the same string).
ENTITY_TOKENS = 100
RELATIONSHIP_TOKENS = 100
REPORT_TOKENS = 256
NODE_TOKENS = 256
# Node types whose vector is derived from their text units under node_vectors="derived".
DERIVED_NODE_TYPES = ("PARAGRAPH", "LIST_ITEM")
TEXT_UNIT_TOKENS = 512
# The columns of a source table its vector table is built from, in any mode (the others:
# every column); the asset loads only these. tests/test_stage_inputs.py checks it.
INPUT_COLUMNS = {
    "text_units": ["id", "text", "document_id"],
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
    if name == "content_nodes":
        texts = frame.select(
            pl.when(pl.col("text").fill_null("").str.strip_chars() != "")
            .then(pl.col("text"))
            .otherwise(pl.col("description"))
            .fill_null("")
        ).to_series()
        return _truncate(texts.to_list(), NODE_TOKENS)
    raise ValueError(f"no vector table {name!r}; known: {sorted(schemas.VECTOR_TABLES)}")


def _normalise(mat: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return (mat / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def mean_vectors(members: pl.Series, ids: list[str], vectors: np.ndarray, dim: int) -> np.ndarray:
    """Row i = normalised mean of `vectors` of the ids listed in members[i] (a list column);
    one sparse product, no per-row loop. Unknown ids are ignored; no member -> zeros."""
    n = len(members)
    if n == 0 or len(ids) == 0:
        return np.zeros((n, dim), dtype=np.float32)
    pairs = (
        pl.DataFrame({"members": members})
        .with_row_index("row")
        .explode("members")
        .join(
            pl.DataFrame({"members": ids}).with_row_index("col"),
            on="members",
            how="inner",
        )
    )
    incidence = sp.csr_matrix(
        (np.ones(pairs.height, dtype=np.float32), (pairs["row"], pairs["col"])),
        shape=(n, len(ids)),
    )
    return _normalise(np.asarray(incidence @ vectors))


def _lookup(keys: pl.Series, ids: list[str], vectors: np.ndarray, dim: int) -> np.ndarray:
    """vectors[row of key] per key; zeros where the key is unknown."""
    out = np.zeros((len(keys), dim), dtype=np.float32)
    rows = (
        pl.DataFrame({"k": keys})
        .with_row_index("at")
        .join(pl.DataFrame({"k": ids}).with_row_index("row"), on="k", how="inner")
    )
    out[rows["at"].to_numpy()] = vectors[rows["row"].to_numpy()]
    return out


# Rows of derived vectors computed at a time: the temporaries (end points, unit means) of a
# 136k-relationship table are ~200 MB each when computed whole.
BLOCK_ROWS = 16_384

# Titles that say nothing an embedding can use ("1911", "12%"): context vector only.
NUMERIC_TYPES = ("DATE", "TIME", "NUMBER", "PERCENT", "MONEY", "ORDINAL", "AGE")


def title_embedded(entities: pl.DataFrame) -> np.ndarray:
    """Rows whose title is embedded: named entities, and keyphrases seen in 2+ units (a
    keyphrase of one unit adds little to that unit's own vector). Saves ~30% of the
    title embeddings on MuSiQue, where titles are the second-largest embedding cost."""
    keep = ~pl.col("type").is_in(NUMERIC_TYPES) & (
        (pl.col("type") != "CONCEPT") | (pl.col("frequency") > 1)
    )
    return entities.select(keep.fill_null(True).arg_true()).to_series().to_numpy()


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
        named = title_embedded(frame)
        if len(named):
            vecs[named] += embedder.embed(frame["title"].fill_null("").gather(named).to_list())
        return _normalise(vecs)
    if name == "relationships":
        return np.concatenate(list(_relationship_blocks(output_dir, frame, dim)))
    # community_reports: the mean of the member entities' vectors
    ent_ids, ent_vecs = read_vectors(output_dir, "entities")
    members = frame.select("community").join(
        communities.select("community", "entity_ids"), on="community", how="left"
    )["entity_ids"]
    return mean_vectors(members, ent_ids, ent_vecs, dim)


def _relationship_blocks(
    output_dir: str | Path, frame: pl.DataFrame, dim: int
) -> Iterator[np.ndarray]:
    """Derived relationship vectors (source + target entity + mean of its text units),
    BLOCK_ROWS rows at a time: only one block's temporaries exist at once."""
    unit_ids, unit_vecs = read_vectors(output_dir, "text_units")
    ent_ids, ent_vecs = read_vectors(output_dir, "entities")
    for at in range(0, frame.height, BLOCK_ROWS):
        part = frame.slice(at, BLOCK_ROWS)
        block = _lookup(part["source_id"], ent_ids, ent_vecs, dim)
        block += _lookup(part["target_id"], ent_ids, ent_vecs, dim)
        block += mean_vectors(part["text_unit_ids"], unit_ids, unit_vecs, dim)
        yield _normalise(block)


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
