"""Run the index job in-process: what `docgraph index`, benchmarks and tests call.

It is the same `index_job` over the same assets that the Dagster UI, schedules and
sensors run (no second code path); only the resources get the caller's folders. A run
covers the document shards whose files changed since the current version (pipeline.shards)
and then the corpus-wide tail; the other shards' tables carry over from that version.

It executes the job with `execute_job`, not `JobDefinition.execute_in_process`: the latter
keeps every step's output value for the result object, so a run's process held every table
it produced until the end (+0.7 GB at 10k documents).
"""

from __future__ import annotations

import os

from dagster import DagsterInstance, JobExecutionResult, build_reconstructable_job, execute_job

from assets.shards import range_tags
from pipeline import shards, store
from pipeline.config import Settings
from pipeline.ingest import own_folders


def stale_shards(settings: Settings) -> list[str]:
    """The shards whose files or per-document settings changed since the current version
    (every shard when there is none)."""
    n = settings.storage.shards
    prints = shards.fingerprints(
        settings.input_dir,
        own_folders(settings.output_dir),
        n,
        shards.stage_settings_digest(settings),
    )
    if store.read_manifest(settings.output_dir) is None:
        return sorted(prints)
    return shards.stale_shards(store.resolve(settings.output_dir), prints)


def index_job(config_path: str | None, input_dir: str | None, output_dir: str | None):
    """The index job over the given settings file and folders (what `run_index` executes)."""
    from definitions import make_definitions

    return make_definitions(config_path, input_dir, output_dir).resolve_job_def("index_job")


def run_index(
    config_path: str | None = None,
    input_dir: str | None = None,
    output_dir: str | None = None,
    instance: DagsterInstance | None = None,
    raise_on_error: bool = True,
    log_level: str = "DEBUG",
    full: bool = False,
) -> JobExecutionResult:
    """Materialize the changed shards (every shard when `full`), then the corpus-wide tail,
    and run every check. Uses DAGSTER_HOME's instance if set, so CLI runs show up in the UI;
    otherwise an ephemeral one. `log_level` filters the console log only; the run's event
    log keeps everything."""
    from definitions import make_definitions

    if instance is None and os.environ.get("DAGSTER_HOME"):
        instance = DagsterInstance.get()
    from pipeline import lock
    from resources import DocgraphConfig

    config = DocgraphConfig(config_path=config_path, input_dir=input_dir, output_dir=output_dir)
    settings = config.settings()
    defs = make_definitions(config_path, input_dir, output_dir)
    job = defs.resolve_job_def("index_job")
    stale = sorted(job.partitions_def.get_partition_keys()) if full else stale_shards(settings)
    selection = None
    if not stale:  # no document changed: the tail alone (its settings may have)
        graph = defs.resolve_asset_graph()
        selection = [k for k in graph.materializable_asset_keys if not graph.get(k).is_partitioned]
    job_ref = build_reconstructable_job(
        __name__, index_job.__name__, reconstructable_args=(config_path, input_dir, output_dir)
    )
    try:
        with execute_job(
            job_ref,
            instance=instance or DagsterInstance.ephemeral(),
            run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
            tags=range_tags(stale),
            raise_on_error=raise_on_error,
            asset_selection=selection,
        ) as result:
            return result
    finally:  # a run that failed before publishing still held the output lock
        lock.release(settings.output_dir)


__all__ = ["index_job", "run_index", "stale_shards"]
