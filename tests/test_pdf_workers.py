"""PDF pages read by worker processes (pipeline.pdf.layout.workers): the PDFs of a run's
next shards are read together and dealt out page by page, the parse takes what was read,
and the structure is the one a single process finds."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest
from conftest import write_report_pdf

from pipeline.config import StructureSettings
from pipeline.ids import sha256_hex
from pipeline.pdf.layout import workers as pdf_workers
from pipeline.structure.build import parse_document


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    monkeypatch.setattr(pdf_workers, "PAGES_PER_WORKER", 1)  # 2-page PDFs get workers
    monkeypatch.setattr(pdf_workers, "WAVE_PAGES", 4)


def shard_frames(folder: Path) -> dict[str, pl.DataFrame]:
    """Three shards: s0 a.pdf and a Markdown file, s1 b.pdf, s2 c.pdf (2 pages each)."""
    (folder / "note.md").write_text("# Note\n\nNot a PDF.\n", encoding="utf-8")
    files = {"s0": ["a.pdf", "note.md"], "s1": ["b.pdf"], "s2": ["c.pdf"]}
    frames = {}
    for key, names in files.items():
        rows = []
        for name in names:
            path = folder / name
            if name.endswith(".pdf"):
                write_report_pdf(path)
                with open(path, "ab") as f:  # same pages, different file
                    f.write(f"% {name}\n".encode())
            data = path.read_bytes()
            mime = "application/pdf" if name.endswith(".pdf") else "text/markdown"
            text = data.decode() if mime == "text/markdown" else ""
            rows.append(
                {"id": sha256_hex(name.encode()), "source_path": name, "title": name}
                | {"text": text, "sha256": sha256_hex(data), "mime_type": mime}
                | {"n_pages": 2 if mime == "application/pdf" else 1}
            )
        frames[key] = pl.DataFrame(rows)
    return frames


def nodes(st) -> list[tuple]:
    return [(n["node_type"], n["text"], n["positions"], n["metadata"]) for n in st.nodes]


def test_next_shards_pdfs_read_in_workers_then_taken_by_the_parse(tmp_path, monkeypatch, two_cpus):
    frames = shard_frames(tmp_path)
    sha = {f: sha256_hex((tmp_path / f).read_bytes()) for f in ("a.pdf", "b.pdf", "c.pdf")}
    real_run, jobs = pdf_workers._run, []
    monkeypatch.setattr(pdf_workers, "_run", lambda j: jobs.append(j) or real_run(j))
    settings = StructureSettings()
    ahead = pdf_workers.ReadAhead(list(frames), frames.__getitem__, tmp_path, True)
    parsed = {}
    for key in frames:
        docs = ahead.documents(key)
        assert docs.equals(frames[key])
        if key == "s0":  # s0 and s1 hold the wave's 4 pages: both read, before s0 is parsed
            assert set(pdf_workers._read_ahead) == {sha["a.pdf"], sha["b.pdf"]}
        for row in docs.iter_rows(named=True):
            parsed[row["source_path"]] = parse_document(row, tmp_path, settings)
            assert row["sha256"] not in pdf_workers._read_ahead  # taken
    a, b, c = (str(tmp_path / f) for f in ("a.pdf", "b.pdf", "c.pdf"))
    assert jobs == [  # every other page, counted across the PDFs, to each of 2 workers
        [[(a, [0]), (b, [0])], [(a, [1]), (b, [1])]],
        [[(c, [0])], [(c, [1])]],
    ]
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0}, raising=False)
    for key, docs in frames.items():  # one process reads the same structure
        for row in docs.iter_rows(named=True):
            alone = parse_document(row, tmp_path, settings)
            assert nodes(parsed[row["source_path"]]) == nodes(alone), key
            assert [s["title"] for s in parsed[row["source_path"]].sections] == [
                s["title"] for s in alone.sections
            ]
    assert any(n[0] == "HEADING" for n in nodes(parsed["a.pdf"]))


def test_documents_loaded_ahead_are_bounded_without_pdfs(tmp_path, two_cpus, monkeypatch):
    """A corpus with no PDFs must not load every shard's documents at once."""
    monkeypatch.setattr(pdf_workers, "WAVE_BYTES", 1)
    frames = {
        k: pl.DataFrame(
            {"source_path": [f"{k}.md"], "mime_type": ["text/markdown"], "n_pages": [1]}
        )
        for k in ("s0", "s1", "s2")
    }
    loads: list[str] = []
    ahead = pdf_workers.ReadAhead(
        list(frames), lambda k: loads.append(k) or frames[k], tmp_path, True
    )
    for key in frames:
        assert ahead.documents(key).equals(frames[key])
        assert loads[-1] == key and len(ahead.loaded) == 0  # one shard held at a time
    assert loads == ["s0", "s1", "s2"]


def test_a_failed_worker_leaves_its_pages_to_the_parse(tmp_path, monkeypatch, two_cpus):
    frames = shard_frames(tmp_path)
    real_run = pdf_workers._run
    monkeypatch.setattr(pdf_workers, "_run", lambda jobs: [None, *real_run(jobs[1:])])
    settings = StructureSettings()
    ahead = pdf_workers.ReadAhead(["s0", "s1"], frames.__getitem__, tmp_path, True)
    docs = ahead.documents("s0")
    held = pdf_workers._read_ahead[sha256_hex((tmp_path / "a.pdf").read_bytes())]
    assert held[0] is None and held[1] is not None  # page 0 was the failed worker's
    row = docs.row(0, named=True)
    st = parse_document(row, tmp_path, settings)
    assert not st.warnings
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0}, raising=False)
    assert nodes(st) == nodes(parse_document(row, tmp_path, settings))


def test_the_index_job_reads_pdfs_ahead(tmp_path, monkeypatch, two_cpus):
    from app.run import run_index

    inp = tmp_path / "in"
    inp.mkdir()
    for name in ("a.pdf", "b.pdf", "c.pdf"):
        write_report_pdf(inp / name)
        with open(inp / name, "ab") as f:
            f.write(f"% {name}\n".encode())
    real_read, read = pdf_workers.read_pages, []
    monkeypatch.setattr(pdf_workers, "read_pages", lambda p, n: read.append(p) or real_read(p, n))
    result = run_index(input_dir=str(inp), output_dir=str(tmp_path / "out"))
    assert result.success
    assert sorted(Path(p).name for pdfs in read for p, _ in pdfs) == ["a.pdf", "b.pdf", "c.pdf"]
    assert not pdf_workers._read_ahead  # every PDF read ahead was taken by its parse
    read.clear()  # `structure.pdf_workers: 1`: the index process reads them, nothing re-runs
    monkeypatch.setenv("DOCGRAPH_STRUCTURE__PDF_WORKERS", "1")
    (inp / "d.pdf").write_bytes((inp / "a.pdf").read_bytes() + b"% d\n")
    again = run_index(input_dir=str(inp), output_dir=str(tmp_path / "out"))
    assert again.success and read == []
    parsed = again.asset_materializations_for_node("document_structure")
    assert len({m.partition for m in parsed}) == 1  # only d.pdf's shard: same settings digest


def test_a_run_without_pdfs_never_loads_pymupdf():
    """The structure step's modules load pymupdf and its layout model (~0.6 s) only once a PDF
    is read."""
    import subprocess
    import sys

    code = (
        "import sys, assets, pipeline.pdf.layout.workers, pipeline.structure.build;"
        "print('pymupdf' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
