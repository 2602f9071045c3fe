"""Atomic writes respect the umask; stray temp files of a killed writer are removed; tables
written side by side are those written alone."""

import os
import stat

import pyarrow.parquet as pq
import pytest

from pipeline.storage import store
from pipeline.storage.files import atomic_write_text, remove_stray_temps


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_written_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        path = store.write_table(tmp_path, "documents", store.read_table(tmp_path, "documents"))
        atomic_write_text(tmp_path / "state.json", "{}")
        assert _mode(path) == 0o644  # mkstemp alone would give 0600
        assert _mode(tmp_path / "state.json") == 0o644
        os.umask(0o077)
        store.write_table(tmp_path, "documents", store.read_table(tmp_path, "documents"))
        assert _mode(path) == 0o600
    finally:
        os.umask(old)


def test_remove_stray_temps_spares_live_writers_and_real_files(tmp_path):
    import subprocess
    import sys

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    (tmp_path / "sub").mkdir()
    stray = tmp_path / "sub" / f".entities.parquet.{dead.stdout.strip()}.abc123.tmp"
    stray.write_bytes(b"partial")
    live = tmp_path / f".x.json.{os.getpid()}.def456.tmp"  # this process writes it now
    live.write_bytes(b"in progress")
    unnamed = tmp_path / ".old.tmp"  # no pid: from before pids were in temp names
    unnamed.write_bytes(b"partial")
    keep = tmp_path / "entities.parquet"
    keep.write_bytes(b"whole")
    hidden = tmp_path / ".hidden"
    hidden.write_bytes(b"not a temp")
    assert sorted(remove_stray_temps(tmp_path)) == sorted([stray, unnamed])
    assert keep.exists() and hidden.exists() and live.exists()


@pytest.mark.parametrize("together", [512 * 2**20, 0])
def test_tables_written_side_by_side_are_those_written_one_at_a_time(
    sample_index, tmp_path, monkeypatch, together
):
    """store.write_tables (the graph step's three tables, two at a time under a size, else
    one at a time): every table as write_table writes it alone, each path returned, the
    frames taken out of the caller's dict; a write that fails raises."""
    monkeypatch.setattr(store, "WRITE_TOGETHER_BYTES", together)
    out = sample_index[1]
    frames = {n: store.read_table(out, n) for n in ("relationships", "entities", "text_units")}
    for folder in ("together", "alone"):
        (tmp_path / folder).mkdir()
    handed = dict(frames)
    paths = store.write_tables(tmp_path / "together", handed)
    assert handed == {} and list(paths) == list(frames)
    for name, frame in frames.items():
        alone = store.write_table(tmp_path / "alone", name, frame)
        assert paths[name] == tmp_path / "together" / f"{name}.parquet"
        assert pq.read_table(paths[name]).equals(pq.read_table(alone)), name
        assert pq.read_schema(paths[name]) == pq.read_schema(alone), name
    with pytest.raises(ValueError, match="published output folder"):
        store.write_tables(out, dict(frames))  # a published folder is never written into
