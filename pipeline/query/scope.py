"""Index tables restricted to the documents of some publications (`--publication`).

The restriction is applied where every mode reads its tables (IndexTables.table), so no mode
needs to know about it (query/index.py's ScopedIndex is a GraphIndex with this scope): tables
of documents (text units, sections, content nodes, ...) keep the rows of the publications'
documents; entities, relationships and communities keep only the rows that occur in those
documents' text units, with their `text_unit_ids` cut to them; community reports keep the
communities kept. Vectors follow, as they are aligned to those tables by id. Flow search
reads entities and relationships by Parquet row number (its DuckDB store), so the scoped
index hands it a store built over the scoped rows.
"""

from __future__ import annotations

import tempfile
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import schemas
from pipeline.config import Settings
from pipeline.query.result import SearchResult
from pipeline.query.tables import IndexTables
from pipeline.storage import store

# Tables whose rows belong to the text units listed in their `text_unit_ids`.
_BY_UNITS = ("entities", "relationships", "communities")


class PublicationScope(IndexTables):
    """Tables that hold only what the given publications' documents hold (a mixin: the
    ScopedIndex of query/index.py puts it before GraphIndex, so `table` here reads through
    the unscoped one)."""

    def __init__(
        self,
        root: Path,
        settings: Settings,
        embedder: Any,
        llm: Any,
        llm_fallback: bool,
        publication_ids: list[str],
    ):
        super().__init__(root, settings, embedder, llm, llm_fallback)
        ids = [str(p).strip() for p in publication_ids if str(p).strip()]
        if not ids:
            raise ValueError("no publication id given")
        self.publication_ids = sorted(set(ids))
        self._check_ids()

    def _reopen(self) -> Any:
        return type(self)(
            self.output_root,
            self.settings,
            self._embedder,
            self.llm,
            self.llm_fallback,
            self.publication_ids,
        )

    def _check_ids(self) -> None:
        known = set(self.scope_documents["publication_id"].drop_nulls().to_list())
        known |= set(IndexTables.table(self, "publications", ["id"])["id"].to_list())
        unknown = [p for p in self.publication_ids if p not in known]
        if unknown:
            shown = ", ".join(sorted(known)[:20]) or "none (the index has no publications manifest)"
            raise ValueError(f"unknown publication id {', '.join(unknown)}; known: {shown}")

    @cached_property
    def scope_documents(self) -> pl.DataFrame:
        """id and publication_id of every document of the index (unscoped)."""
        try:
            return IndexTables.table(self, "documents", ["id", "publication_id"])
        except pl.exceptions.ColumnNotFoundError:  # built before the publications manifest
            ids = IndexTables.table(self, "documents", ["id"])
            return ids.with_columns(publication_id=pl.lit(None, dtype=pl.Utf8))

    @cached_property
    def document_ids(self) -> pl.Series:
        """Ids of the documents in scope."""
        docs = self.scope_documents
        return docs.filter(pl.col("publication_id").is_in(self.publication_ids))["id"]

    @cached_property
    def unit_ids(self) -> pl.Series:
        """Ids of the text units in scope."""
        units = IndexTables.table(self, "text_units", ["id", "document_id"])
        return units.filter(pl.col("document_id").is_in(self.document_ids.implode()))["id"]

    def table(self, name: str, columns: list[str] | None = None) -> pl.DataFrame:
        schema = schemas.TABLES.get(name)
        names = schema.names if schema is not None else []
        key = "id" if name == "documents" else "document_id" if "document_id" in names else None
        if name in _BY_UNITS:
            key = "text_unit_ids"
        elif name == "community_reports":
            key = "community"
        if key is None:
            return super().table(name, columns)
        wanted = columns if columns is None or key in columns else [*columns, key]
        frame = super().table(name, wanted)
        if key == "id" or key == "document_id":
            frame = frame.filter(pl.col(key).is_in(self.document_ids.implode()))
        elif key == "text_unit_ids":
            in_scope = pl.element().is_in(self.unit_ids.implode())
            frame = frame.with_columns(pl.col(key).list.eval(pl.element().filter(in_scope)))
            frame = frame.filter(pl.col(key).list.len() > 0)
        else:
            kept = self.table("communities", ["community"])["community"]
            frame = frame.filter(pl.col("community").is_in(kept.implode()))
        return frame if columns is None else frame.select(columns)

    def empty_result(self, query: str, mode: str) -> SearchResult:
        result = super().empty_result(query, mode)
        result.answer = (
            f"The documents of publication {', '.join(self.publication_ids)} hold no text units "
            "in this index, so there is nothing to search."
        )
        return result

    @cached_property
    def _flow_store(self) -> Any:
        """Flow search's store over the scoped entities and relationships (flow/duckdb_store.py's
        flow_store reads it from this attribute): its rows must be the rows of `entities` here."""
        from pipeline.query.flow.duckdb_store import FlowStore

        ents = self.entities
        with tempfile.TemporaryDirectory(prefix="docgraph-scope-") as tmp:
            # the store copies the two tables into DuckDB: the files are not needed after
            store.write_table(tmp, "entities", ents)
            store.write_table(tmp, "relationships", self.relationships)
            aliases = ents["aliases"].to_list() if "aliases" in ents.columns else None
            return FlowStore(tmp, ents["title"].to_list(), aliases)
