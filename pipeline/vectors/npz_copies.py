"""Copies of the Lance tables' (ids, vectors) as .npz files, so a cold query skips lancedb.

Why: `import lancedb` alone costs 2.4-3.6 s on the loaded 2-core machine, the largest part
of a cold `docgraph query` once the model loads fast (pipeline.vectors.embed_onnx), and a query
needs only the ids and vectors of a few tables, which numpy reads in milliseconds.

The index makes the copies once it has published (`copy_table`, block by block from Lance);
a query makes a missing one when it reads a table through Lance. A copy is made for a
published version only (`<output>/versions/<v>`) and kept outside it,
in `<output>/cache/query_vectors/<v>/<table>.npz`, so it is never published or linked into
a new version. It holds the fingerprint of the Lance table it copies (the names and sizes of
its data and manifest files: a table is recreated with new file names, never modified in
place), and a copy whose fingerprint differs is ignored and rewritten. Copies of versions
that are gone are deleted when a new copy is written.
"""

from __future__ import annotations

import contextlib
import shutil
import zipfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from pipeline.storage import store
from pipeline.storage.files import atomic_path

CACHE_DIR = "cache/query_vectors"
# Rows of a Lance table read at a time when copying it: 16k vectors of 384 floats are 25 MB
READ_ROWS = 16_384


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
    save_blocks(version_dir, name, matrix.shape, [(ids, matrix)])


def save_blocks(
    version_dir: Path,
    name: str,
    shape: tuple[int, int],
    blocks: Iterable[tuple[list[str], np.ndarray]],
) -> None:
    """`save` from (ids, vectors) blocks of a (rows, dim) table, each block's vectors written
    as it comes (the .npz numpy writes, uncompressed): whoever copies a large table need not
    hold its matrix (a 151 MB text's 618k content nodes are 950 MB of vectors)."""
    path = _copy_path(version_dir, name)
    stamp = fingerprint(version_dir, name)
    if path is None or stamp is None:
        return
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32))}
    header |= {"fortran_order": False, "shape": tuple(shape)}
    ids: list[str] = []
    try:
        with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", allowZip64=True) as npz:
            with npz.open("vectors.npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array_header_2_0(fh, header)
                for block_ids, block in blocks:
                    fh.write(np.ascontiguousarray(block, dtype=np.float32).tobytes())
                    ids += block_ids
            if len(ids) != shape[0]:
                raise ValueError(f"{name}: {len(ids)} rows read, {shape[0]} counted")
            for key, value in (("ids", np.array(ids, dtype=str)), ("fingerprint", np.array(stamp))):
                with npz.open(f"{key}.npy", "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, value, allow_pickle=False)
        _drop_gone_versions(version_dir.parent, path.parent.parent)
    except (OSError, ValueError):
        return


def copy_table(version_dir: Path, name: str) -> None:
    """Make the copy of Lance table `name` of a version, a block at a time: the index
    process makes it for the next cold query without ever holding the matrix."""
    if (found := lance_blocks(version_dir / store.LANCE_DIR, name)) is not None:
        save_blocks(version_dir, name, *found)


def lance_blocks(lance_dir: Path, name: str):
    """((rows, dim), the table's (ids, vectors) READ_ROWS at a time) of Lance table `name`
    in `lance_dir`, or None when it has none."""
    if not (lance_dir / f"{name}.lance").is_dir():
        return None
    import lance  # not lancedb: ~1.2 s more to import, for the same scan

    table = lance.dataset(str(lance_dir / f"{name}.lance"))
    shape = (table.count_rows(), table.schema.field("vector").type.list_size)
    # only the two columns: the text column of a large table is most of its bytes
    batches = table.to_batches(columns=["id", "vector"], batch_size=READ_ROWS)
    blocks = (
        (
            b.column("id").to_pylist(),
            b.column("vector").flatten().to_numpy(zero_copy_only=False).reshape(-1, shape[1]),
        )
        for b in batches
    )
    return shape, blocks


def _drop_gone_versions(versions_dir: Path, copies_dir: Path) -> None:
    """Delete the copies of versions that were pruned (their text must leave the disk)."""
    for folder in copies_dir.iterdir():
        if folder.is_dir() and not (versions_dir / folder.name).is_dir():
            with contextlib.suppress(OSError):
                shutil.rmtree(folder)
