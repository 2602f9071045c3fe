"""Links between documents after an edit: only the links the edit can resolve differently
are resolved again (issue 49); the others keep the edge the base version resolved.

Why: resolving is ~50 us of Python per link (pipeline.structure.links), so a docs site of
40k pages with 20 links each (800k links) would pay ~40 s on every run for a one-page edit.

A link resolves through lookups keyed by strings: a path and the paths it may mean, the ends
of paths, a page or note name, an autorefs identifier, a label, a note uri (`TRACED`, the
corpus' tables), then the anchors of the document it found. Every run records, per link,
the keys it looked up (hits and misses: `trace`). A table's entry for a key depends only on
the documents that contribute that key (the corpus builds its tables document by document).
So a link keeps its edge when its own document is unchanged and no document the run added or
removed contributes a key it looked up; the document it found is then unchanged too (it
was found through a key it contributes), and with it the anchors looked up in it. The links
of added documents and those others are resolved again against the whole corpus; the
result equals resolving every link (tests/test_link_carry.py).

The edges and traces live in `SIDECAR` beside the table, a row per link in link order,
keyed by (document_id, ordinal: the link's place among its document's links).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline import schemas
from pipeline.storage import store
from pipeline.storage.files import atomic_write_with
from pipeline.storage.run_changes import RunChanges
from pipeline.structure.links import _LINK_KEYS as LINK_KEYS
from pipeline.structure.links import _Corpus, _resolve, link_of, structures
from pipeline.structure.model import DocStructure

SIDECAR = "structure_links.parquet"
SEP = "\x1f"  # between a table's name and a key in a trace
TRACED = ("by_path", "tails", "note_uri", "note_title", "page", "declared", "slugs", "objects")
# Past this share of the links to resolve again, all are resolved (no sidecar join, no trace
# check). Measured on a synthetic docs site (2,000 pages, 42k links, docs/incremental.md): a
# carried run costs ~0.2 s of CPU plus its share of a whole run's 1.1 s (every link stale:
# 1.12 s), so it stops paying near 0.8.
WHOLE_FRACTION = 0.8
EDGE_COLUMNS = schemas.STRUCTURE_EDGES.names
_SECTION_COLUMNS = ["id", "document_id", "parent_id", "component_type", "title", "uri", "metadata"]


class _Traced(dict):
    """A lookup table that notes in `log` every key looked up in it."""

    __slots__ = ("name", "log")

    def __init__(self, name: str, log: list[str], items: dict) -> None:
        super().__init__(items)
        self.name, self.log = name, log

    def get(self, key, default=None):
        self.log.append(self.name + SEP + key)
        return super().get(key, default)

    def __contains__(self, key) -> bool:
        self.log.append(self.name + SEP + key)
        return super().__contains__(key)

    def __getitem__(self, key):
        self.log.append(self.name + SEP + key)
        return super().__getitem__(key)


class TracingCorpus(_Corpus):
    """pipeline.structure.links' corpus, its lookups traced."""

    def __init__(self, docs: list[DocStructure]) -> None:
        super().__init__(docs)
        self.log: list[str] = []
        for name in TRACED:
            setattr(self, name, _Traced(name, self.log, getattr(self, name)))

    def keys(self) -> set[str]:
        """Every key of the traced tables (what these documents contribute)."""
        return {name + SEP + key for name in TRACED for key in dict.keys(getattr(self, name))}

    def resolve(self, src: DocStructure, link: dict[str, Any]) -> tuple[dict, list[str]]:
        """The link's edge row, and the keys it looked up."""
        self.log.clear()
        edge = _resolve(self, src, link)
        return edge, sorted(set(self.log))


@dataclass
class LinkRun:
    edges: pl.DataFrame  # REFERS_TO / REIFIES rows (schemas.STRUCTURE_EDGES), link order
    sidecar: pl.DataFrame  # document_id, ordinal, the edge columns, trace
    meta: dict = field(default_factory=dict)


def read_sidecar(version: Path | None) -> pl.DataFrame | None:
    path = Path(version) / SIDECAR if version is not None else None
    try:
        return pl.read_parquet(path) if path is not None and path.exists() else None
    except Exception:  # noqa: BLE001 - a damaged sidecar only costs the carry-over
        return None


def write_sidecar(folder: Path, sidecar: pl.DataFrame) -> None:
    atomic_write_with(Path(folder) / SIDECAR, sidecar.write_parquet)


def _changed_docs(
    changes: RunChanges, documents: pl.DataFrame
) -> tuple[dict[str, DocStructure], dict[str, DocStructure]]:
    """(added, removed) documents with their sections: today's, and the base's."""
    docs = changes.of("documents")
    now, then = [], []
    for shard in sorted(changes.shards):
        now.append(changes.run_shard("sections", shard, _SECTION_COLUMNS))
        then.append(changes.base_shard("sections", shard, _SECTION_COLUMNS))
    base_docs = pl.concat(
        [changes.base_shard("documents", s, ["id", "source_path", "title"]) for s in changes.shards]
        or [documents.clear()]
    )
    added = documents.filter(pl.col("id").is_in(list(docs.added)))
    removed = base_docs.filter(pl.col("id").is_in(list(docs.removed)))
    none = schemas.empty("sections").select(_SECTION_COLUMNS)
    secs = [pl.concat(f) if f else none for f in (now, then)]
    return structures(added, secs[0]), structures(removed, secs[1])


def _stale_rows(
    links: pl.DataFrame, base: pl.DataFrame, added: set[str], keys: set[str]
) -> tuple[pl.DataFrame, pl.Series]:
    """(links joined with the base's rows, whether each must be resolved again)."""
    joined = links.join(
        base.rename({c: f"base_{c}" for c in base.columns if c not in ("document_id", "ordinal")}),
        on=["document_id", "ordinal"],
        how="left",
        maintain_order="left",
    )
    hit = (
        joined.select("row", "base_trace")
        .explode("base_trace")
        .filter(pl.col("base_trace").is_in(list(keys)))["row"]
        .unique()
    )
    stale = (
        pl.col("document_id").is_in(list(added))
        | pl.col("base_trace").is_null()
        | pl.col("row").is_in(hit.implode())
    )
    return joined, joined.select(stale.alias("stale")).to_series()


def link_edges(folder: Path, changes: RunChanges | None) -> LinkRun:
    """Every link of `folder`'s document_links resolved, carried over from `changes.base`
    where no change can alter it (see the module docstring)."""
    links = store.read_table(folder, "document_links")
    links = links.with_row_index("row").with_columns(
        ordinal=pl.int_range(pl.len(), dtype=pl.Int64).over("document_id")
    )
    documents = store.read_table(folder, "documents", ["id", "source_path", "title"])
    reason = changes.whole if changes is not None else "no base version"
    base = read_sidecar(changes.base) if changes is not None and reason is None else None
    if reason is None and base is None:
        reason = f"the base version has no {SIDECAR}"
    joined, stale = links, pl.Series("stale", [True] * links.height, dtype=pl.Boolean)
    if reason is None and links.height:
        assert changes is not None and base is not None
        added, removed = _changed_docs(changes, documents)
        keys = set().union(*(TracingCorpus(list(d.values())).keys() for d in (added, removed)))
        joined, stale = _stale_rows(links, base, set(added), keys)
        if stale.sum() > WHOLE_FRACTION * links.height:
            reason = f"{stale.sum()} of {links.height} links to resolve again"
            stale = pl.Series("stale", [True] * links.height, dtype=pl.Boolean)
    todo = links.filter(stale)
    rows, keys, ends, order = [], [], [0], []
    if todo.height:
        docs = structures(documents, store.read_table(folder, "sections", _SECTION_COLUMNS))
        corpus = TracingCorpus(list(docs.values()))
        for row in todo.select("row", "document_id", *LINK_KEYS).iter_rows(named=True):
            src = docs.get(row["document_id"])
            if src is not None:  # a document without sections has no links resolved
                edge, trace = corpus.resolve(src, link_of(row))
                rows.append(edge)
                keys += trace
                ends.append(len(keys))
                order.append(row["row"])
    traces = pa.ListArray.from_arrays(pa.array(ends, pa.int32()), pa.array(keys, pa.string()))
    fresh = pl.from_arrow(
        schemas.pa.Table.from_pylist(rows, schema=schemas.STRUCTURE_EDGES)
        .append_column("trace", traces)
        .append_column("row", pa.array(order, pa.uint32()))
    )
    fresh = fresh.join(  # type: ignore[union-attr]
        todo.select("row", "document_id", "ordinal"), on="row", how="left", maintain_order="left"
    ).select("row", "document_id", "ordinal", *EDGE_COLUMNS, "trace")
    kept = joined.filter(~stale)
    if kept.height:
        kept = kept.select(
            "row",
            "document_id",
            "ordinal",
            *[pl.col(f"base_{c}").alias(c) for c in [*EDGE_COLUMNS, "trace"]],
        )
    sidecar = pl.concat([fresh, kept] if kept.height else [fresh]).sort("row").drop("row")
    meta = {
        "rows_recomputed": fresh.height,
        "rows_carried": kept.height,
        "incremental": "whole" if reason else "carried",
        "incremental_reason": reason or "links of changed documents or keys",
    }
    edges = pl.from_arrow(schemas.conform(sidecar.select(EDGE_COLUMNS), "structure_edges"))
    return LinkRun(edges, sidecar, meta)  # type: ignore[arg-type]
