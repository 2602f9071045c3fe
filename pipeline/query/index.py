"""GraphIndex: an output folder opened for querying.

Parquet tables are read lazily (only what a search mode needs); the Lance tables'
vectors are loaded once into numpy matrices aligned with those tables' rows, and
search is an exact cosine matmul (~6 ms at 100k x 384, against ~140 ms for Lance's
brute force). Lance stays the store and the full-text engine. The text unit–entity
graph for local search is built once per index and cached.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import scipy.sparse as sp

from pipeline.config import Settings, load_settings
from pipeline.query.ppr import UnitEntityGraph
from pipeline.query.result import SearchResult
from pipeline.query.text import fold, is_stop_key, name_key, raw_words
from pipeline.storage import mirror, remote, store
from pipeline.vectors import lance as vectors
from pipeline.vectors.embed import Embedder
from pipeline.vectors.embed_onnx import query_embedder

# Longest entity name (in words) tried when matching query n-grams against names.
MAX_NAME_WORDS = 8
QUERY_VECTOR_CACHE = 64  # query vectors kept (see GraphIndex.embed_query)


@dataclass(frozen=True)
class NameMatch:
    row: int  # entity row (match_entities) or text unit row (match_titles)
    key: str  # the folded name that matched
    proper: bool  # written like a name in the query (capitalised / digits)


def _on_latest(method):
    """Run a search whole on the newest published version (see GraphIndex.latest)."""

    @functools.wraps(method)
    def run(self: GraphIndex, *args: Any, **kwargs: Any):
        return method(self.latest(), *args, **kwargs)

    return run


class GraphIndex:
    """Read side of a docgraph output folder: naive, local, global, expand, focus, flow.

    It reads one published version of the folder (store.resolve), so every table and vector
    it sees belongs to the same run; a search notices a version published since, and runs
    on a fresh GraphIndex of it (`latest`), so a long-lived index never serves an old corpus
    and never mixes two."""

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
        self._swap = threading.Lock()
        self._newer: GraphIndex | None = None
        # LLM mode (settings.llm.enabled, or a client given): answers are written by the LLM
        # over the same retrieved context; retrieval itself is identical to offline. A failed
        # answer raises LlmAnswerError unless `llm_fallback` keeps the extractive one (said in
        # result.fallback). No server (connection refused) fails at once, without retries.
        if llm is None and settings.llm.enabled:
            from pipeline.llm.client import LlmClient

            llm = LlmClient(settings.llm, self.output_root / "cache" / "llm", retry_refused=False)
        self.llm = llm
        self.llm_fallback = llm_fallback

    @classmethod
    def open(
        cls,
        path: str | Path,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        llm=None,
        llm_fallback: bool = False,
        publication_id: str | Iterable[str] | None = None,
    ) -> GraphIndex:
        """The index in the output folder `path`; with `publication_id` (one id or several)
        every search sees only the documents of those publications (GraphIndex.for_publications)."""
        shown = path
        if mirror.is_url(path):  # an object store: its current version, in a local mirror
            settings = settings or load_settings()
            path = remote.refresh(path, settings.storage.mirror_dir, force=True)
        root = Path(path)
        if not root.is_dir():
            raise FileNotFoundError(
                f"no index at {root}: run `docgraph index` first (or pass the output folder)"
            )
        if not store.is_index(root):
            raise FileNotFoundError(
                f"{shown} holds no docgraph index (no index.json or text_units.parquet): "
                "run `docgraph index` first"
            )
        settings = settings or load_settings()
        index = cls(root, settings, embedder, llm, llm_fallback)
        return index if publication_id is None else index.for_publications(publication_id)

    def for_publications(self, publication_id: str | Iterable[str]) -> GraphIndex:
        """This index seen through the documents of the given publications only: text units,
        sections and nodes of other documents are gone, and entities, relationships and
        communities keep only their text units in scope (query/scope.py). Every mode runs on
        it unchanged. An id the index does not know is a ValueError naming the known ones."""
        from pipeline.query.scope import ScopedIndex

        ids = [publication_id] if isinstance(publication_id, str) else list(publication_id)
        return ScopedIndex(
            self.output_root, self.settings, self._embedder, self.llm, self.llm_fallback, ids
        )

    def _reopen(self) -> GraphIndex:
        """A fresh index of the output folder like this one (see `latest`)."""
        return GraphIndex(
            self.output_root, self.settings, self._embedder, self.llm, self.llm_fallback
        )

    def latest(self) -> GraphIndex:
        """This index, or one over the version published since it was opened (a stat of the
        manifest per call; the new version's tables load lazily, as on open)."""
        stamp = store.manifest_stamp(self.output_root)
        if stamp == self._stamp:
            return self
        with self._swap:
            newer = self._newer
            if newer is None or newer._stamp != stamp:
                newer = self._reopen()
                if newer.version == self.version:
                    self._stamp = newer._stamp
                    return self
                newer._query_vectors = self._query_vectors
                self._newer = newer
            return newer

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

    def unit_record(self, row: int, score: float, **extra: Any) -> dict[str, Any]:
        r = self.unit_info.row(row, named=True)
        return {
            "kind": "text_unit",
            "id": r["id"],
            "human_readable_id": r["human_readable_id"],
            "score": float(score),
            "text": r["text"],
            "n_tokens": r["n_tokens"],
            **self._provenance(r),
            "positions": self.positions(list(r.get("content_node_ids") or [])),
            **extra,
        }

    def entity_record(self, e: dict[str, Any], text: str, **extra: Any) -> dict[str, Any]:
        """An entities row (as a dict) as a result record, with its first unit's provenance."""
        return {
            "kind": "entity",
            "id": e["id"],
            "human_readable_id": e["human_readable_id"],
            "title": e["title"],
            "type": e["type"],
            "text": text,
            **extra,
            **self.provenance_of_units(list(e["text_unit_ids"] or [])),
        }

    @staticmethod
    def _provenance(r: dict[str, Any]) -> dict[str, Any]:
        return {
            "document_id": r.get("document_id"),
            "document_title": r.get("document_title"),
            "source_path": r.get("source_path"),
            "publication_id": r.get("publication_id"),
            "publication_title": r.get("publication_title"),
            "section_id": r.get("section_id"),
            "section_path": list(r.get("section_path") or []),
            "section_uri": r.get("section_uri"),
            "pages": list(r.get("pages") or []),
        }

    def provenance_of_units(self, unit_ids: list[str]) -> dict[str, Any]:
        """Provenance of the first known unit of a list (entities, relationships, reports)."""
        for uid in unit_ids or []:
            row = self.unit_row.get(uid)
            if row is not None:
                prov = self._provenance(self.unit_info.row(row, named=True))
                prov["text_unit_ids"] = list(unit_ids[:10])
                return prov
        return {
            "document_id": None,
            "document_title": None,
            "source_path": None,
            "publication_id": None,
            "publication_title": None,
            "section_id": None,
            "section_path": [],
            "section_uri": None,
            "pages": [],
            "text_unit_ids": [],
        }

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
        return _key_index(names)

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
        return _key_index(names)

    def match_entities(self, query: str) -> list[NameMatch]:
        """Entities named in the query (rows of the entities table); see `_greedy_match`."""
        return _greedy_match(query, self.name_index)

    def match_titles(self, query: str) -> list[NameMatch]:
        """Document titles named in the query (rows are text unit rows)."""
        return _greedy_match(query, self.title_index)

    # ---- search modes -------------------------------------------------------------------

    def _check_query(self, query: str) -> str:
        if query is None or not str(query).strip():
            raise ValueError("empty query")
        return str(query).strip()

    def empty_result(self, query: str, mode: str) -> SearchResult:
        return SearchResult(
            query=query,
            mode=mode,
            answer=f"The index at {self.root} is empty: no text units were indexed, "
            "so there is nothing to search. Add documents to the input folder and re-index.",
            trace=["index is empty"],
        )

    @_on_latest
    def naive_search(
        self, query: str, top_k: int | None = None, llm_answer: bool = True
    ) -> SearchResult:
        """Dense retrieval over text units. In LLM mode the LLM answers from the context
        unless `llm_answer=False` (e.g. to stream it with `stream_answer`)."""
        from pipeline.query.naive import naive_search

        result = naive_search(self, self._check_query(query), top_k)
        return self._answer(result) if llm_answer else result

    @_on_latest
    def local_search(
        self, query: str, top_k: int | None = None, llm_answer: bool = True
    ) -> SearchResult:
        """Entities -> relations, neighbours, reports -> text units (see query/local.py).
        In LLM mode the LLM answers from the context unless `llm_answer=False`."""
        from pipeline.query.local import local_search

        result = local_search(self, self._check_query(query), top_k)
        return self._answer(result) if llm_answer else result

    @_on_latest
    def global_search(self, query: str, level: int | None = None) -> SearchResult:
        from pipeline.query.global_search import global_search

        result = global_search(self, self._check_query(query), level)
        if self.llm is None:
            return result
        from pipeline.query.answer import global_map_reduce

        return global_map_reduce(self.llm, result, self.llm_fallback)

    @_on_latest
    def expand_search(
        self,
        query: str,
        max_hops: int | None = None,
        max_nodes: int | None = None,
        edge_types: list[str] | None = None,
        weights: dict[str, float] | None = None,
        top_k: int | None = None,
        llm_answer: bool = True,
    ) -> SearchResult:
        """Vector seeds over sections / content nodes / units, expanded over structure and
        entity edges, reranked, context grouped by document and section (query/expand.py)."""
        from pipeline.query.expand import expand_search

        result = expand_search(
            self,
            self._check_query(query),
            max_hops=max_hops,
            max_nodes=max_nodes,
            edge_types=edge_types,
            weights=weights,
            top_k=top_k,
        )
        return self._answer(result) if llm_answer else result

    @_on_latest
    def focus_context(
        self, uri: str, budget_tokens: int | None = None, question: str | None = None
    ) -> SearchResult:
        """The focus note (or section) `uri` and its related notes by priority within a token
        budget (query/focus.py); `data` holds the Overall JSON, `context_text` the prompt.
        In LLM mode with a `question`, the LLM answers it from that context."""
        from pipeline.query.focus import focus_context

        if uri is None or not str(uri).strip():
            raise ValueError("empty uri: give the uri of a note or section")
        result = focus_context(self, str(uri).strip(), budget_tokens)
        if question and str(question).strip():
            result = replace(result, query=str(question).strip())
            return self._answer(result)
        return result

    @_on_latest
    def flow_search(self, query: str, quick: bool = False, llm_answer: bool = True) -> SearchResult:
        """Knowledge flow (query/flow.py): query analysis, lexical + trigram + vector
        retrieval with scoring, definitions / facts / Mermaid; quick: semantic + growth."""
        from pipeline.query.flow import flow_search

        return flow_search(self, self._check_query(query), quick=quick, llm_answer=llm_answer)

    def _answer(self, result: SearchResult) -> SearchResult:
        if self.llm is None:
            return result
        from pipeline.query.answer import answer_from_context

        return answer_from_context(self.llm, result, self.llm_fallback)

    def stream_answer(self, result: SearchResult):
        """The LLM answer to a result's context (retrieved with `llm_answer=False`), streamed
        piece by piece; a flow result streams with the flow prompt. A failure raises
        LlmAnswerError; with `llm_fallback`, one before the first piece yields the extractive
        answer and sets `result.fallback`."""
        if self.llm is None:
            raise ValueError("streaming needs LLM mode (settings llm.enabled)")
        from pipeline.query.answer import guarded_stream, stream_answer

        if result.mode == "flow":
            from pipeline.query.flow import stream_flow_answer

            pieces = stream_flow_answer(self, result)
        else:
            pieces = stream_answer(self.llm, result)
        return guarded_stream(pieces, result, self.llm_fallback)

    @_on_latest
    def search_nodes(
        self, query: str, node_types: list[str] | None = None, top_k: int = 10
    ) -> SearchResult:
        """Content nodes nearest the query, optionally only of `node_types` (e.g. TABLE)."""
        from pipeline.query.nodes import search_nodes

        return search_nodes(self, self._check_query(query), node_types, top_k)


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first; ties broken by index (deterministic)."""
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        part = np.argpartition(-scores, k - 1)[:k]
        # Include every tie of the k-th score so the final order does not depend on partition.
        kth = scores[part].min()
        part = np.flatnonzero(scores >= kth)
    else:
        part = np.arange(n)
    order = np.lexsort((part, -scores[part]))
    return part[order][:k]


def idf_weight(df: float) -> float:
    return 1.0 / math.log1p(max(df, 1.0))


def _key_index(names: pl.DataFrame) -> dict[str, list[int]]:
    """(row, name) pairs -> {name key: rows}, skipping keys that cannot name anything."""
    names = names.drop_nulls("name").unique(maintain_order=True)
    out: dict[str, list[int]] = {}
    for row, name in zip(names["row"].to_list(), names["name"].to_list(), strict=True):
        key = name_key(name)
        if is_stop_key(key) or (key.isdigit() and len(key) < 3):
            continue
        rows = out.setdefault(key, [])
        if row not in rows:
            rows.append(row)
    return out


def _greedy_match(query: str, index: dict[str, list[int]]) -> list[NameMatch]:
    """Names of `index` in the query: greedy longest n-gram match, left to right.

    Folded (casefolded, accent-free) word n-grams of the query are looked up, so 'new
    york city' matches 'NEW YORK CITY' and not also 'YORK'. A match is `proper` when
    the query writes it with a capital or digit (past the first word): a stronger sign
    of a name than a lower-case common word that happens to equal a title.
    """
    raw = raw_words(query)
    toks = [fold(w) for w in raw]
    out: list[NameMatch] = []
    i = 0
    while i < len(toks):
        for n in range(min(MAX_NAME_WORDS, len(toks) - i), 0, -1):
            key = " ".join(toks[i : i + n])
            if key in index:
                span = raw[i : i + n]
                proper = any(
                    w[:1].isupper() or w[:1].isdigit()
                    for j, w in enumerate(span)
                    if i + j > 0 or n > 1 or w[:1].isdigit()
                )
                out.extend(NameMatch(row, key, proper) for row in index[key])
                i += n
                break
        else:
            i += 1
    return out


def _incidence(rows: pl.Series, cols: pl.Series, n_rows: int, n_cols: int) -> sp.csr_matrix:
    data = np.ones(len(rows))
    m = sp.csr_matrix((data, (rows.to_numpy(), cols.to_numpy())), shape=(n_rows, n_cols))
    m.data[:] = 1.0  # duplicates (a self-loop's two ends) count once
    return m
