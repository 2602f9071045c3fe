"""Text set in TeX's bitmap fonts (Type 3, glyphs named /aNN, no Unicode map), read through the
fonts' TeX encodings. The PDFs are built here as pdfTeX writes such fonts (T1 without
cm-super, OT1 from bitmap Computer Modern) and read by the real loader and structure parser."""

from pathlib import Path

import pymupdf

from pipeline.ingest import load_folder
from pipeline.pdf.parse import parse_pdf
from pipeline.pdf.read.tex import decode_text, tex_encoding

SLOTS = {chr(c) for c in range(0x20) if c not in (0x09, 0x0A)} | {"\x7f"}


def _type3_font(doc: pymupdf.Document) -> int:
    """A Type 3 font as pdfTeX embeds a PK bitmap font: every slot a box, named /aNN."""
    procs = []
    for code in range(256):
        xref = doc.get_new_xref()
        doc.update_object(xref, "<<>>")
        box = b"" if code == 32 else b" 50 0 400 600 re f"
        doc.update_stream(xref, b"500 0 0 0 500 700 d1" + box)
        procs.append(f"/a{code} {xref} 0 R")
    names = " ".join(f"/a{code}" for code in range(256))
    font = doc.get_new_xref()
    doc.update_object(
        font,
        "<< /Type /Font /Subtype /Type3 /FontMatrix [0.001 0 0 0.001 0 0] "
        f"/FontBBox [0 0 500 700] /FirstChar 0 /LastChar 255 /Widths [{' 500' * 256}] "
        f"/Encoding << /Type /Encoding /Differences [0 {names}] >> "
        f"/CharProcs << {' '.join(procs)} >> /Resources << >> >>",
    )
    return font


def _pdf(path: Path, fonts: list[list[bytes]]) -> Path:
    """One page; `fonts[i]` are the lines (raw font codes) set in Type 3 font /T<i>."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 40), "")  # a resources dictionary to add the fonts to
    resources = " ".join(f"/T{i} {_type3_font(doc)} 0 R" for i in range(len(fonts)))
    doc.xref_set_key(page.xref, "Resources", f"<< /Font << {resources} >> >>")
    ops, y = [], 760
    for i, lines in enumerate(fonts):
        for line in lines:
            ops.append(b"BT /T%d 11 Tf 72 %d Td <%s> Tj ET" % (i, y, line.hex().encode()))
            y -= 16
        y -= 16
    xref = doc.get_new_xref()
    doc.update_object(xref, "<<>>")
    doc.update_stream(xref, b"\n".join(ops))
    doc.xref_set_key(page.xref, "Contents", f"{xref} 0 R")
    path.parent.mkdir(exist_ok=True)
    doc.save(path)
    return path


def _read(path: Path) -> tuple[str, str]:
    """The loader's document text and the structure parser's node texts."""
    docs, *_ = load_folder(path.parent)
    text = docs["text"][0]
    data = path.read_bytes()
    doc = {"id": "d", "source_path": path.name, "title": "t", "text": text, "sha256": ""}
    nodes = "\n".join(n["text"] for n in parse_pdf(doc, data).nodes)
    return text, nodes


T1_LINES = [  # T1: fi 0x1C, ff 0x1B, fl 0x1D, ffi 0x1E, quotes 0x10/0x11, en dash 0x15
    b"The \x1crst e\x1bects of the \x1dood were su\x1ecient to close the o\x1ece.",
    b"It was called \x10the great \x1dood\x11 and lasted 1990\x152000 in the \x1cles.",
]


def test_t1_bitmap_font_ligatures_quotes_and_dashes_read_as_text(tmp_path: Path) -> None:
    text, nodes = _read(_pdf(tmp_path / "in" / "t1.pdf", [T1_LINES]))
    for out in (text, nodes):
        assert "The first effects of the flood were sufficient to close the office." in out
        assert "called “the great flood” and lasted 1990–2000 in the files." in out
        assert not SLOTS & set(out)


def test_ot1_bitmap_font_ligatures_and_its_dash_slot_read_as_text(tmp_path: Path) -> None:
    lines = [  # OT1: fi 0x0C (a form feed), ff 0x0B, fl 0x0D; its en dash is "{" (0x7B)
        b"The \x0crst e\x0bects of the \x0dood were recorded in the o\x0ece.",
        b"The river rose between 1990{2000 and the \x0celds stayed wet.",
    ]
    text, nodes = _read(_pdf(tmp_path / "in" / "ot1.pdf", [lines]))
    for out in (text, nodes):
        assert "The first effects of the flood were recorded in the office." in out
        assert not SLOTS & set(out)
    # the page's plain text mixes fonts: "{" is an en dash only in a font known to be OT1
    assert "1990{2000 and the fields" in text
    assert "1990–2000 and the fields" in nodes


def test_only_fonts_whose_text_shows_a_tex_encoding_are_read_through_it(tmp_path: Path) -> None:
    # a second font's lone control characters (a dingbat's check marks, a math font's
    # symbols) are no ligatures: that font keeps its characters, the T1 one is decoded
    marks = [b"\x14 done \x14 checked"]
    _text, nodes = _read(_pdf(tmp_path / "in" / "mixed.pdf", [T1_LINES, marks]))
    assert "The first effects of the flood" in nodes
    assert "\x14 done \x14 checked" in nodes


def test_encoding_evidence() -> None:
    assert tex_encoding("plain text, no slots at all\n\tindented") is None
    assert tex_encoding("The \x1crst e\x1bects") == "T1"
    assert tex_encoding("The \x0crst e\x0bects") == "OT1"
    assert tex_encoding("a \x10quoted\x11 phrase") == "T1"
    assert tex_encoding("\x14 done \x14 checked") is None  # lone marks: no evidence
    # tabs and newlines are the text's own in either encoding
    assert decode_text("e\x0bects\n\tthe \x0crst") == "effects\n\tthe first"
    # glyph ids as codes (a subset font without a Unicode map): control characters all
    # over, a space each word, some in ligature slots by chance: no TeX encoding
    assert tex_encoding("5IF\x03IBSCPVS\x03XBT\x03\x0fMMFE\x03UIF\x03SFQPSU") is None
