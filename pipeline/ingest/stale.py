"""Which document shards a run must index: the input folder's walk, fingerprinted shard by
shard (pipeline.ingest.shards), compared with the record of the published version. What
`docgraph index`, the input-folder sensor and the Dask launcher all ask before a run."""

from __future__ import annotations

from pathlib import Path

from pipeline.config import Settings
from pipeline.ingest import shards
from pipeline.ingest.walk import Entry, own_folders, walk_input
from pipeline.storage import store


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
