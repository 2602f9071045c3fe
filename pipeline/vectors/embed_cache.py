"""The embedding cache on disk between runs: where it lives, and its upkeep at publish.

Why its own module: `CachedEmbedder` (pipeline.vectors.embed) writes the cache during a run;
what happens to it afterwards is the publish step's business. `sweep_unused` drops the
vectors no run of a kept version used (each `embed` call records the keys it used in
USED_DIR): sentence embeddings are partly invertible, so the vectors of deleted and edited
text must leave the disk as the text does (the LLM cache is swept the same way:
pipeline.storage.store.sweep_cache). `compact_cache` keeps the file count bounded.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from pipeline.storage.files import atomic_write_with


def embedding_cache_dir(output_dir: str | Path) -> Path:
    """The embedding cache of an output folder (one sub-folder per model)."""
    return Path(output_dir) / "cache" / "embeddings"


# In each model's folder of the cache: the keys each `embed` call used, a file per call.
USED_DIR = "used"


def _model_dirs(cache_dir: str | Path) -> list[Path]:
    """The cache's folders, one per model (each holds its vector files and USED_DIR)."""
    return sorted(p for p in Path(cache_dir).glob("*") if p.is_dir())


def sweep_unused(cache_dir: str | Path, since: float | None) -> int:
    """Delete the vectors no `embed` call used since `since` (the file system time the run
    of the oldest kept version started: store.kept_since), and the older use records; returns
    how many vectors went. Every run looks up again every vector its tables hold (the vector
    tables are made in every run's tail), so what stays is what the kept versions use: the
    vectors of deleted and edited text go once no kept version holds that text. Nothing when
    `since` is None (a kept version's start unknown). Run it with no other writer (the
    output lock held, no step embedding)."""
    if since is None:
        return 0
    removed = 0
    for folder in _model_dirs(cache_dir):
        used = _used_since(folder / USED_DIR, since)
        for path in sorted(folder.glob("*.parquet")):
            removed += _keep_only(path, used)
    return removed


def _used_since(folder: Path, since: float) -> pl.DataFrame:
    """The keys recorded in `folder` since `since`; older records are deleted."""
    recent = []
    for path in sorted(folder.glob("*.parquet")):
        if path.stat().st_mtime >= since:
            recent.append(path)
        else:
            path.unlink()
    if not recent:
        return pl.DataFrame(schema={"key": pl.Utf8})
    return pl.scan_parquet(recent).select("key").unique().collect()


def _keep_only(path: Path, used: pl.DataFrame) -> int:
    """Drop the rows of the vector file `path` whose key is not in `used`; returns how many
    went. What is left is written to a new file (an object store uploads it as new), and
    only then is `path` deleted: a crash leaves duplicates, never a gap."""
    scan = pl.scan_parquet(path).select("key", "vector")
    kept = scan.join(used.lazy(), on="key", how="semi")
    total = scan.select(pl.len()).collect().item()
    left = kept.select(pl.len()).collect().item()
    if left == total:
        return 0
    if left:
        name = f"{time.time_ns():020d}-kept-{left}.parquet"
        atomic_write_with(path.parent / name, lambda tmp: kept.sink_parquet(tmp))
    path.unlink()
    return total - left


# Files of one model's cache above which `compact_cache` merges: each embed call that met a new
# text wrote one, and a process reads every file's keys once (a nightly run adds 2-4).
CACHE_MAX_FILES = 64


def compact_cache(cache_dir: str | Path, max_files: int = CACHE_MAX_FILES) -> int:
    """Merge the smallest files of each model's cache into one once it holds more than
    `max_files`, leaving max_files / 2: the file count stays bounded and a compaction
    rewrites only small files, never the whole cache. The merged file is written (streamed)
    before the others go, so a crash leaves duplicates (harmless), never a gap. Run it with
    no other writer (the output lock held, no step embedding). Returns files removed."""
    removed = 0
    for folder in _model_dirs(cache_dir):
        files = sorted(folder.glob("*.parquet"), key=lambda f: (f.stat().st_size, f.name))
        if len(files) <= max_files:
            continue
        small = files[: len(files) - max_files // 2 + 1]
        name = f"{time.time_ns():020d}-merged-{len(small)}.parquet"
        scan = pl.scan_parquet(small).select("key", "vector")
        atomic_write_with(folder / name, lambda tmp, scan=scan: scan.sink_parquet(tmp))
        for path in small:
            path.unlink()
        removed += len(small)
    return removed
