"""A folder's (or a shard's) files to the documents and rejected_documents frames: each
file read, handed to its format's loader (formats.py), given its id and publication columns;
one bad file is a rejected row, never an aborted run."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import progress, schemas
from pipeline.ids import sha256_hex, stable_id
from pipeline.ingest.formats import LoadError, load_bytes
from pipeline.ingest.publications import FileMapping, read_manifest
from pipeline.ingest.walk import Entry, check_input_folder, walk_input


def _mtime_iso(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, tz=UTC).isoformat()


def load_folder(
    input_dir: str | Path, exclude: Iterable[str | Path] = ()
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(documents, rejected_documents) frames with exactly schemas.DOCUMENTS / REJECTED_DOCUMENTS
    columns. A document's id hashes its relative path and its bytes (`sha256`):
    an edit or a move is a new document, and identical copies at two paths are two
    documents (shards are loaded apart, so a copy elsewhere is unknown here). Nothing outside the
    input folder is read, nor the `exclude` folders inside it (see walk.py). A missing or
    empty folder raises InputFolderError."""
    root = check_input_folder(input_dir, exclude)
    entries = walk_input(root, exclude)
    return load_entries(root, entries, read_manifest(root, entries).files)


def load_entries(
    root: Path, entries: Iterable[Entry], mapping: Mapping[str, FileMapping] | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`load_folder` over some entries of a walk of `root` (one document shard's); `mapping`
    (the publications manifest's files) fills the documents' publication columns."""
    mapping = mapping or {}
    docs: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    for entry in progress.iterate("loading", entries):
        rel, path = entry.rel, entry.path
        if path is None:
            rejected.append(_rejected_row(rel, "", 0, entry.reason))
            continue
        sha, size = "", 0
        try:
            data = path.read_bytes()
            sha, size = sha256_hex(data), len(data)
            doc = load_bytes(path, data)
        except LoadError as e:
            rejected.append(_rejected_row(rel, sha, size, str(e)))
            continue
        except OSError as e:
            rejected.append(_rejected_row(rel, sha, size, f"cannot read ({e.strerror})"))
            continue
        except Exception as e:  # noqa: BLE001 - one bad file must not abort the folder
            reason = _relative(f"{type(e).__name__}: {e}", root)
            rejected.append(_rejected_row(rel, sha, size, reason))
            continue
        docs.append(
            {
                "id": stable_id(rel, sha),
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
                **_publication_columns(mapping.get(rel)),
            }
        )
    return _documents_frame(docs), _rejected_frame(rejected)


# The documents columns the publications manifest fills (FileMapping's fields).
PUBLICATION_COLUMNS = (
    "publication_id",
    "document_type",
    "document_description",
    "document_language",
    "document_version",
)


def _publication_columns(mapped: FileMapping | None) -> dict[str, str | None]:
    """The documents table's manifest columns of one file (nulls when it is unmapped)."""
    return {c: getattr(mapped, c, None) for c in PUBLICATION_COLUMNS}


def _relative(reason: str, root: Path) -> str:
    """A reason with the input folder's absolute path taken out (reasons name no absolute
    path: the table may be shared, the layout of the machine is not its business)."""
    for prefix in {str(root.resolve()), str(root.absolute()), str(root)}:
        reason = reason.replace(prefix + os.sep, "")
    return reason


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
        raw_data=pl.col("metadata"),  # GraphRAG's column: the input's own fields
        language=pl.when(cyr > 0.3 * letters).then(pl.lit("ru")).otherwise(pl.lit("en")),
    )
    return pl.from_arrow(schemas.conform(df, "documents"))  # type: ignore[return-value]


def _rejected_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    if not rows:
        return schemas.empty("rejected_documents")
    return pl.from_arrow(schemas.conform(pl.DataFrame(rows), "rejected_documents"))  # type: ignore[return-value]
