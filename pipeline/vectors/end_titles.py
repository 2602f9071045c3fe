"""The title parts of relationships' end entities: what a relationship's vector takes from its
entities under `embedding.relationship_vectors: titles+units`.

Why: under "context" a relationship's vector holds its two end entities' whole vectors, and
an entity's vector holds the mean of all its text units' vectors, so one edited document
that mentions a hub entity changes the vector of every relationship of that hub (a one-file
edit at 10k documents: 1,306 of 130,678 relationship rows, spread over every Lance fragment,
so the incremental vector step rewrote the whole table). The title part of an entity's
vector (its static or embedded title, pipeline.vectors.static_titles) changes only with its
title (and with whether it has one: type and frequency, pipeline.vectors.derive_vectors.
title_embedded), so a relationship made of its ends' title parts and its own text units
changes only when an edit touches the relationship itself.

An end has a title part exactly where its name+context entity vector has one (no title part
under entity_vectors "text"): the same vectors, made once per step — the entities step's
titles are kept in `known` under TITLES and only the ends it did not make (an incremental
run's carried entities) are made here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from pipeline.config import EmbeddingSettings
from pipeline.storage import store
from pipeline.vectors.derive_vectors import embedded_titles, title_embedded
from pipeline.vectors.static_titles import title_vectors

# The key of the entities' title vectors in a step's `known` vectors (pipeline.vectors.lance).
TITLES = "entity_titles"
MODE = "titles+units"
_COLUMNS = ["id", "title", "type", "frequency"]


def titled(settings: EmbeddingSettings) -> bool:
    """Whether entity vectors have title parts (name+context) for relationships to use."""
    return settings.relationship_vectors == MODE and settings.entity_vectors == "name+context"


def titled_rows(entities: pl.DataFrame, settings: EmbeddingSettings) -> pl.Series:
    """Per entity row, whether its vector has a title part a relationship takes."""
    mask = np.zeros(entities.height, dtype=bool)
    if titled(settings):
        mask[title_embedded(entities, settings.title_min_units)] = True
    return pl.Series(mask)


def end_title_vectors(
    output_dir: str | Path,
    relationships: pl.DataFrame,
    embedder,
    settings: EmbeddingSettings,
    known: dict | None = None,
) -> tuple[list[str], np.ndarray]:
    """(entity ids, their title vectors) covering every end of `relationships` that has a
    title part (ends without one are left out: `lookup` gives them zeros). The entities are
    the folder's table (none: the titles made this step alone); titles already made this
    step (`known[TITLES]`) are reused."""
    dim = embedder.dim
    if not titled(settings) or relationships.height == 0:
        return [], np.zeros((0, dim), dtype=np.float32)
    ends = pl.concat(
        [relationships["source_id"].cast(pl.Utf8), relationships["target_id"].cast(pl.Utf8)]
    ).unique()
    have_ids, have = (known or {}).get(TITLES, ([], np.zeros((0, dim), dtype=np.float32)))
    files = store.table_files(output_dir, "entities")
    if not files:  # vectors made from frames alone (no source table): this step's titles
        return have_ids, have
    entities = (
        pl.scan_parquet(files)
        .select(_COLUMNS)
        .filter(pl.col("id").is_in(ends.implode()))
        .sort("id")
        .collect()
    )
    rows, titles = embedded_titles(entities, settings.title_min_units)
    ids = entities["id"].gather(rows)
    missing = ~ids.is_in(pl.Series(have_ids, dtype=pl.Utf8).implode()).to_numpy()
    if not missing.any():
        return have_ids, have
    made = title_vectors([t for t, m in zip(titles, missing, strict=True) if m], embedder, settings)
    made = np.asarray(made, dtype=np.float32).reshape(-1, dim)
    return list(have_ids) + ids.filter(pl.Series(missing)).to_list(), np.concatenate([have, made])
