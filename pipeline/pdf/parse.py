"""PDF structure (pymupdf): logical content nodes in reading order, a section tree from the
outline and/or detected headings, page labels on every node, and note/citation/caption edges.

Two ways to find and classify the page regions, by `pdf_mode`:
- "layout" (default): pymupdf's layout-analysis model (`layout.parse_layout`): region classes and
  reading order learned from many layouts; ~0.25 s of CPU a page (the other: 5-50 ms),
  pages spread over worker processes (`layout.workers`).
- "heuristic": hand-written rules over font sizes and positions (`rules.heuristic`), ~10-20
  ms a page, for very large corpora where time per page matters more than unusual layouts.
Both give classified items that `build.sections` turns into the structure.

Where it runs: in the documents step, on the document the loader opened (`pdf.once`), so
an index reads, hashes and opens each PDF once; the structure step takes that parse as
data. `parse_pdf` (a file's bytes) is the fallback when there is none (a step run alone).
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pymupdf

from pipeline.config import StructureSettings
from pipeline.pdf.build.annotations import add_links, read_links
from pipeline.pdf.build.sections import build, merge_continuations
from pipeline.pdf.read.listings import mark_code
from pipeline.pdf.read.ocr_pages import mark_ocr, structure_ocr
from pipeline.structure.model import DocStructure
from pipeline.structure.parsers import register
from pipeline.structure.text import parse_text

if TYPE_CHECKING:
    from pipeline.pdf.layout.workers import Pages

PdfMode = Literal["layout", "heuristic"]
DEFAULT_MODE: PdfMode = "layout"


def pdf_mode(settings: StructureSettings | None) -> PdfMode:
    """The PDF path of `settings` (StructureSettings.pdf_structure), else the default."""
    mode = getattr(settings, "pdf_structure", None) or DEFAULT_MODE
    if mode not in ("layout", "heuristic"):
        raise ValueError(f"unknown PDF structure mode {mode!r} (layout or heuristic)")
    return mode


def label_pages(doc: pymupdf.Document, printed: dict[int, str]) -> list[str]:
    """Logical page label per page: the PDF's own page labels, else the printed number."""
    labels = []
    for pno in range(doc.page_count):
        try:
            lab = doc[pno].get_label()
        except Exception:  # noqa: BLE001 - a broken label tree must not cost the document
            lab = ""
        labels.append(lab or printed.get(pno, ""))
    return labels


@dataclass
class PdfInput:
    """What the PDF parser reads, passed in (no module state): the document row (id,
    source_path, title, text, metadata), the settings, and the PDF as the loader's open
    document (`pdf`, not closed here) or as its bytes (`data`, opened here); the layout
    regions its pages already have (`pages`, read ahead by worker processes), and the file
    with its sha256 (`path`, `sha256`) for worker processes to read a long PDF's pages."""

    doc: dict[str, Any]
    settings: StructureSettings
    pdf: pymupdf.Document | None = None
    data: bytes | None = None
    pages: Pages | None = None
    path: Path | None = None
    sha256: str = ""


def parse_pdf(
    doc: dict[str, Any],
    data: bytes | None,
    settings: StructureSettings | None = None,
    mode: PdfMode | None = None,
) -> DocStructure:
    """Structure of one PDF from its bytes (by `mode`, default from `settings`);
    plain-text structure (with a warning) when the bytes are gone."""
    cfg = settings or StructureSettings()
    if data is None:
        out = parse_text(doc["id"], doc["source_path"], doc["title"], doc["text"] or "")
        out.warnings.append("PDF file changed or missing: plain-text structure from stored text")
        return out
    return parse_input(PdfInput(doc, cfg, data=data), mode)


def parse_input(src: PdfInput, mode: PdfMode | None = None) -> DocStructure:
    """Structure of the PDF of `src` (by `mode`, default from its settings)."""
    cfg, doc = src.settings, src.doc
    mode = mode or pdf_mode(cfg)
    t0 = time.perf_counter()
    out = DocStructure(doc["id"], doc["source_path"], doc["title"])
    with contextlib.ExitStack() as stack:
        pdf = src.pdf
        if pdf is None:
            pdf = stack.enter_context(pymupdf.open(stream=src.data, filetype="pdf"))
        toc = pdf.get_toc(simple=True)
        ocr, report = structure_ocr(out, pdf, cfg, doc)  # scanned pages' units, if any
        if mode == "layout":
            from pipeline.pdf.layout.parse_layout import parse_layout

            items, printed, meta = parse_layout(out, pdf, cfg, src.data, ocr, src.pages)
        else:
            from pipeline.pdf.rules.heuristic import parse_heuristic

            items, printed, meta = parse_heuristic(out, pdf, cfg, ocr)
        mark_code(items)
        mark_ocr(items, set(ocr), report, meta)
        labels = label_pages(pdf, printed)
        n_pages = pdf.page_count
        links = read_links(pdf)
    build(out, toc, merge_continuations(items), labels)
    add_links(out, links)
    meta |= {
        "parser": "pymupdf" if mode == "heuristic" else "pymupdf-layout",
        "pages": n_pages,
        "page_labels": sum(1 for lab in labels if lab),
        "outline_entries": len(toc),
    }
    out.sections[0]["metadata"] = json.dumps(meta, sort_keys=True)
    # Timings vary run to run: they go to run metadata, never into the tables.
    out.stats.update(pdf_pages=n_pages, pdf_parse_s=time.perf_counter() - t0)
    out.stats.setdefault("pdf_table_s", 0.0)
    return out


@register("application/pdf")
def _parse_pdf_registered(
    doc: dict[str, Any], data: bytes | None, settings: StructureSettings | None = None
) -> DocStructure:
    return parse_pdf(doc, data, settings)


__all__ = ["PdfInput", "parse_input", "parse_pdf", "pdf_mode", "DEFAULT_MODE"]
