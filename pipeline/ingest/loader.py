"""A folder's (or a shard's) files to the documents and rejected_documents frames: each
file read, handed to its format's loader (formats.py), given its id and publication columns;
one bad file is a rejected row, never an aborted run."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline import progress, schemas
from pipeline.ids import sha256_hex, stable_id
from pipeline.ingest.formats import LoadError, load_bytes
from pipeline.ingest.publications import FileMapping, read_manifest
from pipeline.ingest.walk import Entry, check_input_folder, walk_input


def _mtime_iso(path: Path) -> str:
    return _iso(path.stat().st_mtime)


def _iso(mtime: float) -> str:
    return datetime.fromtimestamp(mtime, tz=UTC).isoformat()


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


# (document row, file, the loader's open reader of it): takes the reader (and closes it)
Opened = Callable[[dict[str, Any], Path, Any], None]


class Keep(Protocol):
    """Rows an earlier run loaded (pipeline.storage.carry.KeptDocuments): `find` the one
    loaded from these very bytes at this path (sha256), `unread` the one of a file of this
    path, size and modification time (the file is not read again), `rows` of those found,
    by number."""

    def find(self, rel: str, sha: str) -> int | None: ...

    def unread(self, rel: str, size: int, created: str) -> int | None: ...

    def rows(self, at: list[int]) -> pl.DataFrame: ...


def load_entries(
    root: Path,
    entries: Iterable[Entry],
    mapping: Mapping[str, FileMapping] | None = None,
    opened: Opened | None = None,
    keep: Keep | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`load_folder` over some entries of a walk of `root` (one document shard's); `mapping`
    (the publications manifest's files) fills the documents' publication columns. A
    document whose loader left its file open (`LoadedDoc.source`: a PDF) is handed to
    `opened` with its row, so that its structure is parsed from what was read once;
    without `opened` it is closed. A file `keep` finds (its path and bytes loaded before)
    keeps that row instead (its format not parsed, nor handed to `opened`), with what the
    file system and the manifest say of it today (creation date, publication columns)."""
    mapping = mapping or {}
    docs: list[pa.Table | None] = []  # one row each, made as the file is read (_document_row)
    samples: list[str] = []  # what each document's language is told from
    rejected: list[dict[str, Any]] = []
    kept: list[tuple[int, int, str, str]] = []  # (place, keep's row, creation date, path)
    for entry in progress.iterate("loading", entries):
        rel, path = entry.rel, entry.path
        if path is None:
            rejected.append(_rejected_row(rel, "", 0, entry.reason))
            continue
        sha, size = "", 0
        # the walk's stat, taken before the file is read: a file changed while it is read
        # gets a newer mtime than its row records, so the next run reads it again
        stat = entry.found()
        created = _iso(stat[2]) if stat is not None else None
        # a file of the size and mtime a kept row records is that row's file (the test that
        # leaves a shard whose files' stats are unchanged alone, per file): it is not read (a
        # nightly run of 100 new files in a 40k corpus re-runs every shard, and reading the
        # others back took ~8 s)
        at = keep.unread(rel, stat[0], created) if keep and stat and created else None
        try:
            if at is None:
                data = path.read_bytes()
                sha, size = sha256_hex(data), len(data)
                at = keep.find(rel, sha) if keep is not None else None
                created = created or _mtime_iso(path)
            if at is not None:  # its row (and language) taken below, all of them at once
                kept.append((len(docs), at, created, rel))
                docs.append(None)
                samples.append("")
                continue
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
        del data  # a huge file: its bytes, its text and its row are never all held at once
        samples.append(language_sample(doc.text))
        row = {
            "id": stable_id(rel, sha),
            "human_readable_id": len(docs),
            "title": doc.title,
            "source_path": rel,
            "mime_type": doc.mime_type,
            "sha256": sha,
            "byte_size": size,
            "n_pages": doc.n_pages,
            "metadata": json.dumps(doc.metadata, sort_keys=True, ensure_ascii=False, default=str),
            "text": doc.text,
            "creation_date": created,
            "warnings": list(doc.warnings),
            **_publication_columns(mapping.get(rel)),
        }
        if doc.source is not None:
            if opened is not None:
                opened(row, path, doc.source)
            else:
                doc.source.close()
        del doc
        docs.append(_document_row(row))
    languages = _take_kept(docs, kept, keep, mapping) if keep is not None and kept else {}
    return _documents_frame(docs, samples, languages), _rejected_frame(rejected)


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


def _take_kept(
    docs: list[pa.Table | None],
    kept: list[tuple[int, int, str, str]],
    keep: Keep,
    mapping: Mapping[str, FileMapping],
) -> dict[int, str]:
    """The `kept` rows into their places of `docs` (rows loaded before, made at once: a row
    at a time cost more than loading a text file): today's short id, creation date and
    publication columns, no text units yet (the chunks step fills them). Returns their
    languages by place (told from the same text before)."""
    places, at, created, rels = (list(c) for c in zip(*kept, strict=True))
    pubs = [_publication_columns(mapping.get(rel)) for rel in rels]
    today = pl.DataFrame(
        {
            "human_readable_id": places,
            "creation_date": created,
            **{c: [p[c] for p in pubs] for c in PUBLICATION_COLUMNS},
        },
        schema_overrides={c: pl.Utf8 for c in ("creation_date", *PUBLICATION_COLUMNS)},
    )
    rows = keep.rows(at).drop(today.columns).hstack(today)
    rows = rows.with_columns(pl.lit([], pl.List(pl.Utf8)).alias("text_unit_ids"))
    table = schemas.conform(rows, "documents")
    for j, place in enumerate(places):
        docs[place] = table.slice(j, 1)
    return dict(zip(places, rows.get_column("language").to_list(), strict=True))


def _document_row(row: dict[str, Any]) -> pa.Table:
    """One document's row as Arrow at once, its text wrapped without a copy (`utf8_array`):
    a huge file's Python string (2-4 bytes a character) is freed before the next file is
    read, and never held beside two UTF-8 copies."""
    text = utf8_array(row.pop("text"))
    row["raw_data"] = row["metadata"]  # GraphRAG's column: the input's own fields
    row["text_unit_ids"] = []  # filled by the chunks step
    fields = [f for f in schemas.DOCUMENTS if f.name != "text"]
    table = pa.Table.from_pylist([row], schema=pa.schema(fields))
    return table.add_column(schemas.DOCUMENTS.get_field_index("text"), "text", text)


def utf8_array(text: str) -> pa.Array:
    """A one-string Arrow array over `text`'s UTF-8 bytes themselves (no builder copy)."""
    data = text.encode()
    offsets = np.array([0, len(data)], dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


# A document's language is told from at most this many characters: the whole text when it is
# shorter, else LANGUAGE_SAMPLE_PIECES windows spread evenly over it (two regex passes over
# a 151 MB text took 20 s and 440 MB). The windows' share of Cyrillic letters is the whole
# text's unless its script changes in stretches longer than the gaps between them.
LANGUAGE_SAMPLE_CHARS = 1 << 20
LANGUAGE_SAMPLE_PIECES = 64


def language_sample(text: str) -> str:
    """The text the language is told from (`text` itself when it is short)."""
    if len(text) <= LANGUAGE_SAMPLE_CHARS:
        return text
    step, width = (
        len(text) // LANGUAGE_SAMPLE_PIECES,
        LANGUAGE_SAMPLE_CHARS // LANGUAGE_SAMPLE_PIECES,
    )
    return "".join(text[i * step : i * step + width] for i in range(LANGUAGE_SAMPLE_PIECES))


def _documents_frame(
    rows: list[pa.Table | None], samples: list[str], languages: dict[int, str]
) -> pl.DataFrame:
    """The rows as one frame, their language told from `samples` or given (`languages`, by
    place: rows loaded before)."""
    if not rows:
        return schemas.empty("documents")
    # Language by script share, vectorised: cheap and good enough to route Russian vs English.
    text = pl.Series(samples, dtype=pl.Utf8)
    letters, cyr = text.str.count_matches(r"\p{L}"), text.str.count_matches(r"\p{Cyrillic}")
    language = pl.select(
        pl.when(pl.lit(cyr) > 0.3 * pl.lit(letters)).then(pl.lit("ru")).otherwise(pl.lit("en"))
    ).to_series()
    if languages:
        language = language.scatter(list(languages), list(languages.values()))
    # one chunk per column first: polars took 0.4 s to join 2,000 one-row chunks itself
    df = pl.from_arrow(pa.concat_tables([r for r in rows if r is not None]).combine_chunks())
    return df.with_columns(language.alias("language"))  # type: ignore[union-attr]


def _rejected_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    if not rows:
        return schemas.empty("rejected_documents")
    return pl.from_arrow(schemas.conform(pl.DataFrame(rows), "rejected_documents"))  # type: ignore[return-value]
