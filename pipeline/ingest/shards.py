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
import json
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import schemas
from pipeline.config import Settings
from pipeline.ingest.publications import FileMapping, read_manifest
from pipeline.ingest.walk import Entry, walk_input
from pipeline.pdf.read.ocr_engine import ocr_installed
from pipeline.storage.files import atomic_write_text


def shard_keys(n: int) -> list[str]:
    """The partition keys of `n` shards: zero-padded, so they sort as numbers."""
    width = _key_width(n)
    return [f"{i:0{width}d}" for i in range(n)]


def shard_of(rel_path: str, n: int) -> str:
    """The shard of the file at `rel_path` (posix, relative to the input folder)."""
    digest = hashlib.sha256(rel_path.encode("utf-8")).digest()
    return f"{int.from_bytes(digest[:8], 'big') % n:0{_key_width(n)}d}"  # shard_keys(n)[...]


def _key_width(n: int) -> int:
    return max(3, len(str(n - 1)))


# What a shard's files hold beyond their columns; a new value re-runs every shard once (the
# short ids of the per-shard tables are interleaved over the shards since "2"; "3": mention
# evidence that opens with its sentence, concepts that read as concepts; "4": an image reads
# as its alt text, its address is a link, a data URI's payload is in no text).
SHARD_FORMAT = "4"


def corpus_short_ids(frame: pl.DataFrame, shard: str, n: int) -> pl.DataFrame:
    """One shard's rows of a sharded table with their short ids (human_readable_id, numbered
    0.. in the shard) made unique over the corpus: row i of shard s becomes i*n + s. Dense
    while shards are even, and a shard's ids change only when that shard runs again."""
    if "human_readable_id" not in frame.columns:
        return frame
    return frame.with_columns(pl.col("human_readable_id") * n + int(shard))


def stage_settings_digest(settings: Settings) -> str:
    """Hash of the settings the per-document stages read (structure, chunking, extraction,
    embedding, the LLM's endpoint and model in LLM mode, the shard count), of the tables'
    columns (a shard written with other columns cannot be read with the new ones: Parquet
    files of one table must agree) and SHARD_FORMAT: either change re-runs every shard once."""
    llm = settings.llm
    parts = [
        SHARD_FORMAT,
        ";".join(f"{name}={schema}" for name, schema in sorted(schemas.TABLES.items())),
        settings.structure.model_dump_json(exclude={"pdf_workers"}),  # same regions
        settings.chunking.model_dump_json(),
        settings.extraction.model_dump_json(),
        # where and in what batches the model runs does not change the vectors
        settings.embedding.model_dump_json(exclude={"process", "batch_tokens", "batch_size"}),
        str(settings.storage.shards),
        f"{llm.enabled}|{llm.base_url}|{llm.chat_model}|{llm.temperature}" if llm.enabled else "",
    ]
    if settings.structure.ocr == "auto" and ocr_installed():
        parts.append("ocr")  # the OCR extra installed: shards with scanned PDFs read again
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def carry_digest(settings: Settings) -> str:
    """What the rows of a document that did not change depend on besides its file: the
    per-document settings (`stage_settings_digest`) and docgraph's version (its code).
    Recorded per shard in a version's STATE_FILE; a shard that runs again takes rows of
    unchanged documents from the version it started from only when its digest there is
    this one (pipeline.storage.carry)."""
    try:
        code = metadata.version("docgraph")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        code = "unknown"
    text = f"{stage_settings_digest(settings)}\x1f{code}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def by_shard(entries: Iterable[Entry], n: int) -> dict[str, list[Entry]]:
    """A walk's entries grouped by shard, every shard present."""
    groups: dict[str, list[Entry]] = {key: [] for key in shard_keys(n)}
    for e in entries:
        groups[shard_of(e.rel, n)].append(e)
    return groups


def fingerprints(
    input_dir: str | Path,
    exclude: Iterable[str | Path],
    n: int,
    salt: str = "",
    entries: Iterable[Entry] | None = None,
    mapping: Mapping[str, FileMapping] | None = None,
) -> dict[str, str]:
    """Shard key -> fingerprint of its files, for every shard (an empty one too); from
    `entries` when the folder was just walked. A file's publications-manifest mapping (read
    here unless given) is part of it: a manifest edit re-runs only the shards of the files
    whose mapping changed."""
    hashes = {key: hashlib.sha256(salt.encode("utf-8")) for key in shard_keys(n)}
    root = Path(input_dir)
    if entries is None:
        entries = walk_input(root, exclude) if root.is_dir() else []
    entries = list(entries)
    if mapping is None:
        mapping = read_manifest(root, entries).files if root.is_dir() else {}
    for e in entries:
        if e.hidden:
            continue
        if e.path is None:
            line = f"{e.rel}\x1f{e.reason}\n"
        else:
            if (found := e.found()) is None:  # deleted since the walk: the next poll sees it
                continue
            line = f"{e.rel}\x1f{found[0]}\x1f{found[1]}\n"
            if e.rel in mapping:
                line += f"{e.rel}\x1f{mapping[e.rel].key()}\n"
        hashes[shard_of(e.rel, n)].update(line.encode("utf-8"))
    return {key: h.hexdigest()[:32] for key, h in hashes.items()}


def changed(previous: dict[str, str] | None, current: dict[str, str]) -> list[str]:
    """Shards whose fingerprint differs from `previous` (all of them without one)."""
    previous = previous or {}
    return sorted(k for k, fp in current.items() if previous.get(k) != fp)


# in a version: the shard count, each shard's fingerprint and the carry_digest it was made with
STATE_FILE = "shards.json"


def read_state(folder: str | Path) -> dict[str, Any]:
    """The shard state of a version folder ({} when it has none: every shard is new)."""
    try:
        state = json.loads((Path(folder) / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def write_state(folder: str | Path, n: int, done: dict[str, str], carry: str = "") -> None:
    """Record the fingerprints of the shards a run indexed (`done`) into the run's folder,
    and the `carry_digest` they were made with; the other shards keep theirs (a different
    shard count starts the record over)."""
    state = read_state(folder)
    same = state.get("count") == n
    previous = state.get("fingerprints", {}) if same else {}
    digests = state.get("carry", {}) if same and isinstance(state.get("carry"), dict) else {}
    digests = {k: v for k, v in digests.items() if k not in done}
    if carry:
        digests.update(dict.fromkeys(done, carry))
    state = {"count": n, "fingerprints": {**previous, **done}, "carry": digests}
    atomic_write_text(Path(folder) / STATE_FILE, json.dumps(state, indent=1, sort_keys=True))


def stale_shards(folder: str | Path, current: dict[str, str]) -> list[str]:
    """The shards of `current` (fingerprints now) that the index in `folder` does not hold
    as they are now: added, edited or deleted files, or new stage settings."""
    state = read_state(folder)
    previous = state.get("fingerprints") if state.get("count") == len(current) else None
    return changed(previous, current)
