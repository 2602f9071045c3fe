"""How often an index reads, hashes and opens one PDF: once each (issue 47).

The documents step reads the file, hashes it and opens it with pymupdf, and parses its
structure from that open document (`pipeline.pdf.once`); the structure step takes the parse
as data. Counted in the index's own process only: the layout model's worker processes
(`pipeline.pdf.layout.workers`) read and open the PDF again in theirs, and OCR renders
scanned pages (not opens of the file). A change that adds a read, a hash or an open fails
here."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pymupdf
from conftest import write_report_pdf

from app.run import run_index
from pipeline.config import StructureSettings
from pipeline.pdf import once
from pipeline.storage import store
from pipeline.structure.model import DocStructure

READS, HASHES, OPENS = 1, 1, 1


def _count(monkeypatch, pdf: Path) -> Counter:
    data, counts = pdf.read_bytes(), Counter()
    real_open, real_read, real_sha = pymupdf.open, Path.read_bytes, hashlib.sha256

    def opening(*args, **kwargs):
        target = args[0] if args else kwargs.get("filename")
        if kwargs.get("stream") == data or target == data or str(target) == str(pdf):
            counts["open"] += 1
        return real_open(*args, **kwargs)

    def reading(path: Path) -> bytes:
        counts["read"] += path.resolve() == pdf.resolve()
        return real_read(path)

    def hashing(value: bytes = b"", **kwargs):
        counts["hash"] += value == data
        return real_sha(value, **kwargs)

    monkeypatch.setattr(pymupdf, "open", opening)
    monkeypatch.setattr(Path, "read_bytes", reading)
    monkeypatch.setattr(hashlib, "sha256", hashing)
    return counts


def test_an_index_reads_hashes_and_opens_a_pdf_once(tmp_path, monkeypatch):
    inp = tmp_path / "in"
    inp.mkdir()
    write_report_pdf(inp / "report.pdf")
    monkeypatch.setenv("DOCGRAPH_EXECUTOR", "in_process")
    counts = _count(monkeypatch, inp / "report.pdf")
    assert run_index(None, str(inp), str(tmp_path / "out")).success
    assert (counts["read"], counts["hash"], counts["open"]) == (READS, HASHES, OPENS), counts
    assert not list((tmp_path / "out").rglob(store.SCRATCH_DIR))  # the hand-over: not published


def test_a_hand_over_under_other_settings_is_not_taken(tmp_path):
    """The structure step parses the files again rather than take parses made otherwise."""
    shard = once.Shard((), {"d": DocStructure("d", "a.pdf", "a")})
    once.hand_over(tmp_path, "s0", shard, StructureSettings())
    assert once.taken(tmp_path, "s0", StructureSettings()) == shard.parsed
    assert once.taken(tmp_path, "s0", StructureSettings(pdf_structure="heuristic")) == {}
    assert once.taken(tmp_path, "s1", StructureSettings()) == {}  # none handed over


def test_a_parse_that_raises_is_left_to_the_structure_step(tmp_path, monkeypatch):
    """Its file is parsed again there, and the failure recorded as ever; the PDF is closed."""
    from pipeline.ingest.loader import load_entries
    from pipeline.ingest.walk import Entry

    write_report_pdf(tmp_path / "a.pdf")
    closed = []

    def fails(item, settings, pages):
        item.pdf.close = lambda: closed.append(item.row["source_path"])
        raise RuntimeError("boom")

    monkeypatch.setattr(once, "parse_opened", fails)
    entries = [Entry("a.pdf", tmp_path / "a.pdf")]
    ahead = once.ReadAhead(
        ["s0"],
        lambda k, opened: load_entries(tmp_path, entries, None, opened),
        StructureSettings(pdf_structure="heuristic"),
    )
    shard = ahead.shard("s0")
    assert shard.frames[0].height == 1 and shard.parsed == {} and closed == ["a.pdf"]
