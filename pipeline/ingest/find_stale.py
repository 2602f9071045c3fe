"""What a run must do: which document shards to index (the input folder's walk,
fingerprinted shard by shard, pipeline.ingest.shards, against the record of the published
version) and whether the corpus-wide tail must run again. What `docgraph index`, the
nightly schedule, the input-folder sensor and the Dask launcher all ask before a run."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from pipeline.config import Settings
from pipeline.ingest import shards
from pipeline.ingest.walk import Entry, own_folders, walk_input
from pipeline.storage import store
from pipeline.storage.files import atomic_write_text


def input_entries(settings: Settings) -> list[Entry]:
    """The input folder's walk (what the shard fingerprints and the executor choice read)."""
    root = Path(settings.input_dir)
    return walk_input(root, own_folders(settings.output_dir)) if root.is_dir() else []


def stale_shards(settings: Settings, entries: list[Entry] | None = None) -> list[str]:
    """The shards whose files or per-document settings changed since the current version
    (every shard when there is none)."""
    n = settings.storage.shards
    prints = shards.fingerprints(
        settings.input_dir,
        own_folders(settings.output_dir),
        n,
        shards.stage_settings_digest(settings),
        entries=input_entries(settings) if entries is None else entries,
    )
    if store.read_manifest(settings.output_dir) is None:
        return sorted(prints)
    return shards.stale_shards(store.resolve(settings.output_dir), prints)


@dataclass(frozen=True)
class FilesToRun:
    """What a run of some shards must (re)process (`files_to_run`)."""

    count: int  # input files: added, edited or deleted; or every file of the stale shards
    # the languages the extractor will read (pipeline.extract.lexicon_preload): the published
    # version's for the edited files, its most common one for files new to it (empty when
    # there is no version: nothing to go by)
    languages: frozenset[str] = frozenset()


def files_to_run(settings: Settings, entries: list[Entry], stale: list[str]) -> FilesToRun:
    """How many input files a run of the `stale` shards must (re)process: the files added,
    edited (size or mtime) or deleted since the published version, when their shards are
    every stale shard; else every file of the stale shards (no version yet, or new
    per-document settings re-run whole shards). What the executor choice weighs: a nightly
    run of 100 new files in a 40k corpus touches every shard, but is 100 files of work."""
    n = settings.storage.shards
    in_stale = [e for e in entries if not e.hidden and shards.shard_of(e.rel, n) in set(stale)]
    if store.read_manifest(settings.output_dir) is None:
        return FilesToRun(len(in_stale))
    base = store.read_table(
        store.resolve(settings.output_dir),
        "documents",
        ["source_path", "byte_size", "creation_date", "language"],
    )
    known = set(base.drop("language").iter_rows())
    present = {e.rel: e for e in entries if not e.hidden}
    changed = {rel for rel, e in present.items() if _file_key(e) not in known}
    paths = base.get_column("source_path")
    languages = _languages(base.filter(paths.is_in(list(changed))), base, changed - set(paths))
    changed |= set(paths.to_list()) - set(present)
    if {shards.shard_of(rel, n) for rel in changed} >= set(stale):
        return FilesToRun(len(changed), languages)
    return FilesToRun(len(in_stale), languages)


def _languages(edited: pl.DataFrame, base: pl.DataFrame, new: set[str]) -> frozenset[str]:
    """The languages of the `edited` files' rows, and the corpus' most common when `new`."""
    found = set(edited.get_column("language").drop_nulls().to_list())
    common = base.get_column("language").drop_nulls().mode().sort()
    return frozenset(found | ({common[0]} if new and len(common) else set()))


def _file_key(entry: Entry) -> tuple[str, int, str] | None:
    """(path, size, mtime) as the documents table records them (pipeline.ingest.loader)."""
    if (found := entry.found()) is None:
        return None
    return entry.rel, found[0], datetime.fromtimestamp(found[2], tz=UTC).isoformat()


# what an LLM call's settings change only in how it is made, not in what it answers
_LLM_RUNTIME = {"api_key", "timeout_s", "max_retries", "concurrency", "cache", "prices"}
# graph settings that change how the tail computes its tables, never what they hold
_GRAPH_RUNTIME = {"incremental_merge_max_share"}


# What the tail writes, by version: a change re-runs the tail of an index written before
# once ("2": the BM25 index, lexical/, which an index of "1" lacks).
TAIL_FORMAT = "2"


def tail_settings_digest(settings: Settings) -> str:
    """Hash of what the corpus-wide tail's output depends on besides the shards' tables: the
    per-document stages' digest, the graph, report, SAME_TOPIC and LLM settings, the
    installed docgraph version (its code) and TAIL_FORMAT. Never the API key (it is not
    hashed at all)."""
    try:
        code = metadata.version("docgraph")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        code = "unknown"
    parts = [
        shards.stage_settings_digest(settings),
        settings.graph.model_dump_json(exclude=_GRAPH_RUNTIME),
        settings.reports.model_dump_json(),
        settings.same_topic.model_dump_json(),
        settings.llm.model_dump_json(exclude=_LLM_RUNTIME),
        code,
        TAIL_FORMAT,
    ]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


TAIL_FILE = "tail.json"  # in a version: the digest of the settings its tail was built with


def record_tail(folder: str | Path, settings: Settings) -> None:
    """Record in a run's folder (before it is published) what its tail was built with."""
    text = json.dumps({"settings": tail_settings_digest(settings)})
    atomic_write_text(Path(folder) / TAIL_FILE, text)


def recorded_tail(folder: Path) -> str | None:
    try:
        return json.loads((folder / TAIL_FILE).read_text(encoding="utf-8")).get("settings")
    except (OSError, ValueError, AttributeError):
        return None


# failures a run of the tail retries: an LLM that timed out or rate-limited may answer now
RETRIED_FAILURES = ("summary_failures", "report_failures")


@dataclass
class RunPlan:
    """The shards a run must index and whether the tail must run; `reason` says why, in
    words for a log line or a skip message."""

    shards: list[str] = field(default_factory=list)
    tail: bool = False
    reason: str = ""

    @property
    def up_to_date(self) -> bool:
        return not self.shards and not self.tail


def _shards_to_retry(settings: Settings) -> list[str]:
    """LLM mode: the shards whose extraction failed for some text units in the current
    version (a timeout or a rate limit may answer now; a failure is never cached)."""
    if not settings.llm.enabled:
        return []
    files = store.table_files(store.resolve(settings.output_dir), "extraction_failures")
    return [f.stem for f in files if pq.read_metadata(f).num_rows]


def plan_run(settings: Settings, entries: list[Entry] | None = None) -> RunPlan:
    """What a run must do now: the stale shards (and in LLM mode those holding extraction
    failures) and the tail after them; with none, the tail alone when its settings or the
    docgraph version changed since the current version or when that version holds LLM
    summary or report failures to retry; otherwise nothing."""
    manifest = store.read_manifest(settings.output_dir)
    stale = stale_shards(settings, entries)
    if manifest is None:
        return RunPlan(stale, True, "no index yet")
    keys = set(shards.shard_keys(settings.storage.shards))
    retry = sorted(set(_shards_to_retry(settings)) & keys - set(stale))
    if stale or retry:
        reason = f"{len(stale)} of {len(keys)} shards changed"
        if retry:
            reason += f", {len(retry)} hold extraction failures to retry"
        return RunPlan(sorted(stale + retry), True, reason)
    version = manifest["version"]
    if recorded_tail(store.resolve(settings.output_dir)) != tail_settings_digest(settings):
        return RunPlan(
            [], True, f"the corpus-wide stages' settings or code changed since {version}"
        )
    counts = manifest.get("tables", {})
    retry = {name: counts.get(name, 0) for name in RETRIED_FAILURES if counts.get(name, 0)}
    if retry and settings.llm.enabled:
        failures = ", ".join(f"{n} {name}" for name, n in retry.items())
        return RunPlan([], True, f"{version} holds {failures} to retry")
    return RunPlan(
        reason=f"{version} holds every input file as it is now, built with these settings"
    )
