"""Object-storage outputs (`output_dir: s3://bucket/prefix`): a local mirror, published whole.

A run never writes object storage piecemeal. For an `s3://` output every writer and reader
works in a **local mirror** folder (`storage.mirror_dir`, default
`$XDG_CACHE_HOME/docgraph/mirrors/<hash of endpoint + URL>`; settings map `output_dir` to
it, see `pipeline.config`; the naming is pipeline.storage.mirror, the S3 calls
pipeline.storage.object_store), which holds the same layout as a local output folder
(pipeline.storage.store). So staging with hard links, atomic writes, incremental shards, the writer
lock and the caches work unchanged; only three moments touch the store:

- **pull** (`pull`, the first step of a run, under the writer lock; `refresh` for readers):
  the mirror is made to hold exactly the store's current version — `index.json`, then the
  files of `versions/<v>/` missing locally or of another size (a version's files never
  change once published, so a size check suffices; index.json is written last, so a
  mirror names only versions it holds whole) — and local versions the store no longer has
  go. A writer's pull also fetches the caches (`cache/embeddings/*.parquet`, `cache/llm/…`
  entries, with their store time as mtime so `store.sweep_cache` judges them as before).
- **push** (`push`, in the `published_index` step after the local publish and the cache
  sweep): the new version's files are uploaded — a file that was a hard link of the previous
  version's (a carried-over shard table, noted by `carried_over` before the local publish,
  which may prune that version) is copied server-side instead — then the cache
  entries the store lacks (and the LLM entries this run used, so their store time is fresh),
  and **last** `index.json`: one PUT, atomic, so a reader of the store sees the old version
  or the new one whole. Then versions pruned locally and LLM cache entries swept locally are
  deleted from the store.
- **readers** (`store.read_manifest`/`resolve`/`read_table` given an `s3://` URL or the
  mirror folder, `GraphIndex.open("s3://…")`): `refresh` pulls the current version into the
  mirror (one GET of index.json when nothing changed; at most once a second per mirror)
  unless a local writer holds the mirror's lock, then everything reads local Parquet and
  Lance files. LanceDB could open `s3://` tables natively, but a version's Lance tables are
  small beside the round trips of a remote full-text/vector search, and the mirror keeps
  one code path for every table.

Credentials: only the standard AWS variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_SESSION_TOKEN`, profiles, instance roles: the AWS SDK's default chain inside pyarrow's
S3 filesystem); the endpoint from `AWS_ENDPOINT_URL_S3` or `AWS_ENDPOINT_URL` (MinIO, moto,
R2, …), the region from `AWS_REGION` / `AWS_DEFAULT_REGION`. Nothing here writes, logs or
raises them: errors name the URL and the operation only.

One writer: the lock (pipeline.storage.lock) is a local flock on the mirror, so it serialises runs
on one machine only. Runs on one object-store output from several machines should be
serialised by Dagster's run queue (`tag_concurrency_limits` on `docgraph/output`,
dagster.yaml): there is no remote lease (pyarrow's S3 filesystem cannot send a conditional
PUT). Should two machines' runs overlap anyway, the store stays whole: a writer's pull
records the store's index.json and versions (`PULLED`, in the mirror), and its push
- reads index.json again right before its PUT: another writer published since the pull ->
  this run's version is not published (its uploads deleted, RemoteError naming both; the
  next run starts from the store's version). Left: the moment between that read and the PUT;
- deletes only versions the store held at its pull: never the files of a version another
  writer is still uploading, which its index.json is about to name.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from pipeline.storage.files import atomic_write_bytes, files_under
from pipeline.storage.mirror import is_url, mirror_for, url_of
from pipeline.storage.object_store import (
    RemoteError,
    download,
    fail,
    filesystem,
    list_files,
    object_key,
    parallel,
    read_bytes,
    subdirs,
    upload,
)

log = logging.getLogger(__name__)

MANIFEST = "index.json"  # = store.MANIFEST (store imports this module)
PULLED = (
    ".docgraph-pulled.json"  # in a mirror: the store's index.json and versions at a writer's pull
)
VERSIONS_DIR = "versions"
CACHE_DIR = "cache"
LLM_CACHE_DIRS = ("cache/llm", "cache/llm_memo")  # = store.LLM_CACHE_DIRS
EMBEDDING_CACHE_DIR = "cache/embeddings"  # = pipeline.vectors.embed_cache.embedding_cache_dir
REFRESH_EVERY_S = 1.0  # a reader asks the store for index.json at most this often per mirror

_last_refresh: dict[str, float] = {}
_refresh_lock = threading.Lock()


# ---------------------------------------------------------------------------- local folders


def local_root(root: str | Path, base: str | Path | None = None) -> Path:
    """The local folder behind `root`: its mirror for a URL, `root` itself otherwise."""
    if is_url(root):
        if base is None:
            base = _configured_base()
        return mirror_for(str(root), base)
    return Path(root)


def _configured_base() -> str | None:
    """storage.mirror_dir from the settings (file / DOCGRAPH_ variables), when they load."""
    try:
        from pipeline.config import load_settings

        return load_settings().storage.mirror_dir
    except Exception:  # noqa: BLE001 - a reader given a URL needs no valid settings file
        return None


# ---------------------------------------------------------------------------- pull


def pull(root: str | Path, caches: bool = False) -> dict[str, int]:
    """Make the mirror `root` hold exactly the store's current version (see the module
    docstring); with `caches`, also fetch the cache files it lacks. Returns counts."""
    root = Path(root)
    url = url_of(root)
    if url is None:
        raise ValueError(f"{root} mirrors no object-store URL")
    stats = {"files_downloaded": 0, "bytes_downloaded": 0, "files_removed": 0}
    try:
        s3 = filesystem()
        remote_manifest = read_bytes(s3, object_key(url, MANIFEST))
        local_manifest = root / MANIFEST
        local_bytes = local_manifest.read_bytes() if local_manifest.exists() else None
        if remote_manifest is None:
            if local_bytes is not None:  # the store holds no index: neither does its mirror
                local_manifest.unlink()
                shutil.rmtree(root / VERSIONS_DIR, ignore_errors=True)
        elif remote_manifest != local_bytes:
            version = json.loads(remote_manifest)["version"]
            _pull_version(s3, url, root, version, stats)
            atomic_write_bytes(local_manifest, remote_manifest)  # last: names a whole version
            kept = set(subdirs(s3, object_key(url, VERSIONS_DIR)))
            for old in (root / VERSIONS_DIR).iterdir():
                if old.is_dir() and old.name not in kept:
                    shutil.rmtree(old, ignore_errors=True)
        if caches:  # a writer's pull: what its push checks the store against
            _pull_caches(s3, url, root, stats)
            _record(root, remote_manifest, subdirs(s3, object_key(url, VERSIONS_DIR)))
    except RemoteError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        raise fail("pull from", url, exc) from None
    if stats["files_downloaded"]:
        log.info(
            "pulled %d files (%d bytes) of %s into its mirror",
            stats["files_downloaded"],
            stats["bytes_downloaded"],
            url,
        )
    return stats


def _pull_version(s3, url: str, root: Path, version: str, stats: dict[str, int]) -> None:
    rel_version = f"{VERSIONS_DIR}/{version}"
    remote = list_files(s3, object_key(url, rel_version))
    if not remote:
        raise RemoteError(f"pull from {url}: index.json names version {version}, which is missing")
    folder = root / rel_version
    local = files_under(folder)
    todo = [r for r, i in remote.items() if r not in local or local[r].stat().st_size != i.size]

    def fetch(rel: str) -> int:
        return download(s3, object_key(url, f"{rel_version}/{rel}"), folder / rel)

    sizes = parallel(fetch, todo)
    stats["files_downloaded"] += len(todo)
    stats["bytes_downloaded"] += sum(sizes)
    for rel in set(local) - set(remote):  # the store's version is the truth
        local[rel].unlink(missing_ok=True)
        stats["files_removed"] += 1


def _pull_caches(s3, url: str, root: Path, stats: dict[str, int]) -> None:
    remote = list_files(s3, object_key(url, CACHE_DIR))
    folder = root / CACHE_DIR
    todo = [(r, i) for r, i in remote.items() if not (folder / r).exists()]

    def fetch(item) -> int:
        rel, info = item
        mtime = info.mtime.timestamp() if info.mtime is not None else None
        return download(s3, object_key(url, f"{CACHE_DIR}/{rel}"), folder / rel, mtime)

    sizes = parallel(fetch, todo)
    stats["files_downloaded"] += len(todo)
    stats["bytes_downloaded"] += sum(sizes)


def refresh(root: str | Path, base: str | Path | None = None, force: bool = False) -> Path:
    """The local folder to read for `root` (a URL, a mirror, or a plain folder), a mirror
    brought up to the store's current version first — unless a local writer holds the
    mirror (it is then at least as new as the store), or it was refreshed under a second
    ago. A plain folder is returned as it is."""
    url = url_of(root)
    local = local_root(root, base)
    if url is None:
        return local
    key = str(local)
    now = time.monotonic()
    with _refresh_lock:
        if not force and now - _last_refresh.get(key, -1e9) < REFRESH_EVERY_S:
            return local
        from pipeline.storage import lock

        if lock.holder(local) is None:
            pull(local)
        _last_refresh[key] = time.monotonic()
    return local


# ---------------------------------------------------------------------------- push


def carried_over(root: str | Path) -> set[str]:
    """The files of the mirror `root`'s staging folder that are the current version's own
    (hard links: shard tables a run did not recompute). Taken before the local publish,
    which may prune that version: `push` copies them server-side instead of uploading."""
    root = Path(root)
    try:
        current = json.loads((root / MANIFEST).read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return set()
    previous = root / VERSIONS_DIR / current
    out = set()
    for rel, path in files_under(root / "staging").items():
        with contextlib.suppress(OSError):
            if os.path.samefile(path, previous / rel):
                out.add(rel)
    return out


def push(
    root: str | Path, manifest: dict[str, Any], carried: set[str] | None = None
) -> dict[str, int]:
    """Upload the version `manifest` names (published locally in the mirror `root`), the
    new cache entries, then index.json; delete what the local publish pruned or swept.
    `carried`: files that are the previous version's (`carried_over`), copied server-side.
    Returns counts (no paths, no credentials) for the run's metadata."""
    root = Path(root)
    url = url_of(root)
    if url is None:
        raise ValueError(f"{root} mirrors no object-store URL")
    stats = dict.fromkeys(
        (
            "files_uploaded",
            "bytes_uploaded",
            "files_copied",
            "bytes_copied",
            "files_skipped",
            "cache_files_uploaded",
            "cache_bytes_uploaded",
            "objects_deleted",
        ),
        0,
    )
    pulled = _pulled(root)
    try:
        s3 = filesystem()
        _push_version(s3, url, root, manifest, carried or set(), stats)
        _push_caches(s3, url, root, manifest, stats)
        manifest_bytes = (root / MANIFEST).read_bytes()
        _refuse_if_moved_on(s3, url, manifest["version"], pulled)
        with s3.open_output_stream(object_key(url, MANIFEST)) as out:  # last, in one PUT
            out.write(manifest_bytes)
        if pulled is not None:  # the store is now what this mirror holds
            pulled = _record(root, manifest_bytes, [*pulled["versions"], manifest["version"]])
        _delete_pruned(s3, url, root, stats, pulled)
    except RemoteError:
        raise
    except (OSError, ValueError) as exc:
        raise fail("publish to", url, exc) from None
    with _refresh_lock:
        _last_refresh[str(root)] = time.monotonic()
    return stats


def _push_version(
    s3, url: str, root: Path, manifest: dict[str, Any], carried: set[str], stats
) -> None:
    version, previous = manifest["version"], manifest.get("previous")
    rel_version = f"{VERSIONS_DIR}/{version}"
    local = files_under(root / rel_version)
    remote = list_files(s3, object_key(url, rel_version))  # a retried push resumes
    prev_remote = list_files(s3, object_key(url, f"{VERSIONS_DIR}/{previous}")) if previous else {}

    def send(rel: str) -> tuple[str, int]:
        path = local[rel]
        size = path.stat().st_size
        if rel in remote and remote[rel].size == size:
            return "skipped", 0
        dst = object_key(url, f"{rel_version}/{rel}")
        if rel in carried and rel in prev_remote and prev_remote[rel].size == size:
            s3.copy_file(object_key(url, f"{VERSIONS_DIR}/{previous}/{rel}"), dst)  # server-side
            return "copied", size
        return "uploaded", upload(s3, path, dst)

    for how, size in parallel(send, sorted(local)):
        stats[f"files_{how}"] += 1
        if how != "skipped":
            stats[f"bytes_{how}"] += size


def _push_caches(s3, url: str, root: Path, manifest: dict[str, Any], stats) -> None:
    local = files_under(root / CACHE_DIR)
    if not local:
        return
    remote = list_files(s3, object_key(url, CACHE_DIR))
    started = manifest.get("run_started")
    llm = tuple(d[len(CACHE_DIR) + 1 :] + "/" for d in LLM_CACHE_DIRS)

    def due(rel: str) -> bool:
        path = local[rel]
        if rel not in remote or remote[rel].size != path.stat().st_size:
            return True
        # an LLM entry this run used (a hit refreshes its mtime): refresh its store time too
        return (
            rel.startswith(llm)
            and isinstance(started, int | float)
            and path.stat().st_mtime >= started
        )

    todo = [r for r in sorted(local) if due(r)]
    sizes = parallel(lambda r: upload(s3, local[r], object_key(url, f"{CACHE_DIR}/{r}")), todo)
    stats["cache_files_uploaded"] += len(todo)
    stats["cache_bytes_uploaded"] += sum(sizes)


def _record(root: Path, manifest: bytes | None, versions: list[str]) -> dict[str, Any]:
    """Record in the mirror what the store holds (see PULLED)."""
    pulled = {"manifest": manifest and manifest.decode(), "versions": sorted(set(versions))}
    atomic_write_bytes(root / PULLED, json.dumps(pulled).encode())
    return pulled


def _pulled(root: Path) -> dict[str, Any] | None:
    """What the mirror's last writer pull saw of the store (None: no record)."""
    with contextlib.suppress(OSError, ValueError):
        pulled = json.loads((root / PULLED).read_text(encoding="utf-8"))
        return pulled if isinstance(pulled, dict) and "versions" in pulled else None
    return None


def _refuse_if_moved_on(s3, url: str, version: str, pulled: dict[str, Any] | None) -> None:
    """RemoteError (`version`'s uploads deleted) if another writer published since the pull."""
    if pulled is None:
        return
    now = read_bytes(s3, object_key(url, MANIFEST))
    if (None if now is None else now.decode()) == pulled.get("manifest"):
        return
    s3.delete_dir(object_key(url, f"{VERSIONS_DIR}/{version}"))
    raise RemoteError(
        f"publish to {url}: another writer published {_named(now)} after this run pulled "
        f"{_named(pulled.get('manifest'))}; this run's version {version} is not published there "
        "(run again to index on top of the store's version)"
    )


def _named(manifest: str | bytes | None) -> str:
    try:
        return f"version {json.loads(manifest)['version']}" if manifest else "no index"
    except (ValueError, KeyError, TypeError):
        return "an unreadable index.json"


def _delete_pruned(s3, url: str, root: Path, stats, pulled: dict[str, Any] | None) -> None:
    """Versions the local publish pruned (of those the store held at the pull, not another
    writer's upload), LLM cache entries swept and embedding cache files merged locally."""
    kept = {p.name for p in (root / VERSIONS_DIR).iterdir() if p.is_dir()}
    known = set(pulled["versions"]) if pulled else None
    for name in subdirs(s3, object_key(url, VERSIONS_DIR)):
        if name not in kept and (known is None or name in known):
            stats["objects_deleted"] += len(
                list_files(s3, object_key(url, f"{VERSIONS_DIR}/{name}"))
            )
            s3.delete_dir(object_key(url, f"{VERSIONS_DIR}/{name}"))
    for folder in (*LLM_CACHE_DIRS, EMBEDDING_CACHE_DIR):  # swept, or merged (compact_cache)
        gone = [
            r for r in list_files(s3, object_key(url, folder)) if not (root / folder / r).exists()
        ]
        for rel in gone:
            s3.delete_file(object_key(url, f"{folder}/{rel}"))
        stats["objects_deleted"] += len(gone)


__all__ = [
    "carried_over",
    "local_root",
    "pull",
    "push",
    "refresh",
]
