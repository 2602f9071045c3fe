"""The one place that assembles dagster.Definitions: the code location "docgraph" that
pyproject.toml's [tool.dg] block names, loaded by `dg dev` and `dagster dev` alike."""

import gc
from pathlib import Path

from dagster import AssetSelection, Definitions, define_asset_job

from assets import index_assets, index_checks
from assets.automation import INDEX_JOB, index_nightly, input_folder_changed
from resources import build_resources
from resources.executors import OUTPUT_TAG, executor_for  # dagster.yaml queues by OUTPUT_TAG


def index_job(output_dir: str, executor: str | None = None):
    """The index job. By default one process per run (`executor`, else
    `$DOCGRAPH_EXECUTOR`, else in_process):
    the embedding model loads once and the LLM client's connection pool and concurrency
    bound are shared by every stage; `multiprocess` and `dask` run the same steps in other
    processes or machines, the run's coordinating process holding the output lock
    (resources.executors). Runs launched through the Dagster queue (UI, schedule, sensor)
    carry their output folder as a tag, so a second run on the same folder waits in the
    queue instead of failing on the lock."""
    return define_asset_job(
        INDEX_JOB,
        selection=AssetSelection.all(),
        executor_def=executor_for(executor),
        run_tags={OUTPUT_TAG: str(Path(output_dir).resolve())},
        description="Index the input folder end to end: documents to communities and vectors, "
        "published as one new version of the output folder.",
    )


def make_definitions(
    config_path: str | None = None,
    input_dir: str | None = None,
    output_dir: str | None = None,
    executor: str | None = None,
) -> Definitions:
    """Definitions whose resources read the given settings file and folders, the index job
    on `executor` (resources.executors; None: $DOCGRAPH_EXECUTOR, else in_process)."""
    resources = build_resources(config_path, input_dir, output_dir)
    settings = resources["docgraph"].settings()
    assets = index_assets(settings.storage.shards)
    return Definitions(
        assets=assets,
        asset_checks=index_checks(assets),
        jobs=[index_job(settings.output_dir, executor)],
        schedules=[index_nightly],
        sensors=[input_folder_changed],
        resources=resources,
    )


defs = make_definitions()
# The code is loaded: a process that loads it to run (a run worker launched from the UI, a
# step's process) leaves these objects out of the collections its steps make
# (pipeline.memory.frozen says why; run_index freezes its caller's objects the same way).
gc.freeze()
