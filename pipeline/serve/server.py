"""`docgraph serve`: the query modes over HTTP (FastAPI + uvicorn), the index opened once.

Why: a shell query pays the interpreter, the imports and the first reads every time; a
long-lived process pays them once, and a warm query then costs what the in-process call
costs plus the HTTP round trip (~1-2 ms).

    POST /query/{naive,local,global,expand,focus,flow}   body: QueryRequest (JSON)
    GET  /health

The body holds the question and the options of `docgraph query` (`publication`: a list of
publication ids to search within, as its --publication).

A query answers `SearchResult.to_json(indent=2)`, the very text `docgraph query --json`
prints. With `"stream": true` in LLM mode (naive, local, expand, flow) the answer comes as
Server-Sent Events: one `answer` event per piece (a JSON string), then one `result` event
holding the whole result (its answer the joined pieces), or an `error` event. Offline,
`stream` is ignored, as in the CLI. Errors: a bad request 400 (422 for a malformed body), a
failed LLM answer 502, an index version deleted under a search 503.

There is no authentication: it binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from fastapi import FastAPI, HTTPException
from fastapi.responses import Response, StreamingResponse

from pipeline.serve.request import QUERY_MODES, STREAM_MODES, QueryRequest, run_query

if TYPE_CHECKING:
    from pipeline.query import GraphIndex, SearchResult

LOOPBACK = ("127.0.0.1", "localhost", "::1")
SCOPED_VIEWS = 16  # publication filters kept open


def create_app(index: GraphIndex) -> FastAPI:
    """The API over an open index (one endpoint per mode, and /health)."""
    from pipeline.query.answer import LlmAnswerError

    app = FastAPI(title="docgraph", summary="Graph-RAG queries over one docgraph index")
    scoped: dict[tuple[str, ...], GraphIndex] = {}  # publication filters, newest last
    scoped_lock = threading.Lock()

    def target(request: QueryRequest) -> GraphIndex:
        """The index, or its view through `request.publication` (kept for the next
        requests: a view reads and filters its tables once)."""
        if not request.publication:
            return index
        key = tuple(sorted(set(request.publication)))
        with scoped_lock:
            if key not in scoped:
                if len(scoped) >= SCOPED_VIEWS:
                    del scoped[next(iter(scoped))]
                scoped[key] = index.for_publications(list(key))
            return scoped[key]

    @app.get("/health")
    def health() -> dict:
        current = index.latest()
        return {
            "status": "ok",
            "version": current.version,
            "text_units": current.text_units.height,
            "llm": index.llm is not None,
            "modes": list(QUERY_MODES),
        }

    def endpoint(mode: str):
        # a plain `def`: FastAPI runs it in its thread pool, so a long search or LLM call
        # never blocks the event loop (health checks, other queries)
        def query(request: QueryRequest) -> Response:
            stream = request.stream and index.llm is not None and mode in STREAM_MODES
            try:
                searched = target(request)
                result = run_query(searched, mode, request, llm_answer=not stream)
            except LlmAnswerError as exc:
                raise HTTPException(502, str(exc)) from None
            except FileNotFoundError as exc:  # the version read was pruned by a newer run
                raise HTTPException(503, str(exc)) from None
            except ValueError as exc:  # an empty question, an unknown uri or edge type, ...
                raise HTTPException(400, str(exc)) from None
            if stream:
                return StreamingResponse(
                    _events(searched, result, LlmAnswerError), media_type="text/event-stream"
                )
            return Response(result.to_json(indent=2), media_type="application/json")

        query.__name__ = f"query_{mode}"
        query.__doc__ = f"{mode} search: the SearchResult as `docgraph query --json` prints it"
        return query

    for mode in QUERY_MODES:
        app.post(f"/query/{mode}", response_class=Response)(endpoint(mode))
    return app


def _event(name: str, data: str) -> str:
    """One Server-Sent Event; `data` is one line of JSON (its newlines are escaped)."""
    return f"event: {name}\ndata: {data}\n\n"


def _events(index: GraphIndex, result: SearchResult, failure: type[Exception]) -> Iterator[str]:
    pieces: list[str] = []
    try:
        for piece in index.stream_answer(result):
            pieces.append(piece)
            yield _event("answer", json.dumps(piece, ensure_ascii=False))
    except failure as exc:  # the status line is sent: the failure is an event
        yield _event("error", json.dumps({"detail": str(exc)}, ensure_ascii=False))
        return
    result.answer = "".join(pieces)
    yield _event("result", result.to_json())


def open_index(output_dir: str, settings, llm_fallback: bool = False) -> GraphIndex:
    """The index, with what every query needs read now rather than by the first request:
    the text units, their vectors, their BM25 index and the query embedder."""
    from pipeline.query import GraphIndex

    index = GraphIndex.open(output_dir, settings, llm_fallback=llm_fallback)
    if not index.is_empty:
        index.unit_vectors  # noqa: B018 - a cached property, read for its side effect
        index.lexical_scores("warm up")
        index.embedder.embed(["warm up"])
    return index


def serve(index: GraphIndex, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve until interrupted (Ctrl-C)."""
    import uvicorn

    if host not in LOOPBACK:
        print(
            f"docgraph: warning: serving on {host}: the API has no authentication, anyone who "
            "can reach this port can query the index",
            file=sys.stderr,
        )
    print(f"docgraph: serving {index.output_root} at http://{host}:{port}", file=sys.stderr)
    uvicorn.run(create_app(index), host=host, port=port, log_level="warning")
