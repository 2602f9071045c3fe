"""A cited PDF page as a PNG, for the query page: found through the index, cached in memory.

Why here and so guarded: the server reads files on a client's say-so only through this
module. A page is served only for a document of the published version the index reads: the
id is looked up in that version's `documents` table, the file is that row's `source_path`
under the settings' `input_dir` (resolved; it must stay inside the folder, and still have
the size the index recorded), the document must be a PDF and the page within its
`n_pages`. Anything else is `NotServed` (a 404) before any file is opened. Rendering
(pymupdf, ~20 ms a page) is cached per (version, document, page) in an LRU bounded both
in entries and in bytes, so a page cited by many answers is rendered once, and a newly
published version never shows an old rendering.

    PageImages(max_entries, max_bytes).png(index, document_id, page) -> (png bytes, zoom)
    PageImages.cached(index, document_id, page) -> png bytes or None (no slot needed)
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from pipeline.pdf.read.render import page_png

if TYPE_CHECKING:
    from pipeline.query.tables import IndexTables

ZOOM = 1.5  # pixels per PDF point (108 dpi): a page ~900 px wide
ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,128}")
MAX_PAGE = 100_000


class NotServed(Exception):
    """No such page of a document of the published version (a 404)."""


class PageImages:
    """PNG renderings of PDF pages, the most recent `max_entries` (at most `max_bytes` in
    all) kept in memory."""

    def __init__(self, max_entries: int = 64, max_bytes: int = 64 * 2**20) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._cache: OrderedDict[tuple[str, str, int], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._documents: dict[str, pl.DataFrame] = {}  # version -> its PDF documents
        self.renders = 0  # pages rendered (not from the cache)

    def cached(self, index: IndexTables, document_id: str, page: int) -> bytes | None:
        """The PNG of the page when this version's rendering of it is in the cache (it was
        checked when rendered), else None; reads nothing."""
        with self._lock:
            hit = self._cache.get((str(index.version), document_id, page))
            if hit is not None:
                self._cache.move_to_end((str(index.version), document_id, page))
            return hit

    def png(self, index: IndexTables, document_id: str, page: int) -> tuple[bytes, float]:
        """The PNG of page `page` (1-based) of the document, and its pixels per point."""
        path = self.source(index, document_id, page)
        key = (str(index.version), document_id, page)
        hit = self.cached(index, document_id, page)
        if hit is not None:
            return hit, ZOOM
        data = render(path, page)
        with self._lock:
            self.renders += 1
            if key not in self._cache and len(data) <= self.max_bytes:
                self._cache[key] = data
                self._bytes += len(data)
                while len(self._cache) > self.max_entries or self._bytes > self.max_bytes:
                    _, old = self._cache.popitem(last=False)
                    self._bytes -= len(old)
        return data, ZOOM

    def source(self, index: IndexTables, document_id: str, page: int) -> Path:
        """The file of the document's page, or NotServed; reads no file, only stats it."""
        if not ID_PATTERN.fullmatch(document_id) or not 1 <= page <= MAX_PAGE:
            raise NotServed("no such document page")
        docs = self._pdf_documents(index)
        row = docs.filter(pl.col("id") == document_id)
        if row.height == 0:
            raise NotServed("no such PDF document in the published index")
        source, n_pages, size = row["source_path"][0], row["n_pages"][0], row["byte_size"][0]
        if n_pages is None or page > n_pages:
            raise NotServed(f"the document has {n_pages or 0} pages")
        if not source or ".." in Path(source).parts:
            raise NotServed("no such document file")
        root = Path(index.settings.input_dir).resolve()
        path = (root / source).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise NotServed("the document's file is not in the input folder")
        if size is not None and path.stat().st_size != size:
            raise NotServed("the file changed since the published version indexed it")
        return path

    def _pdf_documents(self, index: IndexTables) -> pl.DataFrame:
        version = str(index.version)
        with self._lock:
            docs = self._documents.get(version)
        if docs is None:
            columns = ["id", "source_path", "n_pages", "mime_type", "byte_size"]
            docs = index.table("documents", columns)
            docs = docs.filter(pl.col("mime_type") == "application/pdf")
            with self._lock:
                self._documents = {version: docs}  # the newest version only
        return docs


def render(path: Path, page: int) -> bytes:
    """Page `page` (1-based) of the PDF at `path` as PNG bytes at ZOOM."""
    data = page_png(path, page, ZOOM)
    if data is None:  # the file changed since it was indexed
        raise NotServed("the file has fewer pages than the index recorded")
    return data
