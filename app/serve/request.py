"""One query request: its fields made from the modes' registry, shared by the CLI and the API.

Why from the registry: `docgraph query --json` and `docgraph serve` must give the same
result for the same question and options, so both take a mode's options from
pipeline/query/modes.py (`QueryMode.from_request`) and call `GraphIndex.search`; both print
`SearchResult.to_json`. The fields are the registry's exposed options with their bounds
(counts >= 1, a level >= 0, as the CLI's flags), checked by pydantic, so a bad HTTP body is
a 422 naming the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from pipeline.query.modes import OPTIONS, get_mode

if TYPE_CHECKING:
    from pipeline.query import GraphIndex, SearchResult


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def options(self, mode: str) -> dict[str, Any]:
        """The options `mode` takes, by their Python parameter (None: the settings')."""
        return get_mode(mode).from_request(self.model_dump())


def _field(option) -> tuple[Any, Any]:
    if option.annotation is bool:
        return bool, Field(False, description=option.help)
    return option.annotation | None, Field(None, ge=option.minimum, description=option.help)


QueryRequest = create_model(
    "QueryRequest",
    __base__=_Request,
    __doc__="A question and the options of `docgraph query` (None: the settings' default).",
    query=(str, Field(description="the question (focus: a note or section uri)")),
    **{name: _field(o) for name, o in OPTIONS.items() if o.exposed},
    stream=(bool, Field(False, description="LLM mode: stream the answer")),
    publication=(
        list[str] | None,
        Field(None, description="only the documents of these publications (--publication)"),
    ),
)


def run_query(
    index: GraphIndex, mode: str, request: QueryRequest, llm_answer: bool = True
) -> SearchResult:
    """Run `mode` on the index; `llm_answer=False` leaves the LLM answer out (to stream it)."""
    return index.search(mode, request.query, llm_answer=llm_answer, **request.options(mode))
