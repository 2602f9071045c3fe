from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pymupdf
import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# One ingest date for the whole session, its subprocesses included: tests compare indexes
# built minutes apart, which a run crossing midnight (UTC) would date apart (`period`).
os.environ.setdefault("SOURCE_DATE_EPOCH", str(int(time.time())))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder {SHARED_DATA} is absent")
    return SHARED_DATA


def write_bad_inputs(folder: Path) -> dict[str, str]:
    """Bad files next to the good ones; maps file name -> a word its rejection reason holds."""
    (folder / "empty.txt").write_bytes(b"")
    (folder / "binary.pdf").write_bytes(bytes(range(256)) * 8)
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "A real page that will be cut short.")
    (folder / "corrupt.pdf").write_bytes(doc.tobytes()[:200])
    (folder / "latin1.txt").write_bytes("Caf\xe9 au lait in Z\xfcrich".encode("latin-1"))
    return {"empty.txt": "empty", "binary.pdf": "pdf", "corrupt.pdf": "pdf", "latin1.txt": "utf-8"}


def write_report_pdf(path: Path) -> None:
    """A real two-page PDF: a title, a heading per page, body paragraphs."""
    doc = pymupdf.open()
    for n, (head, body) in enumerate(
        [
            (
                "1 Cavendish Laboratory",
                "The Cavendish Laboratory in Cambridge was directed by "
                "J. J. Thomson and later by Ernest Rutherford, who split the atom there in 1917.",
            ),
            (
                "2 Copenhagen",
                "Niels Bohr founded the Institute for Theoretical Physics in "
                "Copenhagen in 1921, where Werner Heisenberg worked on quantum mechanics.",
            ),
        ],
        start=1,
    ):
        page = doc.new_page()
        if n == 1:
            page.insert_text((72, 80), "Laboratories of Modern Physics", fontsize=20)
        page.insert_text((72, 130), head, fontsize=14, fontname="helv")
        page.insert_textbox(pymupdf.Rect(72, 150, 520, 400), body, fontsize=10)
    doc.save(path)


def write_llm_config(path: Path, base_url: str, **llm: object) -> str:
    """A settings YAML for LLM mode against `base_url` (the fake server), model fake-model;
    `llm` adds or overrides fields of the `llm:` section."""
    fields = {"enabled": "true", "base_url": base_url, "chat_model": "fake-model", **llm}
    body = "".join(f"  {k}: {v}\n" for k, v in fields.items())
    path.write_text("llm:\n" + body, encoding="utf-8")
    return str(path)


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory):
    """The sample corpus plus bad files, indexed once by the real index job."""
    from app.cli.demo import write_sample_corpus
    from app.run import run_index

    root = tmp_path_factory.mktemp("index")
    inp, out = root / "input", root / "output"
    write_sample_corpus(inp)
    bad = write_bad_inputs(inp)
    write_report_pdf(inp / "laboratories.pdf")
    result = run_index(input_dir=str(inp), output_dir=str(out))
    return inp, out, result, bad


@pytest.fixture(scope="session")
def sample_run(tmp_path_factory) -> tuple[Path, Path]:
    """The sample corpus indexed once by the real index job, default settings: the index a
    test starts from or compares with (copy it with `indexed_sample`, never change it)."""
    from app.cli.demo import write_sample_corpus
    from app.run import run_index

    root = tmp_path_factory.mktemp("sample-run")
    inp, out = root / "input", root / "output"
    write_sample_corpus(inp)
    assert run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR").success
    return inp, out


@pytest.fixture()
def indexed_sample(sample_run, tmp_path) -> tuple[Path, Path]:
    """(input, output) of this test: a copy of `sample_run`; the files keep their mtimes, so
    the copy is up to date as its input stands."""
    inp, out = tmp_path / "input", tmp_path / "output"
    shutil.copytree(sample_run[0], inp)
    shutil.copytree(sample_run[1], out)
    return inp, out
