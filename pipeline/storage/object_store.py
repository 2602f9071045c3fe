"""Object-store access: pyarrow's S3 filesystem and the file operations the mirror sync uses.

Credentials come from the AWS SDK's default chain only; errors are RemoteError lines that
name the URL and the operation, never a credential (see pipeline.storage.remote).
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pipeline.storage.files import atomic_path
from pipeline.storage.mirror import endpoint, normalize

THREADS = 8


class RemoteError(RuntimeError):
    """An object-store operation failed (the message names the URL, never a credential)."""


def filesystem():
    """pyarrow's S3 filesystem: credentials from the AWS SDK's default chain (environment),
    endpoint and region from the standard variables."""
    from pyarrow import fs

    kwargs: dict[str, Any] = {
        "region": os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or "us-east-1"
    }
    ep = endpoint()
    if ep:
        parsed = urlparse(ep if "://" in ep else f"https://{ep}")
        kwargs["endpoint_override"] = parsed.netloc + parsed.path.rstrip("/")
        kwargs["scheme"] = parsed.scheme
    return fs.S3FileSystem(**kwargs)


def object_key(url: str, rel: str = "") -> str:
    """pyarrow's path of `rel` under `url` (bucket/prefix/rel)."""
    base = normalize(url)[len("s3://") :]
    return f"{base}/{rel}".rstrip("/") if rel else base


def fail(op: str, url: str, exc: BaseException) -> RemoteError:
    # pyarrow's messages name the operation, bucket and key, never a credential; cut to one line
    reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    return RemoteError(f"{op} {url}: {reason}")


def read_bytes(s3, path: str) -> bytes | None:
    from pyarrow import fs

    info = s3.get_file_info(path)
    if info.type != fs.FileType.File:
        return None
    with s3.open_input_stream(path) as fh:
        return fh.read()


def list_files(s3, path: str) -> dict[str, Any]:
    """{relative path: FileInfo} of the files under `path` (recursive; none when missing)."""
    from pyarrow import fs

    try:
        infos = s3.get_file_info(fs.FileSelector(path, recursive=True, allow_not_found=True))
    except FileNotFoundError:
        return {}
    return {
        i.path[len(path) + 1 :]: i
        for i in infos
        if i.type == fs.FileType.File and i.size is not None
    }


def subdirs(s3, path: str) -> list[str]:
    from pyarrow import fs

    infos = s3.get_file_info(fs.FileSelector(path, recursive=False, allow_not_found=True))
    return sorted(i.base_name for i in infos if i.type == fs.FileType.Directory)


def download(s3, src: str, dst: Path, mtime: float | None = None) -> int:
    with atomic_path(dst) as tmp, s3.open_input_stream(src) as inp, open(tmp, "wb") as out:
        size = 0
        while chunk := inp.read(1 << 20):
            out.write(chunk)
            size += len(chunk)
    if mtime is not None:
        with contextlib.suppress(OSError):
            os.utime(dst, (mtime, mtime))
    return size


def upload(s3, src: Path, dst: str) -> int:
    data = src.read_bytes()
    with s3.open_output_stream(dst) as out:
        out.write(data)
    return len(data)


def parallel(fn, items) -> list:
    items = list(items)
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(fn, items))
