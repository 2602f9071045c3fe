"""Vector arithmetic of derived vectors: means of member vectors, lookups by id, which
entity titles are worth embedding. Pure numpy/polars, no table I/O (pipeline.vectors.lance
reads the vectors and builds the tables from these)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import polars as pl
import scipy.sparse as sp


def normalise(mat: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero), as float32."""
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    # no copy of a float32 quotient: a 618k-node table's vectors are 950 MB each
    return (mat / np.where(norms == 0, 1.0, norms)).astype(np.float32, copy=False)


# Member ids paired with their rows at a time (the ids exploded as strings, then joined):
# a 151 MB file's 16k entities list 4.3M units, +0.3 GB at once.
MEAN_PAIRS = 1_000_000


def mean_vectors(members: pl.Series, ids: list[str], vectors: np.ndarray, dim: int) -> np.ndarray:
    """Row i = normalised mean of `vectors` of the ids listed in members[i] (a list column);
    a sparse product per span of rows listing about MEAN_PAIRS ids, no per-row loop (a row's
    sum is over its ids in `ids` order, whatever the span). Unknown ids are ignored; no
    member -> zeros."""
    n = len(members)
    out = np.zeros((n, dim), dtype=np.float32)
    if n == 0 or len(ids) == 0:
        return out
    listed = members.list.len().fill_null(0).cum_sum().to_numpy()
    at = 0
    while at < n:
        end = max(at + 1, int(np.searchsorted(listed, listed[at] + MEAN_PAIRS, side="right")))
        part = members.slice(at, end - at)
        out[at:end] = normalise(np.asarray(incidence(part, ids) @ vectors))
        at = end
    return out


def incidence(members: pl.Series, ids: list[str]) -> sp.csr_matrix:
    """(len(members), len(ids)) matrix: row i counts the ids listed in members[i]. Its rows
    sliced are the rows of the whole (`mean_vectors` a block of rows at a time).

    A row's entries are stored in the order of their ids' strings, not of their places in
    `ids`: a product sums them in that order, so a derived vector is the same to the bit
    whatever order the vectors it is made from were read in (a run that carries rows over
    holds them in another order than a whole build: pipeline.vectors.carry_over)."""
    pairs = (
        pl.DataFrame({"members": members})
        .with_row_index("row")
        .explode("members")
        .with_columns(pl.col("members").cast(pl.Utf8))  # Categorical ids: their strings
        .join(
            pl.DataFrame({"members": ids}).with_row_index("col"),
            on="members",
            how="inner",
        )
        .group_by("row", "members", "col")
        .agg(pl.len().cast(pl.Float32).alias("n"))
        .sort("row", "members")
    )
    indptr = np.zeros(len(members) + 1, dtype=np.int64)
    np.cumsum(np.bincount(pairs["row"].to_numpy(), minlength=len(members)), out=indptr[1:])
    return sp.csr_matrix(
        (pairs["n"].to_numpy(), pairs["col"].to_numpy(), indptr),
        shape=(len(members), len(ids)),
    )


def lookup(keys: pl.Series, ids: list[str], vectors: np.ndarray, dim: int) -> np.ndarray:
    """vectors[row of key] per key; zeros where the key is unknown."""
    out = np.zeros((len(keys), dim), dtype=np.float32)
    if not len(ids):
        return out
    rows = (
        pl.DataFrame({"k": keys})
        .with_row_index("at")
        .join(pl.DataFrame({"k": ids}).with_row_index("row"), on="k", how="inner")
    )
    out[rows["at"].to_numpy()] = vectors[rows["row"].to_numpy()]
    return out


def edge_blocks(
    edges: pl.DataFrame, ends: tuple, units: tuple, dim: int, rows: int
) -> Iterator[np.ndarray]:
    """Per edge (source_id, target_id, text_unit_ids), the normalised sum of its ends'
    vectors (`ends`: ids, vectors; zeros where unknown) and the mean of its units' (`units`),
    `rows` edges at a time."""
    (end_ids, end_vecs), (unit_ids, unit_vecs) = ends, units
    for at in range(0, edges.height, rows):
        part = edges.slice(at, rows)
        block = lookup(part["source_id"], end_ids, end_vecs, dim)
        block += lookup(part["target_id"], end_ids, end_vecs, dim)
        block += mean_vectors(part["text_unit_ids"], unit_ids, unit_vecs, dim)
        yield normalise(block)


# Titles that say nothing an embedding can use ("1911", "12%"): context vector only.
NUMERIC_TYPES = ("DATE", "TIME", "NUMBER", "PERCENT", "MONEY", "ORDINAL", "AGE")


def title_embedded(entities: pl.DataFrame, min_units: int = 1) -> np.ndarray:
    """Rows whose title is embedded: named entities seen in `min_units` text units or more,
    and keyphrases seen in 2+ (a keyphrase of one unit adds little to that unit's own
    vector). Saves ~30% of the title embeddings on MuSiQue, where titles are the
    second-largest embedding cost; `min_units` 2 saves ~80% (embedding.title_min_units)."""
    keep = (
        ~pl.col("type").is_in(NUMERIC_TYPES)
        & ((pl.col("type") != "CONCEPT") | (pl.col("frequency") > 1))
        & (pl.col("frequency") >= min_units)
    )
    return entities.select(keep.fill_null(True).arg_true()).to_series().to_numpy()


def embedded_titles(entities: pl.DataFrame, min_units: int = 1) -> tuple[np.ndarray, list[str]]:
    """The rows of `title_embedded` and their titles: what name+context entity vectors embed."""
    rows = title_embedded(entities, min_units)
    return rows, entities["title"].fill_null("").gather(rows).to_list()
