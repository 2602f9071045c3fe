"""Narrow columns: layout-model regions across a column gutter cut into columns
(pipeline/pdf/layout/gutters; the rule on line rectangles, and through pymupdf4llm's own
reading order), a heading wrapped over several lines of a narrow column split from its text
(layout/parse_layout), and a numbered heading the model called a list item and a heading it
drew as two regions (layout/classify)."""

from __future__ import annotations

import random

import pymupdf
import pytest

from pipeline.pdf.layout import stripes as pdf_stripes
from pipeline.pdf.layout.classify import classify_page, join_wrapped_headings
from pipeline.pdf.layout.gutters import install, split_at_gutters
from pipeline.pdf.layout.parse_layout import _split_text
from pipeline.pdf.layout.regions import Region
from pipeline.pdf.read.page_units import Line, Unit, join_lines

COLS = [(125, 233), (243, 351), (361, 469)]  # three 108 pt columns, 10 pt gutters (multicol)
LEAD = 11.5


def prose(col: int, y: float, rows: int, seed: int = 0) -> list[tuple[float, ...]]:
    """A justified paragraph in column `col` from `y`: every row across the column but the
    last, each cut into words at its wide spaces (as MuPDF reads LaTeX's lines)."""
    rnd = random.Random(seed * 31 + col)
    x0, x1 = COLS[col]
    out = []
    for r in range(rows):
        end = x1 if r < rows - 1 else x0 + 0.4 * (x1 - x0)
        cuts = sorted(rnd.uniform(x0 + 8, end - 8) for _ in range(2))
        for a, b in zip([x0, *cuts], [*cuts, end], strict=True):
            out.append((a + (2.5 if a > x0 else 0), y + r * LEAD, b, y + r * LEAD + 9))
    return out


def hulls(boxes) -> list[tuple]:
    return [(round(b[0]), round(b[2]), b[4]) for b in boxes]


def test_a_text_region_over_two_columns_is_cut_into_them():
    lines = prose(1, 236, 14) + prose(2, 236, 14) + prose(0, 236, 40)
    boxes = [(125, 236, 233, 700, "text"), (243, 236, 469, 400, "text")]
    assert hulls(split_at_gutters(boxes, lines)) == [
        (125, 233, "text"), (243, 351, "text"), (361, 469, "text")
    ]  # fmt: skip


def test_one_region_over_four_columns_is_cut_into_four():
    """A page's last rows in four narrow columns (CSS columns), one region to the model:
    each column's text was lost into the paragraph before, rows read across all four."""
    cols = [(57, 172), (180, 294), (302, 417), (425, 539)]
    lines = [
        (x0 + (2.5 if i else 0), 58 + r * LEAD, x0 + (i + 1) * (x1 - x0) / 3, 67 + r * LEAD)
        for x0, x1 in cols
        for r in range(12)
        for i in range(3)
    ]
    out = split_at_gutters([(57, 58, 539, 206, "text")], lines)
    assert hulls(out) == [(x0, x1, "text") for x0, x1 in cols]


def test_a_heading_region_beside_the_next_columns_text():
    """The model drew one heading region over "2 Milton F. Pavlic" and the three rows that end a
    paragraph in the next column: the heading stays one (its number stands apart from its
    words), the rows are text."""
    heading = [(243, 233, 249, 245), (258, 233, 351, 245), (258, 250, 300, 262)]
    lines = heading + prose(1, 276, 8) + prose(2, 233, 3, seed=1) + prose(2, 290, 10)
    boxes = [(243, 233, 469, 267, "section-header")]
    assert hulls(split_at_gutters(boxes, lines)) == [
        (243, 351, "section-header"), (361, 469, "text")
    ]  # fmt: skip


def test_a_heading_at_the_foot_of_its_column_keeps_its_number():
    heading = [(243, 700, 249, 712), (258, 700, 351, 712)]  # nothing below it
    lines = heading + prose(2, 700, 4, seed=2)
    out = split_at_gutters([(243, 700, 469, 746, "section-header")], lines)
    assert hulls(out) == [(243, 351, "section-header"), (361, 469, "text")]


@pytest.mark.parametrize(
    "case",
    [
        "one column",
        "bullets",
        "form",
        "two-part heading",
        "numbered heading",
        "hanging number",
        "short side",
        "table",
    ],
)
def test_regions_that_are_not_columns_stay_whole(case):
    x0, x1 = COLS[1]
    if case == "one column":  # word gaps at other places in each row
        lines, cls = prose(1, 100, 12), "text"
    elif case == "bullets":  # a list's bullets apart from its items
        lines = [(x0, 100 + r * LEAD, x0 + 4, 109 + r * LEAD) for r in range(6)]
        lines += [(x0 + 12, 100 + r * LEAD, x1, 109 + r * LEAD) for r in range(6)]
        cls = "text"
    elif case == "form":  # labels of uneven widths, then values, over two columns' width
        lines = [(x0, 100 + r * LEAD, x0 + w, 109 + r * LEAD) for r, w in enumerate((60, 95, 30))]
        lines += [(360, 100 + r * LEAD, 469 - r * 9, 109 + r * LEAD) for r in range(3)]
        cls = "text"
    elif case == "two-part heading":  # "Chapter 3      Methods"
        lines, cls = [(x0, 100, x0 + 40, 114), (x1 - 40, 100, x1, 114)], "section-header"
    elif case == "numbered heading":  # "1.1  Amphitheater High / School in / practice"
        lines = [(x0, 100, x0 + 17, 110)] + [
            (a, 100 + r * 14, b, 110 + r * 14)
            for r in range(4)
            for a, b in ((x0 + 30, x0 + 60), (x0 + 70, x1))
        ]
        cls = "section-header"
    elif case == "hanging number":  # the same in a wide column: words wide enough for prose
        lines = [(50, 100, 67, 112)] + [(80, 100 + r * 14, 540, 112 + r * 14) for r in range(3)]
        cls = "section-header"
    elif case == "short side":  # a column's last two rows beside a paragraph
        lines, cls = prose(1, 100, 2) + prose(2, 100, 8), "text"
    else:  # two columns of one-word cells
        lines = [(x, 100 + r * LEAD, x + 20, 109 + r * LEAD) for r in range(5) for x in (x0, x1)]
        cls = "text"
    box = (min(ln[0] for ln in lines), 100, max(ln[2] for ln in lines), 200, cls)
    assert split_at_gutters([box], lines) == [box]


def test_a_cut_part_and_a_region_of_its_column_become_one():
    """The model's second region in the column overlaps the part cut from the region across
    both: their lines would belong to two regions."""
    lines = prose(1, 236, 20) + prose(2, 236, 14)
    boxes = [(243, 236, 469, 400, "text"), (243, 345, 351, 466, "text")]
    out = split_at_gutters(boxes, lines)
    assert hulls(out) == [(243, 351, "text"), (361, 469, "text")]
    assert out[0][:4] == (243, 236, 351, 466)


def test_pymupdf4llm_reads_the_cut_columns_one_after_the_other():
    """Installed, the cut happens inside pymupdf4llm's reading order: its blocks' lines tell
    the gutters, and the columns are read top to bottom, left to right."""
    from pymupdf4llm.helpers import utils

    pdf_stripes.install()  # as the parser has it (pdf_regions)
    install()
    install()  # once only
    assert utils.find_reading_order.cuts_gutters
    c2, c3 = prose(1, 236, 20), prose(2, 236, 20)
    blocks = [
        {"type": 0, "bbox": ln, "lines": [{"bbox": ln}]} for ln in (*c2, *c3)
    ]  # fmt: skip
    boxes = [(243, 236, 469, 400, "text"), (243, 402, 351, 466, "text")]
    ordered = utils.find_reading_order(pymupdf.Rect(0, 0, 595, 842), blocks, boxes)
    assert [(round(b[0]), round(b[1])) for b in ordered] == [(243, 236), (243, 402), (361, 236)]


def _lines(texts: list[str], y: float, size: float, bold: float) -> list[Line]:
    return [
        Line(t, (243, y + i * size * 1.2, 351, y + i * size * 1.2 + size), size, bold, 0.0)
        for i, t in enumerate(texts)
    ]


@pytest.mark.parametrize("larger", [True, False])
def test_a_heading_wrapped_in_a_narrow_column_is_split_from_its_text(larger):
    """The model read a narrow column's heading (12 pt, over five lines) and its paragraph as
    one text region; a bold block of body size over three lines (an address) stays text."""
    heading = ["3 Party lead-", "ers of the", "United", "States Sen-", "ate"]
    head = _lines(heading, 100, 12 if larger else 9.5, 1.0)
    body = _lines(
        ["The Pacific War saw the Allied", "powers pitted against the", "Empire."], 170, 9.5, 0
    )
    region = Region("text", (243, 100, 351, 210), None, Unit(head + body, 0))
    _split_text(region)
    if larger:
        assert region.parts is not None
        assert [(cls, u.text) for cls, u in region.parts][0] == (
            "section-header", "3 Party leaders of the United States Senate"
        )  # fmt: skip
    else:
        assert region.parts is None


@pytest.mark.parametrize(
    "text, size, kind",
    [
        ("8 List of last World War I veterans by country", 12, "HEADING"),
        ("8 List of last World War I veterans by country", 9.5, "LIST_ITEM"),  # body size
        ("\x84  No", 14, "LIST_ITEM"),  # a check box drawn larger than the text
        ("2. Call the office first.", 12, "LIST_ITEM"),  # a sentence
    ],
)
def test_a_numbered_heading_the_model_called_a_list_item(text, size, kind):
    """Numbered headings in narrow columns ("8 List of ...") were list items to the model."""
    unit = Unit(_lines([text], 100, size, 1.0 if size > 10 else 0.0), 0)
    assert classify_page([unit], {id(unit): "list-item"}, {}, body=9.5)[0]["kind"] == kind


@pytest.mark.parametrize(
    "second, y, size, joined",
    [
        ("(Jacksonville, Oregon)", 116, 12, True),  # the next line of one heading
        ("2.1 Data", 116, 12, False),  # a numbered subsection under it
        ("(Jacksonville, Oregon)", 140, 12, False),  # a line apart: another heading
        ("(Jacksonville, Oregon)", 116, 10, False),  # another size
    ],
)
def test_a_heading_drawn_as_two_regions_is_one(second, y, size, joined):
    """Chrome's narrow CSS columns: the model drew "Jackson County Courthouse" and the line
    under it as two heading regions."""
    first = Unit(_lines(["Jackson County Courthouse"], 100, 12, 1.0), 0)
    under = Unit(_lines([second], y, size, 1.0), 0)
    items = [{"kind": "HEADING", "unit": u, "text": u.text, "marker": None} for u in (first, under)]
    join_wrapped_headings(items)
    texts = [it["text"] for it in items]
    assert texts == (
        [f"Jackson County Courthouse {second}"] if joined else ["Jackson County Courthouse", second]
    )


@pytest.mark.parametrize(
    "lines, text",
    [
        (["a new sepa-", "rated column"], "a new separated column"),
        (["Le Chevalier de Maison-", "Rouge"], "Le Chevalier de Maison-Rouge"),
        (["if ELE-", "MENT is absent"], "if ELEMENT is absent"),
        (["results -", "Table 2"], "results - Table 2"),
    ],
)
def test_a_word_broken_at_a_line_end(lines, text):
    """A narrow column breaks more words: a hyphenated compound keeps its hyphen."""
    assert join_lines(lines) == text


def test_a_list_item_over_two_columns_headings_is_cut_into_text():
    """multicol's first page: the model called the two columns' first headings, side by
    side ("1 Armstrong Farm (Crane Township, ..." with its number apart, "2 History of
    Missis- sippi" over the first rows of text) one list item."""
    left = [(134, 233, 142, 245)] + [(158, 233 + r * 17.5, 301, 245 + r * 17.5) for r in range(4)]
    right = [(311, 233, 478, 245), (335, 250, 368, 263), (311, 280, 478, 289), (311, 292, 478, 301)]
    out = split_at_gutters([(134, 232, 478, 302, "list-item")], left + right)
    assert hulls(out) == [(134, 301, "text"), (311, 478, "text")]


@pytest.mark.parametrize("font", ["Courier", "NimbusMonL-Regu"])
def test_a_listings_fields_are_no_columns(font):
    """A hex dump continued on a page (offsets, two runs of bytes, their text) in a region
    the model called text: its fields are read row by row, as the listing is."""
    from pymupdf4llm.helpers import utils

    install()
    fields = [(120, 163), (173, 297), (308, 432), (442, 539)]
    lines = [(x0, 75 + r * 11.5, x1, 82 + r * 11.5) for r in range(3) for x0, x1 in fields]
    blocks = [
        {"type": 0, "bbox": ln, "lines": [{"bbox": ln, "spans": [{"font": font, "flags": 4}]}]}
        for ln in lines
    ]
    box = (120, 75, 539, 105, "text")
    assert split_at_gutters([box], lines) != [box]  # by their geometry alone, columns
    ordered = utils.find_reading_order(pymupdf.Rect(0, 0, 612, 792), blocks, [box])
    assert [tuple(b) for b in ordered] == [box]
