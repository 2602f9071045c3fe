"""Test helper: a docs site as published index versions (documents, sections, document
links and edges, sharded as the index writes them), without the rest of the pipeline, so
the corpus-wide link and SAME_TOPIC steps can be run against a real base version."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline import schemas
from pipeline.ingest.find_stale import TAIL_FILE
from pipeline.ingest.loader import load_folder
from pipeline.ingest.shards import shard_of
from pipeline.storage import shard_files, store
from pipeline.storage.run_changes import RunChanges, run_changes
from pipeline.structure import build_structure

SHARDS = 4
DIGEST = "test-tail"
# tables the run's changes are read from too (pipeline.storage.run_changes), left empty
EMPTY = ("chunks", "extracted_entities", "extracted_relationships")


def write_docs(inp: Path, pages: dict[str, str]) -> None:
    """The input folder holds exactly `pages` (relative path -> text)."""
    for old in inp.rglob("*.md"):
        if old.relative_to(inp).as_posix() not in pages:
            old.unlink()
    for rel, text in pages.items():
        path = inp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


def stage(inp: Path, out: Path, run_id: str) -> Path:
    """A run's staging folder (hard links of the current version) with the structure
    tables of `inp`'s documents written for the shards whose documents changed."""
    folder = store.begin(out, run_id)
    docs, _ = load_folder(inp)
    shard = docs["source_path"].map_elements(lambda p: shard_of(p, SHARDS), return_dtype=pl.Utf8)
    for key in [f"{i:03d}" for i in range(SHARDS)]:
        part = docs.filter(shard == key)
        old = shard_files.read_shard(folder, "documents", key, ["id"])["id"].to_list()
        written = (folder / "documents" / f"{key}.parquet").exists()
        if written and sorted(old) == sorted(part["id"].to_list()):
            continue  # unchanged shard: its files stay links of the base's
        built = build_structure(part, inp, resolve_links=False)
        links = schemas.pa.Table.from_pylist(built.links, schema=schemas.DOCUMENT_LINKS)
        for name, frame in (
            ("documents", part),
            ("sections", built.sections),
            ("document_edges", built.structure_edges),
            ("document_links", pl.from_arrow(links)),
            ("content_nodes", built.content_nodes),
            *((name, schemas.empty(name)) for name in EMPTY),
        ):
            shard_files.write_shard(folder, name, key, frame)  # type: ignore[arg-type]
    return folder


def changes_of(folder: Path, out: Path) -> RunChanges:
    return run_changes(folder, out, DIGEST)


def publish(folder: Path, out: Path, run_id: str) -> None:
    (folder / TAIL_FILE).write_text(json.dumps({"settings": DIGEST}))
    store.publish(out, run_id)
