"""One query request: its options and the call of the mode, shared by the CLI and the API.

Why one place: `docgraph query --json` and `docgraph serve` must give the same result for
the same question and options, so both build a `QueryRequest` and call `run_query`; both
print `SearchResult.to_json`. The bounds are the CLI's (counts >= 1, a level >= 0), checked
by pydantic, so a bad HTTP body is a 422 naming the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from pipeline.query import GraphIndex, SearchResult

QUERY_MODES = ("naive", "local", "global", "expand", "focus", "flow")
# Modes whose LLM answer can be streamed (global reduces partial answers; focus is context)
STREAM_MODES = ("naive", "local", "expand", "flow")


class QueryRequest(BaseModel):
    """A question and the options of `docgraph query` (None: the settings' default)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="the question (focus: a note or section uri)")
    top_k: int | None = Field(None, ge=1, description="results kept")
    level: int | None = Field(None, ge=0, description="global: community level")
    max_hops: int | None = Field(None, ge=1, description="expand: graph hops")
    max_nodes: int | None = Field(None, ge=1, description="expand: nodes kept")
    edge_types: list[str] | None = Field(None, description="expand: edge types followed")
    budget: int | None = Field(None, ge=1, description="focus: token budget")
    question: str | None = Field(None, description="focus, LLM mode: a question to answer")
    quick: bool = Field(False, description="flow: semantic search + graph growth")
    stream: bool = Field(False, description="LLM mode: stream the answer")
    publication: list[str] | None = Field(
        None, description="only the documents of these publications (the CLI's --publication)"
    )


def run_query(
    index: GraphIndex, mode: str, request: QueryRequest, llm_answer: bool = True
) -> SearchResult:
    """Run `mode` on the index; `llm_answer=False` leaves the LLM answer out (to stream it)."""
    q = request.query
    if mode == "naive":
        return index.naive_search(q, top_k=request.top_k, llm_answer=llm_answer)
    if mode == "local":
        return index.local_search(q, top_k=request.top_k, llm_answer=llm_answer)
    if mode == "expand":
        return index.expand_search(
            q,
            max_hops=request.max_hops,
            max_nodes=request.max_nodes,
            edge_types=request.edge_types,
            top_k=request.top_k,
            llm_answer=llm_answer,
        )
    if mode == "focus":
        return index.focus_context(q, request.budget, question=request.question)
    if mode == "flow":
        return index.flow_search(q, quick=request.quick, llm_answer=llm_answer)
    if mode == "global":
        return index.global_search(q, level=request.level)
    raise ValueError(f"unknown query mode {mode!r}: one of {', '.join(QUERY_MODES)}")
