"""Regions of PDF pages from pymupdf's layout-analysis model, in reading order: the model
(ONNX, on the CPU, shipped with pymupdf 2.x, nothing downloaded) classes each region (text,
title, section-header, caption, footnote, list-item, formula, picture, table, page-header,
page-footer) and pymupdf4llm orders them, columns included. The model is the cost of the
layout path (~0.2 s of CPU a page); its ONNX sessions are made here (`use_model`) for how
it runs in this project, and `workers` spreads pages over processes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pymupdf

from pipeline import memory
from pipeline.pdf.layout import gutters, stripes
from pipeline.pdf.read.page_units import Unit
from pipeline.pdf.thresholds import MIN_GUTTER_SHARE, TOUCH_GAP

MARGIN_CLASSES = ("page-header", "page-footer")
FAILED = "model-failed"  # the class of the one region of a page the model could not read
BATCH_PAGES = 16  # pages per model call; the heap is trimmed after each (see below)
MAX_PATHS = 10_000  # pages with more vector paths are read by position (`_too_many_paths`)
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
    - the page CNN and the table grid model keep their memory arenas: each is fed one image
      of a fixed size (a page at 300x300, a table at 360x300), so their arenas cannot grow
      (pymupdf turns arenas off because its other models' inputs vary in size); without
      one, the CNN's 60 MB of outputs were allocated afresh every page (80 -> 55 ms), the
      grid model's every table (59 -> 37 ms);
    - no memory patterns (ONNX Runtime plans and keeps the buffers of each input shape it
      meets; the graph model's shapes change every page): a worker's peak on 154 pages
      824 -> 612 MB, no slower;
    - the CNN's activations, PReLU with one slope, are the same function as LeakyReLU with that
      slope, which ONNX Runtime fuses into the convolution before it: 115 -> 84 ms a page
      on one thread (PReLU alone was a quarter of the CNN's time).
    The model pymupdf loaded at import is replaced, and freed. Should pymupdf's internals
    differ from those of the pinned version, its own model is kept (slower, same output)."""
    global _model_threads
    if _model_threads == threads:
        return
    _model_threads = threads
    import onnxruntime as ort
    from pymupdf.layout import DocumentLayoutAnalyzer

    try:
        wrapper = DocumentLayoutAnalyzer.get_model()  # what pymupdf.layout.activate() loads
        model = wrapper._model
        for owner in (model, model.feature_extractor, model.table_grid_extractor):
            for name, old in list(vars(owner).items() if owner is not None else ()):
                if not isinstance(old, ort.InferenceSession):
                    continue
                opts = ort.SessionOptions()
                opts.enable_cpu_mem_arena = _one_size(old)
                opts.intra_op_num_threads = threads
                opts.enable_mem_pattern = False  # a plan kept per input shape: +200 MB, no gain
                opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
                path = old._model_path
                new = ort.InferenceSession(_fusable(path), opts, old.get_providers())
                new._model_path = path  # where it came from (made from bytes): for a next call
                setattr(owner, name, new)
    except Exception:  # noqa: BLE001 - another pymupdf: its own sessions
        return
    pymupdf._get_layout = wrapper.predict


def _one_size(session: Any) -> bool:
    """Whether the session's one input has a fixed size past its batch axis (pymupdf calls
    these models one image at a time)."""
    inputs = session.get_inputs()
    return len(inputs) == 1 and all(isinstance(d, int) for d in inputs[0].shape[1:])


def _fusable(path: str) -> bytes:
    """The ONNX model at `path` with each PReLU whose slope is one number written as the
    LeakyReLU it equals (ONNX Runtime fuses LeakyReLU into the Conv before it, not PReLU)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(path)
    graph = model.graph
    slopes = {t.name: t for t in graph.initializer}
    done = set()
    for node in graph.node:
        slope = slopes.get(node.input[1]) if node.op_type == "PRelu" else None
        if slope is None or numpy_helper.to_array(slope).size != 1:
            continue
        alpha = float(numpy_helper.to_array(slope).ravel()[0])
        leaky = helper.make_node("LeakyRelu", [node.input[0]], list(node.output), node.name)
        leaky.attribute.append(helper.make_attribute("alpha", alpha))
        node.CopyFrom(leaky)
        done.add(slope.name)
    used = {name for node in graph.node for name in node.input}
    kept = [t for t in graph.initializer if t.name not in done or t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return model.SerializeToString()


def _model_regions(pdf: pymupdf.Document, pages: list[int]) -> list[list[Region]]:
    """Regions of `pages` in reading order. `pymupdf4llm.to_json` serialises this same
    parse; the objects are used directly, without the JSON round trip."""
    from pymupdf4llm.helpers.document_layout import parse_document

    if _model_threads is None:
        use_model()
    stripes.install()
    gutters.install()

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


def _touch(a: tuple[float, ...], b: tuple[float, ...], gap: float = TOUCH_GAP) -> bool:
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
    if best < MIN_GUTTER_SHARE * width:
        return regions
    left = [r for r in body if r.bbox[2] <= cut]
    right = [r for r in body if r.bbox[0] >= cut]
    margins = [r for r in regions if r.cls in MARGIN_CLASSES]
    return left + right + margins


def _failed(reason: str) -> list[Region]:
    return [Region(FAILED, (0.0, 0.0, 0.0, 0.0), {"error": reason[:200]})]


def _too_many_paths(page: pymupdf.Page) -> str | None:
    """Why the model must not read `page`, if it must not: more than MAX_PATHS vector paths.
    The model's text extraction segments the page around its vector paths, and on a page of
    18,560 (a drawing in pypdf's test files) that took 240 s; the documents here have at most
    ~800 (a CAD diagram). Counting them costs ~2 ms a page."""
    paths = len(page.get_cdrawings())
    return f"{paths} vector paths, over {MAX_PATHS}" if paths > MAX_PATHS else None


def regions_in_process(pdf: pymupdf.Document, pages: list[int]) -> list[list[Region]]:
    """Regions of `pages` in batches; where a batch fails, page by page, and a page the model
    cannot read (or must not: `_too_many_paths`) is one FAILED region (its text is then
    ordered by position)."""
    out: list[list[Region]] = []
    for start in range(0, len(pages), BATCH_PAGES):
        memory.release()  # freed page buffers fragment the heap: 154 pages 913 -> 685 MB
        batch = pages[start : start + BATCH_PAGES]
        skip = {pno: why for pno in batch if (why := _too_many_paths(pdf[pno]))}
        read = [pno for pno in batch if pno not in skip]
        got: dict[int, list[Region]] = {}
        try:
            got = dict(zip(read, _model_regions(pdf, read), strict=True)) if read else {}
        except Exception:  # noqa: BLE001 - find the page, keep the others
            for pno in read:
                try:
                    got[pno] = _model_regions(pdf, [pno])[0]
                except Exception as exc:  # noqa: BLE001 - one odd page must not cost the document
                    got[pno] = _failed(f"{type(exc).__name__}: {exc}")
        out += [got[pno] if pno in got else _failed(skip[pno]) for pno in batch]
    return out


def finish(pdf: pymupdf.Document, regions: list[list[Region]]) -> list[list[Region]]:
    """The model's regions of every page, its rotation undone (the model read the page
    unrotated: so is its text) and wide gutters cut."""
    for pno, rs in enumerate(regions):
        page = pdf[pno]
        if page.rotation:
            page.remove_rotation()
        regions[pno] = _split_wide_gutter(rs, page.rect.width)
    return regions
