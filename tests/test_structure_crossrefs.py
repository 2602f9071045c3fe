"""In-document cross-references (CROSS_REFERENCES edges): Markdown and PDF built here, Russian,
unresolvable and self references, other works' tables, and docling's shared PDFs."""

from __future__ import annotations

import json

import pymupdf

from pipeline.ingest import load_folder
from pipeline.pdf.parse import parse_pdf
from pipeline.structure import build_structure
from pipeline.structure.crossrefs import cross_references
from pipeline.structure.markdown import parse_markdown

MD = """# Report

Intro: see Figure 2 and Table 1, details in Section 3. Figure 9 and Section 7 do not exist.
As Table 2 of Smith et al. (2020) shows, and Figures 1 and 2 agree.

![Figure 1: Pipeline](a.png)

**Figure 2.** Architecture overview.

| a | b |
|---|---|
| 1 | 2 |

Table 1: Results on the test set (see Figure 2).

## 3 Method

Text (Eq. 5) and Appendix A; Figure 1 shows it.

$$ x = y \\tag{5} $$

## 3.2 Ablation

See §3 and Sections 3-3.2.

## A Note on Style

## Appendix A: Data
"""

RU = """# Отчёт

## 4 Результаты

Как показано на рис. 3 и в табл. 2 (см. также раздел 4.1 и приложение Б), метод работает.
На рисунке 7 ничего нет.

Рисунок 3 — Схема установки

Таблица 2 – Данные измерений

### 4.1 Обсуждение

Текст.

## Приложение Б. Исходный код
"""


def _edges(doc) -> list[tuple[str, str, str]]:
    """(marker, source text start, target text) of every cross-reference edge."""
    text = {n["id"]: n["text"] for n in doc.nodes} | {s["id"]: s["title"] for s in doc.sections}
    return [
        (e["marker_text"], text[e["source_id"]][:12], text[e["target_id"]])
        for e in cross_references(doc)
    ]


def test_markdown_references_resolve_to_captions_sections_and_equations():
    doc = parse_markdown("d", "r.md", "r", MD)
    got = _edges(doc)
    assert got == [
        ("Figure 2", "Intro: see F", "**Figure 2.** Architecture overview."),
        ("Table 1", "Intro: see F", "Table 1: Results on the test set (see Figure 2)."),
        ("Section 3", "Intro: see F", "3 Method"),
        ("Figures 1 and 2", "Intro: see F", "Figure 1: Pipeline"),
        ("Figure 2", "Table 1: Res", "**Figure 2.** Architecture overview."),
        ("Eq. 5", "Text (Eq. 5)", "$$ x = y \\tag{5} $$"),
        # "A Note on Style" has no neighbouring letter heading: not appendix A.
        ("Appendix A", "Text (Eq. 5)", "Appendix A: Data"),
        ("Figure 1", "Text (Eq. 5)", "Figure 1: Pipeline"),
        ("§3", "See §3 and S", "3 Method"),
        ("Sections 3-3.2", "See §3 and S", "3.2 Ablation"),
    ]
    edges = cross_references(doc)
    assert all(e["type"] == "CROSS_REFERENCES" and e["weight"] == 1.0 for e in edges)
    assert all(e["source_id"] != e["target_id"] for e in edges)
    assert len({(e["source_id"], e["target_id"]) for e in edges}) == len(edges)  # deduped
    meta = [json.loads(e["metadata"]) for e in edges]
    assert meta[0] == {"kind": "figure", "label": "2", "mentions": 2, "target_type": "PARAGRAPH"}
    assert meta[2]["target_type"] == "SECTION" and meta[6]["kind"] == "appendix"
    # unresolvable (Figure 9, Section 7) and another work's table produce nothing
    assert not any(m in ("Figure 9", "Section 7", "Table 2") for m, _, _ in got)
    assert cross_references(parse_markdown("d", "r.md", "r", MD)) == edges  # deterministic


def test_self_reference_and_caption_own_label_make_no_edge():
    md = "# T\n\nTable 1: scores; Table 1 is the only table, unlike Table 4.\n"
    assert cross_references(parse_markdown("d", "t.md", "t", md)) == []


def test_russian_references():
    got = _edges(parse_markdown("d", "ru.md", "ru", RU))
    assert got == [
        ("рис. 3", "Как показано", "Рисунок 3 — Схема установки"),
        ("табл. 2", "Как показано", "Таблица 2 – Данные измерений"),
        ("раздел 4.1", "Как показано", "4.1 Обсуждение"),
        ("приложение Б", "Как показано", "Приложение Б. Исходный код"),
    ]


def test_build_structure_stores_edges_with_existing_endpoints(tmp_path):
    (tmp_path / "r.md").write_text(MD, encoding="utf-8")
    (tmp_path / "ru.md").write_text(RU, encoding="utf-8")
    docs, _ = load_folder(tmp_path)
    sections, nodes, edges = build_structure(docs, tmp_path).tables
    xr = edges.filter(edges["type"] == "CROSS_REFERENCES")
    assert xr.height == 14
    ids = set(sections["id"].to_list()) | set(nodes["id"].to_list())
    assert set(xr["source_id"].to_list()) <= ids and set(xr["target_id"].to_list()) <= ids


def _pdf() -> bytes:
    pdf = pymupdf.open()
    page = pdf.new_page()
    y = 72

    def put(text: str, size: float = 10, height: float = 40) -> None:
        nonlocal y
        rc = page.insert_textbox(pymupdf.Rect(72, y, 520, y + height), text, fontsize=size)
        assert rc >= 0
        y += height + 8

    put("1 Introduction", 14, 24)
    put(
        "We describe the setup. As Figure 2 shows and Table 1 lists, the method works; "
        "Section 3 gives results and Figure 5 does not exist.",
    )
    put("Figure 2: The experimental setup of the laboratory.", 9, 16)
    put("Table 1. Measured values of every run in the study.", 9, 16)
    put("Table 1 summarises the runs we made in the study over the year.", 10, 30)
    put("3 Results", 14, 24)
    put("The results confirm the hypothesis in every single case that we examined.")
    return pdf.tobytes()


def test_pdf_references():
    data = _pdf()
    doc = parse_pdf({"id": "p", "source_path": "p.pdf", "title": "p", "text": ""}, data)
    types = {n["text"][:9]: n["node_type"] for n in doc.nodes}
    assert types["Figure 2:"] == "CAPTION" and types["Table 1. "] == "CAPTION"
    got = _edges(doc)
    assert got == [
        ("Figure 2", "We describe ", "Figure 2: The experimental setup of the laboratory."),
        ("Table 1", "We describe ", "Table 1. Measured values of every run in the study."),
        ("Section 3", "We describe ", "3 Results"),
        # a sentence starting with a label is a reference to the caption, not a definition
        ("Table 1", "Table 1 summ", "Table 1. Measured values of every run in the study."),
    ]


def test_shared_pdfs_cross_references(shared_data):
    from benchmarks.structure import parse_file

    st, _ = parse_file(shared_data / "pdfs" / "multi-column.pdf")
    text = {n["id"]: n["text"] for n in st.nodes} | {s["id"]: s["title"] for s in st.sections}
    edges = cross_references(st)
    assert len(edges) == 29
    pairs = {(e["marker_text"], text[e["target_id"]][:22]) for e in edges}
    assert ("Eq. (2)", "(2) L(qi, p+ i , p− i,") in pairs  # the layout model finds (2)
    assert ("Section 4.1", "4.1 Wikipedia Data Pre") in pairs
    assert ("Appendix B", "B Alternative Similari") in pairs
    assert ("Eq. (1)", "(1) sim(q, p) = EQ(q)⊺") in pairs
    assert ("Table 2", "Table 2: Top-20 & Top-") in pairs  # not "Table 2 compares ..."
    assert all(
        text[e["target_id"]].startswith(("Table", "Figure", "(1)", e["marker_text"][-3:]))
        or e["marker_text"].startswith(("Section", "Appendix"))
        for e in edges
    )
    st, _ = parse_file(shared_data / "pdfs" / "redp5110_sampled.pdf")
    text = {n["id"]: n["text"] for n in st.nodes} | {s["id"]: s["title"] for s in st.sections}
    edges = cross_references(st)
    figs = [e for e in edges if e["marker_text"].startswith(("Figure", "Table"))]
    assert len(figs) == 11
    for e in figs:  # "Figure 3-10" -> the caption "Figure 3-10 Column masks ..."
        assert text[e["target_id"]].startswith(e["marker_text"] + " ")


def test_precision_guards():
    md = (
        "# T\n\n## 2 Body\n\nAppendix 2 and Section 3 in [12] and Figure 1 of Lee et al. (2019);"
        " see Eq. (2) and Chapter 2.\n\nFigure 1: a plot.\n\n## 3 Results\n\n"
        "## A Note on Style\n\nText.\n"
    )
    doc = parse_markdown("d", "t.md", "t", md)
    doc.add_node(doc.root_id, "FORMULA", "y = f(2)")  # a function call, no label (2)
    # Appendix 2 is not section 2, "in [12]" / "of Lee et al. (2019)" are other works,
    # f(2) is no equation label, "A Note" is no appendix: only the chapter resolves.
    assert _edges(doc) == [("Chapter 2", "Appendix 2 a", "2 Body")]
    doc.add_node(doc.root_id, "FORMULA", "y = g(x), (2)")
    assert ("Eq. (2)", "Appendix 2 a", "y = g(x), (2)") in _edges(doc)
