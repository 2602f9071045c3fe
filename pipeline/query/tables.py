"""IndexTables: the read-only view of one index version that every search mode reads.

What the modes share and never change: the Parquet tables (read lazily, only what a mode
needs), the Lance tables' vectors loaded once into numpy matrices aligned with those tables'
rows (search is an exact cosine matmul, ~6 ms at 100k x 384 against ~140 ms for Lance's
brute force; Lance stays the store and the full-text engine), the text units' BM25 index
and their hybrid relevance (pipeline/lexical), id -> row lookups, the
entity/unit/relationship/report incidences, the name lookups, the query embedder and the LLM
client. Modes take this view; `GraphIndex` (query/index.py) adds opening, version
following and one method per mode on top, so no mode imports the facade.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from pipeline.config import Settings
from pipeline.lexical.analysis import language
from pipeline.lexical.bm25 import LexicalIndex, index_dir
from pipeline.lexical.fusion import hybrid
from pipeline.query.names import NameMatch, greedy_match, key_index
from pipeline.query.ppr import UnitEntityGraph
from pipeline.query.result import SearchResult
from pipeline.storage import store
from pipeline.vectors import lance as vectors
from pipeline.vectors.embed import Embedder
from pipeline.vectors.embed_onnx import query_embedder

QUERY_VECTOR_CACHE = 64  # query vectors kept (see IndexTables.embed_query)


class IndexTables:
    """Tables, vectors and lookups of one published version of a docgraph output folder.

    It reads one version (store.resolve), so every table and vector it sees belongs to the
    same run. Everything is loaded on first use and cached on the instance."""

    def __init__(
        self,
        root: Path,
        settings: Settings,
        embedder: Embedder | None = None,
        llm=None,
        llm_fallback: bool = False,
    ):
        self.output_root = Path(root)
        self._stamp = store.manifest_stamp(self.output_root)
        manifest = store.read_manifest(self.output_root)
        self.version: str | None = manifest["version"] if manifest else None
        self.root = store.resolve(self.output_root)  # the version folder read
        self.settings = settings
        self._embedder = embedder
        self._query_vectors: dict[str, np.ndarray] = {}
        # LLM mode (settings.llm.enabled, or a client given): answers are written by the LLM
        # over the same retrieved context; retrieval itself is identical to offline. A failed
        # answer raises LlmAnswerError unless `llm_fallback` keeps the extractive one (said in
        # result.fallback). No server (connection refused) fails at once, without retries.
        if llm is None and settings.llm.enabled:
            from pipeline.llm.client import LlmClient

            llm = LlmClient(settings.llm, self.output_root / "cache" / "llm", retry_refused=False)
        self.llm = llm
        self.llm_fallback = llm_fallback

    # ---- tables -------------------------------------------------------------------------

    def table(self, name: str, columns: list[str] | None = None) -> pl.DataFrame:
        if not self.root.is_dir():  # pruned (storage.keep_versions) while this index read it
            raise FileNotFoundError(
                f"index version {self.version} of {self.output_root} was deleted by a newer "
                "run: search again (it runs on the newest version)"
            )
        return store.read_table(self.root, name, columns)

    @cached_property
    def text_units(self) -> pl.DataFrame:
        return self.table("text_units")

    @cached_property
    def documents(self) -> pl.DataFrame:
        """id, title, source_path, publication_id and publication_title of every document
        (the publication columns null in an index built before the publications manifest)."""
        try:
            docs = self.table("documents", ["id", "title", "source_path", "publication_id"])
        except pl.exceptions.ColumnNotFoundError:
            docs = self.table("documents", ["id", "title", "source_path"])
            docs = docs.with_columns(publication_id=pl.lit(None, dtype=pl.Utf8))
        titles = self.table("publications", ["id", "title"]).rename(
            {"id": "publication_id", "title": "publication_title"}
        )
        return docs.join(titles, on="publication_id", how="left", maintain_order="left")

    @cached_property
    def entities(self) -> pl.DataFrame:
        return self.table("entities")

    @cached_property
    def relationships(self) -> pl.DataFrame:
        return self.table("relationships")

    @cached_property
    def communities(self) -> pl.DataFrame:
        return self.table("communities")

    @cached_property
    def community_reports(self) -> pl.DataFrame:
        return self.table("community_reports")

    @property
    def is_empty(self) -> bool:
        return self.text_units.height == 0

    # ---- vectors ------------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = query_embedder(self.settings.embedding)  # ONNX when exported
        return self._embedder

    def embed_query(self, query: str) -> np.ndarray:
        """The query's vector; the last few are kept, so running several modes on one
        question (a notebook, a benchmark) embeds it once."""
        vec = self._query_vectors.pop(query, None)
        if vec is None:
            vec = self.embedder.embed([query])[0]
            vec.setflags(write=False)
        self._query_vectors[query] = vec  # most recent last
        while len(self._query_vectors) > QUERY_VECTOR_CACHE:
            del self._query_vectors[next(iter(self._query_vectors))]
        return vec

    def _aligned_vectors(self, name: str, frame: pl.DataFrame) -> np.ndarray:
        """Lance table `name`'s vectors in `frame`'s row order (zeros where a row has none)."""
        ids, mat = vectors.read_vectors(self.root, name)
        dim = mat.shape[1] if mat.size else self.embedder.dim
        out = np.zeros((frame.height, dim), dtype=np.float32)
        if not ids or frame.height == 0:
            return out
        pos = (
            frame.select("id")
            .with_row_index("row")
            .join(
                pl.DataFrame({"id": ids, "vi": np.arange(len(ids), dtype=np.int64)}).unique(
                    "id", keep="first"
                ),
                on="id",
                how="inner",
            )
        )
        out[pos["row"].to_numpy()] = mat[pos["vi"].to_numpy()]
        return out

    @cached_property
    def unit_vectors(self) -> np.ndarray:
        return self._aligned_vectors("text_units", self.text_units)

    @cached_property
    def entity_vectors(self) -> np.ndarray:
        return self._aligned_vectors("entities", self.entities)

    @cached_property
    def report_vectors(self) -> np.ndarray:
        return self._aligned_vectors("community_reports", self.community_reports)

    @cached_property
    def lexical_units(self) -> tuple[LexicalIndex, np.ndarray] | None:
        """The BM25 index of the text units and, per text_units row, its row in that index
        (-1: none); None for an index written before the lexical side."""
        lex = LexicalIndex.load(index_dir(self.root, "text_units"))
        return None if lex is None else (lex, lex.rows_of(self.text_units["id"]))

    def lexical_scores(self, query: str) -> np.ndarray | None:
        """BM25 score of every text unit (text_units row order) for the query, or None."""
        return (
            None
            if self.lexical_units is None
            else self.lexical_units[0].scores(query, self.lexical_units[1])
        )

    def dense_reads(self, query: str) -> bool:
        """Whether the embedding model reads the query's language (embedding.languages). When
        it does not (Russian questions and the English packaged model), its cosines are noise:
        units rank by BM25 alone and the modes seed on names and units, not on vectors."""
        return self.settings.embedding.reads(language(query))

    def unit_relevance(self, query: str) -> np.ndarray:
        """Every text unit's relevance to the query (text_units row order): the dense cosine
        mixed with BM25 by `query.lexical_weight` (pipeline/lexical/fusion.py), BM25 alone
        (on the cosine's scale) where the model does not read the query; float64."""
        dense = self.similarities(self.unit_vectors, self.embed_query(query))
        weight = self._lexical_weight(query)
        return hybrid(dense, self.lexical_scores(query) if weight > 0 else None, weight)

    def relevance_name(self, query: str) -> str:
        """What `unit_relevance` ranks by for `query`, for traces."""
        weight = self._lexical_weight(query)
        if self.lexical_units is None or not weight:
            return "dense search"
        if weight == 1:
            return f"BM25 search (the embedding model does not read {language(query)!r})"
        return f"hybrid search (cosine {1 - weight:g} + BM25 {weight:g})"

    def _lexical_weight(self, query: str) -> float:
        """`query.lexical_weight`; 1 (BM25 alone) where the model does not read the query,
        unless the setting is 0: the dense ranking stays reachable for comparison."""
        weight = self.settings.query.lexical_weight
        return weight if self.dense_reads(query) or not weight else 1.0

    def similarities(self, matrix: np.ndarray, qvec: np.ndarray) -> np.ndarray:
        """Cosine of every row with the query (rows and query are L2-normalised)."""
        if matrix.shape[0] == 0:
            return np.zeros(0, dtype=np.float32)
        if matrix.shape[1] != qvec.shape[0]:
            raise ValueError(
                f"index vectors have {matrix.shape[1]} dims but the query embedder "
                f"({self.embedder.model_id}) gives {qvec.shape[0]}: query with the "
                "embedding model the index was built with"
            )
        return matrix @ qvec

    # ---- provenance ---------------------------------------------------------------------

    @cached_property
    def node_row(self) -> dict[str, int]:
        """Content node id -> row of the content_nodes table (positions are read by row)."""
        ids = self.table("content_nodes", ["id"])["id"].to_list()
        return {nid: i for i, nid in enumerate(ids)}

    @cached_property
    def node_positions(self) -> pl.Series:
        return self.table("content_nodes", ["positions"])["positions"]

    @cached_property
    def unit_info(self) -> pl.DataFrame:
        """Per text unit row: id, hrid, text, document and section provenance, pages."""
        tu = self.text_units.select(
            "id",
            "human_readable_id",
            "text",
            "n_tokens",
            "document_id",
            "section_id",
            "content_node_ids",
            "pages",
        )
        docs = self.documents.rename(
            {"id": "document_id", "title": "document_title", "source_path": "source_path"}
        )
        sections = self.table("sections").select(
            pl.col("id").alias("section_id"),
            pl.col("path").alias("section_path"),
            pl.col("uri").alias("section_uri"),
        )
        return tu.join(docs, on="document_id", how="left", maintain_order="left").join(
            sections, on="section_id", how="left", maintain_order="left"
        )

    def positions(self, node_ids: list[str]) -> list[dict[str, Any]]:
        """Page, page label and bbox of each content node a unit holds (for citations)."""
        rows = [r for r in map(self.node_row.get, node_ids or []) if r is not None]
        if not rows:
            return []
        found = self.node_positions.gather(rows).to_list()
        return [p for pos in found for p in pos or []]

    @cached_property
    def unit_row(self) -> dict[str, int]:
        return {uid: i for i, uid in enumerate(self.text_units["id"].to_list())}

    @cached_property
    def entity_row(self) -> dict[str, int]:
        return {eid: i for i, eid in enumerate(self.entities["id"].to_list())}

    # ---- graph --------------------------------------------------------------------------

    @cached_property
    def entity_units(self) -> pl.DataFrame:
        """(entity_row, unit_row) pairs: which entity occurs in which text unit."""
        ents = self.entities.select("text_unit_ids").with_row_index("entity_row")
        units = self.text_units.select("id").with_row_index("unit_row")
        return (
            ents.explode("text_unit_ids")
            .rename({"text_unit_ids": "id"})
            .join(units, on="id", how="inner")
            .select("entity_row", "unit_row")
            .unique()
            .sort("entity_row", "unit_row")
        )

    @cached_property
    def unit_entity_graph(self) -> UnitEntityGraph:
        pairs = self.entity_units
        return UnitEntityGraph.build(
            self.text_units.height,
            self.entities.height,
            pairs["unit_row"].to_numpy(),
            pairs["entity_row"].to_numpy(),
        )

    @cached_property
    def entity_relationships(self) -> sp.csr_matrix:
        """Entities x relationships incidence (1 at each endpoint)."""
        rels = self.relationships.select("source_id", "target_id").with_row_index("rel")
        ids = self.entities.select(pl.col("id").alias("eid")).with_row_index("ent")
        ends = pl.concat(
            [
                rels.select("rel", pl.col("source_id").alias("eid")),
                rels.select("rel", pl.col("target_id").alias("eid")),
            ]
        ).join(ids, on="eid", how="inner")
        return _incidence(ends["ent"], ends["rel"], self.entities.height, rels.height)

    @cached_property
    def entity_reports(self) -> sp.csr_matrix:
        """Entities x community reports incidence (entity is a member of the community)."""
        reps = self.community_reports.select("community").with_row_index("rep")
        members = (
            self.communities.select("community", pl.col("entity_ids").alias("eid"))
            .explode("eid")
            .join(self.entities.select(pl.col("id").alias("eid")).with_row_index("ent"), on="eid")
            .join(reps, on="community")
        )
        return _incidence(members["ent"], members["rep"], self.entities.height, reps.height)

    @cached_property
    def report_units(self) -> list[list[str]]:
        """Text unit ids of each report's community, in report row order."""
        units = self.community_reports.select("community").join(
            self.communities.select("community", "text_unit_ids").unique("community"),
            on="community",
            how="left",
            maintain_order="left",
        )
        return [list(u or []) for u in units["text_unit_ids"].to_list()]

    @cached_property
    def name_index(self) -> dict[str, list[int]]:
        """Entity name key (title and aliases, folded words) -> entity rows."""
        ents = self.entities.select("title", "aliases").with_row_index("row")
        names = pl.concat(
            [
                ents.select("row", pl.col("title").alias("name")),
                ents.select("row", pl.col("aliases").alias("name")).explode("name"),
            ]
        )
        return key_index(names)

    @cached_property
    def title_index(self) -> dict[str, list[int]]:
        """Document title key -> text unit rows of the documents with that title.

        A document's title names what the document is about (a Wikipedia-style page
        title, a heading, a file name), so a query naming it points at its units even
        when the extractor never produced that title as an entity.
        """
        units = self.text_units.select("document_id").with_row_index("row")
        names = units.join(
            self.documents.select(pl.col("id").alias("document_id"), pl.col("title").alias("name")),
            on="document_id",
            how="inner",
        ).select("row", "name")
        return key_index(names)

    def match_entities(self, query: str) -> list[NameMatch]:
        """Entities named in the query (rows of the entities table); see `names.greedy_match`."""
        return greedy_match(query, self.name_index)

    def match_titles(self, query: str) -> list[NameMatch]:
        """Document titles named in the query (rows are text unit rows)."""
        return greedy_match(query, self.title_index)

    def empty_result(self, query: str, mode: str) -> SearchResult:
        return SearchResult(
            query=query,
            mode=mode,
            answer=f"The index at {self.root} is empty: no text units were indexed, "
            "so there is nothing to search. Add documents to the input folder and re-index.",
            trace=["index is empty"],
        )


def _incidence(rows: pl.Series, cols: pl.Series, n_rows: int, n_cols: int) -> sp.csr_matrix:
    data = np.ones(len(rows))
    m = sp.csr_matrix((data, (rows.to_numpy(), cols.to_numpy())), shape=(n_rows, n_cols))
    m.data[:] = 1.0  # duplicates (a self-loop's two ends) count once
    return m
