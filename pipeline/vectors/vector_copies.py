"""Copies of the Lance tables' (ids, vectors) as plain .npy files, so a cold query skips
lancedb.

Why: `import lancedb` alone costs 2.4-3.6 s on the loaded 2-core machine, the largest part
of a cold `docgraph query` once the model loads fast (pipeline.vectors.embed_onnx), and a query
needs only the ids and vectors of a few tables, which numpy reads in milliseconds.

The index makes the copies once it has published (`copy_table`, block by block from Lance);
a query makes a missing one when it reads a table through Lance, and an incremental run reads
the published version's copy for the vectors it carries over (pipeline.vectors.carry_over).
A copy is made for a published version only (`<output>/versions/<v>`) and kept outside it,
in `<output>/cache/query_vectors/<v>/`, so it is never published or linked into a new
version. A table's copy is three files: `<table>.json` names the other two by a token of
their own and holds the fingerprint of the Lance table copied (the names and sizes of its
data and manifest files: a table is recreated with new file names, never modified in place);
a copy whose fingerprint differs is ignored and rewritten. The .json is written last, so a
reader never pairs one copy's ids with another's vectors. Copies of versions that are gone
are deleted when a new copy is written.

Plain .npy, not one .npz: a zip member is CRC-checked as it is written and again as it is
read, which at 40k documents was most of a copy's time (the entities' 99 MB of vectors: 0.36
s to read from the .npz, a few hundredths from the .npy).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from pipeline.storage import store
from pipeline.storage.files import atomic_path

CACHE_DIR = "cache/query_vectors"
# Rows of a Lance table read at a time when copying it: 16k vectors of 384 floats are 25 MB
READ_ROWS = 16_384


def _copy_path(version_dir: Path, name: str) -> Path | None:
    """Table `name`'s copy record (`<table>.json`) for `version_dir`; None for a folder that
    is not a published version (staging, an output folder from before versions)."""
    if version_dir.parent.name != store.VERSIONS_DIR:
        return None
    return version_dir.parent.parent / CACHE_DIR / version_dir.name / f"{name}.json"


def _part(record: Path, token: str, part: str) -> Path:
    return record.with_name(f"{record.stem}.{token}.{part}.npy")


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
    record = _copy_path(version_dir, name)
    if record is None or not record.is_file():
        return None
    try:
        made = json.loads(record.read_text())
        if made["fingerprint"] != fingerprint(version_dir, name):
            return None
        ids = np.load(_part(record, made["token"], "ids"), allow_pickle=False)
        vectors = np.load(_part(record, made["token"], "vectors"), allow_pickle=False)
    except (OSError, ValueError, KeyError, TypeError):  # a damaged copy is only a miss
        return None
    if vectors.dtype != np.float32 or vectors.ndim != 2 or len(ids) != vectors.shape[0]:
        return None
    return ids.tolist(), vectors


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
    as it comes: whoever copies a large table need not hold its matrix (a 151 MB text's 618k
    content nodes are 950 MB of vectors)."""
    record = _copy_path(version_dir, name)
    stamp = fingerprint(version_dir, name)
    if record is None or stamp is None:
        return
    token = secrets.token_hex(4)
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32))}
    header |= {"fortran_order": False, "shape": tuple(shape)}
    ids: list[str] = []
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(_part(record, token, "vectors")) as tmp, open(tmp, "wb") as fh:
            np.lib.format.write_array_header_2_0(fh, header)
            for block_ids, block in blocks:
                fh.write(np.ascontiguousarray(block, dtype=np.float32).data)  # no copy
                ids += block_ids
        if len(ids) != shape[0]:
            raise ValueError(f"{name}: {len(ids)} rows read, {shape[0]} counted")
        with atomic_path(_part(record, token, "ids")) as tmp, open(tmp, "wb") as fh:
            np.save(fh, np.array(ids, dtype=str), allow_pickle=False)
        with atomic_path(record) as tmp:
            Path(tmp).write_text(json.dumps({"fingerprint": stamp, "token": token}))
    except (OSError, ValueError):
        _drop_parts(record, lambda other: other == token)  # this copy's, half written
        return
    _drop_parts(record, lambda other: other != token)
    _drop_gone_versions(version_dir.parent, record.parent.parent)


def _drop_parts(record: Path, drop: Callable[[str], bool]) -> None:
    """Delete the .npy files of table `record`'s copies whose token `drop` accepts (a reader
    that still holds the token finds them gone: a miss)."""
    for path in record.parent.glob(f"{record.stem}.*.npy"):
        if drop(path.name.removeprefix(f"{record.stem}.").split(".")[0]):
            with contextlib.suppress(OSError):
                path.unlink()


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
