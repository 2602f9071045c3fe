"""Atomic writes respect the umask; stray temp files of a killed writer are removed."""

import os
import stat

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
