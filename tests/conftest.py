from __future__ import annotations

import ctypes.util
import os
import shutil
import time
from pathlib import Path
from typing import NoReturn

import pymupdf
import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# One ingest date for the whole session, its subprocesses included: tests compare indexes
# built minutes apart, which a run crossing midnight (UTC) would date apart (`period`).
os.environ.setdefault("SOURCE_DATE_EPOCH", str(int(time.time())))

# --------------------------------------------------------------------------- skip policy
# A skipped test gates nothing, so the session fails when any test is skipped (or xfails)
# for a reason other than an optional system tool named here, one a pip install cannot
# bring. Everything else the tests need is a requirement: the project's modules, its extras
# (scripts/setup.sh installs '.[dev]', which holds `distributed` and `ocr`, boto3 and moto)
# and the shared data folder beside the repo (../shared/data, always there in CI). `.ci/run`
# installs these tools too, so in CI nothing skips at all.
# Strict by default; DOCGRAPH_STRICT_SKIPS=0 lets a session without ../shared pass, its
# skips still listed by -ra.
OPTIONAL_SYSTEM_TOOLS = {
    "chromium": "Debian: apt-get install chromium",  # tests/test_export.py's browser tests
    "libGL": "Debian: apt-get install libgl1",  # OpenCV under the OCR engine (test_pdf_ocr.py)
}
SYSTEM_TOOL_ABSENT = "optional system tool absent"
STRICT_SKIPS = "DOCGRAPH_STRICT_SKIPS"


def _tool_reason(tool: str) -> str:
    if tool not in OPTIONAL_SYSTEM_TOOLS:
        raise ValueError(f"{tool!r} is not an optional system tool (tests/conftest.py)")
    return f"{SYSTEM_TOOL_ABSENT}: {tool} ({OPTIONAL_SYSTEM_TOOLS[tool]})"


def needs_system_tool(tool: str, present: bool) -> pytest.MarkDecorator:
    """Skip mark for tests that need `tool` (a key of OPTIONAL_SYSTEM_TOOLS), absent here."""
    return pytest.mark.skipif(not present, reason=_tool_reason(tool))


def skip_system_tool_absent(tool: str, detail: str = "") -> NoReturn:
    """Skip the running test: `tool` (a key of OPTIONAL_SYSTEM_TOOLS) is absent here."""
    pytest.skip(_tool_reason(tool) + (f": {detail}" if detail else ""))


def libgl_present() -> bool:
    return ctypes.util.find_library("GL") is not None


def allowed_skip(reason: str) -> bool:
    reason = reason.removeprefix("Skipped: ")
    return any(reason.startswith(_tool_reason(tool)) for tool in OPTIONAL_SYSTEM_TOOLS)


def strict_skips() -> bool:
    return os.environ.get(STRICT_SKIPS, "1").strip().lower() not in ("0", "false", "no", "")


_disallowed: list[tuple[str, str]] = []  # (test or module, reason)


def _note_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped:
        return
    if hasattr(report, "wasxfail"):
        _disallowed.append((report.nodeid, f"xfail: {report.wasxfail}"))
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    if not allowed_skip(reason):
        _disallowed.append((report.nodeid, reason.removeprefix("Skipped: ")))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _note_skip(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _note_skip(report)  # a module skipped whole (pytest.skip or importorskip at import)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _disallowed and strict_skips() and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not _disallowed:
        return
    strict = strict_skips()
    terminalreporter.section("skips not allowed", sep="=", red=strict, yellow=not strict)
    for nodeid, reason in _disallowed:
        terminalreporter.line(f"{nodeid}: {reason}")
    verdict = "the session fails" if strict else f"let pass by {STRICT_SKIPS}=0"
    terminalreporter.line(
        f"{len(_disallowed)} skipped for a reason other than an optional system tool "
        f"({', '.join(OPTIONAL_SYSTEM_TOOLS)}; tests/conftest.py): {verdict}",
        red=strict,
        bold=True,
    )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data beside the repo; absent, the test is skipped, a skip the policy above
    refuses unless DOCGRAPH_STRICT_SKIPS=0."""
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


def materialization_metadata(result) -> dict[str, dict]:
    """Each asset's materialization metadata (plain values) in the run of `result`, by asset
    name; a partitioned asset's first partition's (every partition records the step's)."""
    out: dict[str, dict] = {}
    for event in result.get_asset_materialization_events():
        metadata = {k: v.value for k, v in event.materialization.metadata.items()}
        out.setdefault(event.asset_key.to_user_string(), metadata)
    return out


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
