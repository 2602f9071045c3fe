"""The publications manifest: which documents make up which publication.

An optional `publications.json` (a list of publications, or an object with a
`publications` list) or `publications.jsonl` (one publication per line) at the top of the
input folder describes publications (id, title, abstract, citation, authors, date, source,
source_url, uri) and maps files to them: each publication's `files` list holds entries
`{path, type, description, language, version}`, `path` relative to the input folder or a
glob (`*` also crosses folders), `type` MAIN, SUPPLEMENTAL or OTHER (any case; default
MAIN). The manifest seeds the document graph, so it must never stop a run: a bad row (invalid
JSON line, missing or repeated id, unknown type, a path matching no file, a file claimed by
two publications) becomes a failure row with its reason and the rest loads. Keys the
models do not know are ignored (room for a manifest written for other tools).
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from pipeline import failures, schemas
from pipeline.ingest.text import decode_text
from pipeline.ingest.walk import Entry, manifest_entries

STAGE = "publications"
_GLOB_CHARS = frozenset("*?[")


class DocumentType(StrEnum):
    MAIN = "MAIN"
    SUPPLEMENTAL = "SUPPLEMENTAL"
    OTHER = "OTHER"


def _text(value: Any) -> str | None:
    """A scalar as stripped text (a year written as a number, a date), None when empty."""
    if value is None:
        return None
    if isinstance(value, date | datetime):
        return value.isoformat()
    if isinstance(value, dict | list):
        raise ValueError("must be text, not an object or a list")
    text = str(value).strip()
    return text or None


class FileEntry(BaseModel):
    """One `files` entry: which file(s) of the input folder, and what they are to the
    publication."""

    model_config = ConfigDict(extra="ignore")

    path: str
    type: DocumentType = DocumentType.MAIN
    description: str | None = None
    language: str | None = None
    version: str | None = None

    @field_validator("path", mode="before")
    @classmethod
    def _relative_path(cls, value: Any) -> str:
        text = _text(value)
        if text is None:
            raise ValueError("path is empty")
        norm = posixpath.normpath(text.replace("\\", "/"))
        if norm.startswith("/") or norm == ".." or norm.startswith("../"):
            raise ValueError(f"path {text!r} is not inside the input folder")
        return norm

    @field_validator("type", mode="before")
    @classmethod
    def _type(cls, value: Any) -> Any:
        if value is None:
            return DocumentType.MAIN
        name = str(value).strip().upper()
        if name not in DocumentType.__members__:
            raise ValueError(f"unknown document type {value!r} (MAIN, SUPPLEMENTAL or OTHER)")
        return DocumentType[name]

    @field_validator("description", "language", "version", mode="before")
    @classmethod
    def _scalar(cls, value: Any) -> str | None:
        return _text(value)


class Publication(BaseModel):
    """One publication; its `files` are validated one by one (a bad entry loses only itself)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    title: str | None = None
    abstract: str | None = None
    citation: str | None = None
    authors: list[str] = []
    date: str | None = None
    source: str | None = None
    source_url: str | None = None
    uri: str | None = None
    files: list[Any] = []

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> str:
        text = _text(value)
        if text is None:
            raise ValueError("missing publication id")
        return text

    @field_validator(
        "title", "abstract", "citation", "date", "source", "source_url", "uri", mode="before"
    )
    @classmethod
    def _scalar(cls, value: Any) -> str | None:
        return _text(value)

    @field_validator("authors", mode="before")
    @classmethod
    def _authors(cls, value: Any) -> list[str]:
        """A list of names, or one name as a string; an author object gives its `name`."""
        items = value if isinstance(value, list) else [] if value is None else [value]
        names = [_text(a.get("name") if isinstance(a, dict) else a) for a in items]
        return [n for n in names if n]

    @field_validator("files", mode="before")
    @classmethod
    def _files(cls, value: Any) -> list[Any]:
        if value is None:
            return []
        return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class FileMapping:
    """What the manifest says about one file: the documents table's manifest columns."""

    publication_id: str
    document_type: str
    document_description: str | None = None
    document_language: str | None = None
    document_version: str | None = None

    def key(self) -> str:
        """A stable string of the mapping (part of the file's shard fingerprint)."""
        return json.dumps(list(self.__dict__.values()), ensure_ascii=False)


@dataclass
class Manifest:
    """The manifest as read: valid publications (manifest order), each mapped file's
    mapping, and a failure row (schemas.DOCUMENT_FAILURES) per rejected row."""

    publications: list[Publication] = field(default_factory=list)
    files: dict[str, FileMapping] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)


def _failure(where: str, reason: str, fallback: str) -> dict[str, Any]:
    return {
        "document_id": None,
        "source_path": where,
        "stage": STAGE,
        "reason": reason,
        "fallback": fallback,
    }


def _rows(name: str, text: str, out: Manifest) -> Iterator[tuple[str, Any]]:
    """(location, raw row) of one manifest file, in order; an unparsable line or file is a
    failure."""
    if name.endswith(".jsonl"):
        for n, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                out.failures.append(
                    _failure(name, f"line {n}: invalid JSON ({e.msg})", "line skipped")
                )
                continue
            yield f"line {n}", row
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        out.failures.append(
            _failure(name, f"invalid JSON: {e.msg} at line {e.lineno}", "manifest ignored")
        )
        return
    if isinstance(data, dict) and isinstance(data.get("publications"), list):
        data = data["publications"]
    if not isinstance(data, list):
        what = (
            "an object without a 'publications' list"
            if isinstance(data, dict)
            else type(data).__name__
        )
        out.failures.append(
            _failure(name, f"top level is {what}, not a list of publications", "manifest ignored")
        )
        return
    for i, row in enumerate(data, start=1):
        yield f"item {i}", row


def _reason(err: ValidationError) -> str:
    """Pydantic's errors as one line: `field: message; ...`."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        if e["type"] == "missing":
            parts.append(f"missing {loc}")
            continue
        msg = str(e["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def _matches(pattern: str, rels: list[str], exact: set[str]) -> list[str]:
    if not _GLOB_CHARS & set(pattern):
        return [pattern] if pattern in exact else []
    return [r for r in rels if fnmatch.fnmatchcase(r, pattern)]


def _map_files(
    pub: Publication, name: str, at: str, rels: list[str], exact: set[str], out: Manifest
) -> None:
    """Map the publication's files; exact paths before globs, so an explicit entry overrides
    a glob of the same publication. A file another publication holds stays with it."""
    entries: list[tuple[FileEntry, str]] = []
    for i, raw in enumerate(pub.files, start=1):
        try:
            entry = FileEntry.model_validate(raw if isinstance(raw, dict) else {"path": raw})
        except ValidationError as e:
            out.failures.append(
                _failure(
                    name,
                    f"{at}: publication {pub.id}, file {i}: {_reason(e)}",
                    "file entry skipped",
                )
            )
            continue
        entries.append((entry, f"{at}: publication {pub.id}, file {i} ({entry.path})"))
    entries.sort(key=lambda item: bool(_GLOB_CHARS & set(item[0].path)))
    mine: set[str] = set()
    for entry, what in entries:
        found = _matches(entry.path, rels, exact)
        if not found:
            out.failures.append(_failure(name, f"{what}: matches no file", "file entry skipped"))
        for rel in found:
            held = out.files.get(rel)
            if rel in mine:
                continue
            if held is not None:
                out.failures.append(
                    _failure(
                        rel,
                        f"claimed by publications {held.publication_id} and {pub.id} ({name} {at})",
                        f"kept in {held.publication_id}",
                    )
                )
                continue
            mine.add(rel)
            out.files[rel] = FileMapping(
                pub.id, entry.type.value, entry.description, entry.language, entry.version
            )


def read_manifest(root: str | Path, entries: Iterable[Entry]) -> Manifest:
    """The manifest of the input folder `root`, its file entries matched against the walk's
    `entries` (their relative paths); an empty Manifest when there is none."""
    out = Manifest()
    found = manifest_entries(root)
    if not found:
        return out
    rels = sorted(e.rel for e in entries if not e.hidden)
    exact = set(rels)
    seen: set[str] = set()
    for mf in found:
        if mf.path is None:
            out.failures.append(_failure(mf.rel, mf.reason, "manifest ignored"))
            continue
        try:
            text = decode_text(mf.path.read_bytes())
        except Exception as e:  # noqa: BLE001 - an unreadable manifest only loses the manifest
            out.failures.append(_failure(mf.rel, failures.reason(e), "manifest ignored"))
            continue
        for at, row in _rows(mf.rel, text, out):
            if not isinstance(row, dict):
                out.failures.append(_failure(mf.rel, f"{at}: not an object", "publication skipped"))
                continue
            try:
                pub = Publication.model_validate(row)
            except ValidationError as e:
                out.failures.append(_failure(mf.rel, f"{at}: {_reason(e)}", "publication skipped"))
                continue
            if pub.id in seen:
                out.failures.append(
                    _failure(
                        mf.rel,
                        f"{at}: duplicate publication id {pub.id}",
                        "publication skipped (the first one is kept)",
                    )
                )
                continue
            seen.add(pub.id)
            out.publications.append(pub)
            _map_files(pub, mf.rel, at, rels, exact, out)
    return out


def publications_frame(manifest: Manifest, documents: pl.DataFrame) -> pl.DataFrame:
    """The publications table: the manifest's publications with the ids of the indexed
    documents mapped to each (`documents` needs columns id and publication_id)."""
    docs: dict[str, list[str]] = {}
    if documents.height:
        for doc_id, pub_id in documents.select("id", "publication_id").sort("id").iter_rows():
            if pub_id is not None:
                docs.setdefault(pub_id, []).append(doc_id)
    rows = [
        {
            **pub.model_dump(exclude={"files"}),
            "human_readable_id": i,
            "document_ids": docs.get(pub.id, []),
        }
        for i, pub in enumerate(manifest.publications)
    ]
    table = schemas.pa.Table.from_pylist(rows, schema=schemas.PUBLICATIONS)
    return pl.from_arrow(table)  # type: ignore[return-value]


def failures_frame(manifest: Manifest) -> pl.DataFrame:
    """The publication_failures table."""
    return failures.failures_frame(manifest.failures, "publication_failures")
