"""Two-column pages that pymupdf4llm's stripes read across (pdf_stripes): synthetic PDFs
through the real layout model and parser, and the joining rule on boxes alone."""

from __future__ import annotations

import pymupdf
import pytest
from test_pdf_layout_model import box, firsts, parse, text

from pipeline.pdf.layout.stripes import join_stripes

LEFT, RIGHT = 50, 316  # the columns' left edges; each 246 pt wide


def paper_with_level_gaps() -> pymupdf.Document:
    """A title and a row of two authors over two columns whose headings stand level: the
    blank bands above them cross the whole page, as on a LaTeX paper's first page."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    box(page, (100, 44, 512, 76), "Paper Title Over Both Columns", 18, align=1)
    box(page, (200, 82, 290, 102), "Ann Author", 10, align=1)
    box(page, (322, 82, 412, 102), "Bob Writer", 10, align=1)
    for c, x in enumerate((LEFT, RIGHT)):
        box(page, (x, 112, x + 246, 134), f"{c + 1} Section{c + 1}", 12)
        box(page, (x, 312, x + 246, 334), f"{c + 1}.1 Sub{c + 1}", 12)
    box(page, (LEFT, 138, LEFT + 246, 296), text("Sec1first", 80))
    box(page, (LEFT, 338, LEFT + 246, 520), text("Sec1second", 90))
    box(page, (RIGHT, 138, RIGHT + 246, 214), text("Sec2first", 36))  # the right column's
    box(page, (RIGHT, 218, RIGHT + 246, 296), text("Sec2more", 36))  # paragraphs break
    box(page, (RIGHT, 338, RIGHT + 246, 420), text("Sec2second", 36))  # elsewhere
    box(page, (RIGHT, 424, RIGHT + 246, 520), text("Sec2last", 44))
    return pdf


def test_columns_under_a_title_read_column_by_column_authors_first():
    st = parse(paper_with_level_gaps())
    order = firsts(st, ("PARAGRAPH", "HEADING", "TITLE"))
    assert order == ["Paper", "Ann", "Bob", "1", "Sec1first", "1.1", "Sec1second"] + [
        "2", "Sec2first", "Sec2more", "2.1", "Sec2second", "Sec2last"
    ]  # fmt: skip


def heading_beside_a_blank(column: int) -> pymupdf.Document:
    """Two clean columns; a heading in one column has a blank beside it (the space around
    an equation in the other one), and both columns run on below it."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    for c, x in enumerate((LEFT, RIGHT)):
        box(page, (x, 60, x + 246, 300), text(f"Top{c + 1}", 130))
        box(page, (x, 340, x + 246, 740), text(f"Low{c + 1}", 220))
    x = (LEFT, RIGHT)[column]
    box(page, (x, 306, x + 246, 330), f"{column + 1}.1 Heading", 12)
    return pdf


@pytest.mark.parametrize("column", [0, 1])
def test_a_heading_beside_a_blank_stays_in_its_column(column):
    st = parse(heading_beside_a_blank(column))
    order = firsts(st, ("PARAGRAPH", "HEADING"))
    first, second = ["Top1", "Low1"], ["Top2", "Low2"]
    (first, second)[column].insert(1, f"{column + 1}.1")
    assert order == first + second


def last_page_left_longer() -> pymupdf.Document:
    """A document's last page: a heading and paragraphs run on in the left column below the
    right column's end."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    box(page, (LEFT, 60, LEFT + 246, 300), text("Lefttop", 130))
    box(page, (LEFT, 324, LEFT + 246, 348), "3 Last", 12)
    box(page, (LEFT, 352, LEFT + 246, 500), text("Leftend", 80))
    box(page, (LEFT, 504, LEFT + 246, 640), text("Leftfinal", 70))
    box(page, (RIGHT, 60, RIGHT + 246, 320), text("Rightonly", 140))
    return pdf


def test_a_longer_left_column_is_read_before_the_right():
    st = parse(last_page_left_longer())
    order = firsts(st, ("PARAGRAPH", "HEADING"))
    assert order == ["Lefttop", "3", "Leftend", "Leftfinal", "Rightonly"]


def unbalanced_columns() -> pymupdf.Document:
    """A word processor's column section under a paragraph across the page: the right column
    ends high, the left one runs on below a heading; the blank band above that heading
    crosses the page (LibreOffice Writer, three columns, the third empty)."""

    def put(x0: float, y: float, x1: float, txt: str, size: float = 9) -> float:
        return 800 - page.insert_textbox(pymupdf.Rect(x0, y, x1, 800), txt, fontsize=size)

    pdf = pymupdf.open()
    page = pdf.new_page()
    top = put(50, 50, 562, text("Intro", 100), 10) + 16
    y = put(50, top, 220, "Olavum Theeravum", 12) + 6
    y = put(50, y, 220, text("Leftone", 110)) + 18
    y = put(50, y, 220, "List of religions", 12) + 6
    put(50, y, 220, text("Leftlast", 40))
    put(230, top, 400, text("Rightone", 50))
    return pdf


def test_a_column_running_on_below_a_blank_band_is_read_before_the_next():
    order = firsts(parse(unbalanced_columns()), ("PARAGRAPH", "HEADING"))
    assert order == ["Intro", "Olavum", "Leftone", "List", "Leftlast", "Rightone"]


def b(x0: float, y0: float, x1: float, y1: float, cls: str = "text") -> tuple:
    return (x0, y0, x1, y1, cls)


def test_stripes_of_the_same_columns_are_joined_others_not():
    body = [b(50, 300, 296, 400), b(316, 300, 562, 400)]
    heads = [b(50, 250, 150, 262, "section-header"), b(316, 240, 562, 290)]
    assert join_stripes([heads, body]) == [heads + body]
    title = [b(100, 44, 512, 76)]  # across the gutter
    authors = [b(200, 84, 290, 98), b(322, 84, 412, 98)]  # centred: narrow, indented
    label = [b(50, 240, 470, 252), b(480, 240, 540, 252)]  # "[Function]" beside a line
    one = [b(50, 300, 296, 400)]  # one column only
    for above, below in ((title, body), (authors, body), (label, body), (one, body)):
        assert join_stripes([above, below]) == [above, below]


def test_a_region_below_the_longest_column_goes_on_with_it():
    columns = [b(57, 284, 208, 634), b(222, 265, 373, 407)]  # the left one reaches lowest
    foot = [b(57, 651, 171, 678, "section-header"), b(57, 684, 208, 774)]
    assert join_stripes([columns, foot]) == [columns + foot]
    right = [b(222, 651, 373, 774)]  # under the column that ended higher up
    far = [b(57, 720, 208, 774)]  # 86 pt below the column's foot: something else
    wide = [b(57, 651, 373, 774)]  # across both columns
    for below in (right, far, wide):
        assert join_stripes([columns, below]) == [columns, below]
