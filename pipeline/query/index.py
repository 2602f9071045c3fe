"""GraphIndex: an output folder opened for querying, one method per search mode.

The facade over the modes: it opens a folder (local or an object store's mirror), follows
the newest published version (`latest`), checks the query, runs the mode function on its
tables (query/tables.py, which it extends) and lets the LLM answer in LLM mode. Modes import
the tables view, never this module.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipeline.config import Settings, load_settings
from pipeline.query.result import SearchResult
from pipeline.query.scope import PublicationScope
from pipeline.query.tables import IndexTables
from pipeline.storage import mirror, remote, store
from pipeline.vectors.embed import Embedder


def _on_latest(method):
    """Run a search whole on the newest published version (see GraphIndex.latest)."""

    @functools.wraps(method)
    def run(self: GraphIndex, *args: Any, **kwargs: Any):
        return method(self.latest(), *args, **kwargs)

    return run


class GraphIndex(IndexTables):
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
        super().__init__(root, settings, embedder, llm, llm_fallback)
        self._swap = threading.Lock()
        self._newer: GraphIndex | None = None

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

    # ---- search modes -------------------------------------------------------------------

    def _check_query(self, query: str) -> str:
        if query is None or not str(query).strip():
            raise ValueError("empty query")
        return str(query).strip()

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
        """Entities -> relations, neighbours, reports -> text units (see query/local/).
        In LLM mode the LLM answers from the context unless `llm_answer=False`."""
        from pipeline.query.local.search import local_search

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
        entity edges, reranked, context grouped by document and section (query/expand/)."""
        from pipeline.query.expand.search import expand_search

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
        budget (query/focus/); `data` holds the Overall JSON, `context_text` the prompt.
        In LLM mode with a `question`, the LLM answers it from that context."""
        from pipeline.query.focus.context import focus_context

        if uri is None or not str(uri).strip():
            raise ValueError("empty uri: give the uri of a note or section")
        result = focus_context(self, str(uri).strip(), budget_tokens)
        if question and str(question).strip():
            result = replace(result, query=str(question).strip())
            return self._answer(result)
        return result

    @_on_latest
    def flow_search(self, query: str, quick: bool = False, llm_answer: bool = True) -> SearchResult:
        """Knowledge flow (query/flow/): query analysis, lexical + trigram + vector
        retrieval with scoring, definitions / facts / Mermaid; quick: semantic + growth."""
        from pipeline.query.flow.search import flow_search

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
            from pipeline.query.flow.search import stream_flow_answer

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


class ScopedIndex(PublicationScope, GraphIndex):
    """A GraphIndex whose tables hold only what the given publications' documents hold
    (the restriction is query/scope.py's; every mode runs on it unchanged)."""
