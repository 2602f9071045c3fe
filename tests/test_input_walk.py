"""The input folder's walk never reads outside it: symlinks out, loops, links to folders,
hidden entries and special files are rejected rows with a relative reason; UTF-16 text with a
BOM decodes; an output folder inside the input folder is never read as input."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

from app.run import run_index
from pipeline.ingest import folder_fingerprint, load_folder
from pipeline.storage import store

OUTSIDE = "symlink to a file outside the input folder"
BODY = "Ada Lovelace wrote the first program for the Analytical Engine of Charles Babbage.\n"


def reasons(rejected: pl.DataFrame) -> dict[str, str]:
    return dict(zip(rejected["source_path"], rejected["reason"], strict=True))


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    inp, outside = tmp_path / "input", tmp_path / "outside"
    inp.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET outside text.\n")
    (outside / "more.md").write_text("# More\n\nAlso outside.\n")
    (inp / "real.txt").write_text(BODY)
    (inp / "passwd_link.txt").symlink_to("/etc/passwd")
    (inp / "proc_status.txt").symlink_to("/proc/self/status")
    (inp / "secret_link.txt").symlink_to(outside / "secret.txt")
    (inp / "dotdot.txt").symlink_to("../outside/secret.txt")
    (inp / "loop_a.txt").symlink_to("loop_b.txt")
    (inp / "loop_b.txt").symlink_to("loop_a.txt")
    (inp / "broken.txt").symlink_to("gone.txt")
    (inp / "docs_out").symlink_to(outside, target_is_directory=True)
    (inp / "sub").mkdir()
    (inp / "sub" / "note.md").write_text("# Note\n\nInside.\n")
    (inp / "sub_again").symlink_to("sub", target_is_directory=True)
    (inp / "z_alias.txt").symlink_to("real.txt")
    (inp / ".env").write_text("API_KEY=hidden\n")
    (inp / ".git").mkdir()
    for i in range(5):
        (inp / ".git" / f"object{i}.txt").write_text(f"git object {i}\n")
    os.mkfifo(inp / "pipe.txt")
    return inp


def test_nothing_outside_the_input_folder_is_read(tree):
    docs, rejected = load_folder(tree)
    got = reasons(rejected)
    for name in ("passwd_link.txt", "proc_status.txt", "secret_link.txt", "dotdot.txt"):
        assert got[name] == OUTSIDE, name
    assert got["docs_out"] == "symlink to a folder (not followed)"
    assert got["sub_again"] == "symlink to a folder (not followed)"
    assert got["loop_a.txt"] == got["loop_b.txt"] == "symlink loop"
    assert got["broken.txt"] == "broken symlink (its target does not exist)"
    assert got["pipe.txt"] == "not a regular file"
    text = "\n".join(docs["text"])
    assert "root:" not in text and "TOP SECRET" not in text and "Also outside" not in text
    assert sorted(docs["source_path"]) == ["real.txt", "sub/note.md"]


def test_a_link_inside_the_folder_is_read_once_under_the_target_path(tree):
    docs, rejected = load_folder(tree)
    assert docs.filter(pl.col("source_path") == "real.txt")["text"].to_list() == [BODY]
    assert reasons(rejected)["z_alias.txt"] == "symlink to real.txt (read there)"


def test_hidden_files_and_folders_get_one_row_each(tree):
    _, rejected = load_folder(tree)
    got = reasons(rejected)
    assert got[".env"] == "hidden file (not read)"
    assert got[".git"] == "hidden folder (not read)"
    assert not any(p.startswith(".git/") for p in got)


def test_reasons_never_carry_absolute_paths(tree):
    _, rejected = load_folder(tree)
    assert rejected.height >= 12
    for reason in rejected["reason"]:
        assert str(tree.parent) not in reason and "/etc" not in reason and "/proc" not in reason
    assert not any(p.startswith("/") for p in rejected["source_path"])


def test_utf16_and_utf8_with_a_bom_decode(tmp_path):
    text = "Héllo wörld, Привет.\nSecond line.\n"
    (tmp_path / "le.txt").write_bytes(text.encode("utf-16-le").join([b"\xff\xfe", b""]))
    (tmp_path / "be.txt").write_bytes(b"\xfe\xff" + ("Big " + text).encode("utf-16-be"))
    (tmp_path / "u8.txt").write_bytes(b"\xef\xbb\xbf" + ("UTF-8 " + text).encode())
    (tmp_path / "heading.md").write_bytes(("# Заголовок\n\n" + text).encode("utf-16"))
    (tmp_path / "nul.txt").write_bytes(b"abc\x00def")
    (tmp_path / "bad16.txt").write_bytes(b"\xff\xfe" + "ok".encode("utf-16-le") + b"\x00\xd8")
    docs, rejected = load_folder(tmp_path)
    by = dict(zip(docs["source_path"], docs["text"], strict=True))
    assert by["le.txt"] == text and by["be.txt"] == "Big " + text
    assert by["u8.txt"] == "UTF-8 " + text
    assert docs.filter(pl.col("source_path") == "heading.md")["title"].to_list() == ["Заголовок"]
    got = reasons(rejected)
    assert got["nul.txt"] == "binary content"
    assert got["bad16.txt"].startswith("invalid UTF-16")


def test_an_output_folder_inside_the_input_folder_is_never_input(tmp_path):
    inp = tmp_path / "input"
    out = inp / "index"
    inp.mkdir()
    (inp / "ada.md").write_text("# Ada Lovelace\n\n" + BODY)
    (inp / "babbage.txt").write_text("Charles Babbage\n\nBabbage designed the Analytical Engine.\n")
    before = folder_fingerprint(inp, exclude=[out])
    assert run_index(input_dir=str(inp), output_dir=str(out)).success
    assert folder_fingerprint(inp, exclude=[out]) == before  # the sensor does not fire itself
    first = store.read_table(out, "documents")["source_path"].to_list()
    assert run_index(input_dir=str(inp), output_dir=str(out)).success
    assert store.read_table(out, "documents")["source_path"].to_list() == first
    assert sorted(first) == ["ada.md", "babbage.txt"]
    assert store.read_table(out, "rejected_documents").height == 0


def test_the_sensor_ignores_writes_to_an_output_folder_inside_the_input(tmp_path):
    from dagster import RunRequest, build_sensor_context

    from definitions import defs
    from resources import DocgraphConfig

    inp, out = tmp_path / "input", tmp_path / "input" / "index"
    inp.mkdir()
    (inp / "ada.md").write_text("# Ada\n\n" + BODY)
    config = DocgraphConfig(input_dir=str(inp), output_dir=str(out))
    sensor_def = defs.resolve_sensor_def("input_folder_changed")

    def tick(cursor: str | None):
        ctx = build_sensor_context(cursor=cursor, resources={"docgraph": config})
        return sensor_def(ctx), ctx.cursor

    first, cursor = tick(None)
    assert isinstance(first, RunRequest)
    out.mkdir()
    (out / "documents.parquet").write_bytes(b"a run's output")
    again, same = tick(cursor)  # nothing published yet: the same request, the same run key
    assert isinstance(again, RunRequest) and again.run_key == first.run_key and same == cursor


def _count_walks(monkeypatch) -> list[str]:
    """Every walk of an input folder from now on, in this process (each module that imported
    walk_input by name gets the counting wrapper)."""
    import sys

    from pipeline.ingest import walk

    original, calls = walk.walk_input, []

    def counted(input_dir, exclude=()):
        calls.append(str(input_dir))
        return original(input_dir, exclude)

    for module in list(sys.modules.values()):
        if getattr(module, "walk_input", None) is original:
            monkeypatch.setattr(module, "walk_input", counted)
    return calls


def test_one_docgraph_index_walks_the_input_folder_once(tmp_path, monkeypatch):
    """The CLI's plan, the runner and the documents and publications steps share one walk."""
    import assets.ingest  # noqa: F401 - imported before the wrappers go in
    from app.cli.main import main

    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    (inp / "a.md").write_text("# Ada\n\n" + BODY)
    (inp / "b.txt").write_text("Charles Babbage designed the Difference Engine.\n")
    monkeypatch.setenv("DOCGRAPH_EXECUTOR", "in_process")
    walks = _count_walks(monkeypatch)
    assert main(["index", "--input", str(inp), "--output", str(out)]) == 0
    assert walks == [str(inp)]
    assert sorted(store.read_table(out, "documents")["source_path"]) == ["a.md", "b.txt"]
    # run_index called without a walk makes the one walk itself
    (inp / "c.txt").write_text("Babbage met Lovelace in 1833.\n")
    walks.clear()
    run_index(None, str(inp), str(out))
    assert walks == [str(inp)]
    assert store.read_table(out, "documents").height == 3


def test_a_saved_walk_reads_back_the_same_in_any_process(tree, tmp_path):
    """Steps in this process take the saved entries themselves (not parsed again); a step in
    another process reads the file: both give the walk, paths, reasons, hidden names and
    stats alike."""
    from pipeline.ingest.walk import forget_listing, read_listing, walk_input, write_listing

    entries = walk_input(tree)
    assert any(e.path is None for e in entries) and any(e.hidden for e in entries)
    saved = tmp_path / "walk.json"
    write_listing(saved, entries)
    here = read_listing(saved)
    assert here == entries and all(a is b for a, b in zip(here, entries, strict=True))
    elsewhere = tmp_path / "copy.json"  # a file this process never saved: parsed
    elsewhere.write_bytes(saved.read_bytes())
    assert read_listing(elsewhere) == entries
    forget_listing(saved)
    assert not saved.exists()
    # a run whose steps all run here keeps it in memory only (app.run, 0.16 s at 40k files)
    write_listing(saved, entries, to_file=False)
    assert not saved.exists() and read_listing(saved) == entries
    forget_listing(saved)
    with pytest.raises(FileNotFoundError):
        read_listing(saved)
