"""Atomic writes respect the umask; stray temp files of a killed writer are removed."""

import os
import stat

from pipeline import store
from pipeline.files import atomic_write_text, remove_stray_temps


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


def test_remove_stray_temps_leaves_real_files(tmp_path):
    (tmp_path / "sub").mkdir()
    stray = tmp_path / "sub" / ".entities.parquet.abc123.tmp"
    stray.write_bytes(b"partial")
    keep = tmp_path / "entities.parquet"
    keep.write_bytes(b"whole")
    hidden = tmp_path / ".hidden"
    hidden.write_bytes(b"not a temp")
    assert remove_stray_temps(tmp_path) == [stray]
    assert keep.exists() and hidden.exists() and not stray.exists()
