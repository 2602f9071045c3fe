"""Loaders: every good file becomes a document with the right fields, every bad one a
rejected row with a clear reason, and one bad file never aborts the folder."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pymupdf
import pytest

from pipeline import schemas
from pipeline.ids import sha256_hex, stable_id
from pipeline.ingest import load_folder

RU_TEXT = "Съешь же ещё этих мягких французских булок, да выпей чаю. Москва — столица России.\n"


def _pdf_bytes(pages: list[str], title: str = "", **save_kw) -> bytes:
    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        if text:
            page.insert_text((72, 72), text)
    if title:
        doc.set_metadata({"title": title, "author": "Test Author"})
    data = doc.tobytes(**save_kw)
    doc.close()
    return data


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("input")
    (root / "notes").mkdir()
    (root / ".hidden").mkdir()
    (root / ".hidden" / "secret.txt").write_text("never loaded")
    (root / ".DS_Store").write_bytes(b"\x00\x01")
    (root / "plain.txt").write_bytes(b"\xef\xbb\xbfHello world.\r\nSecond line.\r\n")
    (root / "notes" / "guide.md").write_text(
        "---\ntitle: Front Title\ntags: [a, b]\ndate: 2024-01-02\n---\n# Heading One\n\nBody.\n",
        encoding="utf-8",
    )
    (root / "notes" / "setext.markdown").write_text(
        "Intro line\n\nSetext Title\n============\n\nText.\n", encoding="utf-8"
    )
    (root / "notes" / "atx.md").write_text(
        "```\n# not a title\n```\n\n## Real Title ##\n\nText.\n", encoding="utf-8"
    )
    (root / "russian.txt").write_text(RU_TEXT, encoding="utf-8")
    (root / "paper.pdf").write_bytes(
        _pdf_bytes(["First page says alpha.", "", "Third page says gamma."], title="My Paper")
    )
    (root / "untitled.pdf").write_bytes(_pdf_bytes(["Short Heading\nbody text"]))
    good = _pdf_bytes(["Encrypted body."])
    doc = pymupdf.open(stream=good, filetype="pdf")
    doc.save(
        root / "locked.pdf",
        encryption=pymupdf.PDF_ENCRYPT_AES_256,
        user_pw="user",
        owner_pw="owner",
    )
    (root / "truncated.pdf").write_bytes(good[: len(good) // 2])
    (root / "binary.pdf").write_bytes(bytes(range(256)) * 4)
    (root / "image_only.pdf").write_bytes(_pdf_bytes(["", ""]))
    (root / "empty.txt").write_bytes(b"")
    (root / "blank.md").write_bytes(b"  \n\t\n")
    (root / "latin1.txt").write_bytes("caf\xe9 ok".encode("latin-1"))
    (root / "nul.txt").write_bytes(b"abc\x00def")
    (root / "data.xyz").write_text("whatever")
    (root / "zz_copy_of_plain.txt").write_bytes((root / "plain.txt").read_bytes())
    return root


@pytest.fixture(scope="module")
def loaded(corpus: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    return load_folder(corpus)


def test_schemas_exact(loaded):
    docs, rejected = loaded
    assert docs.columns == schemas.DOCUMENTS.names
    assert rejected.columns == schemas.REJECTED_DOCUMENTS.names
    assert docs.schema == schemas.empty("documents").schema
    assert rejected.schema == schemas.empty("rejected_documents").schema


def test_rejection_reasons(loaded):
    _, rejected = loaded
    reasons = dict(zip(rejected["source_path"], rejected["reason"], strict=True))
    assert reasons["locked.pdf"] == "encrypted PDF (password required)"
    assert reasons["truncated.pdf"].startswith("corrupt PDF: repaired by MuPDF")
    assert "startxref" in reasons["truncated.pdf"]  # MuPDF's own words travel with the reason
    assert reasons["binary.pdf"].startswith("corrupt PDF: FileDataError: Failed to open")
    assert reasons["image_only.pdf"] == "no text layer (image-only PDF; OCR not configured)"
    assert reasons["empty.txt"] == "empty file"
    assert reasons["blank.md"] == "empty file"
    assert reasons["latin1.txt"] == "invalid UTF-8 at byte 3"
    assert reasons["nul.txt"] == "binary content"
    assert reasons["data.xyz"] == "unsupported file type .xyz"
    assert reasons[".DS_Store"] == "hidden file (not read)"
    assert reasons[".hidden"] == "hidden folder (not read)"  # one row, not one per file in it
    assert len(reasons) == 11, reasons  # nothing good
    assert set(rejected["stage"]) == {"load"}
    row = rejected.filter(pl.col("source_path") == "nul.txt").row(0, named=True)
    assert row["sha256"] == sha256_hex(b"abc\x00def") and row["byte_size"] == 7


def test_good_documents(loaded, corpus):
    docs, _ = loaded
    paths = docs["source_path"].to_list()
    assert paths == [
        "notes/atx.md",
        "notes/guide.md",
        "notes/setext.markdown",
        "paper.pdf",
        "plain.txt",
        "russian.txt",
        "untitled.pdf",
        "zz_copy_of_plain.txt",
    ]
    assert docs["human_readable_id"].to_list() == list(range(8))
    assert docs["id"].n_unique() == 8  # a copy at another path is another document
    by = {r["source_path"]: r for r in docs.iter_rows(named=True)}

    plain = by["plain.txt"]
    raw = (corpus / "plain.txt").read_bytes()
    assert plain["sha256"] == sha256_hex(raw)
    assert plain["id"] == stable_id("plain.txt", sha256_hex(raw))
    assert plain["text"] == "Hello world.\nSecond line.\n"  # BOM gone, newlines normalised
    assert plain["title"] == "plain"  # a first line ending like a sentence is no title
    assert (plain["mime_type"], plain["n_pages"], plain["byte_size"]) == ("text/plain", 1, len(raw))
    assert plain["language"] == "en" and plain["warnings"] == []
    assert plain["creation_date"].endswith("+00:00") and "T" in plain["creation_date"]

    guide = by["notes/guide.md"]
    assert guide["title"] == "Front Title"  # front matter wins over the heading
    assert guide["text"].startswith("# Heading One") and "---" not in guide["text"]
    meta = json.loads(guide["metadata"])
    assert meta == {"date": "2024-01-02", "tags": ["a", "b"], "title": "Front Title"}
    assert list(meta) == sorted(meta)
    assert guide["mime_type"] == "text/markdown"
    assert by["notes/setext.markdown"]["title"] == "Setext Title"
    assert by["notes/atx.md"]["title"] == "Real Title"  # not the '#' line inside code

    ru = by["russian.txt"]
    assert ru["text"] == RU_TEXT and ru["language"] == "ru"


def test_pdf_pages(loaded):
    docs, _ = loaded
    paper = docs.filter(pl.col("source_path") == "paper.pdf").row(0, named=True)
    assert paper["n_pages"] == 3 and paper["mime_type"] == "application/pdf"
    pages = paper["text"].split("\f")
    assert len(pages) == 3
    assert "alpha" in pages[0] and pages[1].strip() == "" and "gamma" in pages[2]
    assert paper["title"] == "My Paper"
    assert json.loads(paper["metadata"])["author"] == "Test Author"
    assert "1 page without text" in paper["warnings"]
    untitled = docs.filter(pl.col("source_path") == "untitled.pdf").row(0, named=True)
    assert untitled["title"] == "Short Heading"  # first line of page 1


def test_deterministic(corpus, loaded):
    docs, rejected = load_folder(corpus)
    assert docs.equals(loaded[0]) and rejected.equals(loaded[1])


def test_unexpected_error_is_a_rejection(tmp_path, monkeypatch):
    from pipeline.ingest import formats as loader

    (tmp_path / "a.txt").write_text("fine text")
    (tmp_path / "b.txt").write_text("boom text")

    def flaky(path: Path, data: bytes):
        if path.name == "b.txt":
            raise RuntimeError("disk on fire")
        return loader.LoadedDoc(title=path.stem, mime_type="text/plain", text=data.decode())

    monkeypatch.setitem(loader.LOADERS, ".txt", flaky)
    docs, rejected = load_folder(tmp_path)
    assert docs["source_path"].to_list() == ["a.txt"]
    assert rejected["reason"].to_list() == ["RuntimeError: disk on fire"]


def test_a_folder_of_rejected_files_gives_typed_empty_documents(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    docs, rejected = load_folder(tmp_path)
    assert docs.height == 0 and rejected["source_path"].to_list() == ["empty.txt"]
    assert docs.schema == schemas.empty("documents").schema


def test_shared_pdfs(shared_data):
    docs, rejected = load_folder(shared_data / "pdfs")
    pdfs = docs.filter(pl.col("mime_type") == "application/pdf")
    assert pdfs.height == len(list((shared_data / "pdfs").glob("*.pdf"))) >= 1
    assert rejected.filter(pl.col("source_path").str.ends_with(".pdf")).height == 0
    for row in pdfs.iter_rows(named=True):
        assert row["n_pages"] > 0 and row["text"].strip()
        assert row["text"].count("\f") == row["n_pages"] - 1
    multi = pdfs.filter(pl.col("source_path") == "multi-column.pdf")
    if multi.height:
        assert multi["n_pages"][0] == 13


def test_text_title_from_a_short_first_line(tmp_path):
    (tmp_path / "a.txt").write_text("Lakeside, Wisconsin\nLakeside is a town in Wisconsin.\n")
    (tmp_path / "b.txt").write_text("One line only\n")
    docs, rejected = load_folder(tmp_path)
    assert rejected.is_empty()
    assert dict(docs.select("source_path", "title").iter_rows()) == {
        "a.txt": "Lakeside, Wisconsin",
        "b.txt": "b",
    }


def test_zero_page_pdf_is_rejected(tmp_path):
    (tmp_path / "zero.pdf").write_bytes(
        b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
        b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
    )
    (tmp_path / "ok.txt").write_text("Still loaded.")
    docs, rejected = load_folder(tmp_path)
    assert rejected.select("source_path", "reason").rows() == [("zero.pdf", "PDF has no pages")]
    assert docs["source_path"].to_list() == ["ok.txt"]


def test_invalid_toml_front_matter_is_a_recorded_warning_and_loses_no_text(tmp_path):
    """Hugo's `+++` front matter that is no TOML: the page loads whole, the reason recorded."""
    (tmp_path / "a.md").write_text("+++\ntitle = \n+++\n# Real title\n\nBody.\n", encoding="utf-8")
    (tmp_path / "b.md").write_text('+++\ntitle = "Tides"\n+++\n# Heading\n', encoding="utf-8")
    docs, rejected = load_folder(tmp_path)
    rows = {r["source_path"]: r for r in docs.iter_rows(named=True)}
    assert rejected.height == 0
    assert rows["a.md"]["warnings"] == ["invalid TOML front matter: TOMLDecodeError"]
    assert rows["a.md"]["text"].startswith("+++\ntitle = \n+++\n# Real title")
    assert rows["b.md"]["title"] == "Tides" and rows["b.md"]["warnings"] == []


def test_a_long_text_keeps_its_exact_text_and_its_language_from_a_sample(tmp_path):
    """Beyond LANGUAGE_SAMPLE_CHARS the language is told from windows spread over the text
    (the whole took 20 s on 151 MB): a long Russian text is "ru", a long English one with a
    Russian quotation is "en"; the text (non-Latin, astral) is stored byte for byte."""
    from pipeline.ingest.loader import LANGUAGE_SAMPLE_CHARS, language_sample

    ru = "Москва — столица России; 𝔘 знак.\n\n" * (LANGUAGE_SAMPLE_CHARS // 20)
    en = "Moscow is the capital of Russia.\n\n" * (LANGUAGE_SAMPLE_CHARS // 30)
    en = en[: len(en) // 2] + "«Москва — столица»\n\n" + en[len(en) // 2 :]
    (tmp_path / "ru.txt").write_text(ru, encoding="utf-8")
    (tmp_path / "en.txt").write_text(en, encoding="utf-8")
    assert len(language_sample(ru)) == LANGUAGE_SAMPLE_CHARS < len(ru)
    docs, rejected = load_folder(tmp_path)
    assert rejected.height == 0
    by_path = {r["source_path"]: r for r in docs.iter_rows(named=True)}
    assert by_path["ru.txt"]["language"] == "ru" and by_path["en.txt"]["language"] == "en"
    assert by_path["ru.txt"]["text"] == ru and by_path["en.txt"]["text"] == en
