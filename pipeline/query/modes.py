"""The query modes in one list: each mode's name, options (bounds, help, the setting that
gives the default), how LLM mode answers it, and the function that runs it.

Why one list: `GraphIndex` (its `search` and one method per mode), the arguments of
`docgraph query` and the endpoints and request body of `docgraph serve` are all made from
it, so a mode or an option is added here once and means the same in Python, on the command
line and over HTTP. A mode's function is imported when the mode first runs (`run`), so
listing the modes costs nothing.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.config.query import QuerySettings
    from pipeline.query.result import SearchResult


@dataclass(frozen=True)
class Option:
    """One option of the modes: the request field and `--flag` (`name`), its Python
    parameter, its type and lower bound, and the `query` setting giving its default."""

    name: str
    annotation: Any  # int, str, bool or list[str]
    help: str
    minimum: int | None = None
    setting: str | None = None  # QuerySettings field filling None (None: the mode decides)
    param: str | None = None  # the Python parameter, when it is not `name`
    exposed: bool = True  # False: a Python-only option (no --flag, no request field)

    @property
    def parameter(self) -> str:
        return self.param or self.name

    @property
    def default(self) -> Any:
        return False if self.annotation is bool else None


OPTIONS: dict[str, Option] = {
    o.name: o
    for o in (
        Option("top_k", int, "results kept", 1, "top_k_units"),
        Option("level", int, "global: community level (none: descend by rating)", 0),
        Option("max_hops", int, "expand: graph hops", 1, "expand_max_hops"),
        Option("max_nodes", int, "expand: nodes kept", 1, "expand_max_nodes"),
        Option("edge_types", list[str], "expand: edge types followed"),
        Option("weights", dict[str, float], "expand: weight per edge type", exposed=False),
        Option("budget", int, "focus: token budget", 1, "focus_budget_tokens", "budget_tokens"),
        Option("question", str, "focus, LLM mode: a question to answer"),
        Option("quick", bool, "flow: semantic search + graph growth"),
    )
}

# How LLM mode answers a mode's result: from its context (an answer that can stream), by
# map-reduce over reports, only when a `question` is given, or inside the mode itself.
ANSWERS = ("context", "reduce", "question", "inside")


@dataclass(frozen=True)
class QueryMode:
    """A search mode: `function(index, query, **options)` returns its SearchResult."""

    name: str
    method: str  # the GraphIndex method
    function: str  # "module:function"
    options: tuple[str, ...]
    answer: str  # one of ANSWERS
    summary: str
    query_name: str = "query"

    @property
    def streams(self) -> bool:
        """Whether LLM mode can stream the answer (global reduces; focus is context)."""
        return self.answer in ("context", "inside")

    def check_query(self, query: Any) -> str:
        if self.query_name == "uri":
            return checked_query(query, "empty uri: give the uri of a note or section")
        return checked_query(query)

    def arguments(self, settings: QuerySettings, given: dict[str, Any]) -> dict[str, Any]:
        """The options by Python parameter, None filled from `settings`; an option this mode
        does not take is a TypeError, as a wrong keyword argument is."""
        options = [OPTIONS[name] for name in self.options]
        unknown = set(given) - {o.parameter for o in options}
        if unknown:
            raise TypeError(f"{self.method}() got unexpected options {sorted(unknown)}")
        values = {o.parameter: given.get(o.parameter, o.default) for o in options}
        for o in options:
            if values[o.parameter] is None and o.setting:
                values[o.parameter] = getattr(settings, o.setting)
        return values

    def from_request(self, fields: dict[str, Any]) -> dict[str, Any]:
        """This mode's options among a request's fields (by name), by Python parameter."""
        return {OPTIONS[name].parameter: fields[name] for name in self.options if name in fields}

    def run(self, index: Any, query: str, arguments: dict[str, Any]) -> SearchResult:
        module, name = self.function.split(":")
        return getattr(importlib.import_module(module), name)(index, query, **arguments)


MODES: dict[str, QueryMode] = {
    m.name: m
    for m in (
        QueryMode(
            "naive",
            "naive_search",
            "pipeline.query.naive:naive_search",
            ("top_k",),
            "context",
            "Dense + BM25 retrieval over text units (the baseline).",
        ),
        QueryMode(
            "local",
            "local_search",
            "pipeline.query.local.search:local_search",
            ("top_k",),
            "context",
            "Entities -> relations, neighbours, reports -> text units, PageRank-ranked "
            "(query/local/).",
        ),
        QueryMode(
            "global",
            "global_search",
            "pipeline.query.global_search:global_search",
            ("level",),
            "reduce",
            "Rated community reports, reduced (map-reduce over them in LLM mode).",
        ),
        QueryMode(
            "expand",
            "expand_search",
            "pipeline.query.expand.search:expand_search",
            ("max_hops", "max_nodes", "edge_types", "weights", "top_k"),
            "context",
            "Vector seeds over sections / content nodes / units, expanded over structure and "
            "entity edges, reranked, context grouped by document and section (query/expand/).",
        ),
        QueryMode(
            "focus",
            "focus_context",
            "pipeline.query.focus.context:focus_context",
            ("budget", "question"),
            "question",
            "The focus note (or section) `uri` and its related notes by priority within a "
            "token budget (query/focus/); `data` holds the Overall JSON, `context_text` the "
            "prompt. In LLM mode with a `question`, the LLM answers it from that context.",
            query_name="uri",
        ),
        QueryMode(
            "flow",
            "flow_search",
            "pipeline.query.flow.search:flow_search",
            ("quick",),
            "inside",
            "Knowledge flow (query/flow/): query analysis, lexical + trigram + vector "
            "retrieval with scoring, definitions / facts / Mermaid; quick: semantic + growth.",
        ),
    )
}

QUERY_MODES = tuple(MODES)
STREAM_MODES = tuple(name for name, m in MODES.items() if m.streams)


def checked_query(query: Any, empty: str = "empty query") -> str:
    """The query stripped; None or blank is a ValueError saying `empty`."""
    if query is None or not str(query).strip():
        raise ValueError(empty)
    return str(query).strip()


def get_mode(name: str) -> QueryMode:
    """The mode called `name`; an unknown one is a ValueError naming the known ones."""
    mode = MODES.get(name)
    if mode is None:
        raise ValueError(f"unknown query mode {name!r}: one of {', '.join(QUERY_MODES)}")
    return mode
