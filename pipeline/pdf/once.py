"""A PDF parsed once: the documents step parses each PDF's structure from the document its
loader opened (`LoadedDoc.source`), so an index reads, hashes and opens a PDF once (issue
47; worker processes open it again in their own process for the layout model); the
structure step takes the parse as data (`pipeline.storage.shard_files.read_scratch`).

Why here and not in the structure step: the structure parse needs the open document, and
the documents step has it. The layout model's pages are read ahead as before, now in the
documents step: from the shard asked for on, shards are loaded until they hold WAVE_PAGES
PDF pages or WAVE_BYTES of documents (which bounds what is held open), those pages are
read by worker processes (`layout.workers.read_pages`), then each PDF is parsed with its
pages' regions. So a corpus of short PDFs uses every core, not only a PDF long enough to
be split. Nothing is module state: the pages travel in the parser's input (`PdfInput`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.config import StructureSettings
from pipeline.pdf.layout import workers as pdf_workers
from pipeline.pdf.layout.workers import Pages
from pipeline.storage.shard_files import read_scratch, write_scratch
from pipeline.structure.model import DocStructure

WAVE_PAGES = 512  # PDF pages read ahead at once: bounds the regions held in memory
WAVE_BYTES = 64 << 20  # and the documents loaded ahead (a corpus with few or no PDFs)
SCRATCH = "pdf_structure"  # the hand-over's name in the run's scratch folder
ROW_KEYS = ("id", "source_path", "title", "text", "metadata", "sha256", "byte_size", "n_pages")

# (shard, the loader's `opened` callback) -> that shard's (documents, rejected_documents)
Load = Callable[[str, Callable[[dict[str, Any], Path, Any], None]], tuple[pl.DataFrame, ...]]


@dataclass
class Opened:
    """One PDF the loader left open: its document row (the columns the parse reads), its
    file (for worker processes) and its pymupdf Document."""

    row: dict[str, Any]
    path: Path
    pdf: Any


@dataclass
class Shard:
    """A shard's loaded frames and its PDFs' structures by document id (a PDF whose parse
    raised has none: the structure step parses it again and records why)."""

    frames: tuple[pl.DataFrame, ...]
    parsed: dict[str, DocStructure] = field(default_factory=dict)


def parse_opened(item: Opened, settings: StructureSettings, pages: Pages | None) -> DocStructure:
    """The structure of an opened PDF (`pages`: its regions read ahead, if any)."""
    from pipeline.pdf.parse import PdfInput, parse_input

    return parse_input(PdfInput(item.row, settings, pdf=item.pdf, pages=pages))


class ReadAhead:
    """The documents of a run's shards, taken in order, each PDF parsed in the open its
    loader made, the pages of the next shards' PDFs read ahead by worker processes (layout
    path, more than one usable CPU)."""

    def __init__(
        self, keys: list[str], load: Load, settings: StructureSettings, workers: int = 0
    ) -> None:
        """`load(key, opened)`: shard `key`'s frames, its opened PDFs given to `opened`;
        `workers`: at most that many processes (0: one a CPU)."""
        self.keys, self.load, self.settings, self.workers = keys, load, settings, workers
        layout = (settings.pdf_structure or "layout") == "layout"
        self.on = layout and pdf_workers.worker_count(10**9, self.workers) > 1
        self.loaded: dict[str, Shard] = {}

    def shard(self, key: str) -> Shard:
        """Shard `key`'s frames and parsed PDFs (with those of the shards after it)."""
        if key not in self.loaded:
            self._load_from(key)
        return self.loaded.pop(key)

    def _load_from(self, key: str) -> None:
        after = self.keys[self.keys.index(key) :] if key in self.keys else [key]
        opened: list[tuple[str, Opened]] = []
        held = 0
        for k in after:
            got: list[Opened] = []
            frames = self.load(k, _collect(got))
            self.loaded[k] = Shard(frames)
            opened += [(k, item) for item in got]
            held += sum(f.estimated_size() for f in frames)
            if not self.on:
                break
            pages = sum(item.row["n_pages"] or 0 for _, item in opened)
            if pages >= WAVE_PAGES or held >= WAVE_BYTES:
                break
        ahead = self._read_ahead([item for _, item in opened])
        for k, item in opened:
            try:
                parsed = parse_opened(item, self.settings, ahead.get(item.row["id"]))
                self.loaded[k].parsed[item.row["id"]] = parsed
            except Exception:  # noqa: BLE001 - the structure step parses it again, records why
                pass
            finally:
                item.pdf.close()

    def _read_ahead(self, opened: list[Opened]) -> dict[str, Pages]:
        """The regions of the PDFs' pages read by worker processes, by document id: none
        when one process would read them (few pages, one CPU, the heuristic path); a PDF
        whose file changed since it was loaded has none (its pages are read here)."""
        pdfs = [(str(item.path), item.row["n_pages"] or 0) for item in opened]
        n = pdf_workers.worker_count(sum(c for _, c in pdfs), self.workers)
        if not self.on or n <= 1:
            return {}
        out: dict[str, Pages] = {}
        for item, read in zip(opened, pdf_workers.read_pages(pdfs, n), strict=True):
            if read is not None and read[0] == item.row["sha256"]:
                out[item.row["id"]] = read[1]
        return out


def hand_over(folder: str | Path, key: str, shard: Shard, settings: StructureSettings) -> None:
    """Write shard `key`'s PDF parses for the structure step of this run (`taken`)."""
    value = {"settings": settings.model_dump_json(), "parsed": shard.parsed}
    write_scratch(folder, SCRATCH, key, value)


def taken(folder: str | Path, key: str, settings: StructureSettings) -> dict[str, DocStructure]:
    """Shard `key`'s PDF parses as the documents step handed them over, by document id
    (a document id hashes the file's bytes); none when there are none, or when they were
    parsed under other settings (a step run alone: its PDFs are parsed again)."""
    value = read_scratch(folder, SCRATCH, key)
    if not isinstance(value, dict) or value.get("settings") != settings.model_dump_json():
        return {}
    return value["parsed"]


def _collect(into: list[Opened]) -> Callable[[dict[str, Any], Path, Any], None]:
    """The loader's `opened` callback: each opened PDF kept in `into` (its row's columns
    the parse reads)."""

    def opened(row: dict[str, Any], path: Path, pdf: Any) -> None:
        into.append(Opened({k: row.get(k) for k in ROW_KEYS}, path, pdf))

    return opened


__all__ = [
    "Opened",
    "ReadAhead",
    "Shard",
    "WAVE_BYTES",
    "WAVE_PAGES",
    "hand_over",
    "parse_opened",
    "taken",
]
