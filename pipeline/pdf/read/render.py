"""One PDF page as a PNG image, for `docgraph serve`'s query page (app/serve/page_images.py).

Why here: every pymupdf call lives under pipeline/pdf, so what the server may do with a PDF
file is visible in one package. The caller has already checked that the file belongs to the
index and the page to the document; this opens the file, renders that page and nothing else.
"""

from __future__ import annotations

from pathlib import Path


def page_png(path: Path, page: int, zoom: float) -> bytes | None:
    """Page `page` (1-based) of the PDF at `path` as PNG bytes, `zoom` pixels per point (an
    RGB image, no alpha); None when the file has fewer pages."""
    import pymupdf

    with pymupdf.open(path) as doc:
        if not 1 <= page <= doc.page_count:
            return None
        pix = doc[page - 1].get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        return pix.tobytes("png")
