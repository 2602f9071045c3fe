"""The vector layer: one LanceDB table per semantic table, explicit Arrow schema, FTS on text.

Vectors: text units are embedded by the model — that is the floor of indexing time. The
other tables are many times more numerous (MuSiQue: 1.9k units, 18k entities, 32k
relations, 4k reports), so by default they are derived rather than embedded whole
(EmbeddingSettings): an entity is its embedded *title* (a few tokens, ~5x cheaper than a
passage) plus the mean of the vectors of the text units it occurs in; a relationship is its
two entities' titles plus its units (pipeline.vectors.end_titles); a report is the mean of
its members. Mode "text" embeds a table's rendering instead (better on a GPU).

Content nodes (node search, "only TABLE nodes"): by default (`node_vectors: derived`) a
PARAGRAPH or LIST_ITEM node takes the mean vector of the text units that hold it (no model
call: prose is what the units already embed), and every other node type (TABLE, CAPTION,
HEADING, FIGURE, CODE, NOTE, ...) embeds its own text (its description when it has no text).

Here: each table's vectors (embedded or derived), its Lance table (schema, rows, writing
in blocks) and reading vectors back; the text a row embeds is pipeline.vectors.texts, the
arithmetic of derived vectors pipeline.vectors.derive_vectors.
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

from pipeline import memory, schemas
from pipeline.config import EmbeddingSettings
from pipeline.storage import store
from pipeline.vectors import end_titles, lance_write
from pipeline.vectors import vector_copies as vector_cache
from pipeline.vectors.derive_vectors import (
    edge_blocks,
    embedded_titles,
    incidence,
    mean_vectors,
    normalise,
)
from pipeline.vectors.static_titles import title_vectors
from pipeline.vectors.static_titles import wanted as static_wanted
from pipeline.vectors.texts import embedding_text, row_text

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
    "community_reports": ["id", "community", "level", "title", "summary", "full_content"],
    "communities": ["community", "entity_ids"],  # the members of derived report vectors
    "content_nodes": ["id", "node_type", "text", "description", "document_id", "section_id"],
}


class EmbedderLike(Protocol):
    @property
    def dim(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


# Rows of derived vectors computed at a time: the temporaries (end points, unit means) of a
# 136k-relationship table are ~200 MB each when computed whole.
BLOCK_ROWS = 16_384
# Tables laid out by document (carry_over.order), whose rows one edit changes together: cut
# by their text (lance_write.FRAGMENT_TEXT_BYTES). The others' changed rows lie all over them
# (40k documents: 6 report fragments compacted so, 2.6 s, against 2 of 16k rows, 1.7 s).
CUT_BY_TEXT = ("text_units", "content_nodes")


# Vectors already in memory, by table: (ids, (n, dim) matrix); a derived table reads the
# ones it lacks from their Lance tables.
Known = dict[str, tuple[list[str], np.ndarray]]


def _vectors_of(output_dir: str | Path, name: str, known: Known | None) -> tuple:
    if known is None:
        return read_vectors(output_dir, name)
    if name not in known:  # read once for every table made from them
        known[name] = read_vectors(output_dir, name)
    return known[name]


def compute_vectors(
    output_dir: str | Path,
    name: str,
    frame: pl.DataFrame,
    embedder: EmbedderLike,
    settings: EmbeddingSettings,
    communities: pl.DataFrame | None = None,
    known: Known | None = None,
) -> np.ndarray:
    """(n, dim) vectors of table `name`'s rows, embedded or derived as the settings say."""
    dim = embedder.dim
    if name == "content_nodes":
        return node_vectors(output_dir, frame, embedder, settings, known=known)
    if vector_mode(name, settings, communities) == "text" or frame.height == 0:
        texts = embedding_text(name, frame)
        return np.asarray(embedder.embed(texts), dtype=np.float32).reshape(len(texts), dim)
    if name == "entities":
        unit_ids, unit_vecs = _vectors_of(output_dir, "text_units", known)
        vecs = mean_vectors(frame["text_unit_ids"], unit_ids, unit_vecs, dim)
        named, titles = embedded_titles(frame, settings.title_min_units)
        made = title_vectors(titles, embedder, settings) if len(named) else vecs[:0]
        vecs[named] += made
        if known is not None and end_titles.titled(settings):  # the relationships' ends
            known[end_titles.TITLES] = (frame["id"].gather(named).to_list(), made)
        return normalise(vecs)
    if name == "relationships":
        blocks = _relationship_blocks(output_dir, frame, embedder, settings, known)
        return np.concatenate(list(blocks))
    # community_reports: the mean of the member entities' vectors
    ent_ids, ent_vecs = _vectors_of(output_dir, "entities", known)
    members = frame.select("community").join(
        communities.select("community", "entity_ids"), on="community", how="left"
    )["entity_ids"]
    return mean_vectors(members, ent_ids, ent_vecs, dim)


def vector_mode(
    name: str, settings: EmbeddingSettings, communities: pl.DataFrame | None = None
) -> str:
    """How table `name`'s vectors are made: "text" (the model embeds each row's text) or the
    derived mode configured (content nodes: "text" too, some of them are embedded)."""
    return {
        "entities": settings.entity_vectors,
        "relationships": settings.relationship_vectors,
        "community_reports": settings.report_vectors if communities is not None else "text",
    }.get(name, "text")


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
    output_dir: str | Path,
    frame: pl.DataFrame,
    embedder: EmbedderLike,
    settings: EmbeddingSettings,
    known: Known | None = None,
) -> Iterator[np.ndarray]:
    """Derived relationship vectors (source + target entity, or their title parts under
    titles+units: pipeline.vectors.end_titles, + mean of its text units), BLOCK_ROWS rows at
    a time: only one block's temporaries exist at once."""
    if frame.height == 0:
        return iter(())
    units = _vectors_of(output_dir, "text_units", known)
    if settings.relationship_vectors == end_titles.MODE:
        ends = end_titles.end_title_vectors(output_dir, frame, embedder, settings, known)
    else:
        ends = _vectors_of(output_dir, "entities", known)
    return edge_blocks(frame, ends, units, embedder.dim, BLOCK_ROWS)


def node_vectors(
    output_dir: str | Path,
    nodes: pl.DataFrame,
    embedder: EmbedderLike,
    settings: EmbeddingSettings,
    text_units: pl.DataFrame | None = None,
    known: Known | None = None,
) -> np.ndarray:
    """(n, dim) content-node vectors (`_node_blocks`, whole)."""
    blocks = list(_node_blocks(output_dir, nodes, embedder, settings, text_units, known))
    return np.concatenate(blocks) if blocks else np.zeros((0, embedder.dim), dtype=np.float32)


def _node_blocks(
    output_dir: str | Path,
    nodes: pl.DataFrame,
    embedder: EmbedderLike,
    settings: EmbeddingSettings,
    text_units: pl.DataFrame | None = None,
    known: Known | None = None,
) -> Iterator[np.ndarray]:
    """Content-node vectors, BLOCK_ROWS rows at a time: PARAGRAPH/LIST_ITEM nodes derived
    from the text units holding them (units' `content_node_ids`, vectors from the text_units
    Lance table), other nodes (and prose held by no unit) embedded, in one call; everything
    embedded when node_vectors="text". A block at a time: a 151 MB file's 618k nodes were
    950 MB of vectors, held three times over while they were normalised."""
    dim, n = embedder.dim, nodes.height
    held = sp.csr_matrix((n, 0), dtype=np.float32)  # the units holding each derived node
    unit_vecs = np.zeros((0, dim), dtype=np.float32)
    if settings.node_vectors == "derived" and n:
        unit_ids, unit_vecs = _vectors_of(output_dir, "text_units", known)
        if unit_ids:
            held = incidence(node_units(output_dir, nodes, text_units), unit_ids)
    # a node with no unit's vector to average is embedded (all of them at once, as a node
    # whose mean is zero would be: never seen, but embedded in its block if it were)
    embed_rows = np.flatnonzero(np.diff(held.indptr) == 0) if held.shape[1] else np.arange(n)
    embedded = _embed_nodes(nodes, embed_rows, embedder)
    for at in range(0, n, BLOCK_ROWS):
        part = held[at : at + BLOCK_ROWS]
        block = (
            normalise(np.asarray(part @ unit_vecs))
            if held.shape[1]
            else np.zeros((part.shape[0], dim), dtype=np.float32)
        )
        ahead = np.searchsorted(embed_rows, [at, at + len(block)])
        rows = embed_rows[ahead[0] : ahead[1]]
        block[rows - at] = embedded[ahead[0] : ahead[1]]
        zero = np.flatnonzero(~block.any(axis=1))
        if len(zero):
            block[zero] = _embed_nodes(nodes, zero + at, embedder)
        yield block


def node_units(
    output_dir: str | Path, nodes: pl.DataFrame, text_units: pl.DataFrame | None
) -> pl.Series:
    """Per node, the ids of the text units holding it (sorted) when its type is derived
    (DERIVED_NODE_TYPES), else none."""
    if text_units is None:
        text_units = store.read_table(output_dir, "text_units", ["id", "content_node_ids"])
    holders = (
        text_units.select(pl.col("id").alias("unit"), pl.col("content_node_ids").alias("node"))
        .explode("node")
        .drop_nulls("node")
        .group_by("node")
        .agg(pl.col("unit").sort())
    )
    return (
        nodes.select(pl.col("id").alias("node"), "node_type")
        .join(holders, on="node", how="left", maintain_order="left")
        .with_columns(
            pl.when(pl.col("node_type").is_in(DERIVED_NODE_TYPES))
            .then(pl.col("unit"))
            .otherwise(pl.lit(None, dtype=pl.List(pl.Utf8)))
            .alias("unit")
        )["unit"]
        .fill_null([])
    )


def _embed_nodes(nodes: pl.DataFrame, rows: np.ndarray, embedder: EmbedderLike) -> np.ndarray:
    """The model's vectors of the nodes at `rows` (their text, else their description)."""
    if not len(rows):
        return np.zeros((0, embedder.dim), dtype=np.float32)
    vecs = embedder.embed(embedding_text("content_nodes", nodes[rows]))
    return np.asarray(vecs, dtype=np.float32).reshape(len(rows), embedder.dim)


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
    texts: pl.Series,
    vecs: np.ndarray,
    dim: int,
    model: str = "",
    created_at: datetime | None = None,
) -> pa.Table:
    """Table `name`'s rows with their vectors, as Arrow in the explicit vector schema; every
    row records the embedding `model` and when the table was made (`created_at`, UTC)."""
    schema = lance_schema(name, dim)
    n = len(texts)
    stamp = created_at or datetime.now(UTC)
    columns = {
        "text": texts.to_arrow(),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel(), pa.float32()), dim),
        "embedding_model": pa.array([model] * n, pa.string()),
        "created_at": pa.array([stamp] * n, schema.field("created_at").type),
    }
    own = [("id", pa.string()), *schemas.VECTOR_TABLES[name]]
    if frame.height:  # Arrow from polars: no Python objects
        rows = frame.select([col for col, _ in own]).to_arrow()
        columns.update({col: rows[col] for col, _ in own})
    else:
        columns.update({col: pa.array([], typ) for col, typ in own})
    return pa.Table.from_arrays([columns[f.name].cast(f.type) for f in schema], schema=schema)


def build_vector_table(
    output_dir: str | Path,
    name: str,
    frame: pl.DataFrame,
    embedder: EmbedderLike,
    settings: EmbeddingSettings | None = None,
    communities: pl.DataFrame | None = None,
    known: Known | None = None,
    vectors: np.ndarray | None = None,
) -> int:
    """Vectors for `frame` (rows of table `name`; `vectors` when already made) into Lance
    table `name`, each row with its whole rendering (pipeline.vectors.texts); returns the row
    count. Derived modes read the text_units (and entities) vectors from `known`, else from
    their Lance tables: build those first."""
    settings = settings or EmbeddingSettings()
    dim = embedder.dim
    model, created_at = model_label(embedder, settings), datetime.now(UTC)
    streamed = name == "relationships" and settings.relationship_vectors != "text"
    if vectors is None and streamed:
        # the largest table (501k rows at 40k documents): vectors made a block at a time,
        # never whole in memory
        blocks = _relationship_blocks(output_dir, frame, embedder, settings, known)
    elif vectors is None and name == "content_nodes":  # the same, for the nodes
        blocks = _node_blocks(output_dir, frame, embedder, settings, known=known)
    else:
        if vectors is None:
            vectors = compute_vectors(
                output_dir, name, frame, embedder, settings, communities, known
            )
        blocks = (vectors[at : at + BLOCK_ROWS] for at in range(0, len(vectors), BLOCK_ROWS))

    def batches() -> Iterator[pa.RecordBatch]:
        at = 0
        for vecs in blocks:
            part = frame.slice(at, len(vecs))
            texts = row_text(name, part)
            yield from vector_arrow(name, part, texts, vecs, dim, model, created_at).to_batches()
            at += len(vecs)

    lance_dir = store.resolve(output_dir) / store.LANCE_DIR
    cut = lance_write.FRAGMENT_TEXT_BYTES if name in CUT_BY_TEXT else None
    lance_write.write_whole(lance_dir, name, batches(), lance_schema(name, dim), text_bytes=cut)
    memory.release()  # the vectors and Arrow buffers of a large table
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
    known: Known = {}  # the entities' titles, for the relationships
    return {
        name: build_vector_table(output_dir, name, f, embedder, settings, communities, known)
        for name, f in frames.items()
    }


def read_vectors(output_dir: str | Path, name: str) -> tuple[list[str], np.ndarray]:
    """(ids, (n, dim) float32 matrix) of Lance table `name`; empty when the table is absent."""
    path = store.resolve(output_dir) / store.LANCE_DIR
    if not path.exists():
        return [], np.zeros((0, 0), dtype=np.float32)
    if (copy := vector_cache.load(path.parent, name)) is not None:
        return copy  # no lancedb import (pipeline.vectors.vector_copies)
    if (found := vector_cache.lance_blocks(path, name)) is None:
        return [], np.zeros((0, 0), dtype=np.float32)
    (n, dim), blocks = found
    ids: list[str] = []
    mat = np.empty((n, dim), dtype=np.float32)  # filled a block at a time: held once
    for block_ids, block in blocks:
        mat[len(ids) : len(ids) + len(block_ids)] = block
        ids += block_ids
    vector_cache.save(path.parent, name, ids, mat[: len(ids)])
    return ids, mat[: len(ids)]
