"""Document shards as Dagster partitions: the per-document stages run shard by shard.

Load, structure, chunking, extraction and text-unit embeddings are partitioned by
document shard (pipeline.ingest.shards); the corpus-wide tail (links across documents, merge,
SAME_TOPIC, communities, reports, the vector tables) is not, and reads every shard's
files. A run targets a range of shards in one step per stage (a single-run backfill
policy: one process keeps the embedding model and the LLM client for every shard), and
each shard's tables are files of their own (`<table>/<shard>.parquet`, pipeline.storage.store),
so the shards outside the range keep the rows of the version the run started from.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetSpec,
    BackfillPolicy,
    MaterializeResult,
    StaticPartitionsDefinition,
)

from assets.metadata import COLUMN_SCHEMA, PARQUET_KINDS, declared_schema, parquet_metadata
from pipeline import memory
from pipeline.config import Settings
from pipeline.extract import lexicon_preload
from pipeline.ingest.find_stale import tail_settings_digest
from pipeline.ingest.shards import carry_digest, corpus_short_ids, shard_keys
from pipeline.storage import shard_files
from pipeline.storage.carry import Carry, open_carry
from pipeline.storage.run_changes import RunChanges, run_changes
from resources import output_root_entry

# the single-run policy is what the shards need and is stable in use; Dagster marks it beta
warnings.filterwarnings("ignore", message=".*backfill_policy.*", category=Warning)
RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"
SHARD_POLICY = BackfillPolicy.single_run()
# A run tag: every document of the shards that run is computed again (`docgraph index
# --full`), none carried over from the version the run started from (pipeline.storage.carry)
FULL_TAG = "docgraph/full"


def shard_partitions(n: int) -> StaticPartitionsDefinition:
    return StaticPartitionsDefinition(shard_keys(n))


def range_tags(keys: Iterable[str]) -> dict[str, str]:
    """Run tags that make a run of the index job cover the shards from min to max of `keys`."""
    keys = sorted(keys)
    return {RANGE_START: keys[0], RANGE_END: keys[-1]} if keys else {}


def tail_keys(asset_graph) -> list:
    """The corpus-wide tail: every materializable asset that is not partitioned by shard."""
    return [
        k for k in asset_graph.materializable_asset_keys if not asset_graph.get(k).is_partitioned
    ]


def shard_carry(context: AssetExecutionContext, settings: Settings) -> Carry:
    """What a per-document step may carry over, inside the shards it runs, from the version
    the run started from: the rows of the documents that did not change."""
    full = context.run.tags.get(FULL_TAG) == "1"
    return open_carry(settings.output_dir, carry_digest(settings), full)


def tail_changes(context: AssetExecutionContext, settings: Settings, folder: Path) -> RunChanges:
    """What the run (staging folder `folder`) changed against the version it started from:
    what a corpus-wide step recomputes, carrying the other rows over; nothing is carried in
    a `docgraph index --full` run."""
    full = context.run.tags.get(FULL_TAG) == "1"
    return run_changes(folder, settings.output_dir, tail_settings_digest(settings), full)


def specs(group: str, tables: dict[str, str], deps: list[str]) -> list[AssetSpec]:
    """Sharded tables' specs. Their column schema (pipeline.schemas, what every shard file is
    conformed to) is the definition's: a range's materialization is copied into an event
    per shard, so per-run metadata stays small (run_shards)."""
    return [
        AssetSpec(
            name,
            description=text,
            group_name=group,
            deps=deps,
            kinds=set(PARQUET_KINDS),
            metadata=declared_schema(name),
        )
        for name, text in tables.items()
    ]


def run_shards(
    context: AssetExecutionContext,
    folder: Path,
    tables: Iterable[str],
    work: Callable[[str], dict[str, pl.DataFrame] | Iterable[dict[str, pl.DataFrame]]],
    extra: Callable[[], dict[str, Any]] = dict,
    carry: Carry | None = None,
    unit: str = "documents",
) -> list[MaterializeResult]:
    """Run `work(shard)` for every shard of the run's range and write the frames it returns
    as those shards' files of each table (or, when it yields them part by part, each part
    as it comes: a huge document's shard is never whole in memory; a part's short ids must
    then be numbered over the shard by `work`); one materialization per table, with the rows the
    range holds now, per-shard timing, and the whole table's row count and preview
    (assets.metadata, from its files), and with `carry` the rows carried over from the
    base version and recomputed (`unit`: what the step carries, documents or text units).
    Dagster stores it once per shard of the range (16 copies in a full run), so the column
    schema is left to the definition (`specs`)."""
    started = time.perf_counter()
    lexicon_preload.start()  # the extractor's lexicons, when the run prepared them (app.run)
    tables = list(tables)
    keys = context.partition_keys
    all_keys = context.assets_def.partitions_def.get_partition_keys()
    rows = dict.fromkeys(tables, 0)
    for key in keys:
        parts = work(key)
        with shard_files.shard_parts(folder, tables, key) as write:
            for frames in [parts] if isinstance(parts, dict) else parts:
                for name in tables:
                    rows[name] += frames[name].height
                # short ids unique over the corpus, as the tail's tables'; taken out of the
                # part, so that `write` frees each frame once it is Arrow
                write({n: corpus_short_ids(frames.pop(n), key, len(all_keys)) for n in tables})
                del frames
                memory.release()  # memory stays that of one part (of one shard)
        del parts
    for name in tables:
        for gone in shard_files.retain_shards(folder, name, all_keys):
            context.log.info(f"{name}: removed shard {gone} (shard count changed)")
    elapsed = round(time.perf_counter() - started, 3)
    meta = extra()
    return [
        MaterializeResult(
            asset_key=name,
            metadata={
                "rows_in_range": rows[name],
                "shards": len(keys),
                "shard_range": f"{keys[0]}..{keys[-1]}" if keys else "none",
                "elapsed_s": elapsed,
                "s_per_shard": round(elapsed / max(1, len(keys)), 3),
                **output_root_entry(folder.parent.resolve()),
                **{k: v for k, v in parquet_metadata(folder, name).items() if k != COLUMN_SCHEMA},
                **meta,
                **(carry.metadata(name, rows[name], unit) if carry is not None else {}),
            },
        )
        for name in tables
    ]
