"""Vector arithmetic of derived vectors: means of member vectors, lookups by id, which
entity titles are worth embedding. Pure numpy/polars, no table I/O (pipeline.vectors.lance
reads the vectors and builds the tables from these)."""

from __future__ import annotations

import numpy as np
import polars as pl
import scipy.sparse as sp


def normalise(mat: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero), as float32."""
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
    return normalise(np.asarray(incidence @ vectors))


def lookup(keys: pl.Series, ids: list[str], vectors: np.ndarray, dim: int) -> np.ndarray:
    """vectors[row of key] per key; zeros where the key is unknown."""
    out = np.zeros((len(keys), dim), dtype=np.float32)
    rows = (
        pl.DataFrame({"k": keys})
        .with_row_index("at")
        .join(pl.DataFrame({"k": ids}).with_row_index("row"), on="k", how="inner")
    )
    out[rows["at"].to_numpy()] = vectors[rows["row"].to_numpy()]
    return out


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
