"""Run the index job from Python: what `docgraph index`, benchmarks and tests call.

It is the same `index_job` over the same assets that the Dagster UI, schedules and
sensors run (no second code path); only the resources get the caller's folders. A run
covers the document shards whose files changed since the current version
(pipeline.ingest.find_stale) and then the corpus-wide tail; the other shards' tables carry
over from that version.

It executes the job with `execute_job`, not `JobDefinition.execute_in_process`: the latter
keeps every step's output value for the result object, so a run's process held every table
it produced until the end (+0.7 GB at 10k documents). The steps run in this process, or
each in one of its own for a large input (`executor_by_size`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from dagster import DagsterInstance, JobExecutionResult, build_reconstructable_job, execute_job

from assets.ingest import LISTING_TAG
from assets.shards import FULL_TAG, range_tags, tail_keys
from pipeline import memory
from pipeline.config import Settings
from pipeline.extract import lexicon_preload
from pipeline.ingest.find_stale import RunPlan, files_to_run, input_entries, plan_run
from pipeline.ingest.shards import shard_keys
from pipeline.ingest.walk import Entry, forget_listing, write_listing
from pipeline.storage import read_cache
from resources.executors import ENV_EXECUTOR, IN_PROCESS_EXECUTORS, executor_for
from resources.llm import llm_mode


def executor_by_size(
    settings: Settings, entries: list[Entry], to_run: int | None = None
) -> str | None:
    """`multiprocess` for a run of `storage.multiprocess_from_documents` files or more
    (`to_run`: the files it must process, pipeline.ingest.find_stale.files_to_run; default:
    every file), or with a file of `storage.multiprocess_from_file_mb` MB or more (unless
    $DOCGRAPH_EXECUTOR names an executor), else None (the job's default). In one process
    every step starts on what the steps before it left behind (allocator pools, parsers' and
    tokenizers' tables): at 40k documents the reports step peaked at 1.54 GB there and the
    largest step at 1.39 GB in a process of its own. A nightly run of a few changed files
    stays in one process: a process per step costs ~4 s each (37 steps)."""
    if os.environ.get(ENV_EXECUTOR):
        return None
    files = [e for e in entries if e.path is not None and not e.hidden]
    many, large_mb = (
        settings.storage.multiprocess_from_documents,
        settings.storage.multiprocess_from_file_mb,
    )
    if many and (len(files) if to_run is None else to_run) >= many:
        return "multiprocess"
    # a file gone since the walk counts 0: the documents step says so
    if large_mb and any((e.found() or (0,))[0] >= large_mb * 1e6 for e in files):
        return "multiprocess"
    return None


# The job `run_index` built, by index_job's arguments, while it runs: execute_job rebuilds
# the job by calling index_job, and in this process that is the same job (~0.4 s of
# definitions before the first step). A step process of its own builds its own.
_BUILT: dict[tuple, object] = {}


def index_job(
    config_path: str | None,
    input_dir: str | None,
    output_dir: str | None,
    executor: str | None = None,
):
    """The index job over the given settings file and folders (what `run_index` executes)."""
    from definitions import make_definitions

    built = _BUILT.get((config_path, input_dir, output_dir, executor))
    if built is not None:
        return built
    defs = make_definitions(config_path, input_dir, output_dir, executor)
    return defs.resolve_job_def("index_job")


def run_index(
    config_path: str | None = None,
    input_dir: str | None = None,
    output_dir: str | None = None,
    instance: DagsterInstance | None = None,
    raise_on_error: bool = True,
    log_level: str = "INFO",
    full: bool = False,
    entries: list[Entry] | None = None,
    plan: RunPlan | None = None,
) -> JobExecutionResult:
    """Materialize the shards to run (pipeline.ingest.find_stale.plan_run; every shard when
    `full`), then the corpus-wide tail, and run every check; with no shard to run, the tail
    alone. Uses DAGSTER_HOME's instance if set, so CLI runs show up in the UI; otherwise an
    ephemeral one. `log_level` (default: the CLI's) filters the console log only; the run's
    event log keeps everything. `entries`: the input folder's walk when the caller made it
    (else it is made here), and `plan` what plan_run made of it; the run's steps read the
    walk from a file named in the run's tags (kept in memory when they run here)."""
    from definitions import make_definitions

    owned = instance is None and bool(os.environ.get("DAGSTER_HOME"))
    if owned:
        instance = DagsterInstance.get()
    from pipeline.storage import lock
    from resources import DocgraphConfig

    config = DocgraphConfig(config_path=config_path, input_dir=input_dir, output_dir=output_dir)
    settings = config.settings()
    entries = input_entries(settings) if entries is None else entries
    if not full and plan is None:
        plan = plan_run(settings, entries)
    stale = shard_keys(settings.storage.shards) if plan is None else plan.shards
    to_run = None if full else files_to_run(settings, entries, stale)
    executor = executor_by_size(settings, entries, None if to_run is None else to_run.count)
    if executor and instance is not None and instance.is_ephemeral:
        executor = None  # steps in other processes need a persistent instance: the caller's
    defs = make_definitions(config_path, input_dir, output_dir, executor)
    job = defs.resolve_job_def("index_job")
    # the model loads while documents are read (steps in other processes have their own)
    in_process = executor_for(executor).name in IN_PROCESS_EXECUTORS
    if stale and in_process and settings.embedding.process == "worker":
        from pipeline.vectors.embed_worker import get_worker

        get_worker(settings.embedding).warm()
    if to_run is not None and in_process and not llm_mode(settings):  # the offline extractor
        lexicon_preload.prepare(to_run.languages)  # they load while documents are read
    selection = None
    if not stale:  # no shard to run: the tail alone (its settings may have changed)
        selection = tail_keys(defs.resolve_asset_graph())
    job_ref = build_reconstructable_job(
        __name__,
        index_job.__name__,
        reconstructable_args=(config_path, input_dir, output_dir, executor),
    )
    run_config: dict = {"loggers": {"console": {"config": {"log_level": log_level}}}}
    if executor == "multiprocess":  # one step at a time: the memory of one step in all
        run_config["execution"] = {"config": {"max_concurrent": 1}}
    instance, scratch = _instance(instance, executor)
    listing = _save_listing(entries, in_process)
    full_tag = {FULL_TAG: "1"} if full else {}  # nothing carried over
    key = (config_path, input_dir, output_dir, executor)
    _BUILT[key] = job
    try:
        with (
            memory.frozen(),
            read_cache.keeping(read_cache.RUN_BYTES) if in_process else contextlib.nullcontext(),
            execute_job(
                job_ref,
                instance=instance,
                run_config=run_config,
                tags={**range_tags(stale), LISTING_TAG: str(listing), **full_tag},
                raise_on_error=raise_on_error,
                asset_selection=selection,
            ) as result,
        ):
            return result
    finally:  # a run that failed before publishing still held the output lock
        _BUILT.pop(key, None)
        lock.release(settings.output_dir)
        forget_listing(listing)
        if scratch is not None or owned:  # its storage's connections closed
            instance.dispose()
        if scratch is not None:
            scratch.cleanup()


def _instance(instance: DagsterInstance | None, executor: str | None):
    """(the instance to run on, the temporary folder to remove after or None): the caller's;
    without one, in memory, or in a temporary folder when steps run in processes of their
    own (they need a persistent instance)."""
    if instance is not None:
        return instance, None
    if not executor:
        return DagsterInstance.ephemeral(), None
    scratch = tempfile.TemporaryDirectory(prefix="docgraph-dagster-")
    return DagsterInstance.local_temp(scratch.name), scratch


def _save_listing(entries: list[Entry], in_process: bool) -> Path:
    """The walk where the run's steps read it (assets.ingest.run_entries): in this process's
    memory under a temporary file's name, and in that file for steps in processes of their
    own (left empty when every step runs here: writing it took 0.16 s at 40k files)."""
    handle, name = tempfile.mkstemp(prefix="docgraph-listing-", suffix=".jsonl")
    os.close(handle)
    write_listing(name, entries, to_file=not in_process)
    return Path(name)


__all__ = ["executor_by_size", "index_job", "run_index"]
