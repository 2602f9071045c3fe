"""A missing or empty input folder is an error everywhere (CLI, asset, sensor), never a silent
index of the sample corpus and never an empty index published over a good one."""

from __future__ import annotations

import pytest

from app.cli.main import main
from app.run import run_index
from pipeline.ingest import InputFolderError, load_folder


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_index_of_a_missing_folder_exits_2_and_creates_nothing(tmp_path, capsys):
    typo, out = tmp_path / "typo", tmp_path / "idx"
    code, stdout, err = run_cli(capsys, "index", "--input", str(typo), "--output", str(out))
    assert code == 2
    assert err.startswith("docgraph: ") and str(typo) in err and "does not exist" in err
    assert len(err.strip().splitlines()) == 1
    assert not typo.exists() and not out.exists()


def test_index_of_an_empty_folder_exits_2_and_writes_no_sample(tmp_path, capsys):
    empty, out = tmp_path / "empty", tmp_path / "idx"
    empty.mkdir()
    (empty / ".DS_Store").write_bytes(b"\x00")  # hidden files are no documents
    code, _, err = run_cli(capsys, "index", "--input", str(empty), "--output", str(out))
    assert code == 2 and str(empty) in err and "no files" in err
    assert sorted(p.name for p in empty.iterdir()) == [".DS_Store"]
    assert not out.exists()


def test_a_file_given_as_the_input_folder_is_an_error(tmp_path):
    (tmp_path / "a.txt").write_text("text")
    with pytest.raises(InputFolderError, match="is not a folder"):
        load_folder(tmp_path / "a.txt")


def test_load_folder_refuses_a_missing_or_empty_folder(tmp_path):
    with pytest.raises(InputFolderError, match="does not exist"):
        load_folder(tmp_path / "nope")
    with pytest.raises(InputFolderError, match="no files"):
        load_folder(tmp_path)


def test_a_scheduled_run_on_an_emptied_folder_keeps_the_good_index(tmp_path):
    """The documents asset (what a schedule or the UI runs) fails before writing anything."""
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    out.mkdir()
    good = out / "documents.parquet"
    good.write_bytes(b"the previous run's table")
    result = run_index(input_dir=str(inp), output_dir=str(out), raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "no files" in str(failure.step_failure_data.error) and str(inp) in str(
        failure.step_failure_data.error
    )
    assert good.read_bytes() == b"the previous run's table"
    assert sorted(p.name for p in out.iterdir()) == ["documents.parquet"]


def test_the_folder_sensor_skips_a_missing_or_empty_folder(tmp_path):
    from dagster import SkipReason, build_sensor_context

    from definitions import defs
    from resources import DocgraphConfig

    sensor_def = defs.resolve_sensor_def("input_folder_changed")
    for folder in (tmp_path / "missing", tmp_path):
        config = DocgraphConfig(input_dir=str(folder), output_dir=str(tmp_path / "out"))
        ctx = build_sensor_context(cursor=None, resources={"docgraph": config})
        skip = sensor_def(ctx)
        assert isinstance(skip, SkipReason) and str(folder) in skip.skip_message
