"""The bounds `docgraph serve` puts on every request (settings `serve`, pipeline/config/serve.py).

Why a module of its own: a server that answers anyone must not let one request take
unbounded memory, CPU or response size, nor a crowd of requests take every core; and what
it says back must stay short whatever was sent. Each bound is one piece here:

- `BodyLimit`: a body over `max_body_bytes` is 413 before the app reads it;
- `size_problem`: a string or list field over its bound is 422;
- `WorkSlots`: at most `max_concurrent_queries` searches at once, a bounded queue, a
  bounded wait, then 503 with Retry-After;
- `shorten` / `scrub` / `validation_message`: user input in a message is a short prefix and
  an ellipsis, never the whole of it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.serve.request import QueryRequest
    from pipeline.config import ServeSettings

SHOWN_CHARS = 60  # user input shown in a message at most, then an ellipsis
MESSAGE_CHARS = 400  # an error message at most
RETRY_AFTER_S = 1  # a 503's Retry-After: a warm query takes ~10-100 ms


def shorten(text: str, limit: int = SHOWN_CHARS) -> str:
    """`text`, or its first `limit` characters, an ellipsis and its length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def scrub(message: str, inputs: Iterable[str]) -> str:
    """`message` with each long user input in it (as given or stripped, each also escaped as
    repr() writes it) shortened, and the whole at most MESSAGE_CHARS long: error messages
    quote their input."""
    for text in sorted({t for t in inputs if len(t) > SHOWN_CHARS}, key=len, reverse=True):
        for form in (text, repr(text)[1:-1], text.strip(), repr(text.strip())[1:-1]):
            message = message.replace(form, shorten(text.strip()))
    return shorten(message, MESSAGE_CHARS)


def request_inputs(request: QueryRequest) -> list[str]:
    """The user's strings in a request: what an error message may quote."""
    return [
        request.query,
        request.question or "",
        *(request.edge_types or ()),
        *(request.publication or ()),
    ]


def size_problem(request: QueryRequest, limits: ServeSettings) -> str | None:
    """Why `request` is over a bound (a 422), or None."""
    texts = [("query", request.query), ("question", request.question or "")]
    for name, text in texts:
        if len(text) > limits.max_query_chars:
            return _too_long(name, text, limits.max_query_chars, "max_query_chars")
    for name in ("edge_types", "publication"):
        items = getattr(request, name) or []
        if len(items) > limits.max_list_items:
            return (
                f"{name} holds {len(items)} names: at most {limits.max_list_items} are "
                "accepted (setting serve.max_list_items)"
            )
        for item in items:
            if len(item) > limits.max_name_chars:
                return _too_long(f"a name in {name}", item, limits.max_name_chars, "max_name_chars")
    return None


def _too_long(what: str, text: str, most: int, setting: str) -> str:
    return (
        f"{what} is too long: at most {most} characters are accepted "
        f"(setting serve.{setting}); got {shorten(text, 40)}"
    )


def validation_message(errors: list[dict[str, Any]]) -> str:
    """FastAPI's validation errors as one line (the first three): field, reason and a short
    prefix of the input, where FastAPI would echo the whole input back."""
    parts = []
    for err in errors[:3]:
        loc = ".".join(shorten(str(p), 40) for p in err["loc"] if p != "body") or "body"
        got = err.get("input")
        shown = isinstance(got, str | int | float) and err["type"] != "missing"
        parts.append(f"{loc}: {err['msg']}" + (f" (got {shorten(str(got))})" if shown else ""))
    more = len(errors) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


# ---- the body ---------------------------------------------------------------------------


class BodyLimit:
    """ASGI middleware: a request body over `max_bytes` is answered 413 (JSON `detail`) as
    soon as that is known, from the Content-Length header before any of the body is read,
    or while a chunked body is read; the app then gets the body read (at most `max_bytes`).
    The server discards the rest of a refused body and keeps the connection."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _content_length(scope)
        body = None if length is not None and length > self.max_bytes else await self._read(receive)
        if body is None:
            await self._refuse(send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive) -> bytes | None:
        """The whole body, or None once it passes max_bytes."""
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: the app hears it
                return b"".join(chunks)
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                return None
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _refuse(self, send) -> None:
        detail = (
            f"request body too large: at most {self.max_bytes} bytes are accepted "
            "(setting serve.max_body_bytes)"
        )
        body = json.dumps({"detail": detail}).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _replay(body: bytes, receive):
    """A `receive` that gives the body read, then what the client sends next (a disconnect)."""
    sent = False

    async def replayed():
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


# ---- concurrent work --------------------------------------------------------------------


class Busy(Exception):
    """No search slot came free in time, or the queue is full: a 503 with Retry-After."""


class WorkSlots:
    """At most `slots` searches at once; at most `max_queued` requests wait for one, each at
    most `wait_s` seconds. Waiting is on the event loop, so a waiting request holds no
    worker thread and /health still answers."""

    def __init__(self, slots: int, max_queued: int, wait_s: float) -> None:
        self.slots, self.max_queued, self.wait_s = slots, max_queued, wait_s
        self._free = asyncio.Semaphore(slots)
        self._queued = 0

    @classmethod
    def from_settings(cls, limits: ServeSettings) -> WorkSlots:
        from pipeline.cpu import usable_cpus

        slots = limits.max_concurrent_queries or usable_cpus()
        return cls(slots, limits.max_queued_queries, limits.queue_wait_s)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self._take()
        try:
            yield
        finally:
            self._free.release()

    async def _take(self) -> None:
        if self._free.locked() and self._queued >= self.max_queued:
            raise Busy(
                f"server busy: every query slot ({self.slots}) is taken and the queue "
                f"({self.max_queued}) is full (settings serve.max_concurrent_queries, "
                "serve.max_queued_queries); retry later"
            )
        self._queued += 1
        try:
            async with asyncio.timeout(self.wait_s):
                await self._free.acquire()
        except TimeoutError:
            raise Busy(
                f"server busy: no query slot came free in {self.wait_s:g} s "
                "(setting serve.queue_wait_s); retry later"
            ) from None
        finally:
            self._queued -= 1
