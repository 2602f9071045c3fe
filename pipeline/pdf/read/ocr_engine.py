"""OCR of scanned (image-only) PDF pages and of unreadable text layers, when the optional
`ocr` extra is installed.

The engine is RapidOCR's ONNX build (`rapidocr-onnxruntime`): its PP-OCR detection and
recognition models ship inside the wheel and it has no download path, so it runs offline
on the CPU with the onnxruntime the project already has. It is imported lazily, once per
process, and only when a page needs it; without the extra an image-only page is skipped
with a reason that says how to enable OCR.

Only pages with no text layer whose content is images or vector drawings are OCR'd, and
pages whose text layer is unreadable (`unreadable`: a font without a Unicode map gives its
glyph ids): a page with text keeps its own text, a blank page stays blank. Both the loader
(document text) and the structure parser (lines with positions) read a page's OCR; results
are kept per process, keyed by the rendered image's digest, so a run that does both in one
process (the default) OCRs a page once, and a page scanned twice (a copy of a file) once
too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from pipeline.pdf.thresholds import (
    MIN_UNREADABLE_CHARS,
    OCR_MIN_SCORE,
    SCAN_MIN_COVER,
    UNREADABLE_SHARE,
)

if TYPE_CHECKING:  # imported where a page is read: shards.py imports this module for every run
    import pymupdf

OcrMode = Literal["auto", "off"]
ENGINE_MODULE = "rapidocr_onnxruntime"  # of the package rapidocr-onnxruntime
INSTALL_HINT = "pip install 'docgraph[ocr]'"
# Lines are read from a 300 dpi image: the recogniser reads each line scaled to 48 px high,
# and a 10-11 pt line's box is about that high at 300 dpi; at 150-200 dpi the crops are
# scaled up and the blur costs the spaces ("Thecommitteereviewedthereportsof" on our
# two-column test page at 200, every word at 250-400). The recogniser's input size does not
# depend on the dpi, and lines are found on a smaller image (`_recognise`), so 300 costs
# no more CPU than 150. Lines are found at 150 dpi: at 100 the detector bridged a two-column
# paper's gutter (one box across both columns; words in reading order 76% -> 91%).
OCR_DPI = 300
DET_DPI = 150
# A large page (a 30-inch scan, a poster) is read at a lower dpi, so that its images hold at
# most this many pixels: at 300 dpi a 2160 pt square page was 81 MP and its OCR took 4 GB;
# the detector's memory grows with its image (a 5 MP one: +0.9 GB, 2.5 MP: +0.4 GB). A4 and
# Letter keep 300 / 150 dpi.
OCR_MAX_PIXELS = 20_000_000
DET_MAX_PIXELS = 2_500_000
_CACHE_PAGES = 256
LOAD_FAILED = "OCR engine failed to load"  # a broken install: a failure, not a setting

# The `structure.ocr` setting for code that has no settings object (the loader); the
# documents asset sets it around loading (`ocr_setting`). Its default is the setting's.
_MODE: ContextVar[OcrMode | None] = ContextVar("docgraph_ocr_mode", default=None)


@dataclass(frozen=True)
class OcrLine:
    """One recognised line: text, its box in PDF points (page space) and the engine's
    confidence."""

    text: str
    bbox: tuple[float, float, float, float]
    score: float


class OcrUnavailable(Exception):
    """OCR was needed but is off or not installed; the message is the user-facing reason."""


def current_mode() -> OcrMode:
    """The OCR setting in force: the one `ocr_setting` set, else the settings default."""
    mode = _MODE.get()
    if mode is None:
        from pipeline.config import StructureSettings

        mode = StructureSettings().ocr
    return mode


@contextlib.contextmanager
def ocr_setting(mode: OcrMode) -> Iterator[None]:
    """Loads inside this block follow `mode` (the run's `structure.ocr`)."""
    token = _MODE.set(mode)
    try:
        yield
    finally:
        _MODE.reset(token)


_NO_TEXT = re.compile(r"[\ufffd\x00-\x08\x0e-\x1b\x7f-\x9f\ue000-\uf8ff]")
_SPACE = re.compile(r"\s")


def unreadable(text: str) -> bool:
    """Whether a page's text layer is no text: at least UNREADABLE_SHARE of it."""
    chars = len(text) - len(_SPACE.findall(text))
    return chars >= MIN_UNREADABLE_CHARS and len(_NO_TEXT.findall(text)) >= UNREADABLE_SHARE * chars


def has_text(text: str) -> bool:
    """Whether a page's extracted text is text to keep: not blank, not unreadable."""
    return bool(text.strip()) and not unreadable(text)


def image_only(page: pymupdf.Page) -> bool:
    """No text layer, and images or drawings cover at least SCAN_MIN_COVER of the page (a scan, or
    text converted to outlines); a blank page is not one."""
    import pymupdf

    if page.get_text("text").strip():
        return False
    area = abs(page.rect)
    if not area:
        return False
    covered = pymupdf.Rect()
    for kind, rect in page.get_bboxlog():
        if "image" in kind or "path" in kind or "imgmask" in kind:
            covered |= pymupdf.Rect(rect) & page.rect
    return abs(covered) >= SCAN_MIN_COVER * area


_engine: Any = None
_engine_error: str | None = None
_lock = threading.Lock()
_cache: OrderedDict[tuple[bytes, float, float], list[OcrLine]] = OrderedDict()


def ocr_installed() -> bool:
    """Whether the OCR extra is installed (found, not imported: cheap enough for every run's
    shard fingerprints)."""
    return importlib.util.find_spec(ENGINE_MODULE) is not None


def engine_status() -> str | None:
    """None when the engine can run, else why not (not installed, or failed to load)."""
    return None if _load_engine() is not None else _engine_error


def _load_engine() -> Any:
    """The OCR engine, loaded once per process; None (and `_engine_error`) when it cannot."""
    global _engine, _engine_error
    with _lock:
        if _engine is None and _engine_error is None:
            try:
                RapidOCR = importlib.import_module(ENGINE_MODULE).RapidOCR  # noqa: N806
            except ImportError as exc:
                if isinstance(exc, ModuleNotFoundError) and exc.name == ENGINE_MODULE:
                    _engine_error = f"OCR not installed: {INSTALL_HINT}"
                else:  # installed, but a library under it is missing (OpenCV needs libGL)
                    _engine_error = f"{LOAD_FAILED} ({type(exc).__name__}: {exc})"
            else:
                try:
                    _engine = RapidOCR()
                except Exception as exc:  # noqa: BLE001 - a broken install is a reason, not a crash
                    _engine_error = f"{LOAD_FAILED} ({type(exc).__name__}: {exc})"
        return _engine


def unavailable_reason(mode: OcrMode) -> str | None:
    """Why image-only pages cannot be OCR'd under `mode`, None when they can."""
    if mode == "off":
        return "OCR is off (structure.ocr: off; set it to auto to OCR scanned pages)"
    return engine_status()


def ocr_page(page: pymupdf.Page, stats: dict[str, float] | None = None) -> list[OcrLine]:
    """Recognised lines of one page, top to bottom. Raises OcrUnavailable when no engine;
    engine errors propagate (the caller records them)."""
    eng = _load_engine()
    if eng is None:
        raise OcrUnavailable(_engine_error or "OCR not available")
    pix = _render(page, OCR_DPI, OCR_MAX_PIXELS)
    # the image and the page size: the boxes are scaled to the page's points
    cache_key = (pix.digest, round(page.rect.width, 2), round(page.rect.height, 2))
    with _lock:
        if cache_key in _cache:
            _cache.move_to_end(cache_key)
            return _cache[cache_key]
    t0 = time.perf_counter()
    lines = _recognise(eng, page, pix)
    lines.sort(key=lambda ln: (round(ln.bbox[1]), ln.bbox[0]))
    if stats is not None:
        stats["ocr_s"] = stats.get("ocr_s", 0.0) + time.perf_counter() - t0
        stats["ocr_pages"] = stats.get("ocr_pages", 0.0) + 1
    with _lock:
        _cache[cache_key] = lines
        while len(_cache) > _CACHE_PAGES:
            _cache.popitem(last=False)
    return lines


def _render(page: pymupdf.Page, dpi: int, max_pixels: int) -> pymupdf.Pixmap:
    """The page in RGB at `dpi`, or at the dpi that makes it `max_pixels`, if lower."""
    import pymupdf

    area = max(page.rect.width * page.rect.height, 1.0) / 72.0**2  # square inches
    dpi = min(dpi, max(int((max_pixels / area) ** 0.5), 1))
    return page.get_pixmap(dpi=dpi, alpha=False, colorspace=pymupdf.csRGB)


def _bgr(pix: pymupdf.Pixmap) -> Any:
    rgb = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, 3)
    return np.ascontiguousarray(rgb[:, :, ::-1])  # BGR, as OpenCV reads


def _recognise(eng: Any, page: pymupdf.Page, pix: pymupdf.Pixmap) -> list[OcrLine]:
    """Lines found at DET_DPI, read from `pix` (OCR_DPI). The engine's own pipeline would
    detect on the large image too: a quarter of its pixels finds the same lines for ~4x less
    detection time. No angle classifier: it flips lines it is unsure of, and on an upright
    test scan it turned a whole paragraph upside down (read as nothing)."""
    det_pix = _render(page, DET_DPI, DET_MAX_PIXELS)
    boxes, _ = eng.text_det(_bgr(det_pix))
    if boxes is None or len(boxes) == 0:
        return []
    scale = np.array([pix.width / det_pix.width, pix.height / det_pix.height], np.float32)
    boxes = [(b * scale).astype(np.float32) for b in boxes]
    found, _ = eng.text_rec(eng.get_crop_img_list(_bgr(pix), boxes))
    # pixel -> point: the pixmap spans the page's rect, rotation included
    sx, sy = page.rect.width / pix.width, page.rect.height / pix.height
    lines = []
    for box, res in zip(boxes, found, strict=True):
        text, score = " ".join(str(res[0]).split()), float(res[1])
        if score >= OCR_MIN_SCORE and any(c.isalnum() for c in text):  # a chart's bars read "-"
            xs, ys = box[:, 0], box[:, 1]
            bbox = (
                float(xs.min()) * sx,
                float(ys.min()) * sy,
                float(xs.max()) * sx,
                float(ys.max()) * sy,
            )
            lines.append(OcrLine(text, bbox, score))
    return lines


@dataclass
class OcrReport:
    """What OCR did to a document: pages read (0-based), and the image-only or unreadable
    pages left without text with the reason for each (`failed`: those where the engine
    raised; `unreadable`: the pages chosen for their text layer, not for being images)."""

    done: list[int]
    skipped: dict[int, str]
    failed: list[int] = field(default_factory=list)
    unreadable: list[int] = field(default_factory=list)  # read for their text layer's sake

    def kind(self, pno: int) -> str:
        return "text layer unreadable" if pno in self.unreadable else "image-only"

    def warnings(self) -> list[str]:
        done: dict[str, list[int]] = {}
        for pno in self.done:
            done.setdefault(self.kind(pno), []).append(pno)
        out = [f"OCR'd {_pages(pnos)} ({kind})" for kind, pnos in done.items()]
        skipped: dict[tuple[str, str], list[int]] = {}
        for pno, why in self.skipped.items():
            skipped.setdefault((self.kind(pno), why), []).append(pno)
        out += [f"{_pages(ps)} {kind}, not OCR'd: {why}" for (kind, why), ps in skipped.items()]
        return out


def _pages(pnos: list[int]) -> str:
    nums = ", ".join(str(p + 1) for p in sorted(pnos))
    return f"page{'s' if len(pnos) > 1 else ''} {nums}"


def ocr_document(
    doc: pymupdf.Document,
    with_text: list[bool],
    mode: OcrMode,
    stats: dict[str, float] | None = None,
) -> tuple[dict[int, list[OcrLine]], OcrReport]:
    """OCR lines of the image-only pages and of the pages whose text layer is unreadable,
    among those without text (`with_text` per page: `has_text` of its text), and the
    report; nothing is OCR'd under mode 'off' or without the engine (the pages are skipped
    with the reason). A page the engine fails on is skipped with the error."""
    todo, report = [], OcrReport([], {})
    for pno in (pno for pno, text in enumerate(with_text) if not text):
        if image_only(doc[pno]):
            todo.append(pno)
        elif unreadable(doc[pno].get_text("text")):
            todo.append(pno)
            report.unreadable.append(pno)
    found: dict[int, list[OcrLine]] = {}
    why = unavailable_reason(mode) if todo else None
    for pno in todo:
        if why is not None:
            report.skipped[pno] = why
            if why.startswith(LOAD_FAILED):
                report.failed.append(pno)
            continue
        try:
            lines = ocr_page(doc[pno], stats)
        except Exception as exc:  # noqa: BLE001 - one bad page must not cost the document
            report.skipped[pno] = f"OCR failed ({type(exc).__name__}: {exc})"[:300]
            report.failed.append(pno)
            continue
        report.done.append(pno)
        found[pno] = lines
    return found, report


__all__ = [
    "OCR_DPI",
    "INSTALL_HINT",
    "OcrLine",
    "OcrMode",
    "OcrReport",
    "OcrUnavailable",
    "current_mode",
    "has_text",
    "image_only",
    "ocr_document",
    "ocr_page",
    "ocr_setting",
    "unavailable_reason",
    "unreadable",
]
