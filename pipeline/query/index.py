"""GraphIndex: an output folder opened for querying, one method per search mode.

The facade over the modes: it opens a folder (local or an object store's mirror), follows
the newest published version (`latest`), checks the query, runs the mode function on its
tables (query/tables.py, which it extends) and lets the LLM answer in LLM mode. Modes import
the tables view, never this module.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipeline.config import Settings, load_settings
from pipeline.query.modes import MODES, OPTIONS, QueryMode, checked_query, get_mode
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

    # ---- search modes (one method per mode is added from query/modes.py below) ----------

    @_on_latest
    def search(
        self, mode: str, query: str, llm_answer: bool = True, **options: Any
    ) -> SearchResult:
        """Run the query mode `mode` (pipeline/query/modes.py) with its options, None ones
        from the settings `query`. In LLM mode the LLM answers from the context unless
        `llm_answer=False` (e.g. to stream it with `stream_answer`)."""
        chosen = get_mode(mode)
        query = chosen.check_query(query)
        arguments = chosen.arguments(self.settings.query, options)
        question = arguments.pop("question", None)
        if chosen.answer == "inside":
            arguments["llm_answer"] = llm_answer
        result = chosen.run(self, query, arguments)
        if chosen.answer == "context":
            return self._answer(result) if llm_answer else result
        if chosen.answer == "reduce" and self.llm is not None:
            from pipeline.query.answer import global_map_reduce

            return global_map_reduce(self.llm, result, self.llm_fallback)
        if chosen.answer == "question" and question and str(question).strip():
            return self._answer(replace(result, query=str(question).strip()))
        return result

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

        return search_nodes(self, checked_query(query), node_types, top_k)


class ScopedIndex(PublicationScope, GraphIndex):
    """A GraphIndex whose tables hold only what the given publications' documents hold
    (the restriction is query/scope.py's; every mode runs on it unchanged)."""


def _mode_method(mode: QueryMode):
    """GraphIndex.<mode.method>(query, *options, llm_answer=True): `search` for one mode,
    with the mode's options as named parameters (positional in the registry's order)."""
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(name, positional) for name in ("self", mode.query_name)]
    for name in mode.options:
        option = OPTIONS[name]
        params.append(inspect.Parameter(option.parameter, positional, default=option.default))
    if mode.streams:
        params.append(inspect.Parameter("llm_answer", positional, default=True))
    signature = inspect.Signature(params, return_annotation=SearchResult)

    def method(self: GraphIndex, *args: Any, **kwargs: Any) -> SearchResult:
        arguments = signature.bind(self, *args, **kwargs).arguments
        del arguments["self"]
        return self.search(mode.name, arguments.pop(mode.query_name), **arguments)

    method.__name__ = method.__qualname__ = mode.method
    method.__signature__ = signature
    method.__doc__ = mode.summary
    return method


for _mode in MODES.values():
    setattr(GraphIndex, _mode.method, _mode_method(_mode))
