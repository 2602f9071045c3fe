"""A shard that runs again carries over the rows of its unchanged documents (issue 49): after
files of a shard are edited, added and deleted, every per-document table's shard files hold
exactly the rows a full run on a fresh output folder writes (same order, same short ids),
while only the new and changed documents were loaded, parsed, chunked and extracted again
(counted in the run's process). A settings change carries nothing."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from conftest import materialization_metadata, write_report_pdf

from app.run import run_index
from pipeline.config import load_settings
from pipeline.extract.nlp import NlpExtractor
from pipeline.ingest import loader, shards
from pipeline.storage import store
from pipeline.storage.carry import open_carry
from pipeline.structure import build

N = 2
TABLES = (
    "documents",
    "rejected_documents",
    "sections",
    "content_nodes",
    "document_edges",
    "document_links",
    "structure_failures",
    "chunks",
    "chunk_failures",
    "extracted_entities",
    "extracted_relationships",
    "extraction_failures",
)
PEOPLE = ["Ada Lovelace", "Charles Babbage", "Mary Somerville", "Michael Faraday"]


def _markdown(i: int) -> str:
    a, b = PEOPLE[i % 4], PEOPLE[(i + 1) % 4]
    return (
        f"# Letter {i}\n\n{a} wrote to {b} from London in {1830 + i}.[^1] "
        f"See [the next letter](letter{(i + 1) % 8}.md) and [[Letter {(i + 2) % 8}]].\n\n"
        f"## Reply\n\n{b} answered about the Analytical Engine and the Royal Society.\n\n"
        f"[^1]: Kept in the archive of {a}.\n"
    )


def _write(inp: Path) -> None:
    for i in range(8):
        (inp / f"letter{i}.md").write_text(_markdown(i))
    for i in range(6):
        (inp / "notes" / f"note{i}.txt").write_text(
            f"Note {i}\n\n{PEOPLE[i % 4]} visited Paris in {1840 + i}. The visit was short.\n"
        )
    write_report_pdf(inp / "report.pdf")
    (inp / "broken.pdf").write_bytes(b"%PDF-1.4 not really")


def _count_work(monkeypatch) -> Counter:
    """Input files read, documents loaded and parsed, text units extracted, by the run's
    process."""
    counts: Counter = Counter()
    load, parse, extract = loader.load_bytes, build.parse_document, NlpExtractor.extract
    read = Path.read_bytes

    def reading(path: Path) -> bytes:
        counts[("read", path.name)] += path.parent.name in ("in", "notes")
        return read(path)

    def loading(path, data):
        counts[("load", path.name)] += 1
        return load(path, data)

    def parsing(doc, *args, **kwargs):
        counts[("parse", doc["source_path"])] += 1
        return parse(doc, *args, **kwargs)

    def extracting(self, units):
        counts[("units", "")] += units.height
        return extract(self, units)

    monkeypatch.setattr(Path, "read_bytes", reading)
    monkeypatch.setattr(loader, "load_bytes", loading)
    monkeypatch.setattr(build, "parse_document", parsing)
    monkeypatch.setattr(NlpExtractor, "extract", extracting)
    return counts


def _shard_files(out: Path, table: str) -> dict[str, pl.DataFrame]:
    return {p.stem: pl.read_parquet(p) for p in store.table_files(out, table)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A full index; files of both shards edited, added and deleted, and the index run again
    (its work counted); a full index of the same input into a fresh folder."""
    tmp = tmp_path_factory.mktemp("carry")
    inp, out, fresh = tmp / "in", tmp / "out", tmp / "fresh"
    (inp / "notes").mkdir(parents=True)
    _write(inp)
    config = tmp / "docgraph.yaml"
    config.write_text(f"storage:\n  shards: {N}\n")

    def run(folder: Path, cfg: Path = config):
        result = run_index(str(cfg), str(inp), str(folder), log_level="ERROR")
        assert result.success
        return result

    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("DOCGRAPH_EXECUTOR", "in_process")
        run(out)
        time.sleep(0.01)
        (inp / "letter3.md").write_text(
            _markdown(3) + "\nFaraday lectured at the Royal Institution.\n"
        )
        (inp / "notes" / "note9.txt").write_text("Note 9\n\nMary Somerville met Ada Lovelace.\n")
        (inp / "notes" / "note2.txt").unlink()
        with pytest.MonkeyPatch.context() as counting:
            counts = _count_work(counting)
            second = run(out)
        run(fresh)
        yield {
            "tmp": tmp,
            "out": out,
            "fresh": fresh,
            "run": run,
            "second": second,
            "counts": counts,
        }


CHANGED = {"letter3.md", "notes/note9.txt"}


def test_a_re_run_shard_works_only_on_its_new_and_changed_documents(runs):
    ran = {shards.shard_of(p, N) for p in [*CHANGED, "notes/note2.txt"]}
    kept = [
        p for p in ("report.pdf", "letter1.md", "notes/note4.txt") if shards.shard_of(p, N) in ran
    ]
    assert "report.pdf" in kept  # unchanged documents, a PDF among them, share shards with changes
    counts, second = runs["counts"], runs["second"]
    loaded = {name for (kind, name), n in counts.items() if kind == "load" if n}
    read = {name for (kind, name), n in counts.items() if kind == "read" if n}
    # a file of the size and mtime its row records is not even read (its stat says enough)
    assert read == loaded and not read & {Path(p).name for p in kept}
    parsed = {name for (kind, name), n in counts.items() if kind == "parse" if n}
    # only the new and changed files (and the one that fails to load, tried again) are loaded
    assert loaded <= {"letter3.md", "note9.txt", "broken.pdf"} and "letter3.md" in loaded
    assert parsed == CHANGED
    units = counts[("units", "")]
    meta = materialization_metadata(second)["extracted_entities"]
    assert meta["incremental"] == "carried" and meta["rows_carried"] > 0
    assert units == meta["text_units_recomputed"] > 0
    assert store.read_table(runs["out"], "chunks", ["id"]).height > units
    docs = materialization_metadata(second)["documents"]
    assert docs["documents_carried"] >= len(kept) and docs["rows_carried"] >= len(kept)


def test_every_per_document_table_equals_a_full_run_row_for_row(runs):
    for table in TABLES:
        ours, full = _shard_files(runs["out"], table), _shard_files(runs["fresh"], table)
        assert sorted(ours) == sorted(full), table
        for shard, frame in full.items():
            assert ours[shard].equals(frame), (table, shard)


def test_new_per_document_settings_carry_nothing(runs):
    """A shard the base made with other per-document settings (or another docgraph) carries
    nothing: every step asks `Carry.on` before it takes a row; `--full` carries nothing."""

    def carry_with(yaml: str):
        path = runs["tmp"] / "other.yaml"
        path.write_text(f"storage:\n  shards: {N}\n{yaml}")
        return open_carry(runs["out"], shards.carry_digest(load_settings(str(path))))

    same = carry_with("")
    assert same.reason is None and all(same.on(k) for k in shards.shard_keys(N))
    for other in ("chunking:\n  chunk_size: 200\n", "extraction:\n  max_relation_distance: 0\n"):
        changed = carry_with(other)
        assert not any(changed.on(k) for k in shards.shard_keys(N)), other
        assert "settings" in changed.metadata("chunks", 5)["incremental_reason"]
        assert changed.metadata("chunks", 5)["incremental"] == "whole"
    assert open_carry(runs["out"], same.digest, full=True).reason  # `--full`
