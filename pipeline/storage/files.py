"""Atomic file writes that respect the umask, clean-up of what a killed writer left, and
listing the files a folder holds with writers' temp files left out; sidecars of polars
hashes (`read_hashes`, `write_hashes`), which only the polars version that wrote them reads.

Every file docgraph writes goes through `atomic_path`: a temp file in the target's folder
(named `.<name>.<pid>.<random>.tmp`, so a clean-up can tell a live writer's temp file from
one a killed process left), then `os.replace`, so a reader sees the old file or the new
one, never a part. `tempfile.mkstemp` creates files 0600 whatever the umask; the final file
gets the mode any other tool would give it (0666 minus the umask), so a shared index stays
readable by the group that reads it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl

TEMP_SUFFIX = ".tmp"


def umask() -> int:
    """The process umask (read without changing it for longer than one call)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def default_mode() -> int:
    """0666 minus the umask: the mode `open(path, "w")` would give a new file."""
    return 0o666 & ~umask()


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """A temp path next to `target`; write it inside the block, and on a clean exit it
    becomes `target` (mode 0666 minus the umask) in one rename. On an error it is removed."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{target.name}.{os.getpid()}.", suffix=TEMP_SUFFIX, dir=target.parent
    )
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, default_mode())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(target: str | Path, data: bytes, fsync: bool = False) -> None:
    with atomic_path(target) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())


def atomic_write_text(target: str | Path, text: str, fsync: bool = False) -> None:
    atomic_write_bytes(target, text.encode("utf-8"), fsync=fsync)


def atomic_write_with(target: str | Path, write: Callable[[Path], object]) -> None:
    """`write(tmp_path)` (e.g. a Parquet writer), then the atomic rename."""
    with atomic_path(target) as tmp:
        write(tmp)


def _writer_alive(name: str) -> bool:
    """Whether the process that named this temp file (`.<name>.<pid>.<random>.tmp`) runs."""
    parts = name[: -len(TEMP_SUFFIX)].rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def remove_stray_temps(root: str | Path) -> list[Path]:
    """Delete the `.*.tmp` files under `root` whose writer process has ended (a killed run
    left them); a live process's temp file is being written and stays. Returns what went."""
    root = Path(root)
    if not root.is_dir():
        return []
    removed: list[Path] = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            if not (name.startswith(".") and name.endswith(TEMP_SUFFIX)):
                continue
            if _writer_alive(name):
                continue
            path = Path(dirpath) / name
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def read_hashes(path: Path, columns: Iterable[str]) -> pl.DataFrame | None:
    """The sidecar `write_hashes` wrote (without its `polars` column); None when it is
    missing, damaged, lacks `columns` or was written by another polars (other hashes)."""
    try:
        frame = pl.read_parquet(path) if path.exists() else None
    except Exception:  # noqa: BLE001 - a damaged sidecar only costs the reuse
        return None
    if frame is None or not {*columns, "polars"} <= set(frame.columns):
        return None
    if frame.height and frame["polars"][0] != pl.__version__:
        return None
    return frame.drop("polars")


def write_hashes(path: Path, frame: pl.DataFrame | None) -> None:
    """`frame` as a sidecar stamped with the polars version, atomically; None: it goes."""
    if frame is None:
        path.unlink(missing_ok=True)
        return
    out = frame.with_columns(pl.lit(pl.__version__).alias("polars"))
    # lz4: hashes do not compress, and zstd took 5x as long to write (0.1 s at 10k documents)
    atomic_write_with(path, lambda tmp: out.write_parquet(tmp, compression="lz4"))


def files_under(folder: Path) -> dict[str, Path]:
    """{relative posix path: path} of the files under `folder`, temp files left out."""
    out: dict[str, Path] = {}
    if not folder.is_dir():
        return out
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            if name.startswith(".") and name.endswith(TEMP_SUFFIX):
                continue
            path = Path(dirpath) / name
            out[path.relative_to(folder).as_posix()] = path
    return out
