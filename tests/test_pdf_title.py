"""A PDF document's title: metadata unless a placeholder, else page 1's display type, else its
first line. Real PDFs written by pymupdf, read by the real loader."""

from pathlib import Path

import pymupdf
import pytest

from pipeline.ingest import load_folder
from pipeline.pdf.read.title import is_placeholder

BODY = "The gauges were read every hour and the readings were checked twice."


def _pdf(path: Path, lines: list[tuple[float, float, str, int]], title: str = "") -> None:
    """One A4 page; each line (y, font size, text, rotation) drawn at x = 72."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    for y, size, text, rotate in lines:
        page.insert_text((72, y), text, fontsize=size, rotate=rotate)
    for i in range(12):  # body text: what the page is mostly set in
        page.insert_text((72, 300 + 14 * i), BODY, fontsize=11)
    if title:
        doc.set_metadata({"title": title})
    doc.save(path)
    doc.close()


def _titles(folder: Path) -> dict[str, str]:
    docs, *_ = load_folder(folder)
    return dict(zip(docs["source_path"], docs["title"], strict=True))


def test_title_from_display_type_metadata_and_first_line(tmp_path: Path) -> None:
    header = (40, 9, "ACME Harbour Authority - internal", 0)
    _pdf(  # a Word placeholder title, a running header over a two-line title
        tmp_path / "word.pdf",
        [header, (120, 24, "Annual Tide Report", 0), (150, 24, "for the Grand Harbour", 0)],
        title="Microsoft Word - draft3.docx",
    )
    _pdf(  # a cover: a brand in huge type at the foot, the title at the top
        tmp_path / "cover.pdf",
        [(120, 26, "Row Access Control in Practice", 0), (780, 60, "Brandpaper", 0)],
    )
    _pdf(  # a real metadata title wins over what the page shows
        tmp_path / "meta.pdf", [(120, 24, "Annual Tide Report", 0)], title="Tides 2025"
    )
    _pdf(tmp_path / "plain.pdf", [header])  # no display type: the first line, as before
    _pdf(tmp_path / "tide-table.pdf", [(40, 9, "208", 0)])  # a page number is no title
    _pdf(  # an arXiv-like stamp up the margin is no title
        tmp_path / "stamp.pdf", [header, (700, 20, "arXiv:2004.04906v3 [cs.CL]", 90)]
    )
    _pdf(  # no display type, and the page opens with a paragraph: the file's name
        tmp_path / "notes.pdf",
        [
            (40, 11, "Opening text. The gauges were read every hour.", 0),
            (54, 11, "Then the readings were checked twice.", 0),
        ],
    )
    _pdf(
        tmp_path / "wraps.pdf",
        [(40, 11, "The gauges were read every hour and the", 0), (54, 11, "readings", 0)],
    )
    titles = _titles(tmp_path)
    assert titles["notes.pdf"] == "notes"
    assert titles["wraps.pdf"] == "wraps"
    assert titles["word.pdf"] == "Annual Tide Report for the Grand Harbour"
    assert titles["cover.pdf"] == "Row Access Control in Practice"
    assert titles["meta.pdf"] == "Tides 2025"
    assert titles["plain.pdf"] == "ACME Harbour Authority - internal"
    assert titles["tide-table.pdf"] == "tide-table"
    assert titles["stamp.pdf"] == "ACME Harbour Authority - internal"


@pytest.mark.parametrize(
    ("title", "placeholder"),
    [
        ("Microsoft Word - draft3.docx", True),
        ("Microsoft PowerPoint - deck.pptx", True),
        ("untitled", True),
        ("Slide 1", True),
        ("paper.dvi", True),
        ("Document1", True),
        ("h3_a.html", True),  # Chrome's print of a page with no <title>
        ("scan0001.jpg", True),
        ("about:blank", True),
        ("Node.js", False),
        ("Untitled Goose Game: a review", False),
        ("Document Engineering", False),
        ("Tides 2025", False),
    ],
)
def test_placeholder_titles(title: str, placeholder: bool) -> None:
    assert is_placeholder(title) is placeholder


def test_shared_cover_and_running_header(tmp_path: Path, shared_data: Path) -> None:
    """An IBM Redpaper's cover (no metadata title; its first line is 'ibm.com/redbooks' and
    'Redpaper' is its largest type) and an arXiv paper."""
    pdfs = shared_data / "pdfs"
    for name in ("redp5110_sampled.pdf", "multi-column.pdf"):
        (tmp_path / name).write_bytes((pdfs / name).read_bytes())
    titles = _titles(tmp_path)
    assert titles == {
        "redp5110_sampled.pdf": "Row and Column Access Control Support in IBM DB2 for i",
        "multi-column.pdf": "Dense Passage Retrieval for Open-Domain Question Answering",
    }


def test_a_title_slide_whose_title_is_most_of_its_text(tmp_path):
    """A deck printed by a browser: its metadata title is the HTML file's name, and the
    cover's two lines of title outweigh the author line under them."""
    doc = pymupdf.open()
    page = doc.new_page(width=960, height=540)
    page.insert_text((60, 230), "Quarterly Review of Journal of", fontsize=42)
    page.insert_text((60, 280), "Mathematical Physics", fontsize=42)
    page.insert_text((60, 340), "Team Falcon · March 2026", fontsize=21)
    doc.new_page(width=960, height=540).insert_text((60, 100), "Agenda", fontsize=40)
    doc.set_metadata({"title": "deck.html"})
    (tmp_path / "deck.pdf").write_bytes(doc.tobytes())
    docs, _ = load_folder(tmp_path)
    assert docs["title"].to_list() == ["Quarterly Review of Journal of Mathematical Physics"]
