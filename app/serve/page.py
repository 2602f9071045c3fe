"""The query page of `docgraph serve`: ask the index in a browser and see the evidence.

Why in the server: the page uses the same process and the same warm index as the API, so a
question costs what `POST /query/<mode>` costs; it needs no build step and nothing from the
network. Its HTML, script and style are files shipped in the package (app/serve/static/),
the graph is drawn by the vendored vis-network (pipeline/export/static/, MIT, its licence
served beside it). Everything the page shows from the index goes in through `textContent`.

    GET /                                   the page
    GET /assets/<name>                      its script, style, vis-network and its licence
    GET /page/<document_id>/<page>.png      a PDF page of the published version (page_images)
    GET /section/<section_id>?unit=<id>     a section's content nodes, the unit's marked
    GET /entity/<entity_id>                 an entity, its relationships, sources, reports

Every response of the server carries a Content-Security-Policy that allows nothing from
elsewhere and no inline script (`SecurityHeaders`; not FastAPI's /docs and /redoc, which
load Swagger UI and ReDoc from a CDN) and `X-Content-Type-Options: nosniff`.
Ids are at most 128 characters of [A-Za-z0-9_-], pages integers; anything else, an id the
published version does not hold, or a `..` in the path is a 404 before any file is read.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from app.serve.evidence import entity_json, section_json
from app.serve.limits import RETRY_AFTER_S, Busy, WorkSlots
from app.serve.page_images import ID_PATTERN, ZOOM, NotServed, PageImages

if TYPE_CHECKING:
    from pipeline.query import GraphIndex

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode("ascii")),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
# name -> (package, file, media type): the only files the page route serves
ASSETS = {
    "page.js": ("app.serve", "static/page.js", "text/javascript; charset=utf-8"),
    "page.css": ("app.serve", "static/page.css", "text/css; charset=utf-8"),
    "vis-network.min.js": (
        "pipeline.export",
        "static/vis-network.min.js",
        "text/javascript; charset=utf-8",
    ),
    "vis-network.LICENSE.txt": (
        "pipeline.export",
        "static/vis-network.LICENSE.txt",
        "text/plain; charset=utf-8",
    ),
}
CACHE = {"cache-control": "no-cache"}


# FastAPI's own API docs load Swagger UI / ReDoc from a CDN with inline script: no CSP there
OWN_DOCS = ("/docs", "/redoc")


class SecurityHeaders:
    """ASGI middleware: the CSP, nosniff and no-referrer headers on every response (the CSP
    on all but FastAPI's API docs pages, which it would leave blank)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        path = scope.get("path", "")
        docs = any(path == d or path.startswith(d + "/") for d in OWN_DOCS)
        added = HEADERS[1:] if docs else HEADERS

        async def sending(message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in added}
                kept = [h for h in message.get("headers", []) if h[0].lower() not in names]
                message = {**message, "headers": kept + added}
            await send(message)

        await self.app(scope, receive, sending)


def _read(package: str, name: str) -> bytes:
    return (resources.files(package) / name).read_bytes()


def _checked_id(value: str, request: Request) -> str:
    """`value` when it is an id (and the path holds no `..` in any spelling), else 404."""
    raw = request.scope.get("raw_path", b"").lower()
    if b".." in raw or b"%2e" in raw or not ID_PATTERN.fullmatch(value):
        raise HTTPException(404, "not found")
    return value


def add_page(app: FastAPI, index: GraphIndex, slots: WorkSlots, images: PageImages) -> None:
    """The page, its assets and its evidence endpoints on `app` (renders share `slots`
    with the searches: both are CPU-bound)."""
    app.add_middleware(SecurityHeaders)
    files = {name: _read(package, path) for name, (package, path, _) in ASSETS.items()}
    html = _read("app.serve", "static/index.html")

    @app.get("/", include_in_schema=False)
    def page() -> Response:
        return Response(html, media_type="text/html; charset=utf-8", headers=CACHE)

    @app.get("/assets/{name}", include_in_schema=False)
    def asset(name: str) -> Response:
        if name not in ASSETS:
            raise HTTPException(404, "not found")
        return Response(files[name], media_type=ASSETS[name][2], headers=CACHE)

    @app.get("/page/{document_id}/{page:int}.png")
    async def page_image(document_id: str, page: int, request: Request) -> Response:
        """Page `page` of a PDF of the published index as PNG; header X-Page-Zoom: pixels
        per PDF point (bounding boxes are in points)."""
        _checked_id(document_id, request)
        current = index.latest()
        data, zoom = images.cached(current, document_id, page), ZOOM
        try:
            if data is None:  # a render is CPU-bound: it waits for a slot, as searches do
                async with slots.slot():
                    data, zoom = await run_in_threadpool(images.png, current, document_id, page)
        except NotServed:
            raise HTTPException(404, "no such page of a document of the index") from None
        except Busy as exc:
            retry = {"Retry-After": str(RETRY_AFTER_S)}
            raise HTTPException(503, str(exc), headers=retry) from None
        headers = {"x-page-zoom": f"{zoom:g}", "cache-control": "private, max-age=300"}
        return Response(data, media_type="image/png", headers=headers)

    @app.get("/section/{section_id}")
    def section(section_id: str, request: Request, unit: str | None = None) -> JSONResponse:
        """A section: title, path, document and its content nodes' text, those the text
        unit `unit` holds marked `cited`."""
        _checked_id(section_id, request)
        if unit is not None and not ID_PATTERN.fullmatch(unit):
            raise HTTPException(422, "unit: not an id")
        try:
            return JSONResponse(section_json(index.latest(), section_id, unit))
        except KeyError:
            raise HTTPException(404, "no such section in the index") from None

    @app.get("/entity/{entity_id}")
    def entity(entity_id: str, request: Request) -> JSONResponse:
        """An entity: description, relationships, sources and its communities' reports."""
        _checked_id(entity_id, request)
        try:
            return JSONResponse(entity_json(index.latest(), entity_id))
        except KeyError:
            raise HTTPException(404, "no such entity in the index") from None
