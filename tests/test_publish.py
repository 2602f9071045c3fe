"""Publishing (issue 9 A, B, 9, 11, 12): readers see one whole version, one writer per output,
deleted text leaves the disk, a killed run is cleaned up after, files follow the umask."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import lancedb
import polars as pl
import pyarrow.parquet as pq
import pytest

from app.cli.demo import write_sample_corpus
from app.run import run_index
from pipeline.query import GraphIndex
from pipeline.storage import lock, store, validate

REPO = Path(__file__).resolve().parents[1]
SECRET_DOC = (
    "The Quokkaville Accord\n\n"
    "The Quokkaville Accord was signed by Zebulon Farnsworth-Pike in Quokkaville in 1907. "
    "Farnsworth-Pike grew xylophonic marrows on the Quokkaville allotments.\n"
)
MARKER = "xylophonic"  # a word no other document holds


def _index_cli(inp: Path, out: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "index", "--input", str(inp), "--output", str(out)]
        + ["--log-level", "ERROR", *extra],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _consistent(out: Path) -> list[str]:
    """What a reader of the published index would find broken (empty: a whole version)."""
    folder = store.resolve(out)
    problems = []
    for name in ("text_units", "entities", "communities", "community_reports"):
        problems += validate.integrity_problems(folder, name)
    return problems + validate.lance_problems(folder)


@pytest.fixture()
def corpus(tmp_path) -> tuple[Path, Path]:
    inp, out = tmp_path / "input", tmp_path / "output"
    write_sample_corpus(inp)
    return inp, out


def test_readers_only_ever_see_a_whole_version(indexed_sample):
    """While a re-index (with a document removed and one added) runs in another process, every
    probe of the published index is consistent, and the next search of an open GraphIndex
    runs on the new version whole (including one that never read a table before)."""
    inp, out = indexed_sample
    first = store.read_manifest(out)["version"]
    warm = GraphIndex.open(out)
    assert "Quokkaville" not in warm.naive_search("Quokkaville Accord").context_text
    cold = GraphIndex.open(out)  # opened now, reads its first table after the re-index
    (inp / "marie_curie.md").unlink()
    (inp / "quokkaville.txt").write_text(SECRET_DOC, encoding="utf-8")

    proc = _index_cli(inp, out)
    probes, seen = 0, set()
    while proc.poll() is None:
        assert _consistent(out) == []
        seen.add(store.read_manifest(out)["version"])
        probes += 1
    assert proc.returncode == 0, proc.stderr.read()
    assert probes >= 5 and first in seen
    second = store.read_manifest(out)["version"]
    assert second != first and _consistent(out) == []

    for index in (warm, cold):
        result = index.naive_search("Quokkaville Accord Farnsworth-Pike")
        assert "Quokkaville" in result.context_text
        assert index.latest().version == second
        flow = index.flow_search("How is Farnsworth-Pike related to Quokkaville?")
        assert flow.records
        docs = index.latest().documents["source_path"].to_list()
        assert "marie_curie.md" not in docs and "quokkaville.txt" in docs


def test_a_killed_or_failed_reindex_publishes_nothing(indexed_sample, monkeypatch):
    inp, out = indexed_sample
    before = store.read_manifest(out)
    docs_before = store.read_table(out, "documents")
    (inp / "quokkaville.txt").write_text(SECRET_DOC, encoding="utf-8")

    # killed once the run has written some of its tables
    proc = _index_cli(inp, out)
    staging = store.staging_dir(out)
    deadline = time.monotonic() + 120
    while not (staging / "text_units.parquet").exists() or (
        os.stat(staging / "text_units.parquet").st_nlink > 1  # still the link of the old one
    ):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert store.read_manifest(out) == before
    assert store.read_table(out, "documents").equals(docs_before)
    assert _consistent(out) == []
    hit = GraphIndex.open(out).naive_search("Who discovered polonium and radium?")
    assert "polonium" in hit.context_text

    # failed in a late stage (after documents and text units were staged)
    import assets.communities as semantic

    def boom(*args, **kwargs):
        raise RuntimeError("reports exploded")

    monkeypatch.setattr(semantic, "report_table", boom)
    result = run_index(input_dir=str(inp), output_dir=str(out), raise_on_error=False)
    assert not result.success
    assert store.read_manifest(out) == before
    assert store.read_table(out, "documents").equals(docs_before)
    assert _consistent(out) == []
    monkeypatch.undo()
    assert run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR").success
    assert "quokkaville.txt" in store.read_table(out, "documents")["source_path"].to_list()


def test_a_second_writer_is_refused_with_the_holder_named(corpus):
    inp, out = corpus
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pipeline.storage import lock; "
            f"lock.acquire({str(out)!r}, 'holder-run-1234'); print('held', flush=True); "
            "sys.stdin.read()",
        ],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        info = lock.holder(out)
        assert info["pid"] == holder.pid and info["run_id"] == "holder-run-1234"
        proc = _index_cli(inp, out)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2
        assert f"pid {holder.pid}" in err and "holder-r" in err
        assert store.read_manifest(out) is None and not store.staging_dir(out).exists()

        # with a wait, the second run goes ahead once the holder is done
        waiting = _index_cli(inp, out, "--wait", "120")
        time.sleep(3)
        assert waiting.poll() is None
    finally:
        holder.stdin.close()
        holder.wait()
    _, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0, err
    assert _consistent(out) == [] and lock.holder(out) is None


def test_two_runs_at_once_leave_one_consistent_index(corpus):
    inp, out = corpus
    runs = [_index_cli(inp, out) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in runs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, err in results if code == 2)
    assert "is being written by run" in refused
    assert _consistent(out) == []
    units = store.read_table(out, "text_units").height
    assert store.lance_db(out).open_table("text_units").count_rows() == units


def _all_text(out: Path) -> str:
    """Every string the output folder holds, decoded: Parquet cells (files are compressed),
    every version of every Lance table, and the raw bytes of every other file."""
    parts = []
    for path in out.rglob("*"):
        if not path.is_file():
            continue
        if path.suffix == ".parquet":
            parts.append(str(pq.read_table(path).to_pylist()))
        parts.append(path.read_bytes().decode("utf-8", "ignore"))
    for lance_dir in {p.parent for p in out.rglob("*.lance") if p.is_dir()}:
        db = lancedb.connect(str(lance_dir))
        for name in db.list_tables().tables:
            table = db.open_table(name)
            for v in table.list_versions():
                table.checkout(v["version"])
                parts.append(str(table.to_arrow().drop_columns(["vector"]).to_pylist()))
    return "\n".join(parts)


def test_a_deleted_document_leaves_no_text_on_disk(corpus):
    inp, out = corpus
    doc = inp / "quokkaville.txt"
    doc.write_text(SECRET_DOC, encoding="utf-8")
    assert run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR").success
    assert MARKER in _all_text(out)  # the check can see it when it is there
    doc.unlink()
    for _ in range(2):  # the previous version is kept once (storage.keep_versions: 2)
        assert run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR").success
    assert MARKER not in _all_text(out)
    assert len(store.versions(out)) == 2
    for version in store.versions(out):
        db = lancedb.connect(str(out / store.VERSIONS_DIR / version / store.LANCE_DIR))
        for name in db.list_tables().tables:
            assert len(db.open_table(name).list_versions()) == 1, (version, name)


def test_llm_mode_a_deleted_document_leaves_no_text_in_the_caches(corpus, tmp_path, monkeypatch):
    """In LLM mode the call cache and the report memos hold answers drawn from the text: the
    entries no kept version used are swept after a publish."""
    from conftest import write_llm_config

    from pipeline.llm.fake_server import FakeLlm

    monkeypatch.setenv("OPENAI_API_KEY", "sk-sweep")
    inp, out = corpus
    doc = inp / "quokkaville.txt"
    doc.write_text(SECRET_DOC, encoding="utf-8")
    with FakeLlm() as server:
        config = write_llm_config(tmp_path / "llm.yaml", server.base_url, timeout_s=5.0)
        assert run_index(config_path=config, input_dir=str(inp), output_dir=str(out)).success
        cached = "\n".join(p.read_text() for p in (out / "cache").rglob("*.json"))
        assert "Farnsworth-Pike" in cached  # the sweep has something to remove
        doc.unlink()
        for _ in range(2):
            assert run_index(config_path=config, input_dir=str(inp), output_dir=str(out)).success
        calls_before = server.requests
        assert run_index(config_path=config, input_dir=str(inp), output_dir=str(out)).success
        assert server.requests == calls_before  # what the kept versions use stays cached
    text = _all_text(out)
    assert "Farnsworth-Pike" not in text and MARKER not in text


# Every vector of these settings is the model's vector of one row's text (no title vectors, no
# derived node vectors), so what the cache must hold can be told from the tables alone.
TEXT_VECTORS = "embedding:\n  node_vectors: text\n  entity_vectors: text\n"
EMBEDDED_TABLES = ("text_units", "content_nodes", "entities")


def _cached_keys(out: Path) -> set[str]:
    """The keys of the vectors in the embedding cache, read from its files (one model)."""
    from pipeline.config import PACKAGED_MODEL
    from pipeline.ids import sha256_hex
    from pipeline.vectors.embed import resolve_model
    from pipeline.vectors.embed_cache import embedding_cache_dir

    folders = list(embedding_cache_dir(out).iterdir())
    assert [p.name for p in folders] == [sha256_hex(resolve_model(PACKAGED_MODEL).encode())[:16]]
    return set(pl.read_parquet(list(folders[0].glob("*.parquet")))["key"])


def _kept_keys(out: Path) -> set[str]:
    """The cache keys of the texts the kept versions' rows were embedded from."""
    from pipeline.config import PACKAGED_MODEL
    from pipeline.vectors.embed import cache_key, resolve_model
    from pipeline.vectors.texts import embedding_text

    model = resolve_model(PACKAGED_MODEL)
    keys = set()
    for version in store.versions(out):
        folder = out / store.VERSIONS_DIR / version
        for name in EMBEDDED_TABLES:
            texts = embedding_text(name, store.read_table(folder, name))
            keys |= {cache_key(model, text) for text in texts}
    return keys


def test_the_embedding_cache_keeps_only_the_vectors_of_kept_versions(corpus, tmp_path):
    """Issue 45, 6: vectors of deleted and edited text leave the cache once no kept version
    (storage.keep_versions: 2) holds that text; those of kept versions stay."""
    inp, out = corpus
    config = tmp_path / "vectors.yaml"
    config.write_text(TEXT_VECTORS, encoding="utf-8")

    def index() -> None:
        assert run_index(config_path=str(config), input_dir=str(inp), output_dir=str(out)).success

    index()
    first = _kept_keys(out)
    assert _cached_keys(out) == first
    edited = inp / "niels_bohr.md"
    edited.write_text(edited.read_text(encoding="utf-8").replace("Copenhagen", "Kobenhavn"))
    (inp / "nobel_prize.md").unlink()
    index()
    assert _cached_keys(out) == _kept_keys(out)  # the first version is kept: its vectors too
    index()  # the first version goes, and with it the vectors of the old and deleted text
    kept = _kept_keys(out)
    assert first - kept, "the edit and the deletion left text behind"
    assert _cached_keys(out) == kept


def test_a_killed_cli_run_is_marked_failed_and_its_leftovers_removed(indexed_sample, tmp_path):
    inp, out = indexed_sample
    home = tmp_path / "dagster_home"
    home.mkdir()
    env = {"DAGSTER_HOME": str(home)}
    (inp / "quokkaville.txt").write_text(SECRET_DOC, encoding="utf-8")
    proc = _index_cli(inp, out, env=env)
    deadline = time.monotonic() + 120
    while (
        not list(store.staging_dir(out).glob("text_units.parquet"))
        or os.stat(store.staging_dir(out) / "text_units.parquet").st_nlink > 1
    ):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_run = json.loads(lock.lock_path(out).read_text())["run_id"]
    # what a killed writer leaves mid-write: a temp file next to its target
    stray = store.staging_dir(out) / f".entities.parquet.{proc.pid}.k1ll3d.tmp"
    stray.write_bytes(b"half a table")

    assert _index_cli(inp, out, env=env).wait(timeout=300) == 0
    from dagster import DagsterInstance, DagsterRunStatus

    with DagsterInstance.from_config(str(home)) as instance:
        run = instance.get_run_by_id(killed_run)
        assert run is not None and run.status == DagsterRunStatus.FAILURE
        statuses = {r.status for r in instance.get_runs()}
    assert DagsterRunStatus.STARTED not in statuses
    assert not list(out.rglob("*.tmp")) and not store.staging_dir(out).exists()


def test_output_files_follow_the_umask(corpus):
    inp, out = corpus
    proc = subprocess.run(
        ["bash", "-c", 'umask 022 && exec "$@"', "_", sys.executable, "-m", "app.cli"]
        + ["index", "--input", str(inp), "--output", str(out), "--log-level", "ERROR"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    modes = {str(p.relative_to(out)): stat.S_IMODE(p.stat().st_mode) for p in out.rglob("*")}
    files = {k: m for k, m in modes.items() if (out / k).is_file()}
    assert files and {m for m in files.values()} == {0o644}, files
    assert {m for k, m in modes.items() if (out / k).is_dir()} == {0o755}


def test_check_compares_the_vector_tables_with_the_tables(indexed_sample, capsys):
    from app.cli.main import main

    inp, out = indexed_sample
    assert validate.lance_problems(out) == []
    assert main(["check", "--output", str(out)]) == 0
    assert "lancedb: ok" in capsys.readouterr().out
    folder = store.resolve(out)
    table = lancedb.connect(str(folder / store.LANCE_DIR)).open_table("text_units")
    victim = store.read_table(out, "text_units")["id"][0]
    table.delete(f"id = '{victim}'")
    problems = validate.lance_problems(out)
    assert any("text_units" in p and "1 ids missing" in p for p in problems), problems
    assert pl.Series(problems).str.contains("entities").sum() == 0
    assert main(["check", "--output", str(out)]) == 1
    units = store.read_table(out, "text_units").height
    assert f"lancedb: lance table text_units: {units - 1} rows for {units}" in (
        capsys.readouterr().out
    )


def test_threads_share_one_index_across_a_republish(indexed_sample):
    """8 threads query one GraphIndex while a new version is published: no errors."""
    inp, out = indexed_sample
    index = GraphIndex.open(out)
    errors: list[BaseException] = []
    stop = threading.Event()

    def worker(i: int) -> None:
        while not stop.is_set():
            try:
                mode = ("naive_search", "local_search", "flow_search")[i % 3]
                getattr(index, mode)("Who worked with Ernest Rutherford?")
            except BaseException as exc:  # noqa: BLE001 - collected for the assert
                errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    try:
        (inp / "quokkaville.txt").write_text(SECRET_DOC, encoding="utf-8")
        assert _index_cli(inp, out).wait(timeout=300) == 0
        time.sleep(1)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []
    assert index.latest().version == store.read_manifest(out)["version"]
