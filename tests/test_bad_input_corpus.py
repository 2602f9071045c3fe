"""Issue 9's acceptance corpus in one real index run: every good document is indexed, every bad
one is a rejected row or a failure row with its reason, nothing outside the input is read."""

from __future__ import annotations

import os
import shutil

import polars as pl
import pytest
from conftest import write_bad_inputs
from test_long_documents import _book, _nested_list

from app.cli.demo import write_sample_corpus
from app.run import run_index
from pipeline.storage import store, validate

OUTSIDE = ("/etc/passwd", "/proc/self/status")


@pytest.fixture(scope="module")
def bad_corpus(tmp_path_factory, shared_data):
    root = tmp_path_factory.mktemp("bad-corpus")
    inp, out = root / "input", root / "output"
    good = {p.name for p in write_sample_corpus(inp)}
    bad = write_bad_inputs(inp)  # empty, binary named .pdf, corrupt PDF, invalid UTF-8
    shutil.copy(shared_data / "pdf-bad" / "password-example.pdf", inp / "encrypted.pdf")
    bad["encrypted.pdf"] = "encrypted"
    # a real malformed PDF that pymupdf repairs: indexed or rejected, never a crash
    shutil.copy(shared_data / "pdf-bad" / "malformed-from-issue-932.pdf", inp / "malformed.pdf")
    (inp / "utf16.txt").write_bytes(
        "Lise Meitner in Berlin\n\nLise Meitner worked with Otto Hahn in Berlin.\n".encode("utf-16")
    )
    (inp / "one_line.md").write_text(" ".join(_book(shared_data).split() * 6) + "\n", "utf-8")
    (inp / "deep_list.md").write_text(_nested_list(1000), encoding="utf-8")
    good |= {"utf16.txt", "one_line.md", "deep_list.md"}
    os.symlink("/etc/passwd", inp / "passwd_link.txt")
    os.symlink("/proc/self/status", inp / "status_link.txt")
    os.symlink(inp / "loop_b.txt", inp / "loop_a.txt")
    os.symlink(inp / "loop_a.txt", inp / "loop_b.txt")
    bad |= {"passwd_link.txt": "outside", "status_link.txt": "outside", "loop_a.txt": "loop"}
    result = run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR")
    return inp, out, result, good, bad


def test_the_run_succeeds_and_publishes_a_consistent_index(bad_corpus):
    _, out, result, _, _ = bad_corpus
    assert result.success
    assert store.read_manifest(out) is not None
    for name in ("documents", "text_units", "entities", "communities", "community_reports"):
        assert validate.integrity_problems(out, name) == [], name
    assert validate.lance_problems(out) == []


def test_every_good_document_is_indexed_with_units(bad_corpus):
    _, out, _, good, _ = bad_corpus
    docs = store.read_table(out, "documents")
    units = store.read_table(out, "text_units")
    per_doc = dict(
        docs.join(units.group_by("document_id").len(), left_on="id", right_on="document_id")
        .select("source_path", "len")
        .iter_rows()
    )
    assert good <= set(per_doc), good - set(per_doc)
    assert per_doc["one_line.md"] > 1000  # a 1 MB line is indexed whole, not dropped
    assert "Otto Hahn" in " ".join(units.filter(pl.col("text").str.contains("Meitner"))["text"])


def test_every_bad_file_has_a_reason(bad_corpus):
    _, out, _, _, bad = bad_corpus
    rejected = dict(
        store.read_table(out, "rejected_documents").select("source_path", "reason").iter_rows()
    )
    for name, word in bad.items():
        assert name in rejected, name
        assert word.lower() in rejected[name].lower(), (name, rejected[name])
        assert "/" not in rejected[name].replace("UTF-8", ""), rejected[name]  # no paths
    indexed = set(store.read_table(out, "documents")["source_path"])
    assert "malformed.pdf" in indexed or "malformed.pdf" in rejected
    failures = pl.concat(
        [
            store.read_table(out, n).select("reason")
            for n in ("structure_failures", "chunk_failures")
        ]
    )
    assert failures.height == 0, failures  # the long and deep files need no fallback


def test_nothing_outside_the_input_folder_was_read(bad_corpus):
    _, out, _, _, _ = bad_corpus
    text = "\n".join(store.read_table(out, "text_units")["text"])
    assert "root:x:0:0" not in text and "VmRSS" not in text and "TracerPid" not in text
    for path in OUTSIDE:
        assert path not in text
