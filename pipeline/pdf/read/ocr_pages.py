"""Scanned PDF pages in the structure parser: the OCR'd lines of an image-only page
(`pipeline.pdf.read.ocr_engine`), made into units by `pipeline.pdf.read.ocr_units`, enter the
parse as a text-layer page's units do; their headings are found by size (OCR knows no
fonts, nothing is bold or set in a math font), and the nodes and document metadata say
which pages came from OCR."""

from __future__ import annotations

import json
from typing import Any

import pymupdf

from pipeline.config import StructureSettings
from pipeline.pdf.read.load import PAGE_BREAK
from pipeline.pdf.read.ocr_engine import OCR_DPI, OcrReport, has_text, ocr_document
from pipeline.pdf.read.ocr_units import ocr_units
from pipeline.pdf.read.page_units import Unit
from pipeline.pdf.read.tex import decode_text
from pipeline.structure.model import DocStructure


def _has_text(pdf: pymupdf.Document, doc: dict[str, Any]) -> list[bool]:
    """Per page, whether it has a text layer, from the loaded document (its text by page,
    the pages the loader OCR'd): no second pass over every page of every PDF for the few
    scans. Read from the pages when the stored text does not match them."""
    pages = (doc.get("text") or "").split(PAGE_BREAK)
    if len(pages) != pdf.page_count:
        return [has_text(decode_text(pdf[pno].get_text("text"))) for pno in range(pdf.page_count)]
    try:
        ocred = set(json.loads(doc.get("metadata") or "{}").get("ocr_pages", []))
    except (ValueError, AttributeError):
        ocred = set()
    return [bool(t.strip()) and pno + 1 not in ocred for pno, t in enumerate(pages)]


def structure_ocr(
    out: DocStructure, pdf: pymupdf.Document, cfg: StructureSettings, doc: dict[str, Any]
) -> tuple[dict[int, list[Unit]], OcrReport]:
    """Units of the image-only and unreadable pages of document row `doc` that were OCR'd
    (an unreadable one not OCR'd: none), by page, and the OCR report (its warnings added to
    `out`, pages the engine failed on to `out.failures`; time and page count to
    `out.stats`)."""
    found, report = ocr_document(pdf, _has_text(pdf, doc), cfg.ocr, out.stats)
    out.warnings.extend(report.warnings())
    for pno in report.failed:
        out.failures.append((f"page {pno + 1}: {report.skipped[pno]}", "page left out"))
    # a page where OCR read nothing (a photo, a chart) keeps its picture as a figure
    units = {pno: ocr_units(lines, pno) for pno, lines in found.items()}
    units = {pno: us for pno, us in units.items() if us}
    # an unreadable text layer never becomes nodes: without its OCR the page has none
    return {pno: [] for pno in report.unreadable} | units, report


def mark_ocr(
    items: list[dict[str, Any]], read: set[int], report: OcrReport, meta: dict[str, Any]
) -> None:
    """In place: items of the pages whose text came from OCR (`read`) carry `ocr: true` in
    their node metadata; the document's metadata lists the OCR'd pages (1-based) and those
    skipped, with why."""
    done = set(report.done)
    for it in items:
        if it["unit"].page in read:
            it["meta"] = {**(it.get("meta") or {}), "ocr": True}
    if report.done:
        meta |= {"ocr_pages": sorted(p + 1 for p in done), "ocr_dpi": OCR_DPI}
    if report.skipped:
        meta["ocr_skipped"] = {str(p + 1): why for p, why in sorted(report.skipped.items())}


__all__ = ["mark_ocr", "structure_ocr"]
