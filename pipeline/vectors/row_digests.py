"""Per-row digests of the Lance vector tables: what a row's stored columns and its vector
are made from, so a run rewrites only the rows whose digests changed (issue 49).

Two 64-bit digests per row, kept beside the Lance table (`vector_digests/<table>.parquet`
in the version folder, a sidecar: the Lance schema, which GraphRAG reads, is unchanged):

- `own`: the row's stored columns (its rendering's inputs, its extra columns);
- `vec`: `own` and everything its vector is made from, transitively: a text unit's text and
  token count (its vector is the embedding cache's); a content node's holders' digests; an
  entity's title, type, frequency (whether its title is embedded) and its units' digests; a
  relationship's units' digests and its end entities' digests (relationship_vectors
  "context"), or their title parts' (`title_digests`, "titles+units"), or nothing more
  ("text": its rendering is `own`); a report's member entities' digests.

A row whose `vec` changed (it holds `own`) is rewritten (pipeline.vectors.carry_over); `own`
tells a changed text from a changed vector, for whoever reads the sidecar. Everything else
that decides a vector (the model, the vector modes, the digest's own code) is one digest
per table, `settings_digest`: when it differs, the table is built whole.

Digests are polars hashes (fast over 500k rows; stable within a polars version, which the
settings digest therefore holds).
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import schemas
from pipeline.config import EmbeddingSettings
from pipeline.storage import store
from pipeline.storage.files import atomic_write_with

DIGESTS_DIR = "vector_digests"
# Bump when what a digest covers changes: every table is then built whole once.
DIGEST_FORMAT = "3"  # 2: relationships by their vector mode (titles+units); 3: `_combined` a sum
_SEED = 49
# The title digests of the entities (`title_digests`): made, never recorded.
ENTITY_TITLES = "entity_titles"
_SETTINGS_KEY = b"docgraph.settings"
# The columns a row's rendering (pipeline.vectors.texts.row_text) is made from.
RENDERED = {
    "text_units": ["text"],
    "entities": ["title", "type", "description"],
    "relationships": ["source", "target", "description"],
    "community_reports": ["full_content", "title", "summary"],
    "content_nodes": ["text", "description"],
}
_VECTOR_FIELDS = (
    "model",
    "entity_vectors",
    "title_vectors",
    "title_min_units",
    "relationship_vectors",
    "node_vectors",
    "report_vectors",
)


def settings_digest(model: str, dim: int, settings: EmbeddingSettings, titles: str) -> str:
    """What every vector of the tables depends on besides its rows: the model (its label and
    width), the vector modes, where title vectors come from (`titles`), and the code."""
    try:
        code = metadata.version("docgraph")
    except metadata.PackageNotFoundError:
        code = "unknown"
    parts = {f: getattr(settings, f) for f in _VECTOR_FIELDS}
    parts |= {"label": model, "dim": dim, "titles": titles, "format": DIGEST_FORMAT}
    parts |= {"polars": pl.__version__, "docgraph": code}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _hash(*columns: pl.Expr | str) -> pl.Expr:
    return pl.struct(*columns).hash(seed=_SEED)


def _combined(frame: pl.DataFrame, lists: str, digests: pl.DataFrame) -> pl.Series:
    """Per row of `frame`, one digest of the `vec` digests of the ids its list column
    `lists` names, in any order, as often as named (ids without a digest count nothing):
    their sum, wrapping. The ids are matched as Categorical codes (the process's global
    categories), never as strings: a 490k-row relationships table names 5.4M unit ids,
    and exploding, joining and sorting them as strings took 0.35-0.5 s at 40k documents."""
    items = frame[lists].cast(pl.List(pl.Categorical))
    lengths = items.list.len().fill_null(0).to_numpy()
    flat = items.explode(empty_as_null=False, keep_nulls=False).to_physical()
    codes = flat.fill_null(0).to_numpy()
    known = digests.filter(pl.col("vec").is_not_null())
    ids = known["id"].cast(pl.Categorical).to_physical().to_numpy()
    by_code = np.zeros(int(max(codes.max(initial=0), ids.max(initial=0))) + 1, np.uint64)
    by_code[ids] = known["vec"].to_numpy()
    picked = by_code[codes]
    if flat.null_count():  # a null in a list names nothing
        picked[flat.is_null().to_numpy()] = 0
    sums = np.concatenate([np.zeros(1, np.uint64), np.cumsum(picked, dtype=np.uint64)])
    ends = np.cumsum(lengths)
    return pl.Series(sums[ends] - sums[ends - lengths], dtype=pl.UInt64)


def _own(name: str, frame: pl.DataFrame) -> pl.Expr:
    extras = [c for c, _ in schemas.VECTOR_TABLES[name]]
    return _hash(*dict.fromkeys(["id", *RENDERED[name], *extras]))


def table_digests(
    name: str,
    frame: pl.DataFrame,
    known: dict[str, pl.DataFrame],
    holders: pl.DataFrame | None = None,
    communities: pl.DataFrame | None = None,
    relationships: str = "context",
) -> pl.DataFrame:
    """(id, own, vec) of every row of table `name` (its INPUT_COLUMNS in `frame`), from the
    digests already made of the tables its vectors come from (`known`: text_units for
    nodes, entities and relationships; entities for relationships ("context"; their
    `title_digests` as entity_titles under "titles+units") and reports;
    `relationships`: the relationships' vector mode).
    `holders`: text_units' (id, content_node_ids), for the nodes; `communities`:
    (community, entity_ids), for the reports."""
    if frame.height == 0:
        return pl.DataFrame(schema={"id": pl.Utf8, "own": pl.UInt64, "vec": pl.UInt64})
    own = frame.select("id", _own(name, frame).alias("own"))
    if name == "text_units":
        inputs = [frame["n_tokens"]]
    elif name == "content_nodes":
        held = _held_units(frame, holders)
        inputs = [frame["node_type"], _combined(held, "units", known["text_units"])]
    elif name == "entities":
        units = _combined(frame, "text_unit_ids", known["text_units"])
        inputs = [frame["frequency"], units]
    elif name == "relationships" and relationships == "text":
        inputs = []
    elif name == "relationships":
        ends = known["entities" if relationships == "context" else ENTITY_TITLES]
        inputs = [
            _combined(frame, "text_unit_ids", known["text_units"]),
            _looked_up(frame["source_id"], ends),
            _looked_up(frame["target_id"], ends),
        ]
    else:  # community_reports: their communities' member entities
        groups = communities
        if groups is None:
            groups = pl.DataFrame(schema={"community": pl.Int64, "entity_ids": pl.List(pl.Utf8)})
        members = frame.select("id", "community").join(
            groups.select("community", "entity_ids"),
            on="community",
            how="left",
            maintain_order="left",
        )
        inputs = [_combined(members, "entity_ids", known["entities"])]
    parts = pl.DataFrame(
        [own["own"].alias("own")] + [s.alias(f"_{i}") for i, s in enumerate(inputs)]
    )
    vec = parts.select(_hash(*parts.columns).alias("vec"))["vec"]
    return own.with_columns(vec)


def title_digests(entities: pl.DataFrame, titled: pl.Series) -> pl.DataFrame:
    """(id, vec) of entities: a digest of the title where the entity's vector has a title
    part a relationship takes (`titled`, pipeline.vectors.end_titles.titled_rows), else
    null; what a titles+units relationship takes from its ends."""
    title = pl.when(pl.lit(titled)).then(_hash("title")).otherwise(None)
    return entities.select("id", title.cast(pl.UInt64).alias("vec"))


def _looked_up(keys: pl.Series, digests: pl.DataFrame) -> pl.Series:
    """The `vec` digest of each key's row of `digests` (null: none)."""
    found = keys.to_frame("id").join(digests, on="id", how="left", maintain_order="left")
    return found["vec"]


def _held_units(nodes: pl.DataFrame, holders: pl.DataFrame | None) -> pl.DataFrame:
    """Per node, the ids of the text units holding it (`units`)."""
    if holders is None or holders.height == 0:
        return nodes.select("id", pl.lit([], dtype=pl.List(pl.Utf8)).alias("units"))
    held = (
        holders.select(pl.col("id").alias("unit"), pl.col("content_node_ids").alias("id"))
        .explode("id")
        .drop_nulls("id")
        .group_by("id")
        .agg(pl.col("unit").alias("units"))
    )
    return (
        nodes.select("id")
        .join(held, on="id", how="left", maintain_order="left")
        .with_columns(pl.col("units").fill_null([]))
    )


def digest_path(root: str | Path, name: str) -> Path:
    return Path(root) / DIGESTS_DIR / f"{name}.parquet"


def read_digests(root: str | Path, name: str, settings: str) -> pl.DataFrame | None:
    """The digests of Lance table `name` of folder `root` as written with `settings` (None
    when absent, damaged or made under other settings)."""
    path = digest_path(store.resolve(root), name)
    try:
        meta = pq.read_schema(path).metadata or {}
        if meta.get(_SETTINGS_KEY, b"").decode() != settings:
            return None
        return pl.read_parquet(path)
    except (OSError, ValueError, pa.ArrowInvalid):
        return None


def write_digests(root: str | Path, name: str, digests: pl.DataFrame, settings: str) -> None:
    """Record the digests of the rows Lance table `name` now holds (atomically)."""
    table = digests.select("id", "own", "vec").to_arrow()
    table = table.replace_schema_metadata({_SETTINGS_KEY: settings.encode()})
    path = digest_path(root, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_with(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def drop_digests(root: str | Path, name: str) -> None:
    """Forget table `name`'s digests before its Lance table changes: a run that fails
    half-way then leaves a table no digest describes, which the next run builds whole."""
    digest_path(root, name).unlink(missing_ok=True)
