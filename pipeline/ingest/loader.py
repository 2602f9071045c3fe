"""Folder walking and dispatch: one bad file is a rejected row, never an aborted run."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import schemas
from pipeline.ids import sha256_hex


class InputFolderError(ValueError):
    """The input folder is missing, not a folder or empty: the run stops before writing."""


class LoadError(Exception):
    """A file that cannot become a document; the message is the user-facing reason."""


@dataclass
class LoadedDoc:
    title: str
    mime_type: str
    text: str
    n_pages: int = 1
    metadata: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


# (path, raw bytes) -> LoadedDoc, or raise LoadError. Keyed by lower-case suffix.
Loader = Callable[[Path, bytes], LoadedDoc]
LOADERS: dict[str, Loader] = {}


def register(*suffixes: str) -> Callable[[Loader], Loader]:
    """Registers a loader for file suffixes (so other formats plug in without editing this file)."""

    def deco(fn: Loader) -> Loader:
        for s in suffixes:
            LOADERS[s.lower()] = fn
        return fn

    return deco


def _walk(root: Path) -> list[Path]:
    """Every non-hidden regular file under root, sorted by relative posix path (deterministic)."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            if not name.startswith("."):
                p = Path(dirpath) / name
                if p.is_file():
                    out.append(p)
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def check_input_folder(input_dir: str | Path) -> Path:
    """The input folder as a Path, or InputFolderError when it is missing, a file or holds no
    visible file: a typo must not index nothing (or the sample) over a good index."""
    root = Path(input_dir)
    if not root.exists():
        raise InputFolderError(f"input folder {root} does not exist")
    if not root.is_dir():
        raise InputFolderError(f"input folder {root} is not a folder")
    if not _has_visible_entry(root):
        raise InputFolderError(f"input folder {root} holds no files to index (hidden ones skipped)")
    return root


def _has_visible_entry(root: Path) -> bool:
    """Whether any non-hidden file or link lies under root (stops at the first)."""
    for _, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if any(not name.startswith(".") for name in filenames):
            return True
    return False


def folder_fingerprint(input_dir: str | Path) -> tuple[str, int]:
    """(hash of every file's path, size and mtime, file count): changes when a file is
    added, edited or deleted, without reading any content — what a sensor polls."""
    root = Path(input_dir)
    if not root.is_dir():
        return "", 0
    files = _walk(root)
    h = hashlib.sha256()
    for p in files:
        st = p.stat()
        h.update(f"{p.relative_to(root).as_posix()}\x1f{st.st_size}\x1f{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:32], len(files)


def _mtime_iso(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).isoformat()


def load_bytes(path: Path, data: bytes) -> LoadedDoc:
    """Loads one file's bytes by its suffix; raises LoadError with the reason when it cannot."""
    suffix = path.suffix.lower()
    loader = LOADERS.get(suffix)
    if loader is None:
        raise LoadError(
            f"unsupported file type {suffix}" if suffix else "unsupported file type (no extension)"
        )
    if not data.strip():
        raise LoadError("empty file")
    return loader(path, data)


def load_folder(input_dir: str | Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(documents, rejected_documents) frames with exactly schemas.DOCUMENTS / REJECTED_DOCUMENTS
    columns. Ids are the sha256 of the bytes, so identical files are one document (the first
    in path order); later copies are rejected as duplicates. A missing or empty folder raises
    InputFolderError."""
    root = check_input_folder(input_dir)
    docs: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for path in _walk(root):
        rel = path.relative_to(root).as_posix()
        sha, size = "", 0
        try:
            size = path.stat().st_size
            data = path.read_bytes()
            sha = sha256_hex(data)
            if sha in seen and data.strip():
                raise LoadError(f"duplicate of {seen[sha]}")
            doc = load_bytes(path, data)
        except LoadError as e:
            rejected.append(_rejected_row(rel, sha, size, str(e)))
            continue
        except Exception as e:  # noqa: BLE001 - one bad file must not abort the folder
            rejected.append(_rejected_row(rel, sha, size, f"{type(e).__name__}: {e}"))
            continue
        seen[sha] = rel
        docs.append(
            {
                "id": sha,
                "title": doc.title,
                "source_path": rel,
                "mime_type": doc.mime_type,
                "sha256": sha,
                "byte_size": size,
                "n_pages": doc.n_pages,
                "metadata": json.dumps(
                    doc.metadata, sort_keys=True, ensure_ascii=False, default=str
                ),
                "text": doc.text,
                "creation_date": _mtime_iso(path),
                "warnings": list(doc.warnings),
            }
        )
    return _documents_frame(docs), _rejected_frame(rejected)


def _rejected_row(rel: str, sha: str, size: int, reason: str) -> dict[str, Any]:
    return {"source_path": rel, "sha256": sha, "byte_size": size, "stage": "load", "reason": reason}


def _documents_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    if not rows:
        return schemas.empty("documents")
    df = pl.DataFrame(rows, schema_overrides={"warnings": pl.List(pl.Utf8)})
    # Language by script share, vectorised: cheap and good enough to route Russian vs English.
    letters = pl.col("text").str.count_matches(r"\p{L}")
    cyr = pl.col("text").str.count_matches(r"\p{Cyrillic}")
    df = df.with_columns(
        human_readable_id=pl.int_range(pl.len(), dtype=pl.Int64),
        language=pl.when(cyr > 0.3 * letters).then(pl.lit("ru")).otherwise(pl.lit("en")),
    )
    return pl.from_arrow(schemas.conform(df, "documents"))  # type: ignore[return-value]


def _rejected_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    if not rows:
        return schemas.empty("rejected_documents")
    return pl.from_arrow(schemas.conform(pl.DataFrame(rows), "rejected_documents"))  # type: ignore[return-value]
