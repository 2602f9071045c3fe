"""Copies of the Lance tables' (ids, vectors) as .npz files, so a cold query skips lancedb.

Why: `import lancedb` alone costs 2.4-3.6 s on the loaded 2-core machine, the largest part
of a cold `docgraph query` once the model loads fast (pipeline.vectors.embed_onnx), and a query
needs only the ids and vectors of a few tables, which numpy reads in milliseconds.

A copy is made for a published version only (`<output>/versions/<v>`) and kept outside it,
in `<output>/cache/query_vectors/<v>/<table>.npz`, so it is never published or linked into
a new version. It holds the fingerprint of the Lance table it copies (the names and sizes of
its data and manifest files: a table is recreated with new file names, never modified in
place), and a copy whose fingerprint differs is ignored and rewritten. Copies of versions
that are gone are deleted when a new copy is written.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import numpy as np

from pipeline.storage import store
from pipeline.storage.files import atomic_path

CACHE_DIR = "cache/query_vectors"


def _copy_path(version_dir: Path, name: str) -> Path | None:
    """Where table `name`'s copy for `version_dir` lives; None for a folder that is not a
    published version (staging, an output folder from before versions)."""
    if version_dir.parent.name != store.VERSIONS_DIR:
        return None
    return version_dir.parent.parent / CACHE_DIR / version_dir.name / f"{name}.npz"


def fingerprint(version_dir: Path, name: str) -> str | None:
    """Names and sizes of the Lance table's data and manifest files; None when absent."""
    table = version_dir / store.LANCE_DIR / f"{name}.lance"
    parts = []
    for sub in ("data", "_versions"):
        folder = table / sub
        if not folder.is_dir():
            return None
        parts += sorted(f"{sub}/{p.name}:{p.stat().st_size}" for p in folder.iterdir())
    return "\n".join(parts)


def load(version_dir: Path, name: str) -> tuple[list[str], np.ndarray] | None:
    """The copy of table `name`'s (ids, matrix), or None when there is none that matches."""
    path = _copy_path(version_dir, name)
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["fingerprint"]) != fingerprint(version_dir, name):
                return None
            return data["ids"].tolist(), np.ascontiguousarray(data["vectors"], dtype=np.float32)
    except (OSError, ValueError, KeyError):  # a damaged copy is only a miss
        return None


def save(version_dir: Path, name: str, ids: list[str], matrix: np.ndarray) -> None:
    """Write the copy (best effort: a read-only output folder only misses the speed-up)."""
    path = _copy_path(version_dir, name)
    stamp = fingerprint(version_dir, name)
    if path is None or stamp is None:
        return
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, ids=np.array(ids, dtype=str), vectors=matrix, fingerprint=stamp)
        _drop_gone_versions(version_dir.parent, path.parent.parent)
    except OSError:
        return


def _drop_gone_versions(versions_dir: Path, copies_dir: Path) -> None:
    """Delete the copies of versions that were pruned (their text must leave the disk)."""
    for folder in copies_dir.iterdir():
        if folder.is_dir() and not (versions_dir / folder.name).is_dir():
            with contextlib.suppress(OSError):
                shutil.rmtree(folder)
