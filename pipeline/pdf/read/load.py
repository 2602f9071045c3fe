"""PDF loader (pymupdf): page texts joined by form feeds so chunks can map back to pages.
The document it opened is handed back open (`LoadedDoc.source`): the documents step parses
its structure from it (`pipeline.pdf.once`), so the file is opened once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymupdf

from pipeline.ingest.formats import LoadedDoc, LoadError, register
from pipeline.pdf.read.ocr_engine import current_mode, has_text, ocr_document
from pipeline.pdf.read.ocr_units import page_text
from pipeline.pdf.read.tex import decode_spans, decode_text
from pipeline.pdf.read.title import display_title, first_line, is_placeholder

PAGE_BREAK = "\f"
_META_KEYS = ("author", "subject", "keywords", "creator", "producer", "creationDate", "modDate")


def _mupdf_messages() -> str:
    """MuPDF's own warnings since the last call: the detail behind 'Failed to open stream'."""
    msgs = [m for m in pymupdf.TOOLS.mupdf_warnings(reset=True).splitlines() if m.strip()]
    return "; ".join(dict.fromkeys(msgs))[:300]


def _open(data: bytes) -> pymupdf.Document:
    pymupdf.TOOLS.mupdf_display_errors(False)  # keep stderr clean; reasons go to rejected rows
    _mupdf_messages()
    try:
        return pymupdf.open(stream=data, filetype="pdf")
    except Exception as e:  # pymupdf raises FileDataError (and others) on broken files
        detail = _mupdf_messages()
        reason = f"corrupt PDF: {type(e).__name__}: {e}"
        raise LoadError(f"{reason} ({detail})" if detail else reason) from None


def _page_text(page: pymupdf.Page) -> str:
    text = decode_text(page.get_text("text"))  # TeX's bitmap fonts: OT1's "fi" is a form feed
    # A stray form feed inside a page would break the page mapping.
    return text.replace("\r\n", "\n").replace("\r", "\n").replace(PAGE_BREAK, "\n")


def _display_title(page: pymupdf.Page) -> str:
    try:
        d = page.get_text("dict")
        decode_spans(d)
        return display_title(d) or ""
    except Exception:  # a page MuPDF cannot lay out: its first line names the document
        return ""


@register(".pdf")
def load_pdf(path: Path, data: bytes) -> LoadedDoc:
    """The PDF's document, with its pymupdf Document still open (`source`: the caller
    closes it); LoadError when it cannot be a document (closed then)."""
    doc = _open(data)
    try:
        return _load(path, doc)
    except BaseException:
        doc.close()
        raise


def _load(path: Path, doc: pymupdf.Document) -> LoadedDoc:
    """`load_pdf` on the opened document."""
    if doc.needs_pass:
        raise LoadError("encrypted PDF (password required)")
    if doc.page_count == 0:
        raise LoadError("PDF has no pages")
    repaired = bool(getattr(doc, "is_repaired", False))
    pages = [_page_text(p) for p in doc]
    # scanned pages and unreadable text layers: OCR'd when the engine is there (and the
    # setting allows), else skipped; an unreadable layer is never indexed as text
    found, ocr = ocr_document(doc, [has_text(t) for t in pages], current_mode())
    for pno in ocr.unreadable:
        pages[pno] = ""
    for pno, lines in found.items():
        pages[pno] = page_text(lines).replace(PAGE_BREAK, "\n")
    labels = [p.get_label() for p in doc]
    raw_meta = doc.metadata or {}
    title = (raw_meta.get("title") or "").strip()
    if is_placeholder(title):
        title = ""
    if not title and 0 not in found and 0 not in ocr.unreadable:  # page 1's own text
        title = _display_title(doc[0])
    toc_len = len(doc.get_toc())
    messages = _mupdf_messages()
    if not any(t.strip() for t in pages):
        if repaired:  # e.g. a truncated file: MuPDF rebuilt a skeleton with no readable content
            raise LoadError(f"corrupt PDF: repaired by MuPDF but no text recovered ({messages})")
        if ocr.unreadable and ocr.skipped:
            raise LoadError(
                "text layer unreadable (fonts without a Unicode map; "
                f"{next(iter(ocr.skipped.values()))})"
            )
        if ocr.skipped:  # OCR off, not installed, or failed: its reason
            raise LoadError(f"no text layer (image-only PDF; {next(iter(ocr.skipped.values()))})")
        if ocr.done:
            raise LoadError("no text layer (image-only PDF; OCR recognised no text)")
        raise LoadError("no text layer (image-only PDF; OCR not configured)")

    warnings: list[str] = ocr.warnings()
    empty = sum(1 for t in pages if not t.strip())
    if empty:
        warnings.append(f"{empty} page{'s' if empty > 1 else ''} without text")
    if repaired:
        warnings.append("damaged PDF repaired by MuPDF")
    if messages:
        warnings.append(f"mupdf: {messages}")

    meta: dict[str, Any] = {k: raw_meta[k] for k in _META_KEYS if raw_meta.get(k)}
    if raw_meta.get("format"):
        meta["pdf_format"] = raw_meta["format"]
    if any(labels):
        meta["page_labels"] = labels
    if toc_len:
        meta["toc_entries"] = toc_len
    if ocr.done:
        meta["ocr_pages"] = [p + 1 for p in ocr.done]

    return LoadedDoc(
        title=title or first_line(pages[0]) or path.stem,
        mime_type="application/pdf",
        text=PAGE_BREAK.join(pages),
        n_pages=len(pages),
        metadata=meta,
        warnings=warnings,
        source=doc,
    )
