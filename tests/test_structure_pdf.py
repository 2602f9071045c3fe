"""PDF structure parser on PDFs built here with pymupdf (and docling's ground truth if present)."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pymupdf
import pytest

from pipeline.pdf.parse import parse_pdf
from pipeline.pdf.read.bullets import mark_bullets
from pipeline.structure import PARSERS

LOREM = (
    "Structured documents carry their meaning in layout as well as in words, and a parser "
    "has to recover paragraphs, headings and notes before anything else can use them."
)


def _doc(data: bytes) -> dict:
    return {"id": "d1", "source_path": "x.pdf", "title": "x", "text": "", "sha256": ""}


def _parse(pdf: pymupdf.Document):
    data = pdf.tobytes()
    return parse_pdf(_doc(data), data)


def _box(page, rect, text, size=10, font="helv"):
    rc = page.insert_textbox(pymupdf.Rect(*rect), text, fontsize=size, fontname=font)
    assert rc >= 0, "text did not fit"


def test_registered_and_fallback():
    assert "application/pdf" in PARSERS
    st = parse_pdf({"id": "d", "source_path": "a.pdf", "title": "a", "text": "one\fTwo"}, None)
    assert [n["positions"][0]["page"] for n in st.nodes] == [1, 2]
    assert st.warnings


def test_two_columns_reading_order():
    pdf = pymupdf.open()
    page = pdf.new_page()
    _box(page, (50, 80, 290, 300), "Left top. " + LOREM)
    _box(page, (50, 320, 290, 540), "Left bottom. " + LOREM)
    _box(page, (320, 80, 560, 300), "Right top. " + LOREM)
    _box(page, (320, 320, 560, 540), "Right bottom. " + LOREM)
    st = _parse(pdf)
    firsts = [n["text"].split(".")[0] for n in st.nodes if n["node_type"] == "PARAGRAPH"]
    assert firsts == ["Left top", "Left bottom", "Right top", "Right bottom"]


def test_three_columns_under_a_full_width_title_reading_order():
    # Paragraph breaks at different heights in each column, as on real pages (a blank band
    # across all columns would make two rows of columns, read row by row).
    pdf = pymupdf.open()
    page = pdf.new_page()
    _box(page, (50, 60, 560, 100), "Full width opening statement. " + LOREM[:120])
    for i, (x, split) in enumerate(((50, 180), (225, 240), (400, 300))):
        top = (f"Column {i + 1} top. " + LOREM * 4)[: int((split - 120) * 2)]
        _box(page, (x, 120, x + 160, split), top)
        _box(page, (x, split + 4, x + 160, 700), (f"Column {i + 1} bottom. " + LOREM * 4)[:600])
    st = _parse(pdf)
    firsts = [n["text"].split(".")[0] for n in st.nodes if n["node_type"] == "PARAGRAPH"]
    assert firsts == [
        "Full width opening statement",
        "Column 1 top",
        "Column 1 bottom",
        "Column 2 top",
        "Column 2 bottom",
        "Column 3 top",
        "Column 3 bottom",
    ]


def test_running_header_and_page_labels():
    pdf = pymupdf.open()
    for i in range(3):
        page = pdf.new_page()
        page.insert_text((50, 40), "Journal of Examples, vol. 3", fontsize=9)
        _box(page, (50, 100, 550, 300), f"Body of page {i + 1}. " + LOREM)
        page.insert_text((300, 800), str(i + 1), fontsize=9)
    pdf.set_page_labels([{"startpage": 0, "prefix": "", "style": "r", "firstpagenum": 1}])
    st = _parse(pdf)
    texts = " ".join(n["text"] for n in st.nodes if n["node_type"] != "PAGE_NUMBER")
    assert "Journal" not in texts
    body = [n for n in st.nodes if n["node_type"] == "PARAGRAPH"]
    assert len(body) == 3
    assert [n["positions"][0]["page_label"] for n in body] == ["i", "ii", "iii"]
    nums = [n for n in st.nodes if n["node_type"] == "PAGE_NUMBER"]
    assert [(n["text"], n["positions"][0]["page"]) for n in nums] == [("1", 1), ("2", 2), ("3", 3)]


def test_figure_between_split_paragraph_gives_continues():
    pdf = pymupdf.open()
    page = pdf.new_page()
    _box(page, (50, 60, 550, 160), LOREM + " The sentence goes on and")
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 40, 40), False)
    pix.clear_with(128)
    page.insert_image(pymupdf.Rect(50, 200, 250, 400), pixmap=pix)
    _box(page, (50, 440, 550, 540), "ends below the figure. " + LOREM)
    st = _parse(pdf)
    assert "FIGURE" in {n["node_type"] for n in st.nodes}
    paras = {n["id"]: n["text"] for n in st.nodes if n["node_type"] == "PARAGRAPH"}
    assert len(paras) == 2  # not merged across the figure
    cont = [e for e in st.edges if e["type"] == "CONTINUES"]
    assert len(cont) == 1
    assert paras[cont[0]["source_id"]].endswith("goes on and")
    assert paras[cont[0]["target_id"]].startswith("ends below")


def test_footnote_marker_edge():
    pdf = pymupdf.open()
    page = pdf.new_page()
    claim = "A claim that needs a source."
    page.insert_text((50, 200), claim, fontsize=11)
    end = 50 + pymupdf.get_text_length(claim, fontsize=11) + 0.5
    page.insert_text((end, 195), "1", fontsize=7)  # its own text object, raised
    page.insert_text((50, 216), "More text follows here on the page.", fontsize=11)
    page.insert_text((50, 657), "1", fontsize=5)
    page.insert_text((54, 660), "The source of the claim, 2020.", fontsize=8)
    st = _parse(pdf)
    notes = [n for n in st.nodes if n["node_type"] == "NOTE"]
    assert len(notes) == 1 and notes[0]["text"].startswith("The source")
    edges = [e for e in st.edges if e["type"] == "REFERENCES_NOTE"]
    assert len(edges) == 1 and edges[0]["target_id"] == notes[0]["id"]
    assert edges[0]["marker_text"] == "1"


def test_heading_hierarchy_by_font_size():
    pdf = pymupdf.open()
    page = pdf.new_page()
    y = 60
    for text, size in [
        ("Chapter One", 20),
        ("Body one. " + LOREM, 10),
        ("First Part", 14),
        ("Body two. " + LOREM, 10),
        ("Second Part", 14),
        ("Body three. " + LOREM, 10),
    ]:
        h = 20 if size > 10 else 60
        _box(page, (50, y, 550, y + h + 20), text, size=size)
        y += h + 25
    st = _parse(pdf)
    by_title = {s["title"]: s for s in st.sections}
    assert {"First Part", "Second Part"} <= set(by_title)
    parent = by_title["First Part"]["parent_id"]
    assert parent == by_title.get("Chapter One", {}).get("id") or parent == st.root_id
    assert by_title["Second Part"]["parent_id"] == parent


def test_outline_sections():
    pdf = pymupdf.open()
    for i in range(2):
        page = pdf.new_page()
        page.insert_text((50, 80), f"Topic {i + 1}", fontsize=10)
        _box(page, (50, 100, 550, 300), LOREM)
    pdf.set_toc([[1, "Topic 1", 1], [2, "Topic 2", 2]])
    st = _parse(pdf)
    titles = {s["title"]: s for s in st.sections}
    assert titles["Topic 2"]["parent_id"] == titles["Topic 1"]["id"]
    para2 = [n for n in st.nodes if n["node_type"] == "PARAGRAPH"][1]
    assert para2["section_id"] == titles["Topic 2"]["id"]


def test_paragraph_continued_across_pages():
    pdf = pymupdf.open()
    p1 = pdf.new_page()
    _box(p1, (50, 600, 550, 800), LOREM + " The sentence goes on and")
    p2 = pdf.new_page()
    _box(p2, (50, 60, 550, 200), "ends on the next page. " + LOREM)
    st = _parse(pdf)
    paras = [n for n in st.nodes if n["node_type"] == "PARAGRAPH"]
    merged = [n for n in paras if "goes on and ends on the next page" in n["text"]]
    cont = [e for e in st.edges if e["type"] == "CONTINUES"]
    assert (len(merged) == 1 and {p["page"] for p in merged[0]["positions"]} == {1, 2}) or cont


def test_caption_versus_sentence_about_a_figure():
    """Label + separator / capitalised title / nothing is a caption; label + lower-case word in
    the body font is a sentence (PARAGRAPH); in a smaller caption font it stays a caption."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    blocks = [
        ("Opening text. " + LOREM, 10),
        ("Table 2 compares the results of both parsers on every page of the corpus.", 10),
        ("Table 2: Results of both parsers", 8),
        ("Middle text. " + LOREM, 10),
        ("Figure 3 shows that the layout matters more than the words on a page.", 10),
        ("Figure 3 - Layout of a page", 8),
        ("TABLE IV", 8),
        ("Table 2-1 Special registers", 8),
        ("Fig. 4a shows the first page of the corpus, in a caption font.", 8),
        ("Closing text. " + LOREM, 10),
    ]
    y = 50
    for text, size in blocks:
        h = 55 if len(text) > 120 else 20
        _box(page, (50, y, 550, y + h), text, size=size)
        y += h + 14
    st = _parse(pdf)
    types = {n["text"]: n["node_type"] for n in st.nodes}
    for text in (
        "Table 2: Results of both parsers",
        "Figure 3 - Layout of a page",
        "TABLE IV",
        "Table 2-1 Special registers",
        "Fig. 4a shows the first page of the corpus, in a caption font.",
    ):
        assert types.get(text) == "CAPTION", (text, types)
    for text in (
        "Table 2 compares the results of both parsers on every page of the corpus.",
        "Figure 3 shows that the layout matters more than the words on a page.",
    ):
        assert types.get(text) == "PARAGRAPH", (text, types)


@pytest.mark.parametrize(
    ("name", "n_captions"),
    [("multi-column", 8), ("redp5110_sampled", 14), ("2305.03393v1-pg9", 1)],
)
def test_shared_pdf_captions(shared_data, name, n_captions):
    """No sentence about a table/figure ("Table 3-1 summarizes ...") is a caption; every real
    caption is one."""
    pdf = shared_data / "pdfs" / f"{name}.pdf"
    st, _ = _bench().parse_file(pdf)
    caps = [n["text"] for n in st.nodes if n["node_type"] == "CAPTION"]
    assert len(caps) == n_captions, caps
    sentences = [n["text"] for n in st.nodes if n["node_type"] == "PARAGRAPH"]
    if name == "redp5110_sampled":
        assert "Table 3-1 Special registers and their corresponding values" in caps
        assert "Table 3-1 summarizes these special registers and their values." in sentences
    if name == "multi-column":
        assert any(t.startswith("Table 2 compares") for t in sentences)
        assert any(t.startswith("Table 2: Top-20") for t in caps)


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_structure", Path(__file__).resolve().parents[1] / "benchmarks" / "structure.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["redp5110_sampled", "2305.03393v1-pg9"])
def test_docling_headings(shared_data, name):
    pdf, gt = shared_data / "pdfs" / f"{name}.pdf", shared_data / "pdfs" / f"{name}.groundtruth.md"
    bench = _bench()
    st, _ = bench.parse_file(pdf)
    pred = [bench.norm(n["text"]) for n in st.nodes if n["node_type"] in ("HEADING", "TITLE")]
    p, r, _ = bench.prf(pred, bench.gt_headings(gt))
    assert p >= 0.9, (p, Counter(pred))
    assert r >= 0.9, r


def _listing_pdf(body_font: str) -> pymupdf.Document:
    """Prose in `body_font`, a listing in an embedded monospaced font whose name does not say
    so (the "fixed pitch" flag unset, as TeX's and Ghostscript's subsets leave it), its
    caption, and a sentence with one monospaced word."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_font(fontname="F9", fontbuffer=pymupdf.Font("cour").buffer)
    _box(page, (50, 60, 550, 120), "Opening text. " + LOREM, font=body_font)
    y = 140
    for line in (
        "def tide(hour):",
        "    if hour < 6:",
        "        return 'low'",
        "    return 'high'",
    ):
        page.insert_text((60, y), line, fontsize=9, fontname="F9")
        y += 11
    _box(page, (50, y + 4, 550, y + 20), "Listing 1: The tide of an hour", size=8, font=body_font)
    y += 40
    page.insert_text((50, y), "Call", fontsize=10, fontname=body_font)
    page.insert_text((72, y), "tide()", fontsize=10, fontname="F9")
    page.insert_text((106, y), "with the hour of the day, as the example shows.", fontsize=10,
                     fontname=body_font)  # fmt: skip
    _box(page, (50, y + 20, 550, y + 80), "Closing text. " + LOREM, font=body_font)
    return pdf


def test_a_listing_in_a_monospaced_font_is_code_with_its_lines_and_caption():
    """Lines set in a monospaced font (told by its glyphs' advances) are one CODE node,
    lines and indentation kept, captioned by its `Listing` caption; a sentence with a
    monospaced word in it stays a paragraph."""
    st = _parse(_listing_pdf("tiro"))
    code = [n for n in st.nodes if n["node_type"] == "CODE"]
    assert [n["text"] for n in code] == [
        "def tide(hour):\n    if hour < 6:\n        return 'low'\n    return 'high'"
    ]
    types = {n["text"][:11]: n["node_type"] for n in st.nodes}
    assert types["Opening tex"] == types["Closing tex"] == types["Call tide()"] == "PARAGRAPH"
    caption = next(n for n in st.nodes if n["node_type"] == "CAPTION")
    assert caption["text"] == "Listing 1: The tide of an hour"
    captioned = {
        (e["source_id"], e["target_id"]) for e in st.edges if e["type"] == "IS_CAPTIONED_BY"
    }
    assert captioned == {(code[0]["id"], caption["id"])}


@pytest.mark.parametrize("mode", ["layout", "heuristic"])
def test_a_listing_keeps_its_columns_blank_lines_and_dash_lines(mode):
    """A usage listing: its option lines open with a dash (read as list items) in a block of
    their own, indented, each with its description in an aligned column pymupdf reads as a
    line of its own; one CODE node keeps the indentation, the column and the blank line."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_font(fontname="F9", fontbuffer=pymupdf.Font("cour").buffer)
    _box(page, (50, 60, 550, 120), "Opening text. " + LOREM, font="tiro")
    char = 0.6 * 9  # Courier's advance at 9 pt
    page.insert_text((60, 140), "Usage: tide [OPTION] FILE", fontsize=9, fontname="F9")
    page.insert_text((60, 151), "Print the tide of FILE.", fontsize=9, fontname="F9")
    for y, option, text in ((173, "-h, --hour=H", "the hour to ask for"), (184, "-v", "version")):
        page.insert_text((60 + 2 * char, y), option, fontsize=9, fontname="F9")
        page.insert_text((60 + 20 * char, y), text, fontsize=9, fontname="F9")
    _box(page, (50, 210, 550, 270), "Closing text. " + LOREM, font="tiro")
    data = pdf.tobytes()
    st = parse_pdf(_doc(data), data, mode=mode)
    assert [n["text"] for n in st.nodes if n["node_type"] not in ("PARAGRAPH",)] == [
        "Usage: tide [OPTION] FILE\n"
        "Print the tide of FILE.\n"
        "\n"
        "  -h, --hour=H      the hour to ask for\n"
        "  -v                version"
    ]


@pytest.mark.parametrize("mode", ["layout", "heuristic"])
def test_bullets_painted_as_shapes_lead_list_items(mode):
    """A browser's "Save as PDF" paints list bullets as small discs (stroked circles one
    level down), no text: each item is a list item led by "•" / "◦". A marker of another
    colour beside a label (a chart legend) leads nothing."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    _box(page, (50, 60, 550, 120), "Opening text. " + LOREM, font="tiro")
    page.insert_text((72, 150), "Supported values for this option are:", fontsize=11)
    items = [
        (72, "tiny - Tiny code model, for the smallest programs.", True),
        (72, "small - Small code model, the default on most targets.", True),
        (92, "kernel - Kernel code model, within the small one.", False),
    ]
    y = 168
    for x, text, filled in items:
        centre = pymupdf.Point(x - 14, y - 3.5)
        if filled:
            page.draw_circle(centre, 2.25, color=None, fill=(0, 0, 0))
        else:
            page.draw_circle(centre, 2.25, color=(0, 0, 0), width=0.8)
        page.insert_text((x, y), text, fontsize=11)
        y += 18
    page.draw_rect(pymupdf.Rect(58, y + 12, 62, y + 16), color=None, fill=(0.1, 0.4, 0.8))
    page.insert_text((72, y + 17), "Series A of the measured tides", fontsize=11)
    _box(page, (50, y + 40, 550, y + 100), "Closing text. " + LOREM, font="tiro")
    data = pdf.tobytes()
    st = parse_pdf(_doc(data), data, mode=mode)
    assert [n["text"] for n in st.nodes if n["node_type"] == "LIST_ITEM"] == [
        "• tiny - Tiny code model, for the smallest programs.",
        "• small - Small code model, the default on most targets.",
        "◦ kernel - Kernel code model, within the small one.",
    ]
    assert any(n["text"].startswith("Series A") for n in st.nodes)


def test_word_private_use_bullets_read_as_bullets():
    """Word's Symbol-font bullet comes out of a PDF without a Unicode map as U+F0B7."""
    page = pymupdf.open().new_page()
    span = {"text": "\uf0b7 Tides", "bbox": (60, 90, 120, 102), "size": 10, "flags": 0}
    d = {"blocks": [{"lines": [{"bbox": span["bbox"], "spans": [span]}]}]}
    mark_bullets(page, d)
    assert span["text"] == "• Tides"


def test_inline_code_padding_is_no_space_before_punctuation():
    """A browser pads inline code with a box that pymupdf reads as a space: "tool ( tide ),
    then read gauge.rs , as shown." reads "(tide), ... gauge.rs, as shown."."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_font(fontname="F9", fontbuffer=pymupdf.Font("cour").buffer)
    _box(page, (50, 60, 550, 120), "Opening text. " + LOREM, font="tiro")
    x = 50.0
    for text, font in [
        ("Call the tool (", "tiro"),
        ("tide", "F9"),
        ("), then read", "tiro"),
        ("gauge.rs", "F9"),
        (", as shown.", "tiro"),
    ]:
        page.insert_text((x, 150), text, fontsize=10, fontname=font)
        measure = "cour" if font == "F9" else font
        x += pymupdf.get_text_length(text, fontname=measure, fontsize=10) + 4  # the padding
    texts = [n["text"] for n in _parse(pdf).nodes]
    assert "Call the tool (tide), then read gauge.rs, as shown." in texts


def test_a_typewritten_pdf_has_no_code():
    """Set all in a monospaced font (a typewritten report), nothing stands out as a listing."""
    st = _parse(_listing_pdf("cour"))
    assert not [n for n in st.nodes if n["node_type"] == "CODE"]
