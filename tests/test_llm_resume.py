"""LLM mode, kill and resume: a run SIGKILLed mid-extraction and run again repeats no call that
the first run completed, leaves no partial cache entry, and ends with the same tables as a run
that was never interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
from conftest import write_llm_config

from app.cli.demo import write_sample_corpus
from app.run import run_index
from pipeline.config import LlmSettings
from pipeline.llm.cache import cache_key
from pipeline.llm.fake_answers import default_responder
from pipeline.llm.fake_server import FakeLlm
from pipeline.schemas import TABLES
from pipeline.storage import store

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-resume-test"
PEOPLE = [
    ("Ada Lovelace", "London", "the Analytical Engine"),
    ("Sofia Kovalevskaya", "Stockholm", "the Royal Swedish Academy"),
    ("Дмитрий Менделеев", "Санкт-Петербург", "Периодический закон"),
    ("Émilie du Châtelet", "Cirey", "the Principia translation"),
    ("Lise Meitner", "Berlin", "the Kaiser Wilhelm Institute"),
    ("Srinivasa Ramanujan", "Cambridge", "Trinity College"),
    ("Hedy Lamarr", "Vienna", "frequency hopping"),
    ("Chien-Shiung Wu", "New York", "Columbia University"),
]


def _write_corpus(target: Path) -> None:
    """The bundled sample corpus plus one short document per person: one extraction call each
    (packs never cross documents), so the run makes enough calls to be killed half way."""
    write_sample_corpus(target)
    for i, (name, city, work) in enumerate(PEOPLE):
        other = PEOPLE[(i + 1) % len(PEOPLE)][0]
        (target / f"person_{i}.txt").write_text(
            f"{name} worked in {city}.\n\n"
            f"{name} is remembered for {work}. In {city} {name} met {other}, "
            f"and {other} later wrote about {work}.\n",
            encoding="utf-8",
        )


class _Recorder:
    """Responder that records the client cache key of every answered request (computed as the
    client computes it), so server requests and cache files can be matched one to one."""

    def __init__(self, settings: LlmSettings) -> None:
        self.params = {"temperature": settings.temperature, "max_tokens": settings.max_tokens}
        self.keys: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, messages: list[dict]) -> str:
        with self._lock:
            self.keys.append(cache_key("fake-model", messages, self.params))
        return default_responder(messages)


def _config(path: Path, server: FakeLlm) -> str:
    return write_llm_config(path, server.base_url, timeout_s=5.0, max_retries=2, concurrency=2)


def _cache_files(out: Path) -> list[Path]:
    root = out / "cache" / "llm"
    return sorted(root.rglob("*.json")) if root.is_dir() else []


def _tables(out: Path) -> dict[str, pl.DataFrame]:
    folder = store.resolve(out)  # the published version
    return {
        name: store.read_table(folder, name)
        for name in TABLES
        if store.table_path(folder, name).exists()
    }


def test_killed_run_resumes_without_repeating_completed_calls(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    inp = tmp_path / "input"
    _write_corpus(inp)
    ref_out, out = tmp_path / "reference", tmp_path / "resumed"
    recorder = _Recorder(LlmSettings())
    with FakeLlm(recorder, require_key=KEY) as server:
        config = _config(tmp_path / "llm.yaml", server)

        # 1. The uninterrupted run, for the expected calls and tables.
        assert run_index(
            config_path=config, input_dir=str(inp), output_dir=str(ref_out), log_level="ERROR"
        ).success
        all_keys = set(recorder.keys)
        total = server.requests
        assert total == len(all_keys) >= 10 and max(server.by_body.values()) == 1
        # The recorded keys are exactly the client's cache file names.
        assert {p.stem for p in _cache_files(ref_out)} == all_keys

        # 2. The same index in a subprocess, slowed down, SIGKILLed half way through extraction.
        server.reset_counters()
        recorder.keys.clear()
        server.latency_s = 0.3
        code = (
            "from app.run import run_index; "
            f"run_index(config_path={config!r}, input_dir={str(inp)!r}, "
            f"output_dir={str(out)!r}, log_level='ERROR')"
        )
        env = {**os.environ, "OPENAI_API_KEY": KEY}
        env.pop("DAGSTER_HOME", None)
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while len(_cache_files(out)) < total // 3:
                assert proc.poll() is None, "the run ended before it could be killed"
                assert time.monotonic() < deadline, "extraction never got going"
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait()
        assert proc.returncode == -signal.SIGKILL
        # Let the server finish the requests the dead client left behind.
        settle = time.monotonic() + 10
        while server.in_flight and time.monotonic() < settle:
            time.sleep(0.05)
        time.sleep(0.2)
        first_bodies = dict(server.by_body)
        first_requests = server.requests
        first_keys = set(recorder.keys)

        # No partial entry: every cache file is whole JSON; temp files may stay, never read.
        completed = _cache_files(out)
        for path in completed:
            entry = json.loads(path.read_text(encoding="utf-8"))
            assert isinstance(entry["text"], str) and entry["stage"] == "extract"
        completed_keys = {p.stem for p in completed}
        in_flight = first_keys - completed_keys  # sent, answer never stored
        assert 0 < len(completed_keys) < total, "killed before or after extraction"
        # A request the kill cut off mid-send reaches the server but never the responder.
        assert completed_keys <= first_keys and len(first_keys) <= first_requests

        # 3. Run again to completion.
        server.latency_s = 0.0
        server.reset_counters()
        recorder.keys.clear()
        assert run_index(
            config_path=config, input_dir=str(inp), output_dir=str(out), log_level="ERROR"
        ).success
        second_keys = set(recorder.keys)
        second_requests = server.requests
    # what the killed process was writing is gone: the re-run removed its temp files
    assert not list(out.rglob("*.tmp"))

    # No completed call is made again: the second run sends exactly the calls the first did not
    # complete (those in flight at the kill included), each once.
    print(
        f"\ncalls: uninterrupted {total}; killed run sent {first_requests}, completed "
        f"{len(completed_keys)}, {len(in_flight)} in flight; resumed run sent {second_requests}"
    )
    assert second_keys.isdisjoint(completed_keys)
    assert second_keys == all_keys - completed_keys
    assert second_requests == len(second_keys) == total - len(completed_keys)
    assert max(server.by_body.values()) == 1
    repeated = set(server.by_body) & set(first_bodies)  # raw request bodies sent in both runs
    assert len(repeated) == len(in_flight & second_keys) <= len(in_flight)

    # Same tables as the uninterrupted run.
    ref, got = _tables(ref_out), _tables(out)
    assert set(got) == set(ref) and "extracted_entities" in ref
    for name, df in ref.items():
        assert got[name].equals(df), name
    assert set(got["extracted_entities"]["extractor"]) == {"llm"}
