"""Where tables live: versions of an output folder, each published in one atomic step.

```
<output>/index.json          the manifest: which version is current (swapped last, atomically)
<output>/versions/<v>/       a published version: <table>.parquet, lancedb/, state files
<output>/staging/            the version being written by the one running writer (see lock)
<output>/staging/scratch/    what one step hands the next that is no table (never published)
<output>/cache/              content-keyed caches shared by all versions (LLM, embeddings)
```

Why: tables are written one by one, minutes apart. A reader that followed the files would
see a half-written index (new `documents` beside old `text_units`), and a failed or killed
run would leave it that way. So a run writes a whole version into `staging/` (which starts
as hard links of the current version, so a partial run reads what it did not recompute),
and `publish` renames it into `versions/` and then replaces `index.json`: readers resolve
the manifest once (`resolve`) and read one consistent version. Old versions beyond
`keep` are deleted, so deleted documents' text leaves the disk.

Within a version a Parquet write is atomic (temp file + rename). A Lance table is written
whole or changed in place (pipeline.vectors.lance_write): Lance never rewrites an existing
file, so the links shared with the previous version are never written through, and only
the table's latest Lance version is kept.

An object-store output (`s3://bucket/prefix`) is worked in a local mirror folder with this
same layout and published to the store whole (pipeline.storage.remote); the readers here accept
the URL itself and read the store's current version through the mirror.

An output folder written before versions existed (tables at its top level) still reads
as one; the first publish into it removes those files.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import schemas
from pipeline.storage import mirror, read_cache, remote
from pipeline.storage.files import atomic_write_text, atomic_write_with

LANCE_DIR = "lancedb"
MANIFEST = "index.json"
VERSIONS_DIR = "versions"
STAGING_DIR = "staging"
SCRATCH_DIR = "scratch"  # in staging: steps' hand-overs (the PDF parses), removed at publish
RUN_MARKER = ".run.json"  # in staging: which run it belongs to, when it started
VERSION_INFO = "version.json"  # in a version: its manifest
LLM_CACHE_DIRS = ("cache/llm", "cache/llm_memo")  # per-entry files, refreshed on every hit
LLM_KEYS_DIR = "llm_keys"  # in a version: <shard>.txt, the LLM cache keys the shard used
FORMAT = 1
# Columns of free text written without Parquet min/max statistics: a statistic holds a copy
# of the value in the writer and in the footer, and no reader filters text by range (writing
# a 151 MB document's shard took +1.0 GB and 5.6 s with them, +0.35 GB and 1.8 s without).
FREE_TEXT = frozenset({"text", "full_content", "description", "summary", "raw_data"})


def parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """The options every table's Parquet files are written with."""
    ranked = [n for n in schema.names if n not in FREE_TEXT]
    return {"compression": "zstd", "write_statistics": ranked}


# Lance's Rust logger warns on every first write of a table; keep real errors only. Read
# when lancedb is first imported, which happens after this module is.
os.environ.setdefault("LANCEDB_LOG", "error")


# ---------------------------------------------------------------------------- versions


def _local(root: str | Path) -> Path:
    """The local folder of `root`: for an object-store URL (`s3://…`) or its mirror folder,
    the mirror, brought up to the store's current version (pipeline.storage.remote.refresh)."""
    if mirror.is_url(root) or (Path(root) / mirror.MARKER).exists():
        return remote.refresh(root)
    return Path(root)


def read_manifest(root: str | Path) -> dict[str, Any] | None:
    """The output folder's manifest, or None when nothing was published with one."""
    return _read_manifest(_local(root))


def _read_manifest(root: Path) -> dict[str, Any] | None:
    data = _read_json(root / MANIFEST)
    return data if isinstance(data.get("version"), str) else None


def manifest_stamp(root: str | Path) -> tuple[int, int, int] | None:
    """(mtime, size, inode) of the manifest: changes whenever a version is published."""
    try:
        st = (_local(root) / MANIFEST).stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def resolve(root: str | Path) -> Path:
    """The folder holding the tables to read: the current version of an output folder, or
    `root` itself (a version or staging folder, or an output folder from before versions)."""
    root = _local(root)
    manifest = _read_manifest(root)
    if manifest is None:
        return root
    return root / VERSIONS_DIR / manifest["version"]


def is_index(root: str | Path) -> bool:
    """Whether `root` is an output folder holding a readable index."""
    folder = resolve(root)
    return table_path(folder, "text_units").exists() or (folder / LANCE_DIR).is_dir()


def staging_dir(root: str | Path) -> Path:
    return Path(root) / STAGING_DIR


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _read_marker(staging: Path) -> dict[str, Any]:
    return _read_json(staging / RUN_MARKER)


def staging_owner(root: str | Path) -> str | None:
    """The run whose version is in the staging folder (None: no staging folder)."""
    return _read_marker(staging_dir(root)).get("run_id")


def _link_tree(src: Path, dst: Path, skip: frozenset[str] = frozenset()) -> None:
    """Hard-link every file of `src` into `dst` (a copy where links are impossible)."""
    for dirpath, dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        if rel == Path("."):
            dirnames[:] = [d for d in dirnames if d not in skip]
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            if rel == Path(".") and (name in skip or name.startswith(".")):
                continue
            try:
                os.link(Path(dirpath) / name, dst / rel / name)
            except OSError:
                shutil.copy2(Path(dirpath) / name, dst / rel / name)


# What of an output folder's top level is not a table of the legacy flat layout.
_NOT_LEGACY = frozenset({MANIFEST, VERSIONS_DIR, STAGING_DIR, "cache"})


def begin(root: str | Path, run_id: str, parent_run_id: str | None = None) -> Path:
    """The staging folder of run `run_id`, ready to write. The caller holds the output lock.

    A staging folder left by another run is discarded — unless this run re-executes it
    (`parent_run_id`, Dagster's "re-execute from failure"), which keeps its finished
    tables — and a fresh one starts as links of the current version."""
    root = Path(root)
    staging = staging_dir(root)
    owner = staging_owner(root)
    if owner == run_id:
        return staging
    if owner is None or owner != parent_run_id:
        shutil.rmtree(staging, ignore_errors=True)
        current = resolve(root)
        if current != root:
            _link_tree(current, staging)
        elif any((root / f"{n}.parquet").exists() for n in schemas.TABLES):
            _link_tree(root, staging, skip=_NOT_LEGACY | {".docgraph.lock"})
    started = _read_marker(staging).get("started")  # a resumed run: its parent's start
    staging.mkdir(parents=True, exist_ok=True)
    marker = staging / RUN_MARKER
    if started is None:  # the file system's clock, as the cache entries' mtimes it is held to
        atomic_write_text(marker, "{}")
        started = marker.stat().st_mtime
    atomic_write_text(marker, json.dumps({"run_id": run_id, "started": started}))
    return staging


def publish(root: str | Path, run_id: str, keep: int = 2) -> dict[str, Any]:
    """Make run `run_id`'s staging folder the current version, in one atomic step (the
    manifest is replaced last), then delete versions beyond the newest `keep`."""
    root = Path(root)
    staging = staging_dir(root)
    marker = _read_marker(staging)
    owner = marker.get("run_id")
    if owner != run_id:
        raise RuntimeError(f"staging folder of {root} belongs to run {owner}, not {run_id}")
    version = f"{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}-{run_id[:8]}"
    tables = {n: table_rows(staging, n) for n in schemas.TABLES if table_files(staging, n)}
    previous = read_manifest(root)
    manifest = {
        "format": FORMAT,
        "version": version,
        "run_id": run_id,
        "run_started": marker.get("started"),
        "published": datetime.now(UTC).isoformat(timespec="seconds"),
        "previous": previous["version"] if previous else None,
        "tables": tables,
    }
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    shutil.rmtree(staging / SCRATCH_DIR, ignore_errors=True)  # hand-overs: no version's
    atomic_write_text(staging / VERSION_INFO, text)  # the version describes itself
    (staging / RUN_MARKER).unlink()
    target = root / VERSIONS_DIR / version
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staging, target)
    atomic_write_text(root / MANIFEST, text)
    prune(root, keep)
    return manifest


def versions(root: str | Path) -> list[str]:
    """Published version names, oldest first (names start with their UTC publish time)."""
    folder = remote.local_root(root) / VERSIONS_DIR
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def prune(root: str | Path, keep: int) -> list[str]:
    """Delete all but the newest `keep` versions (never the current one), and the tables of
    the pre-version flat layout; returns the deleted version names."""
    root = Path(root)
    manifest = read_manifest(root)
    current = manifest["version"] if manifest else None
    names = versions(root)
    doomed = [v for v in names[: max(0, len(names) - max(1, keep))] if v != current]
    for name in doomed:
        shutil.rmtree(root / VERSIONS_DIR / name, ignore_errors=True)
    if manifest is not None:  # the flat layout's leftovers: readers follow the manifest now
        for name in schemas.TABLES:
            (root / f"{name}.parquet").unlink(missing_ok=True)
        (root / "communities_state.json").unlink(missing_ok=True)
        shutil.rmtree(root / LANCE_DIR, ignore_errors=True)
    return doomed


def record_cache_keys(folder: str | Path, shard: str, keys: list[str]) -> None:
    """Record the LLM cache keys shard `shard`'s extraction used in the run's `folder`: a
    later run that skips the shard keeps them (sweep_cache), its version still uses them."""
    text = "\n".join(sorted(set(keys)))
    atomic_write_text(Path(folder) / LLM_KEYS_DIR / f"{shard}.txt", text + "\n" if text else "")


def kept_since(root: str | Path) -> float | None:
    """When the run of the oldest kept version started (by the file system's clock, as cache
    entries' mtimes are): whatever a kept version's run used, it used since then. None when
    a kept version's start is unknown (then no cache may be swept)."""
    root = Path(root)
    starts = [
        _read_json(root / VERSIONS_DIR / v / VERSION_INFO).get("run_started")
        for v in versions(root)
    ]
    if not starts or not all(isinstance(t, int | float) for t in starts):
        return None
    return min(starts)


def sweep_cache(root: str | Path) -> int:
    """Delete LLM cache and memo entries that no kept version used: neither refreshed by a
    kept version's run (a hit refreshes an entry's mtime: pipeline.llm.cache.DiskCache) nor
    recorded by a kept version's shards (record_cache_keys). They hold answers drawn from
    documents since deleted or edited. Returns how many went; none when a kept version's
    start is unknown."""
    root = Path(root)
    cutoff = kept_since(root)
    if cutoff is None:
        return 0
    listed: set[str] = set()
    for version in versions(root):
        for path in (root / VERSIONS_DIR / version / LLM_KEYS_DIR).glob("*.txt"):
            listed.update(path.read_text(encoding="utf-8").split())
    removed = 0
    for folder in LLM_CACHE_DIRS:
        for path in (root / folder).rglob("*.json"):
            with contextlib.suppress(OSError):
                if path.stem not in listed and path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
    return removed


# ---------------------------------------------------------------------------- tables


def table_path(root: str | Path, name: str) -> Path:
    """Where table `name` lives in `root` (resolved like `read_table`): `<name>.parquet`, or
    the folder `<name>/` of a sharded table (one `<shard>.parquet` per document shard)."""
    folder = resolve(root)
    sharded = folder / name
    return sharded if sharded.is_dir() else folder / f"{name}.parquet"


def table_files(root: str | Path, name: str) -> list[Path]:
    """The Parquet files of table `name`, in shard order (none when it was never written)."""
    path = table_path(root, name)
    if path.is_dir():
        return sorted(path.glob("*.parquet"))
    return [path] if path.exists() else []


def table_rows(root: str | Path, name: str) -> int:
    """Row count of table `name` from the Parquet footers (no data read)."""
    return sum(pq.read_metadata(f).num_rows for f in table_files(root, name))


def write_table(root: str | Path, name: str, df: pl.DataFrame) -> Path:
    """Write `df` as table `name` (conformed to its schema), atomically; inside an in-process
    run its columns but free text are kept as if read from the file (read_cache.written)."""
    table = schemas.conform(df, name)
    with read_cache.written(Path(root) / f"{name}.parquet", df, table, skip=FREE_TEXT):
        return write_arrow(root, name, table)


def write_tables(root: str | Path, frames: dict[str, pl.DataFrame]) -> dict[str, Path]:
    """`write_table` of each frame (taken out of `frames`, let go once written), in order,
    two at a time when they hold WRITE_TOGETHER_BYTES or less: Parquet encodes outside the
    GIL (a 40k edit's graph tables, 382 MB: 1.2-1.5 s one at a time, 0.7 s two), but one
    151 MB file's (817 MB) made its graph step peak 112 MB higher so."""
    together = sum(f.estimated_size() for f in frames.values()) <= WRITE_TOGETHER_BYTES
    with ThreadPoolExecutor(max_workers=2 if together else 1) as pool:
        written = {}
        while frames:
            name = next(iter(frames))
            written[name] = pool.submit(write_table, root, name, frames.pop(name))
        return {name: path.result() for name, path in written.items()}


WRITE_TOGETHER_BYTES = 512 * 2**20  # the frames' estimated size in memory, all together


def write_arrow(root: str | Path, name: str, table: pa.Table) -> Path:
    if read_manifest(root) is not None:
        raise ValueError(f"{root} is a published output folder: write into a run's staging")
    path = Path(root) / f"{name}.parquet"
    options = parquet_options(table.schema)
    atomic_write_with(path, lambda tmp: pq.write_table(table, tmp, **options))
    shutil.rmtree(Path(root) / name, ignore_errors=True)  # it was sharded before
    return path


def read_table(root: str | Path, name: str, columns: list[str] | None = None) -> pl.DataFrame:
    """Table `name` of `root` (an output folder's current version, or that folder), all its
    shards; only `columns` when given; its empty frame when it was never written."""
    files = table_files(root, name)
    if not files:
        frame = schemas.empty(name)
        return frame.select(columns) if columns else frame
    if len(files) == 1:  # a corpus-wide table: read again by later steps (read_cache)
        return read_cache.read(files[0], columns)
    return pl.read_parquet(files, columns=columns)


def scan_table(root: str | Path, name: str) -> pl.LazyFrame:
    """Table `name` as a lazy frame (nothing read until collected: filter and select first)."""
    files = table_files(root, name)
    return pl.scan_parquet(files) if files else schemas.empty(name).lazy()


def import_lance(writers: bool = True) -> None:
    """Import what the Lance writers after this step need now, while it waits for other work
    anyway: Lance's own package (pylance, ~0.4 s of CPU) and, when `writers` (a table may be
    made whole: lancedb makes tables and their full-text index), lancedb (~1.5 s, most of it
    its REST client's pydantic models). A run that carries rows over needs pylance only."""
    import lance  # noqa: F401

    if writers:
        import lancedb  # noqa: F401


def lance_dataset(root: str | Path, name: str):
    """Lance table `name` of `root` (resolved like `read_table`) opened with pylance, or None
    when there is none. For reading it: pylance loads in a fraction of lancedb's time."""
    path = resolve(root) / LANCE_DIR / f"{name}.lance"
    if not path.is_dir():
        return None
    import lance

    return lance.dataset(str(path))


def lance_db(root: str | Path):
    """The LanceDB folder of `root` (resolved like `read_table`)."""
    import lancedb

    path = resolve(root) / LANCE_DIR
    path.mkdir(parents=True, exist_ok=True)
    return lancedb.connect(str(path))
