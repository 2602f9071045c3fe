"""Regions of PDF pages from pymupdf's layout-analysis model, in reading order: the model
(ONNX, on the CPU, shipped with pymupdf 2.x, nothing downloaded) classes each region (text,
title, section-header, caption, footnote, list-item, formula, picture, table, page-header,
page-footer) and pymupdf4llm orders them, columns included. A long PDF is split into page
ranges run in worker processes: the model is the cost of the layout path (~0.3-0.5 s a
page on one core), and its pages are independent."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymupdf

from pipeline.ingest.pdf_units import Unit

MARGIN_CLASSES = ("page-header", "page-footer")
FAILED = "model-failed"  # the class of the one region of a page the model could not read
BATCH_PAGES = 64  # pages per model call: bounds the memory of the parsed pages
PAGES_PER_WORKER = 24  # fewer pages than this per process: loading the model costs more
_model_threads: int | None = None  # ONNX threads of the model use_model installed


@dataclass
class Region:
    """One region of a page as the layout model classed it, with its text as units."""

    cls: str
    bbox: tuple[float, float, float, float]
    table: dict[str, Any] | None
    unit: Unit | None = None  # its lines (None: no text, e.g. a picture)
    parts: list[tuple[str, Unit]] | None = None  # (class, unit): headings split from text


def use_model(threads: int = 0) -> None:
    """Make pymupdf's layout model (what `page.get_layout` runs) one whose ONNX sessions
    suit this project, with the same weights and outputs:
    - threads sleep between calls instead of spinning (ONNX Runtime's default): spinning
      threads kept a core busy through the rest of each page's work, so two worker
      processes on 2 CPUs were no faster than one;
    - `threads` threads a session (0: ONNX Runtime's default, every core), 1 in a worker
      process that shares the CPUs with others;
    - the page CNN keeps its memory arena: its input is always 300x300, so the arena cannot
      grow (pymupdf turns arenas off because its other models' inputs vary in size), and
      without one its 60 MB of outputs were allocated afresh every page (80 -> 55 ms).
    The model pymupdf loaded at import is replaced, and freed."""
    global _model_threads
    if _model_threads == threads:
        return
    import onnxruntime as ort
    from pymupdf.layout import DocumentLayoutAnalyzer

    wrapper = DocumentLayoutAnalyzer.get_model()  # what pymupdf.layout.activate() loads
    model = wrapper._model
    for owner in (model, model.feature_extractor, model.table_grid_extractor):
        for name, old in list(vars(owner).items() if owner is not None else ()):
            if not isinstance(old, ort.InferenceSession):
                continue
            opts = ort.SessionOptions()
            opts.enable_cpu_mem_arena = owner is model.feature_extractor
            opts.intra_op_num_threads = threads
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            setattr(owner, name, ort.InferenceSession(old._model_path, opts, old.get_providers()))
    pymupdf._get_layout = wrapper.predict
    _model_threads = threads


def _model_regions(pdf: pymupdf.Document, pages: list[int]) -> list[list[Region]]:
    """Regions of `pages` in reading order. `pymupdf4llm.to_json` serialises this same
    parse; the objects are used directly, without the JSON round trip."""
    from pymupdf4llm.helpers.document_layout import parse_document

    if _model_threads is None:
        use_model()

    parsed = parse_document(pdf, pages=pages, use_ocr=False, force_text=False)
    return [
        _join_pictures(
            [Region(b.boxclass, (b.x0, b.y0, b.x1, b.y1), _grid(b.table)) for b in p.boxes]
        )
        for p in parsed.pages
    ]


def _grid(table: dict[str, Any] | None) -> dict[str, Any] | None:
    """What is used of a table: its cell texts and shape."""
    if not table:
        return None
    return {k: table.get(k) for k in ("extract", "row_count", "col_count")}


def _join_pictures(regions: list[Region]) -> list[Region]:
    """Picture regions that touch are one figure drawn in pieces (tiles, strips): one region
    over all of them, where the first piece was in reading order."""
    out: list[Region] = []
    for r in regions:
        if r.cls == "picture":
            for o in out:
                if o.cls == "picture" and _touch(o.bbox, r.bbox):
                    o.bbox = (
                        min(o.bbox[0], r.bbox[0]),
                        min(o.bbox[1], r.bbox[1]),
                        max(o.bbox[2], r.bbox[2]),
                        max(o.bbox[3], r.bbox[3]),
                    )
                    break
            else:
                out.append(r)
        else:
            out.append(r)
    return out


def _touch(a: tuple[float, ...], b: tuple[float, ...], gap: float = 2.0) -> bool:
    return a[0] - gap <= b[2] and b[0] - gap <= a[2] and a[1] - gap <= b[3] and b[1] - gap <= a[3]


def _split_wide_gutter(regions: list[Region], width: float) -> list[Region]:
    """The model's reading order, side by side where a wide blank strip (5% of the page
    width or more) runs down the whole page: two pages of a spread, or panels, are read
    one after the other. The model reads such a page row by row across the strip; narrow
    column gutters are left to the model."""
    body = [r for r in regions if r.cls not in MARGIN_CLASSES]
    spans = sorted((r.bbox[0], r.bbox[2]) for r in body)
    if len(spans) < 2:
        return regions
    best, cut, end = 0.0, 0.0, spans[0][1]
    for x0, x1 in spans[1:]:
        if x0 - end > best:
            best, cut = x0 - end, (x0 + end) / 2
        end = max(end, x1)
    if best < 0.05 * width:
        return regions
    left = [r for r in body if r.bbox[2] <= cut]
    right = [r for r in body if r.bbox[0] >= cut]
    margins = [r for r in regions if r.cls in MARGIN_CLASSES]
    return left + right + margins


def _regions_in_process(pdf: pymupdf.Document, pages: list[int]) -> list[list[Region]]:
    """Regions of `pages` in batches; where a batch fails, page by page, and a page the model
    cannot read is one FAILED region (its text is then ordered by position)."""
    out: list[list[Region]] = []
    for start in range(0, len(pages), BATCH_PAGES):
        batch = pages[start : start + BATCH_PAGES]
        try:
            out += _model_regions(pdf, batch)
            continue
        except Exception:  # noqa: BLE001 - find the page, keep the others
            pass
        for pno in batch:
            try:
                out += _model_regions(pdf, [pno])
            except Exception as exc:  # noqa: BLE001 - one odd page must not cost the document
                reason = f"{type(exc).__name__}: {exc}"[:200]
                out.append([Region(FAILED, (0.0, 0.0, 0.0, 0.0), {"error": reason})])
    return out


def worker_count(n_pages: int) -> int:
    """Processes for a PDF of `n_pages`: one a usable CPU (each runs its model on one
    thread), at least PAGES_PER_WORKER pages each."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cpus or 1, n_pages // PAGES_PER_WORKER))


def _in_workers(data: bytes, ranges: list[list[int]]) -> list[list[list[Region]] | None]:
    """Regions of each page set, each set read by a `python -m` process of its own
    (not multiprocessing: that re-runs the caller's main script, and forking would copy the
    model's ONNX threads). None for a range whose process failed."""
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    with tempfile.TemporaryDirectory(prefix="docgraph-pdf-") as tmp:
        src = Path(tmp) / "doc.pdf"
        src.write_bytes(data)
        procs = []
        for i, pages in enumerate(ranges):
            out = Path(tmp) / f"{i}.pickle"
            cmd = [sys.executable, "-m", __name__, str(src), str(out), *map(str, pages)]
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            procs.append((proc, out))
        results: list[list[list[Region]] | None] = []
        for proc, out in procs:
            proc.communicate()
            ok = proc.returncode == 0 and out.exists()
            results.append(pickle.loads(out.read_bytes()) if ok else None)
    return results


def layout_regions(
    pdf: pymupdf.Document, data: bytes | None, workers: int | None = None
) -> list[list[Region]]:
    """Regions of every page of `pdf` (whose bytes are `data`), in reading order, with
    wide gutters cut; a long PDF's pages dealt out to worker processes (every n-th page to
    one, so that dense chapters are shared)."""
    pages = list(range(pdf.page_count))
    n = worker_count(len(pages)) if workers is None else workers
    if n <= 1 or data is None:
        regions = _regions_in_process(pdf, pages)
    else:
        sets = [pages[i::n] for i in range(n)]
        regions = [[] for _ in pages]
        for some, got in zip(sets, _in_workers(data, sets), strict=True):
            for pno, rs in zip(some, got or _regions_in_process(pdf, some), strict=True):
                regions[pno] = rs
    for pno, rs in enumerate(regions):
        page = pdf[pno]
        if page.rotation:  # the model read the page unrotated: so is its text
            page.remove_rotation()
        regions[pno] = _split_wide_gutter(rs, page.rect.width)
    return regions


if __name__ == "__main__":  # a worker: python -m pipeline.structure.pdf_regions PDF OUT PAGE...
    import pipeline.structure.pdf_regions as pdf_regions  # Region pickled under its module's name

    pdf_regions.use_model(threads=1)
    with pymupdf.open(sys.argv[1]) as doc:
        result = pdf_regions._regions_in_process(doc, [int(p) for p in sys.argv[3:]])
    Path(sys.argv[2]).write_bytes(pickle.dumps(result))
