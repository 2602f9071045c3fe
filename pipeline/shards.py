"""Document shards: the unit of work of the per-document stages (Dagster partitions).

A document's shard is a hash of its path relative to the input folder, modulo the shard
count (`storage.shards`), so adding, editing or deleting a file never moves another file
to another shard: only that file's shard has to run again. Shards, not documents, are the
partitions because Dagster advises at most ~100k partitions per asset.

A shard's fingerprint hashes the path, size and mtime of its files (no content read: it
is what a sensor polls) with the settings the per-document stages depend on, so a changed
chunk size re-runs every shard while a changed report setting re-runs none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from pipeline.config import Settings
from pipeline.ingest.walk import walk_input


def shard_keys(n: int) -> list[str]:
    """The partition keys of `n` shards: zero-padded, so they sort as numbers."""
    width = max(3, len(str(n - 1)))
    return [f"{i:0{width}d}" for i in range(n)]


def shard_of(rel_path: str, n: int) -> str:
    """The shard of the file at `rel_path` (posix, relative to the input folder)."""
    digest = hashlib.sha256(rel_path.encode("utf-8")).digest()
    return shard_keys(n)[int.from_bytes(digest[:8], "big") % n]


def stage_settings_digest(settings: Settings) -> str:
    """Hash of the settings the per-document stages read (structure, chunking, extraction,
    embedding, the LLM's endpoint and model in LLM mode, the shard count)."""
    llm = settings.llm
    parts = [
        settings.structure.model_dump_json(),
        settings.chunking.model_dump_json(),
        settings.extraction.model_dump_json(),
        settings.embedding.model_dump_json(),
        str(settings.storage.shards),
        f"{llm.enabled}|{llm.base_url}|{llm.chat_model}|{llm.temperature}" if llm.enabled else "",
    ]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def fingerprints(
    input_dir: str | Path, exclude: Iterable[str | Path], n: int, salt: str = ""
) -> dict[str, str]:
    """Shard key -> fingerprint of its files, for every shard (an empty one too)."""
    hashes = {key: hashlib.sha256(salt.encode("utf-8")) for key in shard_keys(n)}
    root = Path(input_dir)
    if root.is_dir():
        for e in walk_input(root, exclude):
            if e.hidden:
                continue
            if e.path is None:
                line = f"{e.rel}\x1f{e.reason}\n"
            else:
                try:
                    st = e.path.stat()
                except OSError:  # deleted since the walk: the next poll sees it gone
                    continue
                line = f"{e.rel}\x1f{st.st_size}\x1f{st.st_mtime_ns}\n"
            hashes[shard_of(e.rel, n)].update(line.encode("utf-8"))
    return {key: h.hexdigest()[:32] for key, h in hashes.items()}


def changed(previous: dict[str, str] | None, current: dict[str, str]) -> list[str]:
    """Shards whose fingerprint differs from `previous` (all of them without one)."""
    previous = previous or {}
    return sorted(k for k, fp in current.items() if previous.get(k) != fp)
