"""The layout-model PDF path on small synthetic PDFs, one per failure of the heuristic path
(issue 11): three columns with a narrow gutter, a full-width caption under two columns,
footnotes high on the page and back to back, rotated margin text, italic body-size
headings, "(a) Title" headings, a journal line with numbers in the running header, a
partial outline, two captions on one row and a figure drawn in pieces."""

from __future__ import annotations

import pymupdf

from pipeline.pdf.parse import parse_pdf

LOREM = (
    "Structured documents carry their meaning in layout as well as in words and a parser "
    "has to recover paragraphs headings and notes before anything else can use them"
)


def text(tag: str, n: int) -> str:
    """`tag` then n words of running text ending a sentence."""
    words = LOREM.split()
    body = " ".join(words[i % len(words)] for i in range(n))
    return f"{tag} {body}."


def box(page: pymupdf.Page, rect: tuple[float, ...], txt: str, size: float = 10, **kw) -> None:
    rc = page.insert_textbox(pymupdf.Rect(*rect), txt, fontsize=size, **kw)
    assert rc >= 0, f"text did not fit: {txt[:30]}"


def image(page: pymupdf.Page, rect: tuple[float, ...], shade: int = 128) -> None:
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 64, 64), False)
    pix.clear_with(shade)
    for i in range(64):  # a diagonal, so it is a picture, not a flat box
        pix.set_pixel(i, i, (0, 0, 0))
    page.insert_image(pymupdf.Rect(*rect), pixmap=pix)


def parse(pdf: pymupdf.Document, mode: str = "layout"):
    data = pdf.tobytes()
    doc = {"id": "d", "source_path": "s.pdf", "title": "s", "text": "", "sha256": ""}
    return parse_pdf(doc, data, mode=mode)


def firsts(st, types=("PARAGRAPH",)) -> list[str]:
    return [n["text"].split(" ")[0] for n in st.nodes if n["node_type"] in types]


def three_columns() -> pymupdf.Document:
    pdf = pymupdf.open()
    page = pdf.new_page()
    width, gutter = 163, 6  # 6 pt gutter, under the 7.2 pt the XY-cut needed
    for c in range(3):
        x = 50 + c * (width + gutter)
        split = 250 + 60 * c  # paragraph breaks at different heights in each column
        box(page, (x, 80, x + width, split), text(f"C{c + 1}top", (split - 80) // 3), 9)
        box(page, (x, split + 10, x + width, 740), text(f"C{c + 1}bottom", 120), 9)
    return pdf


def caption_under_two_columns() -> pymupdf.Document:
    """Two columns, a full-width caption right under them, two columns again below it."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    for c, x in enumerate((50, 316)):
        split = 180 + 70 * c  # paragraph breaks at different heights in each column
        box(page, (x, 60, x + 246, split), text(f"Col{c + 1}a", (split - 60) // 2))
        box(page, (x, split + 6, x + 246, 380), text(f"Col{c + 1}b", (374 - split) // 2))
    box(page, (50, 383, 562, 405), "Figure 2: A full-width caption right under both columns.", 9)
    for c, x in enumerate((50, 316)):
        box(page, (x, 410, x + 246, 700), text(f"Low{c + 1}", 150))
    return pdf


def high_footnotes() -> pymupdf.Document:
    pdf = pymupdf.open()
    page = pdf.new_page()
    claim = "A claim that needs a source is made here in the running text."
    page.insert_text((50, 100), claim, fontsize=10)
    end = 50 + pymupdf.get_text_length(claim, fontsize=10) + 0.5
    page.insert_text((end, 96), "1", fontsize=6)
    other = "Another claim follows with its own note."
    page.insert_text((50, 114), other, fontsize=10)
    end = 50 + pymupdf.get_text_length(other, fontsize=10) + 0.5
    page.insert_text((end, 110), "2", fontsize=6)
    box(page, (50, 124, 550, 220), text("Body", 90))
    page.draw_line((50, 236), (200, 236), width=0.5)
    for i, y in ((1, 250), (2, 262)):  # back to back, in the top third of the page
        page.insert_text((50, y - 3), str(i), fontsize=5)
        page.insert_text((54, y), f"Note {i} gives the source of claim {i}, 2020.", fontsize=8)
    return pdf


def note_over_two_columns() -> pymupdf.Document:
    pdf = pymupdf.open()
    page = pdf.new_page()
    for c, x in enumerate((50, 316)):
        box(page, (x, 60, x + 246, 640), text(f"Col{c + 1}", 330))
    claim = "A claim with a note."
    page.insert_text((50, 655), claim, fontsize=10)
    end = 50 + pymupdf.get_text_length(claim, fontsize=10) + 0.5
    page.insert_text((end, 651), "1", fontsize=6)
    page.draw_line((50, 700), (150, 700), width=0.5)
    page.insert_text((50, 712), "1", fontsize=5)
    first = "The note starts in the left column and says a great deal about the source of the"
    box(page, (54, 706, 296, 780), first + " claim, which is why it runs on", 8)
    box(page, (316, 706, 562, 780), "into the right column, where it ends with the year 2020.", 8)
    return pdf


def rotated_margin() -> pymupdf.Document:
    pdf = pymupdf.open()
    page = pdf.new_page()
    box(page, (60, 80, 550, 300), text("Body", 160))
    page.insert_text((30, 600), "arXiv:2004.04906v3 [cs.CL] 30 Sep 2020", fontsize=14, rotate=90)
    return pdf


def italic_headings() -> pymupdf.Document:
    pdf = pymupdf.open()
    page = pdf.new_page()
    y = 60
    for i, title in enumerate(("Related work", "Training data", "Evaluation protocol")):
        page.insert_text((50, y + 10), title, fontsize=10, fontname="Times-Italic")
        box(page, (50, y + 18, 550, y + 140), text(f"Para{i + 1}", 110), fontname="Times-Roman")
        y += 170
    return pdf


def lettered_headings() -> pymupdf.Document:
    pdf = pymupdf.open()
    page = pdf.new_page()
    y = 60
    for i, title in enumerate(("(a) Scope of the study", "(b) Data collection")):
        page.insert_text((50, y + 12), title, fontsize=12, fontname="Helvetica-Bold")
        box(page, (50, y + 22, 550, y + 150), text(f"Para{i + 1}", 110))
        y += 180
    return pdf


def journal_pages() -> pymupdf.Document:
    pdf = pymupdf.open()
    for i in range(3):
        page = pdf.new_page()
        if i == 0:  # the journal line of an article's first page
            page.insert_text((50, 40), "Journal of Examples, Vol. 85, No. 152", fontsize=8)
        box(page, (50, 80, 550, 300), text(f"Page{i + 1}", 150))
        page.insert_text((300, 780), str(1234 + i), fontsize=9)
    return pdf


def chapter_running_titles() -> pymupdf.Document:
    """16 pages in four parts, each page headed by its part's running title (a quarter of
    the pages each: under the share that makes a document's running title)."""
    pdf = pymupdf.open()
    for i in range(16):
        page = pdf.new_page()
        part = ("One", "Two", "Three", "Four")[i // 4]
        title = f"Guidelines Version 2.2020 Examples - Part {part}"  # the model: a heading
        box(page, (90, 30, 550, 80), title, 16, fontname="hebo")
        box(page, (50, 100, 550, 400), text(f"P{i + 1}", 150))
    return pdf


def partial_outline() -> pymupdf.Document:
    pdf = pymupdf.open()
    for i, title in enumerate(("1 Introduction", "2 Method", "3 Results")):
        page = pdf.new_page()
        page.insert_text((50, 80), title, fontsize=16, fontname="Helvetica-Bold")
        box(page, (50, 100, 550, 300), text(f"Sec{i + 1}", 150))
    pdf.set_toc([[1, "1 Introduction", 1]])
    return pdf


def two_captions_one_row() -> pymupdf.Document:
    pdf = pymupdf.open()
    page = pdf.new_page()
    box(page, (50, 50, 550, 150), text("Intro", 90))
    image(page, (60, 170, 290, 380), 90)
    image(page, (320, 170, 550, 380), 200)
    page.insert_text((60, 400), "Figure 1: The left picture.", fontsize=9)
    page.insert_text((320, 400), "Figure 2: The right picture.", fontsize=9)
    box(page, (50, 430, 550, 530), text("Outro", 90))
    return pdf


def tiled_figure() -> pymupdf.Document:
    pdf = pymupdf.open()
    page = pdf.new_page()
    box(page, (50, 50, 550, 150), text("Intro", 90))
    for r in range(2):
        for c in range(2):
            x, y = 150 + c * 120, 170 + r * 120  # square tiles that touch
            image(page, (x, y, x + 120, y + 120), 60 + 50 * (r * 2 + c))
    page.insert_text((150, 430), "Figure 1: One figure drawn as four images.", fontsize=9)
    box(page, (50, 450, 550, 550), text("Outro", 90))
    return pdf


# Each test below fails on the heuristic path (mode="heuristic" as of issue 11).


def ruled_table() -> pymupdf.Document:
    """A 7x4 table drawn as cell rectangles between two paragraphs: the table grid model
    reads its cells."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    box(page, (50, 60, 550, 150), text("Intro", 60))
    for r in range(7):
        for c in range(4):
            cell = pymupdf.Rect(60 + c * 120, 180 + r * 22, 180 + c * 120, 202 + r * 22)
            page.draw_rect(cell, color=(0, 0, 0), width=0.6)
            label = f"r{r}c{c} {r * 17 + c}" if r else f"Head {c}"
            page.insert_text((cell.x0 + 4, cell.y1 - 7), label, fontsize=9)
    box(page, (50, 360, 550, 460), text("After", 60))
    return pdf


def test_three_columns_narrow_gutter_read_column_by_column():
    st = parse(three_columns())
    assert firsts(st) == ["C1top", "C1bottom", "C2top", "C2bottom", "C3top", "C3bottom"]


def test_full_width_caption_under_two_columns_keeps_columns_apart():
    st = parse(caption_under_two_columns())
    order = firsts(st, ("PARAGRAPH", "CAPTION"))
    assert order == ["Col1a", "Col1b", "Col2a", "Col2b", "Figure", "Low1", "Low2"]


def test_footnotes_high_on_the_page_each_its_own_note_and_linked():
    st = parse(high_footnotes())
    notes = {n["id"]: n for n in st.nodes if n["node_type"] == "NOTE"}
    assert [n["text"][:6] for n in notes.values()] == ["Note 1", "Note 2"]
    links = {(e["marker_text"], notes[e["target_id"]]["text"][:6]) for e in st.edges}
    assert links == {("1", "Note 1"), ("2", "Note 2")}


def test_footnote_run_over_into_the_next_column_is_one_note():
    st = parse(note_over_two_columns())
    notes = [n for n in st.nodes if n["node_type"] == "NOTE"]
    assert len(notes) == 1 and notes[0]["text"].endswith("ends with the year 2020.")
    assert not [n for n in st.nodes if n["text"].startswith("into the right")]
    assert [e["target_id"] for e in st.edges] == [notes[0]["id"]]


def test_rotated_margin_text_is_dropped():
    st = parse(rotated_margin())
    assert not [n for n in st.nodes if "arXiv" in n["text"]]
    assert [s["title"] for s in st.sections[1:]] == []


def test_italic_body_size_headings():
    st = parse(italic_headings())
    heads = [n["text"] for n in st.nodes if n["node_type"] == "HEADING"]
    assert heads == ["Related work", "Training data", "Evaluation protocol"]


def test_lettered_paragraph_headings_are_headings_not_list_items():
    st = parse(lettered_headings())
    heads = [n["text"] for n in st.nodes if n["node_type"] == "HEADING"]
    assert heads == ["(a) Scope of the study", "(b) Data collection"]
    assert not [n for n in st.nodes if n["node_type"] == "LIST_ITEM"]


def test_printed_page_numbers_not_the_issue_number():
    st = parse(journal_pages())
    labels = [n["positions"][0]["page_label"] for n in st.nodes if n["node_type"] == "PARAGRAPH"]
    assert labels == ["1234", "1235", "1236"]
    assert all(n["text"] != "152" for n in st.nodes)


def test_a_chapters_running_title_is_no_heading_or_text():
    st = parse(chapter_running_titles())
    texts = [n["text"] for n in st.nodes]
    assert not [t for t in texts if "Guidelines Version" in t]
    assert not [s["title"] for s in st.sections if "Guidelines Version" in s["title"]]
    assert [t.split()[0] for t in texts if t] == [f"P{i}" for i in range(1, 17)]


def test_partial_outline_keeps_the_detected_headings():
    st = parse(partial_outline())
    titles = [s["title"] for s in st.sections[1:]]
    assert titles == ["1 Introduction", "2 Method", "3 Results"]
    by_title = {s["title"]: s for s in st.sections}
    assert by_title["2 Method"]["parent_id"] == st.root_id


def test_two_captions_on_one_row_each_to_its_figure():
    st = parse(two_captions_one_row())
    caps = {n["id"]: n for n in st.nodes if n["node_type"] == "CAPTION"}
    figs = {n["id"]: n for n in st.nodes if n["node_type"] == "FIGURE"}
    assert sorted(n["text"] for n in caps.values()) == [
        "Figure 1: The left picture.",
        "Figure 2: The right picture.",
    ]
    pairs = [(figs[e["source_id"]], caps[e["target_id"]]) for e in st.edges]
    assert len(pairs) == 2
    for fig, cap in pairs:  # the left figure gets the left caption
        left = fig["positions"][0]["x0"] < 300
        assert cap["text"].startswith("Figure 1" if left else "Figure 2")


def test_figure_drawn_in_pieces_is_one_figure():
    st = parse(tiled_figure())
    assert [n["node_type"] for n in st.nodes].count("FIGURE") == 1
    assert [e["type"] for e in st.edges] == ["IS_CAPTIONED_BY"]


def read_regions(data: bytes, workers: int) -> list[list[tuple]]:
    """Each page's regions as (class, rounded box, table cells)."""
    from pipeline.pdf.layout.workers import layout_regions

    with pymupdf.open(stream=data, filetype="pdf") as doc:
        regions = layout_regions(doc, data, workers=workers)
    return [[(r.cls, tuple(round(v) for v in r.bbox), r.table) for r in rs] for rs in regions]


def test_pages_dealt_to_worker_processes_match_one_process(monkeypatch):
    import os

    from pipeline.pdf.layout import workers as pdf_workers

    pdf = journal_pages()
    for more in (three_columns(), tiled_figure(), caption_under_two_columns()):
        pdf.insert_pdf(more)
    data = pdf.tobytes()
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    monkeypatch.setattr(pdf_workers, "PAGES_PER_WORKER", 1)
    real_run, jobs = pdf_workers._run, []
    monkeypatch.setattr(pdf_workers, "_run", lambda j: jobs.append(j) or real_run(j))
    dealt = read_regions(data, workers=2)
    n = pdf.page_count
    assert [[pages for _, pages in mine] for mine in jobs[0]] == [
        [list(range(0, n, 2))],
        [list(range(1, n, 2))],
    ]
    assert dealt == read_regions(data, workers=1)
    assert len(jobs) == 1  # workers=1: read in this process


def test_model_sessions_set_here_read_pages_as_pymupdfs_own(monkeypatch):
    """use_model's sessions (no spinning threads, one thread in workers, arenas for the
    page CNN and the table grid model, no memory patterns, PReLU as a LeakyReLU fused into
    its Conv) change how
    the model runs, not what it finds."""
    import onnx
    import onnxruntime as ort
    from pymupdf.layout import DocumentLayoutAnalyzer

    from pipeline.pdf.layout import regions as pdf_regions

    pdf = three_columns()
    for more in (tiled_figure(), two_captions_one_row(), high_footnotes(), ruled_table()):
        pdf.insert_pdf(more)
    data = pdf.tobytes()
    pdf_regions.use_model(threads=1)
    model = pymupdf._get_layout.__self__._model  # the wrapper use_model installed
    cnn = model.feature_extractor._session
    assert cnn.get_session_options().enable_cpu_mem_arena
    assert cnn.get_session_options().intra_op_num_threads == 1
    assert not cnn.get_session_options().enable_mem_pattern
    assert model.table_grid_extractor._grid_sess.get_session_options().enable_cpu_mem_arena
    gnn = model.session.get_session_options()
    assert not gnn.enable_cpu_mem_arena
    assert gnn.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert isinstance(model.session, ort.InferenceSession)
    ops = [n.op_type for n in onnx.load(cnn._model_path).graph.node]
    fused = [
        n.op_type for n in onnx.load_from_string(pdf_regions._fusable(cnn._model_path)).graph.node
    ]
    assert ops.count("PRelu") > 20 and "PRelu" not in fused
    assert fused.count("LeakyRelu") == ops.count("PRelu")
    tuned = read_regions(data, workers=1)
    assert any(cls == "table" and cells and cells["col_count"] == 4 for cls, _, cells in tuned[-1])
    monkeypatch.setattr(pymupdf, "_get_layout", DocumentLayoutAnalyzer.get_model().predict)
    monkeypatch.setattr(pdf_regions, "_model_threads", -1)  # keep pymupdf's own model
    assert read_regions(data, workers=1) == tuned
    monkeypatch.undo()
    pdf_regions.use_model()  # the process's default again


def test_a_page_the_model_cannot_read_keeps_its_text(monkeypatch):
    from pipeline.pdf.layout import regions as pdf_regions

    real = pdf_regions._model_regions

    def flaky(pdf, pages):
        if 1 in pages:
            raise RuntimeError("model broke")
        return real(pdf, pages)

    monkeypatch.setattr(pdf_regions, "_model_regions", flaky)
    pdf = journal_pages()
    pdf.insert_pdf(three_columns())
    st = parse(pdf)
    assert any(
        "page 2: not read by the layout model (RuntimeError: model broke)" in w for w in st.warnings
    )
    on_page2 = [n["text"].split(" ")[0] for n in st.nodes if n["positions"][0]["page"] == 2]
    assert "Page2" in on_page2
    assert firsts(st)[-6:] == ["C1top", "C1bottom", "C2top", "C2bottom", "C3top", "C3bottom"]


def test_a_sentence_the_model_puts_in_a_margin_once_is_kept():
    """A one-page document's closing line at the foot of the page may be classed as a page
    footer; it is content unless another page repeats it (found on an unseen PDF: the line
    vanished and its "1" became the page label)."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    box(page, (50, 80, 560, 600), text("Body", 150))
    page.insert_text((50, 800), "1 The Harbour Trust was dissolved in the year 1920.", fontsize=7)
    st = parse(pdf)
    assert any("Harbour Trust was dissolved" in n["text"] for n in st.nodes)
    # a footer sentence repeated on every page is still a running footer, dropped
    repeated = journal_pages()
    for p in repeated:
        p.insert_text(
            (50, 810), "Printed for the examples society by the example press.", fontsize=7
        )
    assert not any("example press" in n["text"] for n in parse(repeated).nodes)


def test_the_only_line_of_a_page_is_content_not_a_margin():
    """The model calls a lone line on a page a page header or footer: a one-line document
    ("Hi."), a title page or a divider page lost its text. On a page with no other text it
    is kept, set large it heads, unless it is a page number or repeated on other pages."""
    pdf = pymupdf.open()
    pdf.new_page().insert_text((72, 72), "Hi.", fontsize=11)
    assert [n["text"] for n in parse(pdf).nodes] == ["Hi."]

    pdf = journal_pages()
    pdf.new_page(1).insert_text((72, 72), "Part Two", fontsize=10)  # a divider page
    pdf.new_page(3).insert_text((300, 780), "1237", fontsize=9)  # a page holding its number
    st = parse(pdf)
    assert firsts(st) == ["Page1", "Part", "Page2", "Page3"]
    assert [n["node_type"] for n in st.nodes if n["text"] == "1237"] == ["PAGE_NUMBER"]

    cover = pdf.new_page(0)  # a title page: one line in display type
    box(cover, (72, 250, 540, 300), "A Study of Harbour Trusts", 24, fontname="hebo", align=1)
    pdf.new_page(4).insert_text((72, 400), "Part Three", fontsize=18)  # a divider set large
    st = parse(pdf)
    assert [n["text"] for n in st.nodes if n["node_type"] == "TITLE"] == [
        "A Study of Harbour Trusts"
    ]
    assert [s["title"] for s in st.sections][1:] == ["Part Three"]
    assert firsts(st) == ["Page1", "Part", "Page2", "Page3"]


def test_a_title_the_model_puts_in_a_margin_heads_and_gives_no_page_number():
    """A one-page report whose display-type title sits at the top was classed a page header:
    its text was dropped and the year closing it became the page label ("2025"; found on an
    unseen PDF). A margin line set larger than the body text and not repeated elsewhere
    heads; a running title at the body's size on every page stays a margin."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_text((72, 60), "Harbour Renewal Report 2025", fontsize=18)
    left = "The harbour pilot began in March. It was led by an engineer, who had built gates."
    right = "Funding came from the maritime authority. It later extended the programme."
    page.insert_textbox(pymupdf.Rect(72, 90, 290, 400), left, fontsize=10)
    page.insert_textbox(pymupdf.Rect(310, 90, 530, 400), right, fontsize=10)
    st = parse(pdf)
    assert [(n["node_type"], n["text"]) for n in st.nodes][0] == (
        "HEADING",
        "Harbour Renewal Report 2025",
    )
    assert "2025" not in [n["text"] for n in st.nodes if n["node_type"] == "PAGE_NUMBER"]
    running = journal_pages()
    for p in running:
        p.insert_text((50, 30), "Harbour Renewal Report", fontsize=9)
    assert not any("Renewal" in n["text"] for n in parse(running).nodes)


def test_a_short_note_the_model_puts_in_a_footer_once_is_a_note():
    """The same report's footnote, "1 Figures are provisional." (under the five words that
    make a margin sentence content), was dropped and its marker became the page label: a
    footer line that no other page repeats and reads as a note (a marker, then words ending
    a sentence) is a NOTE; numbered footers repeated on every page stay margins."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_text((72, 60), "Harbour Renewal Report 2025", fontsize=18)
    left = "The harbour pilot began in March. It was led by an engineer, who had built gates."
    page.insert_textbox(pymupdf.Rect(72, 90, 290, 400), left, fontsize=10)
    page.insert_text((72, 780), "1 Figures are provisional.", fontsize=7)
    st = parse(pdf)
    assert [(n["node_type"], n["text"]) for n in st.nodes][-1] == (
        "NOTE",
        "Figures are provisional.",
    )
    assert "1" not in [n["text"] for n in st.nodes if n["node_type"] == "PAGE_NUMBER"]
    repeated = journal_pages()
    for i, p in enumerate(repeated):
        p.insert_text((50, 810), f"{i + 1} Printed by the example press.", fontsize=7)
    assert not any("example press" in n["text"] for n in parse(repeated).nodes)


def test_a_footnote_sharing_the_footer_with_the_page_number_is_a_note():
    """A word processor's last footnote sits just above "Page 1", and the model draws one
    footer around both (a LibreOffice export): the footnote was lost with the footer. The
    page number's line is judged alone: the note is a NOTE, the number the page's label."""
    pdf = pymupdf.open()
    text = (
        "The harbour pilot began in March. It was led by an engineer, who had built gates. "
        "The tide gauges were read every six minutes and their records kept by the authority."
    )
    for i, title in enumerate(["Harbour Renewal Report 2025", "Methods"]):
        page = pdf.new_page()
        page.insert_text((72, 60), title, fontsize=18)
        page.insert_textbox(pymupdf.Rect(72, 90, 520, 400), text, fontsize=11)
        if i == 0:
            page.insert_text((72, 760), "1 The gauges at Marsa were renewed in 2023.", fontsize=9)
        page.insert_text((72, 776), f"Page {i + 1}", fontsize=11)
    nodes = [(n["node_type"], n["text"]) for n in parse(pdf).nodes]
    assert ("NOTE", "The gauges at Marsa were renewed in 2023.") in nodes
    assert [t for kind, t in nodes if kind == "PAGE_NUMBER"] == ["1", "2"]


def test_a_page_of_too_many_vector_paths_is_read_by_position(monkeypatch):
    """The model's text extraction segments a page around its vector paths (240 s on a page
    of 18,560): a page over MAX_PATHS is not given to the model, its text kept by position,
    the reason recorded; the other pages are the model's."""
    from pipeline.pdf.layout import regions as pdf_regions

    monkeypatch.setattr(pdf_regions, "MAX_PATHS", 50)
    pdf = journal_pages()
    page = pdf[1]
    for i in range(60):  # a chart: 60 separate strokes
        page.draw_line((60 + 8 * i, 500), (64 + 8 * i, 560 - i), width=0.5)
    model, real = [], pdf_regions._model_regions
    monkeypatch.setattr(pdf_regions, "_model_regions", lambda d, p: model.append(p) or real(d, p))
    st = parse(pdf)
    assert model == [[0, 2]]
    assert any(
        "page 2: not read by the layout model (60 vector paths, over 50)" in w for w in st.warnings
    )
    assert "Page2" in [n["text"].split(" ")[0] for n in st.nodes if n["positions"][0]["page"] == 2]
