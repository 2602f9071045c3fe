"""The `docgraph` command line over a real index: query modes, --json, check, errors."""

from __future__ import annotations

import gc
import json

import pytest
import test_lock
from conftest import write_llm_config
from test_llm_query import refused_url

from app.cli import main as cli_main
from app.cli.main import main
from app.cli.querying import cited_text
from pipeline.query import GraphIndex

procs = test_lock.procs  # the fixture: processes that hold the output lock


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("mode", ["naive", "local", "global", "expand", "flow"])
def test_query_modes_return_json_with_provenance(sample_index, capsys, mode):
    _, out, _, _ = sample_index
    code, stdout, _ = run_cli(
        capsys, "query", mode, "Who met Marie Curie in Brussels?", "--output", str(out), "--json"
    )
    assert code == 0
    result = json.loads(stdout)
    assert result["mode"] == mode
    assert result["records"], "no records"
    assert result["answer"].strip()
    assert result["context_text"].strip()


def test_local_query_finds_the_solvay_text(sample_index, capsys):
    _, out, _, _ = sample_index
    code, stdout, _ = run_cli(
        capsys, "query", "local", "Solvay Conference Brussels 1911", "--output", str(out), "--json"
    )
    assert code == 0
    records = json.loads(stdout)["records"]
    sources = {r.get("source_path") for r in records if r.get("kind") == "text_unit"}
    assert "solvay_conference.txt" in sources


def test_focus_prints_the_overall_json_of_a_section(sample_index, capsys):
    _, out, _, _ = sample_index
    code, stdout, _ = run_cli(
        capsys, "query", "focus", "niels_bohr.md", "--output", str(out), "--json", "--budget", "600"
    )
    assert code == 0
    result = json.loads(stdout)
    assert result["mode"] == "focus"
    focus = result["data"]["focusNote"]
    assert focus["uri_and_title"] == "[Niels Bohr](niels_bohr.md)"
    assert result["context_tokens"] <= 600
    code, _, err = run_cli(capsys, "query", "focus", "no/such.md", "--output", str(out))
    assert code == 2 and "no/such.md" in err


def test_check_passes_on_a_good_index(sample_index, capsys):
    _, out, _, _ = sample_index
    code, stdout, _ = run_cli(capsys, "check", "--output", str(out))
    assert code == 0, stdout
    assert "entities: ok" in stdout


def test_query_on_a_missing_index_is_a_clear_error(tmp_path, capsys):
    code, _, err = run_cli(capsys, "query", "naive", "anything", "--output", str(tmp_path / "no"))
    assert code == 2
    assert "docgraph index" in err


def test_empty_query_is_refused(sample_index, capsys):
    _, out, _, _ = sample_index
    code, _, err = run_cli(capsys, "query", "local", "  ", "--output", str(out))
    assert code == 2
    assert "empty query" in err


def test_text_unit_hits_cite_document_section_page_and_position(sample_index, capsys):
    _, out, _, _ = sample_index
    code, stdout, _ = run_cli(
        capsys, "query", "naive", "polonium and radium", "--output", str(out), "--json"
    )
    assert code == 0
    top = json.loads(stdout)["records"][0]
    assert top["source_path"] == "marie_curie.md"
    assert top["section_path"][0] == "Marie Curie"
    assert top["section_uri"].startswith("marie_curie.md")
    assert top["pages"] == [1]
    assert top["positions"] and all(p["page"] == 1 for p in top["positions"])


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--top-k", "-1"),
        ("--top-k", "0"),
        ("--max-hops", "0"),
        ("--max-nodes", "-3"),
        ("--budget", "0"),
        ("--level", "-1"),
        ("--top-k", "ten"),
    ],
)
def test_invalid_numbers_are_refused_with_a_message(tmp_path, capsys, flag, value):
    with pytest.raises(SystemExit) as exit_:
        main(["query", "local", "q", "--output", str(tmp_path), flag, value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert f"argument {flag}: " in err and repr(value) in err
    assert "integer" in err


def test_an_unreachable_llm_is_an_error_unless_the_fallback_is_asked(
    sample_index, tmp_path, capsys
):
    _, out, _, _ = sample_index
    config = write_llm_config(tmp_path / "llm.yaml", refused_url())
    question = "Who attended the Solvay Conference?"
    for stream in ([], ["--stream"]):
        argv = ["query", "local", question, "--output", str(out), "--config", config, *stream]
        code, stdout, err = run_cli(capsys, *argv)
        assert code == 1 and stdout == "", stream
        assert err.startswith("docgraph: LLM answer failed: ") and err.count("\n") == 1
        assert "connection refused" in err and "--offline-fallback" in err
        code, stdout, err = run_cli(capsys, *argv, "--offline-fallback")
        assert code == 0, err
        result = GraphIndex.open(out).local_search(question)
        printed = result.answer if stream else cited_text(result)  # a stream prints text only
        assert result.citations and stdout == printed + "\n"
        assert err.startswith("docgraph: warning: LLM answer failed (")
        assert "extractive" in err and err.count("\n") == 1


def test_index_wait_says_once_who_holds_the_lock(tmp_path, capsys, procs):
    """`--wait` names the holder and says it waits (issue 45), instead of waiting mute."""
    inp, out = tmp_path / "input", tmp_path / "output"
    inp.mkdir()
    (inp / "note.md").write_text("# Note\n\nRadium glows.\n")
    holder = procs()
    assert holder("acquire", str(out), "run-aaaa1111", 0) == "ok"
    argv = ["index", "--input", str(inp), "--output", str(out)]
    code, _, err = run_cli(capsys, *argv, "--wait", "1")
    waiting, refused = err.splitlines()
    assert code == 2 and err.count("waiting") == 1
    assert waiting.startswith(f"docgraph: output folder {out} is being written by run run-aaaa")
    assert f"pid {holder.pid} on " in waiting and waiting.endswith("waiting up to 1 s for it")
    assert "(waited 1 s)" in refused
    code, _, err = run_cli(capsys, *argv, "--wait", "0")  # no wait: the refusal alone
    assert code == 2 and "waiting" not in err and f"pid {holder.pid}" in err


def test_the_process_entry_leaves_what_exists_out_of_the_exit_collection(monkeypatch):
    """`cli` returns main's exit code with every object frozen: the interpreter's last
    collection then walks none of them."""
    monkeypatch.setattr(cli_main, "main", lambda: 3)
    assert gc.get_freeze_count() == 0
    try:
        assert cli_main.cli() == 3
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
