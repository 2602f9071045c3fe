"""The on-disk cache of LLM answers, so a batch index never pays twice for the same call.

Keyed by (model, messages, params), never the api key or the endpoint; written atomically so
a SIGKILL leaves no partial entry; it holds only usable answers (the client caches what its
check accepted, or a remembered cut), so a re-run asks again what failed. An answer recovered by
a re-ask is held under the first prompt's key too, so a re-run pays for neither call.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pipeline.storage.files import atomic_write_text


class DiskCache:
    """One JSON file per key: `<root>/<key[:2]>/<key>.json`. Written to a temp file in the same
    folder then `os.replace`d, so a reader sees a whole entry or none; stray temp files (a
    killed writer) are never read. An unreadable entry is a miss. A hit refreshes the entry's
    mtime: entries no kept index version used are swept after a publish (store.sweep_cache),
    so answers drawn from a deleted document do not stay on disk."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.used: list[str] = []  # keys read or written, in order: what a shard's run used

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        path = self.path(key)
        try:
            with open(path, encoding="utf-8") as fh:
                entry = json.load(fh)
        except (OSError, ValueError):
            return None
        if not (isinstance(entry, dict) and isinstance(entry.get("text"), str)):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        self.used.append(key)
        return entry

    def put(self, key: str, entry: dict) -> None:
        text = json.dumps(entry, ensure_ascii=False, sort_keys=True)
        atomic_write_text(self.path(key), text, fsync=True)
        self.used.append(key)


def cache_key(model: str, messages: list[dict], params: dict[str, Any]) -> str:
    """sha256 of (model, messages, params) — never the key or the endpoint."""
    blob = json.dumps(
        {"model": model, "messages": messages, "params": params},
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def cache_entry(model: str, stage: str, text: str, prompt: int, completion: int) -> dict:
    """One cache entry: the answer text with what produced it and its token usage."""
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {"model": model, "stage": stage, "text": text, "usage": usage}


def memo_store(cache: DiskCache | None) -> DiskCache | None:
    """Per-item memories (extracted graphs, summaries, reports) next to a client's call
    cache, not inside it: that folder holds exactly one file per call made. None when the
    client caches nothing."""
    if cache is None:
        return None
    return DiskCache(cache.root.parent / f"{cache.root.name}_memo")
