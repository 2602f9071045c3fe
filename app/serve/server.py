"""`docgraph serve`: the query modes over HTTP (FastAPI + uvicorn), the index opened once.

Why: a shell query pays the interpreter, the imports and the first reads every time; a
long-lived process pays them once, and a warm query then costs what the in-process call
costs plus the HTTP round trip (~1-2 ms).

    POST /query/{naive,local,global,expand,focus,flow}   body: QueryRequest (JSON)
    GET  /health
    GET  /  and its evidence endpoints (/page, /section, /entity): app/serve/page.py

The body holds the question and the options of `docgraph query` (`publication`: a list of
publication ids to search within, as its --publication).

A query answers `SearchResult.to_json(indent=2)`, the very text `docgraph query --json`
prints. With `"stream": true` in LLM mode (naive, local, expand, flow) the answer comes as
Server-Sent Events: one `answer` event per piece (a JSON string), then one `result` event
holding the whole result (its answer the joined pieces), or an `error` event. Offline,
`stream` is ignored, as in the CLI. Errors are JSON `{"detail": "one line"}`: a bad request
400 (422 for a malformed body or a field over its bound), a failed LLM answer 502, an index
version deleted under a search 503.

Bounds (settings `serve`, applied by app/serve/limits.py): a body over
`max_body_bytes` is 413 before it is read (by its Content-Length, or as soon as a
chunked body passes it); `query` and `question` over `max_query_chars`, a
`publication` id or edge type over `max_name_chars`, or lists over `max_list_items`, are
422. A message quotes user input as its first characters and an ellipsis, never whole.

Concurrent work: at most `max_concurrent_queries` searches run at once (default one a usable
CPU: a search is CPU-bound, so more at once only makes each slower). A query that finds them
all busy waits for one, in a queue of at most `max_queued_queries`, for at most
`queue_wait_s`; one that finds the queue full, or waits that long in vain, is answered 503
with `Retry-After`, which clients and load balancers retry, rather than held until the
client's own timeout. The bounded wait absorbs bursts (8 clients on 2 slots all get their
answers); the 503 keeps a flood from growing the queue, and every answer's latency, without
bound. Waiting holds no worker thread, so /health answers under load. A streamed LLM answer
holds its slot for the search only; its LLM calls are bounded by `llm.concurrency`.

There is no authentication: it binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from app.serve.limits import (
    RETRY_AFTER_S,
    BodyLimit,
    Busy,
    WorkSlots,
    request_inputs,
    scrub,
    size_problem,
    validation_message,
)
from app.serve.page import add_page
from app.serve.page_images import PageImages
from app.serve.request import QueryRequest, run_query
from pipeline.query.modes import MODES, QUERY_MODES, STREAM_MODES

if TYPE_CHECKING:
    from pipeline.config import ServeSettings
    from pipeline.query import GraphIndex, SearchResult

LOOPBACK = ("127.0.0.1", "localhost", "::1")
SCOPED_VIEWS = 16  # publication filters kept open


def create_app(index: GraphIndex, limits: ServeSettings | None = None) -> FastAPI:
    """The API over an open index (one endpoint per mode, /health, and the query page with
    its evidence endpoints), within `limits` (default: the index's settings `serve`)."""
    limits = limits or index.settings.serve
    app = FastAPI(title="docgraph", summary="Graph-RAG queries over one docgraph index")
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    app.add_exception_handler(RequestValidationError, _validation_error)
    slots = WorkSlots.from_settings(limits)
    answer = _answerer(index)

    @app.get("/health")
    def health() -> dict:
        current = index.latest()
        return {
            "status": "ok",
            "version": current.version,
            "text_units": current.text_units.height,
            "llm": index.llm is not None,
            "modes": list(QUERY_MODES),
            "stream_modes": list(STREAM_MODES) if index.llm is not None else [],
        }

    def endpoint(mode: str):
        # the bounds are checked and the slot waited for on the event loop; the search runs
        # in the thread pool, so it never blocks the loop (health checks, other queries)
        async def query(request: QueryRequest) -> Response:
            problem = size_problem(request, limits)
            if problem:
                raise HTTPException(422, problem)
            try:
                async with slots.slot():
                    return await run_in_threadpool(answer, mode, request)
            except Busy as exc:
                retry = {"Retry-After": str(RETRY_AFTER_S)}
                raise HTTPException(503, str(exc), headers=retry) from None

        query.__name__ = f"query_{mode}"
        query.__doc__ = (
            f"{MODES[mode].summary} Answers the SearchResult as `docgraph query --json` prints it."
        )
        return query

    for mode in QUERY_MODES:
        app.post(f"/query/{mode}", response_class=Response)(endpoint(mode))
    add_page(app, index, slots, PageImages())
    return app


async def _validation_error(_request, exc: RequestValidationError) -> JSONResponse:
    """422 as one line quoting a short prefix of the input (FastAPI's own echoes it whole)."""
    return JSONResponse({"detail": validation_message(list(exc.errors()))}, status_code=422)


def _answerer(index: GraphIndex):
    """`answer(mode, request)`: the search's response (JSON, or the streamed LLM answer), or
    an HTTPException whose message quotes no more than a prefix of the request."""
    from pipeline.query.answer import LlmAnswerError

    # a version pruned by a newer run under the search: 503; an empty question, an unknown
    # uri or edge type, ...: 400
    statuses = ((LlmAnswerError, 502), (FileNotFoundError, 503), (ValueError, 400))
    target = _scoped(index)

    def answer(mode: str, request: QueryRequest) -> Response:
        stream = request.stream and index.llm is not None and mode in STREAM_MODES
        inputs = request_inputs(request)
        try:
            searched = target(request)
            result = run_query(searched, mode, request, llm_answer=not stream)
        except Exception as exc:
            status = next((code for kind, code in statuses if isinstance(exc, kind)), None)
            if status is None:
                raise
            raise HTTPException(status, scrub(str(exc), inputs)) from None
        if stream:
            events = _events(searched, result, LlmAnswerError, inputs)
            return StreamingResponse(events, media_type="text/event-stream")
        return Response(result.to_json(indent=2), media_type="application/json")

    return answer


def _scoped(index: GraphIndex):
    """`target(request)`: the index, or its view through `request.publication` (kept for
    the next requests: a view reads and filters its tables once)."""
    scoped: dict[tuple[str, ...], GraphIndex] = {}  # publication filters, newest last
    scoped_lock = threading.Lock()

    def target(request: QueryRequest) -> GraphIndex:
        if not request.publication:
            return index
        key = tuple(sorted(set(request.publication)))
        with scoped_lock:
            if key not in scoped:
                if len(scoped) >= SCOPED_VIEWS:
                    del scoped[next(iter(scoped))]
                scoped[key] = index.for_publications(list(key))
            return scoped[key]

    return target


def _event(name: str, data: str) -> str:
    """One Server-Sent Event; `data` is one line of JSON (its newlines are escaped)."""
    return f"event: {name}\ndata: {data}\n\n"


def _events(
    index: GraphIndex, result: SearchResult, failure: type[Exception], inputs: list[str]
) -> Iterator[str]:
    pieces: list[str] = []
    try:
        for piece in index.stream_answer(result):
            pieces.append(piece)
            yield _event("answer", json.dumps(piece, ensure_ascii=False))
    except failure as exc:  # the status line is sent: the failure is an event
        detail = scrub(str(exc), inputs)
        yield _event("error", json.dumps({"detail": detail}, ensure_ascii=False))
        return
    result.answer = "".join(pieces)
    if result.fallback is None:  # the LLM's answer: no extractive citations (as unstreamed)
        result.citations = []
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
