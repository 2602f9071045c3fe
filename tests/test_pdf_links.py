"""A PDF's link annotations: internal links (explicit and named destinations) become
CROSS_REFERENCES edges to what they point at (a textual reference to the same target adds
none) and REFERENCES_CITATION edges to a bibliography entry; URIs and links to other files
REFERS_TO edges resolved across the corpus; through the real loader and structure build."""

import json
from pathlib import Path

import polars as pl
import pymupdf

from pipeline.ingest import load_folder
from pipeline.structure import build_structure

LOREM = (
    "Tide tables give the times and heights of high and low water at a port, computed from "
    "the harmonic constituents of the local tide and checked against gauge records."
)


def _paper(path: Path) -> None:
    doc = pymupdf.open()
    doc.new_page()
    doc.new_page()
    first, second = doc[0], doc[1]
    first.insert_text((72, 80), "1 Tides", fontsize=16, fontname="hebo")
    first.insert_textbox((72, 100, 540, 160), LOREM, fontsize=10)
    first.insert_text((72, 180), "The week's tides are in Table 1; the methods follow Ames (1999).")
    first.insert_textbox((72, 200, 540, 260), "Sources: " + LOREM, fontsize=10)
    first.insert_text((72, 280), "Gauge data: https://tides.example.org and notes/b.pdf.")
    second.insert_text((72, 80), "2 Methods", fontsize=16, fontname="hebo")
    second.insert_textbox((72, 100, 540, 160), LOREM, fontsize=10)
    second.insert_text((72, 200), "Table 1: Tides of the week at the port", fontsize=9)
    second.insert_textbox((72, 220, 540, 280), "Closing. " + LOREM, fontsize=10)
    second.insert_text((72, 320), "References", fontsize=16, fontname="hebo")
    second.insert_text((72, 345), "Ames, R. 1999. Harmonic tides of small harbours. Tide Press.")
    links = [  # (where, kind, the link's own keys)
        ((258, 170, 325, 184), pymupdf.LINK_GOTO, {"page": 1, "to": pymupdf.Point(72, 62)}),
        ((195, 170, 255, 184), pymupdf.LINK_GOTO, {"page": 1, "to": pymupdf.Point(0, 0)}),
        ((140, 270, 260, 284), pymupdf.LINK_URI, {"uri": "https://tides.example.org"}),
        ((280, 270, 340, 284), pymupdf.LINK_GOTOR, {"file": "notes/b.pdf", "page": 0}),
        ((330, 170, 400, 184), pymupdf.LINK_GOTO, {"page": 1, "to": pymupdf.Point(72, 333)}),
    ]
    for rect, kind, extra in links:
        first.insert_link({"kind": kind, "from": pymupdf.Rect(rect), **extra})
    # the second one made a named destination (hyperref's and browsers' kind): the caption
    doc = pymupdf.open(stream=doc.tobytes())
    xref = doc[0].get_links()[1]["xref"]
    doc.xref_set_key(xref, "A", "<</S/GoTo/D(tab:tides)>>")
    dests = doc.get_new_xref()
    height = doc[1].rect.height
    doc.update_object(dests, f"<</Names[(tab:tides)[{doc[1].xref} 0 R/XYZ 72 {height - 186} 0]]>>")
    doc.xref_set_key(doc.pdf_catalog(), "Names", f"<</Dests {dests} 0 R>>")
    doc.save(path)


def test_pdf_links_become_cross_references_and_refers_to_edges(tmp_path):
    (tmp_path / "notes").mkdir()
    _paper(tmp_path / "a.pdf")
    other = pymupdf.open()
    other.new_page().insert_text((72, 80), "Gauge notes for the port and its tides.")
    other.save(tmp_path / "notes" / "b.pdf")
    docs, rejected = load_folder(tmp_path)
    assert rejected.is_empty()
    sections, nodes, edges = build_structure(docs, tmp_path).tables

    text = dict(zip(nodes["id"], nodes["text"], strict=True))
    text |= dict(zip(sections["id"], sections["title"], strict=True))
    source = nodes.filter(pl.col("text").str.starts_with("The week's tides"))["id"].item()
    cross = edges.filter(pl.col("type") == "CROSS_REFERENCES")
    found = {
        (text[t], json.loads(m)["kind"], json.loads(m)["target_type"])
        for s, t, m in cross.select("source_id", "target_id", "metadata").iter_rows()
        if s == source
    }
    assert found == {
        ("2 Methods", "link", "SECTION"),  # an explicit destination above the heading
        ("Table 1: Tides of the week at the port", "link", "CAPTION"),  # a named one
    }
    # "Table 1" is a textual cross-reference to the same caption too: one edge, the link's
    assert cross.filter(pl.col("source_id") == source).height == 2
    # an author-year citation's link to its entry (no "[12]" marker to find it by)
    cites = edges.filter(pl.col("type") == "REFERENCES_CITATION")
    assert [(text[s], text[t]) for s, t in cites.select("source_id", "target_id").iter_rows()] == [
        (text[source], "Ames, R. 1999. Harmonic tides of small harbours. Tide Press.")
    ]

    refers = edges.filter(pl.col("type") == "REFERS_TO")
    rows = {json.loads(m)["href"]: (text[s], t, json.loads(m)) for s, t, m in refers.select(
        "source_id", "target_id", "metadata").iter_rows()}  # fmt: skip
    assert len(refers) == len(rows) == 2
    source, target, meta = rows["https://tides.example.org"]
    assert source.startswith("Gauge data:") and target is None
    assert meta["reason"] == "external URL"
    source, target, meta = rows["notes/b.pdf"]
    assert source.startswith("Gauge data:") and meta["kind"] == "pdf"
    assert target == sections.filter(pl.col("uri") == "notes/b.pdf")["id"].item()
