"""How often an index reads, hashes and opens one PDF, counted in the index's process.

Issue 47 asks for once each (the documents step's parse handed to the structure step as
data); today the structure step still reads and hashes the file again (to check it is the
one loaded) and opens it again with pymupdf. The counts below are what the code does now:
a change that adds a read, a hash or an open fails here, and the parse-once work lowers them
to 1."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pymupdf
from conftest import write_report_pdf

from app.run import run_index

READS, HASHES, OPENS = 2, 2, 2  # issue 47's target: 1, 1, 1


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


def test_an_index_reads_hashes_and_opens_a_pdf_no_more_than_counted(tmp_path, monkeypatch):
    inp = tmp_path / "in"
    inp.mkdir()
    write_report_pdf(inp / "report.pdf")
    monkeypatch.setenv("DOCGRAPH_EXECUTOR", "in_process")
    counts = _count(monkeypatch, inp / "report.pdf")
    assert run_index(None, str(inp), str(tmp_path / "out")).success
    assert counts["read"] >= 1 and counts["open"] >= 1  # the counters see the PDF
    assert counts["read"] <= READS and counts["hash"] <= HASHES and counts["open"] <= OPENS, counts
