"""PDF pages read by worker processes (pipeline.pdf.layout.workers): the documents step
(pipeline.pdf.once) loads the PDFs of a run's next shards, has their pages read together and
dealt out page by page, parses each PDF with what was read, and the structure is the one a
single process finds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import write_report_pdf

from pipeline.config import StructureSettings
from pipeline.ingest.loader import load_entries
from pipeline.ingest.walk import Entry
from pipeline.pdf import once
from pipeline.pdf.layout import workers as pdf_workers
from pipeline.structure.build import parse_document


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    monkeypatch.setattr(pdf_workers, "PAGES_PER_WORKER", 1)  # 2-page PDFs get workers
    monkeypatch.setattr(once, "WAVE_PAGES", 4)


def shard_entries(folder: Path) -> dict[str, list[Entry]]:
    """Three shards: s0 a.pdf and a Markdown file, s1 b.pdf, s2 c.pdf (2 pages each)."""
    (folder / "note.md").write_text("# Note\n\nNot a PDF.\n", encoding="utf-8")
    files = {"s0": ["a.pdf", "note.md"], "s1": ["b.pdf"], "s2": ["c.pdf"]}
    for name in ("a.pdf", "b.pdf", "c.pdf"):
        write_report_pdf(folder / name)
        with open(folder / name, "ab") as f:  # same pages, different file
            f.write(f"% {name}\n".encode())
    return {k: [Entry(n, folder / n) for n in names] for k, names in files.items()}


def loader(folder: Path, groups: dict[str, list[Entry]], loads: list[str] | None = None):
    def load(key: str, opened):
        if loads is not None:
            loads.append(key)
        return load_entries(folder, groups[key], None, opened)

    return load


def nodes(st) -> list[tuple]:
    return [(n["node_type"], n["text"], n["positions"], n["metadata"]) for n in st.nodes]


def test_next_shards_pdfs_read_in_workers_then_parsed(tmp_path, monkeypatch, two_cpus):
    groups = shard_entries(tmp_path)
    real_run, jobs = pdf_workers._run, []
    monkeypatch.setattr(pdf_workers, "_run", lambda j: jobs.append(j) or real_run(j))
    settings = StructureSettings()
    ahead = once.ReadAhead(list(groups), loader(tmp_path, groups), settings)
    parsed, rows = {}, {}
    for key in groups:
        shard = ahead.shard(key)
        if key == "s0":  # s0 and s1 hold the wave's 4 pages: both read and parsed
            assert set(ahead.loaded) == {"s1"} and len(ahead.loaded["s1"].parsed) == 1
        docs = shard.frames[0]
        assert sorted(docs["source_path"]) == sorted(e.rel for e in groups[key])
        for row in docs.iter_rows(named=True):
            rows[row["source_path"]] = row
            if row["mime_type"] == "application/pdf":
                parsed[row["source_path"]] = shard.parsed[row["id"]]
    assert sorted(parsed) == ["a.pdf", "b.pdf", "c.pdf"]  # the Markdown file: not here
    a, b, c = (str(tmp_path / f) for f in ("a.pdf", "b.pdf", "c.pdf"))
    assert jobs == [  # every other page, counted across the PDFs, to each of 2 workers
        [[(a, [0]), (b, [0])], [(a, [1]), (b, [1])]],
        [[(c, [0])], [(c, [1])]],
    ]
    monkeypatch.setattr(os, "sched_getaffinity", lambda _: {0}, raising=False)
    for name, st in parsed.items():  # one process, from the file, reads the same structure
        alone = parse_document(rows[name], tmp_path, settings)
        assert nodes(st) == nodes(alone), name
        assert [s["title"] for s in st.sections] == [s["title"] for s in alone.sections]
    assert any(n[0] == "HEADING" for n in nodes(parsed["a.pdf"]))


def test_documents_loaded_ahead_are_bounded_without_pdfs(tmp_path, two_cpus, monkeypatch):
    """A corpus with no PDFs must not load every shard's documents at once."""
    monkeypatch.setattr(once, "WAVE_BYTES", 1)
    groups = {}
    for k in ("s0", "s1", "s2"):
        (tmp_path / f"{k}.md").write_text(f"# {k}\n", encoding="utf-8")
        groups[k] = [Entry(f"{k}.md", tmp_path / f"{k}.md")]
    loads: list[str] = []
    ahead = once.ReadAhead(list(groups), loader(tmp_path, groups, loads), StructureSettings())
    for key in groups:
        assert ahead.shard(key).frames[0]["source_path"].to_list() == [f"{key}.md"]
        assert loads[-1] == key and len(ahead.loaded) == 0  # one shard held at a time
    assert loads == ["s0", "s1", "s2"]


def test_a_failed_worker_leaves_its_pages_to_the_parse(tmp_path, monkeypatch, two_cpus):
    groups = shard_entries(tmp_path)
    real_run, real_read, held = pdf_workers._run, pdf_workers.read_pages, []
    monkeypatch.setattr(pdf_workers, "_run", lambda jobs: [None, *real_run(jobs[1:])])
    monkeypatch.setattr(
        pdf_workers, "read_pages", lambda p, n: held.extend(real_read(p, n)) or held
    )
    settings = StructureSettings()
    shard = once.ReadAhead(["s0", "s1"], loader(tmp_path, groups), settings).shard("s0")
    assert held[0][1][0] is None and held[0][1][1] is not None  # page 0: the failed worker's
    row = next(r for r in shard.frames[0].iter_rows(named=True) if r["source_path"] == "a.pdf")
    st = shard.parsed[row["id"]]
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
    read.clear()  # `structure.pdf_workers: 1`: the index process reads them, nothing re-runs
    monkeypatch.setenv("DOCGRAPH_STRUCTURE__PDF_WORKERS", "1")
    (inp / "d.pdf").write_bytes((inp / "a.pdf").read_bytes() + b"% d\n")
    again = run_index(input_dir=str(inp), output_dir=str(tmp_path / "out"))
    assert again.success and read == []
    parsed = again.asset_materializations_for_node("document_structure")
    assert len({m.partition for m in parsed}) == 1  # only d.pdf's shard: same settings digest


def test_a_run_without_pdfs_never_loads_pymupdf():
    """The documents and structure steps' modules load pymupdf and its layout model (~0.6 s)
    only once a PDF is read."""
    import subprocess
    import sys

    code = (
        "import sys, assets, pipeline.pdf.layout.workers, pipeline.pdf.once,"
        " pipeline.structure.build;"
        "print('pymupdf' in sys.modules)"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
