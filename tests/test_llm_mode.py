"""LLM mode through the whole index job: the real openai client over HTTP to the fake server."""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl
import pytest
from conftest import write_llm_config

from app.cli.demo import write_sample_corpus
from app.run import run_index
from pipeline.llm.fake_server import FakeLlm
from pipeline.schemas import SEMANTIC_TABLES, TABLES
from pipeline.storage import store, validate

SECRET = "sk-test-SECRET-123"


def _config(tmp_path: Path, server: FakeLlm, name: str = "llm.yaml") -> str:
    return write_llm_config(tmp_path / name, server.base_url, timeout_s=1.0, max_retries=4)


def _extract_metadata(result, asset: str = "extracted_entities") -> dict:
    return [
        m.materialization.metadata
        for m in result.get_asset_materialization_events()
        if m.asset_key.to_user_string() == asset
    ][0]


@pytest.fixture()
def corpus(tmp_path) -> Path:
    inp = tmp_path / "input"
    write_sample_corpus(inp)
    return inp


def test_whole_graph_in_llm_mode_resumes_without_repeating_calls(
    tmp_path, corpus, monkeypatch, caplog, capfd
):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    out = tmp_path / "out"
    # verbose answers: the whole offline graph, whose communities are large enough for reports
    with FakeLlm(require_key=SECRET, answers="verbose") as server:
        config = _config(tmp_path, server)
        first = run_index(config_path=config, input_dir=str(corpus), output_dir=str(out))
        assert first.success
        calls_first = server.requests
        by_stage = dict(server.by_stage)
        assert by_stage.get("extract", 0) > 0 and by_stage.get("report", 0) > 0
        unchanged = run_index(config_path=config, input_dir=str(corpus), output_dir=str(out))
        assert unchanged.success  # no document changed: no shard runs, the tail alone
        assert "extracted_entities" not in {
            e.asset_key.to_user_string() for e in unchanged.get_asset_materialization_events()
        }
        second = run_index(
            config_path=config, input_dir=str(corpus), output_dir=str(out), full=True
        )
        assert second.success
        assert server.requests == calls_first  # every call answered from the disk cache
        assert max(server.by_body.values()) == 1  # no request was ever sent twice

    # Same schemas as offline, every semantic table filled, the LLM did the extraction.
    for name in TABLES:
        if store.table_path(out, name).exists():
            assert validate.schema_problems(out, name) == [], name
    for name in SEMANTIC_TABLES:
        assert store.read_table(out, name).height > 0, name
    ents = store.read_table(out, "extracted_entities")
    assert set(ents["extractor"]) == {"llm"} and set(ents["model"]) == {"fake-model"}
    assert "Marie Curie" in set(store.read_table(out, "entities")["title"])
    meta = _extract_metadata(first)
    assert meta["llm_calls"].value == by_stage["extract"]
    # the full re-run sends no extraction call: every unit's graph is remembered
    again = _extract_metadata(second)
    assert again["llm_calls"].value == 0
    assert again["llm_memo_hits"].value == store.read_table(out, "chunks").height
    # Large communities got LLM reports (bottom-up); the small ones kept extractive ones.
    reports = store.read_table(out, "community_reports")
    assert reports.filter(pl.col("size") >= 10).height == by_stage["report"]
    assert store.read_table(out, "report_failures").is_empty()
    for run in (first, second):  # the re-run's calls are cache hits, none kept from memory
        meta_r = _extract_metadata(run, "community_reports")
        assert meta_r["reports_sent_to_llm"].value == by_stage["report"]
        assert meta_r["reports_kept_from_memo"].value == 0
        assert meta_r["reports_failed_kept_previous"].value == 0

    # No secret anywhere: output files (tables, Lance, cache), metadata, logs.
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    for result in (first, second):
        for event in result.all_events:
            assert SECRET not in repr(event)
    assert SECRET not in caplog.text
    captured = capfd.readouterr()
    assert SECRET not in captured.out + captured.err


def test_faulty_endpoint_run_completes_and_records_what_fell_back(tmp_path, corpus, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    out = tmp_path / "out"
    with FakeLlm(fault_rate=0.2, seed=7, retry_after=0.0, stall_s=2.0) as server:
        config = _config(tmp_path, server)
        result = run_index(config_path=config, input_dir=str(corpus), output_dir=str(out))
        assert result.success
        assert sum(server.by_fault.values()) > 0  # faults were injected
    meta = _extract_metadata(result)
    assert meta["llm_retries"].value + meta["llm_repairs"].value > 0
    ents = store.read_table(out, "extracted_entities")
    failures = store.read_table(out, "extraction_failures")
    units = set(store.read_table(out, "chunks")["id"])
    # Every unit has rows: from the LLM, or from the offline fallback, recorded with a reason.
    assert set(ents["text_unit_id"]) == units
    fallback = set(ents.filter(pl.col("extractor") == "nlp")["text_unit_id"])
    assert fallback == set(failures["text_unit_id"])
    assert all(failures["reason"].str.len_chars() > 0)


def test_llm_mode_without_an_endpoint_fails_fast_with_a_clear_message(tmp_path, monkeypatch):
    from resources import DocgraphConfig, LlmResource

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    config = tmp_path / "llm.yaml"
    config.write_text("llm:\n  enabled: true\n", encoding="utf-8")
    resource = LlmResource(config=DocgraphConfig(config_path=str(config)))
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        resource.get()
