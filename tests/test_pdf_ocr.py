"""Scanned (image-only) PDF pages: OCR'd by the `ocr` extra (installed with the project),
rejected or skipped with the reason when OCR is off. The scans are made here: text written with
pymupdf, rendered to an image, and the image alone put on a page of a new PDF (no text
layer), so the expected words are known."""

from __future__ import annotations

import difflib
import json
import re
import time
from collections import OrderedDict
from pathlib import Path

import polars as pl
import pymupdf
import pytest
from conftest import libgl_present, skip_system_tool_absent

from pipeline.config import StructureSettings
from pipeline.ingest import load_folder
from pipeline.pdf.read import ocr_engine as pdf_ocr
from pipeline.pdf.read.ocr_engine import engine_status, image_only, ocr_setting
from pipeline.structure import build_structure

HEADING = "Annual Maintenance Review"
PARA_1 = (
    "The committee reviewed the reports of every regional office and found that spending "
    "on repairs rose by twelve percent while staff numbers stayed the same."
)
PARA_2 = (
    "Several buildings need new roofs before winter, and the heating systems in two schools "
    "are older than the pupils who sit next to them every morning."
)
TEXT_PAGE = "Introduction. This first page has a real text layer about budget planning."


def _write_page(page: pymupdf.Page) -> None:
    page.insert_text((36, 50), HEADING, fontsize=18)
    page.insert_textbox(pymupdf.Rect(36, 70, 384, 160), PARA_1, fontsize=10)
    page.insert_textbox(pymupdf.Rect(36, 170, 384, 270), PARA_2, fontsize=10)


def _add_scan(doc: pymupdf.Document) -> None:
    """A page that is only an image of `_write_page`'s text, as a scanner makes (200 dpi)."""
    src = pymupdf.open()
    page = src.new_page(width=420, height=300)
    _write_page(page)
    png = page.get_pixmap(dpi=200).tobytes("png")
    scan = doc.new_page(width=420, height=300)
    scan.insert_image(scan.rect, stream=png)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _share_read(expected: str, got: str) -> float:
    """Share of the expected words found in `got` (OCR may glue or miss a few)."""
    want, seen = _words(expected), set(_words(got))
    return sum(w in seen for w in want) / len(want)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scans")
    doc = pymupdf.open()
    _add_scan(doc)
    doc.save(root / "scan.pdf")
    mixed = pymupdf.open()
    mixed.new_page(width=420, height=300).insert_text((36, 50), TEXT_PAGE, fontsize=10)
    _add_scan(mixed)
    mixed.save(root / "mixed.pdf")
    return root


@pytest.fixture(scope="module")
def engine() -> None:
    """The engine loads. The `ocr` extra is installed with the project (scripts/setup.sh), so
    a failure to load fails the test, unless the one system library under it is absent:
    OpenCV's libGL, an allowed skip (tests/conftest.py)."""
    if (why := engine_status()) is not None:
        if not libgl_present():
            skip_system_tool_absent("libGL", why)
        pytest.fail(why)


@pytest.fixture(scope="module")
def loaded(folder: Path, engine: None) -> tuple[pl.DataFrame, pl.DataFrame, float]:
    t0 = time.perf_counter()
    docs, rejected = load_folder(folder)
    return docs, rejected, time.perf_counter() - t0


def _doc(docs: pl.DataFrame, name: str) -> dict:
    return docs.filter(pl.col("source_path") == name).row(0, named=True)


def test_scan_is_image_only_and_text_page_is_not(folder: Path):
    with pymupdf.open(folder / "mixed.pdf") as pdf:
        assert [image_only(p) for p in pdf] == [False, True]
    blank = pymupdf.open()
    blank.new_page()
    assert not image_only(blank[0])  # nothing drawn: a blank page, not a scan


def test_scanned_pdf_is_read_by_ocr(loaded):
    docs, rejected, seconds = loaded
    assert rejected.is_empty()
    doc = _doc(docs, "scan.pdf")
    assert _share_read(f"{HEADING} {PARA_1} {PARA_2}", doc["text"]) >= 0.9
    assert json.loads(doc["metadata"])["ocr_pages"] == [1]
    assert doc["warnings"] == ["OCR'd page 1 (image-only)"]
    assert seconds < 60  # two small pages (the other agents' load included)


def _nodes(docs: pl.DataFrame, folder: Path, name: str, **cfg: str) -> tuple[list[dict], dict]:
    """Content nodes of document `name` and its root section's metadata."""
    sections, nodes, _ = build_structure(
        docs.filter(pl.col("source_path") == name), folder, StructureSettings(**cfg)
    ).tables
    root = sections.filter(pl.col("level") == 0).row(0, named=True)
    return nodes.to_dicts(), json.loads(root["metadata"])


def _squash(text: str) -> str:
    return "".join(text.lower().split())


@pytest.mark.parametrize("mode", ["heuristic", "layout"])
def test_scanned_structure_has_heading_and_paragraphs(loaded, folder: Path, mode: str):
    docs, _, _ = loaded
    nodes, meta = _nodes(docs, folder, "scan.pdf", pdf_structure=mode)
    assert meta["ocr_pages"] == [1]
    assert all(json.loads(n["metadata"]).get("ocr") for n in nodes)
    heads = [n for n in nodes if n["node_type"] in ("HEADING", "TITLE")]
    assert len(heads) == 1  # the larger line heads a section; spaces may be lost, not letters
    assert difflib.SequenceMatcher(None, _squash(heads[0]["text"]), _squash(HEADING)).ratio() > 0.9
    paras = [n["text"] for n in nodes if n["node_type"] == "PARAGRAPH"]
    assert len(paras) == 2  # lines joined into their paragraphs, the two kept apart
    assert _share_read(PARA_1, paras[0]) >= 0.9
    assert _share_read(PARA_2, paras[1]) >= 0.9


@pytest.mark.parametrize("mode", ["heuristic", "layout"])
def test_mixed_pdf_reads_both_pages_in_order(loaded, folder: Path, mode: str):
    docs, _, _ = loaded
    doc = _doc(docs, "mixed.pdf")
    page1, page2 = doc["text"].split("\f")
    assert _share_read(TEXT_PAGE, page1) == 1.0
    assert _share_read(PARA_1 + PARA_2, page2) >= 0.9
    assert json.loads(doc["metadata"])["ocr_pages"] == [2]
    nodes, meta = _nodes(docs, folder, "mixed.pdf", pdf_structure=mode)
    assert meta["ocr_pages"] == [2]
    text = " ".join(n["text"] for n in nodes)
    assert text.index("budget planning") < text.index("regional office") < text.index("winter")
    flagged = [json.loads(n["metadata"]).get("ocr", False) for n in nodes]
    assert flagged[0] is False and flagged[-1] is True  # only the scanned page's nodes


def test_ocr_off_rejects_scans_and_skips_scanned_pages(folder: Path):
    with ocr_setting("off"):
        docs, rejected = load_folder(folder)
    reasons = dict(rejected.select("source_path", "reason").rows())
    assert reasons == {
        "scan.pdf": "no text layer (image-only PDF; OCR is off (structure.ocr: off; set it "
        "to auto to OCR scanned pages))"
    }
    mixed = _doc(docs, "mixed.pdf")
    assert "ocr_pages" not in json.loads(mixed["metadata"])
    assert any("page 2 image-only, not OCR'd: OCR is off" in w for w in mixed["warnings"])
    nodes, meta = _nodes(docs, folder, "mixed.pdf", pdf_structure="heuristic", ocr="off")
    assert meta["ocr_skipped"] == {
        "2": "OCR is off (structure.ocr: off; set it to auto to OCR scanned pages)"
    }
    assert "ocr_pages" not in meta
    # the text page's paragraph, and the scan as a figure (no text)
    assert [(n["node_type"], n["text"]) for n in nodes] == [
        ("PARAGRAPH", TEXT_PAGE),
        ("FIGURE", ""),
    ]


class _BrokenEngine:
    """An engine that raises, as a corrupt model or an out-of-memory error would."""

    def text_det(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("inference failed")


def test_ocr_failure_is_recorded(folder: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(pdf_ocr, "_engine", _BrokenEngine())
    monkeypatch.setattr(pdf_ocr, "_cache", OrderedDict())  # no result from the other tests
    docs, rejected = load_folder(folder)
    reasons = dict(rejected.select("source_path", "reason").rows())
    assert reasons == {
        "scan.pdf": "no text layer (image-only PDF; OCR failed (RuntimeError: inference failed))"
    }
    mixed = _doc(docs, "mixed.pdf")
    assert (
        "page 2 image-only, not OCR'd: OCR failed (RuntimeError: inference failed)"
        in (mixed["warnings"])
    )
    built = build_structure(docs, folder, StructureSettings(pdf_structure="heuristic"))
    assert built.failures == [
        {
            "document_id": mixed["id"],
            "source_path": "mixed.pdf",
            "stage": "structure",
            "reason": "page 2: OCR failed (RuntimeError: inference failed)",
            "fallback": "page left out",
        }
    ]


def test_installing_the_extra_reruns_shards(monkeypatch: pytest.MonkeyPatch):
    """Scans rejected without the extra are read once it is installed: the shard fingerprints'
    settings digest says whether OCR can run (under ocr: auto only)."""
    from pipeline.config import Settings
    from pipeline.ingest import shards

    digests = {}
    for installed in (False, True):
        monkeypatch.setattr(shards, "ocr_installed", lambda installed=installed: installed)
        for mode in ("auto", "off"):
            cfg = Settings(structure=StructureSettings(ocr=mode))
            digests[installed, mode] = shards.stage_settings_digest(cfg)
    assert digests[False, "auto"] != digests[True, "auto"]
    assert digests[False, "off"] == digests[True, "off"]


def test_picture_page_without_words_stays_a_figure(tmp_path: Path, engine: None):
    """A text-less page that is a picture (no words in it): OCR runs and reads nothing, so a
    PDF of only that is rejected with that reason, and next to a text page it stays a figure."""
    src = pymupdf.open()
    art = src.new_page(width=300, height=200)
    for i in range(6):  # a bar chart without labels
        art.draw_rect(pymupdf.Rect(30 + 40 * i, 170 - 20 * i, 60 + 40 * i, 180), fill=(0, 0, 1))
    png = art.get_pixmap(dpi=100).tobytes("png")

    def picture_page(doc: pymupdf.Document) -> None:
        doc.new_page(width=300, height=200).insert_image(pymupdf.Rect(0, 0, 300, 200), stream=png)

    only = pymupdf.open()
    picture_page(only)
    only.save(tmp_path / "chart.pdf")
    mixed = pymupdf.open()
    mixed.new_page(width=300, height=200).insert_text((20, 40), TEXT_PAGE, fontsize=8)
    picture_page(mixed)
    mixed.save(tmp_path / "report.pdf")
    docs, rejected = load_folder(tmp_path)
    assert dict(rejected.select("source_path", "reason").rows()) == {
        "chart.pdf": "no text layer (image-only PDF; OCR recognised no text)"
    }
    nodes, meta = _nodes(docs, tmp_path, "report.pdf", pdf_structure="heuristic")
    assert [n["node_type"] for n in nodes] == ["PARAGRAPH", "FIGURE"]
    assert not any(json.loads(n["metadata"]).get("ocr") for n in nodes)
    assert meta["ocr_pages"] == [2]  # read, nothing found


def _unmapped(root: Path) -> Path:
    """A PDF whose first page is text and whose second page's font lost its Unicode map (a
    Type0 font, Identity-H, no ToUnicode): MuPDF reads its glyph ids, ")BSCPVS\x01(BUFT"."""
    doc = pymupdf.open()
    doc.new_page(width=420, height=300).insert_text((36, 50), TEXT_PAGE, fontsize=10)
    page = doc.new_page(width=420, height=300)
    page.insert_font(fontname="F1", fontbuffer=pymupdf.Font("tiro").buffer)
    page.insert_text((36, 50), HEADING, fontsize=18, fontname="F1")
    page.insert_textbox(pymupdf.Rect(36, 70, 384, 160), PARA_1, fontsize=10, fontname="F1")
    doc = pymupdf.open(stream=doc.tobytes())
    for xref in range(1, doc.xref_length()):
        if "ToUnicode" in doc.xref_get_keys(xref):
            doc.xref_set_key(xref, "ToUnicode", "null")
    root.mkdir(exist_ok=True)
    doc.save(root / "gates.pdf")
    return root


def test_an_unreadable_text_layer_is_no_text(tmp_path: Path):
    """Glyph ids are no text: with OCR off the page is left out with the reason, never
    indexed as ")BSCPVS"; a real page's few stray symbols do not count."""
    # what MuPDF reads of PARA_1 there: each glyph id is its character's code less 31
    assert pdf_ocr.unreadable("".join(chr(ord(c) - 31) for c in PARA_1))
    assert pdf_ocr.unreadable("\ufffd" * 30)
    assert not pdf_ocr.unreadable(f"{PARA_1} \uf0b7 {PARA_2} \x02")  # a bullet, a marker
    root = _unmapped(tmp_path / "pdfs")
    with ocr_setting("off"):
        docs, rejected = load_folder(root)
    assert rejected.is_empty()
    doc = _doc(docs, "gates.pdf")
    assert doc["text"].split("\f") == [TEXT_PAGE + "\n", ""]
    assert doc["warnings"][0].startswith("page 2 text layer unreadable, not OCR'd: OCR is off")
    nodes, meta = _nodes(docs, root, "gates.pdf", ocr="off")
    assert [n["text"] for n in nodes] == [TEXT_PAGE]
    assert list(meta["ocr_skipped"]) == ["2"]


def test_an_unreadable_text_layer_is_read_by_ocr(tmp_path: Path, engine: None):
    """A page whose font has no Unicode map is read like a scan, in the document's text and
    its structure, and says so."""
    root = _unmapped(tmp_path / "pdfs")
    docs, rejected = load_folder(root)
    doc = _doc(docs, "gates.pdf")
    assert doc["warnings"] == ["OCR'd page 2 (text layer unreadable)"]
    assert _share_read(f"{HEADING} {PARA_1}", doc["text"].split("\f")[1]) >= 0.9
    nodes, meta = _nodes(docs, root, "gates.pdf")
    assert meta["ocr_pages"] == [2]
    ocred = " ".join(n["text"] for n in nodes if json.loads(n["metadata"]).get("ocr"))
    assert _share_read(f"{HEADING} {PARA_1}", ocred) >= 0.9
    assert TEXT_PAGE in [n["text"] for n in nodes]


@pytest.mark.parametrize("mode", ["heuristic", "layout"])
def test_two_column_scan_reads_column_by_column(tmp_path_factory, engine: None, mode: str):
    root = tmp_path_factory.mktemp(f"columns-{mode}")
    src = pymupdf.open()
    page = src.new_page(width=420, height=200)
    page.insert_textbox(pymupdf.Rect(20, 20, 200, 190), PARA_1, fontsize=10)
    page.insert_textbox(pymupdf.Rect(224, 20, 404, 190), PARA_2, fontsize=10)
    png = page.get_pixmap(dpi=200).tobytes("png")
    doc = pymupdf.open()
    doc.new_page(width=420, height=200).insert_image(pymupdf.Rect(0, 0, 420, 200), stream=png)
    doc.save(root / "columns.pdf")
    docs, _ = load_folder(root)
    text = _doc(docs, "columns.pdf")["text"]  # the document text reads by column too
    assert text.index("percent") < text.index("same") < text.index("Several") < text.index("pupils")
    nodes, _ = _nodes(docs, root, "columns.pdf", pdf_structure=mode)
    paras = [n["text"] for n in nodes if n["node_type"] == "PARAGRAPH"]
    assert len(paras) == 2  # one per column, not one per row across both
    assert _share_read(PARA_1, paras[0]) >= 0.9
    assert _share_read(PARA_2, paras[1]) >= 0.9


def test_ocr_lines_to_units_by_position():
    """No engine needed: boxes the detector cut from one row are joined (whichever it listed
    first), a box across a gutter stays apart, lines under each other make one paragraph, and
    a line twice the body size is its own unit with its own size."""
    from pipeline.pdf.read.ocr_engine import OcrLine
    from pipeline.pdf.read.ocr_units import ocr_units

    def line(text: str, x0: float, y0: float, size: float = 10.0) -> OcrLine:
        return OcrLine(text, (x0, y0, x0 + 0.5 * size * len(text), y0 + 1.3 * size), 0.99)

    units = ocr_units(
        [
            line("A Large Heading", 10, 10, size=20),
            line("world again and", 70, 49),  # right part of a row, listed first
            line("hello there", 10, 50),
            line("second column text here", 250, 50),  # across a 60 pt gutter
            line("the next line of it", 10, 64),
        ],
        0,
    )
    assert [(u.text, u.size) for u in units] == [
        ("A Large Heading", 20.0),
        ("hello there world again and the next line of it", 10.0),
        ("second column text here", 10.0),
    ]


def test_a_large_page_is_read_at_a_bounded_size(monkeypatch: pytest.MonkeyPatch):
    """OCR reads a page at 300 dpi (lines found at 150) up to a pixel bound: a 30-inch
    square scan (81 MP at 300 dpi, 4 GB of OCR) is read at the dpi that fits the bound; an
    A4 page keeps 300 / 150 dpi."""
    shapes: list[tuple[int, ...]] = []

    class Engine:  # records the image lines are looked for in; finds none
        def text_det(self, img):
            shapes.append(img.shape)
            return None, 0.0

    monkeypatch.setattr(pdf_ocr, "_load_engine", lambda: Engine())
    doc = pymupdf.open()
    doc.new_page(width=2160, height=2160)
    doc.new_page(width=595, height=842)
    big, a4 = doc[0], doc[1]
    for page in (big, a4):
        assert pdf_ocr.ocr_page(page) == []
    rec = [pdf_ocr._render(p, pdf_ocr.OCR_DPI, pdf_ocr.OCR_MAX_PIXELS) for p in (big, a4)]
    assert rec[0].width * rec[0].height <= pdf_ocr.OCR_MAX_PIXELS < 81_000_000
    assert (rec[1].width, rec[1].height) == (2480, 3509)  # A4 at 300 dpi
    assert shapes[0][0] * shapes[0][1] <= pdf_ocr.DET_MAX_PIXELS
    assert shapes[1][:2] == (1755, 1240)  # A4 at 150 dpi
