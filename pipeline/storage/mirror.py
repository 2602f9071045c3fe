"""Object-store URLs and the local mirror folders that stand for them: naming, no network.

Settings map an `s3://bucket/prefix` output_dir to its mirror folder (pipeline.config), so this
module imports nothing of the settings; the sync with the store is pipeline.storage.remote.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pipeline.storage.files import atomic_write_bytes

SCHEMES = ("s3://",)
MARKER = ".docgraph-remote.json"  # in a mirror: which URL (and endpoint) it mirrors


def is_url(path: Any) -> bool:
    return isinstance(path, str) and path.startswith(SCHEMES)


def normalize(url: str) -> str:
    """`s3://bucket/prefix` without a trailing slash."""
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"not an object-store URL: {url!r} (expected s3://bucket/prefix)")
    return f"s3://{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/")


def endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def default_mirror_base() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "docgraph" / "mirrors"


def mirror_for(url: str, base: str | Path | None = None) -> Path:
    """The local mirror folder of `url` (created, with its marker naming the URL). The
    endpoint is part of the name: the same bucket name on two servers is two mirrors."""
    url = normalize(url)
    ep = endpoint() or ""
    digest = hashlib.sha256(f"{ep}|{url}".encode()).hexdigest()[:16]
    bucket_prefix = url[len("s3://") :].replace("/", "_")[:40]
    folder = Path(base) if base else default_mirror_base()
    folder = folder / f"{bucket_prefix}-{digest}"
    marker = folder / MARKER
    if not marker.exists():
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(marker, json.dumps({"url": url, "endpoint": ep}).encode())
    return folder


def url_of(root: str | Path) -> str | None:
    """The URL the folder `root` mirrors (None: a plain local folder)."""
    if is_url(root):
        return normalize(str(root))
    try:
        data = json.loads((Path(root) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("url") if isinstance(data, dict) else None
