"""The index job on a Dask cluster, for tests/test_distributed.py.

`dask_index_job` is a module-level function that builds the job from plain arguments, so the
Dask workers rebuild the very same job (`dagster.build_reconstructable_job` records the
module, the function and its arguments). It is definitions.make_definitions' `index_job`,
with the Dask executor of resources.executors in place of the in-process one.
`run_on_dask` launches it as app.run.run_index launches the in-process run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dagster import (
    DagsterInstance,
    JobDefinition,
    build_reconstructable_job,
    execute_job,
)

from assets.automation import INDEX_JOB
from resources.executors import executor_for


def dask_index_job(input_dir: str, output_dir: str, scheduler: str) -> JobDefinition:
    from definitions import make_definitions

    job = make_definitions(None, input_dir, output_dir).resolve_job_def(INDEX_JOB)
    return job.with_executor_def(executor_for("dask", dask_address=scheduler))


def run_on_dask(input_dir: str, output_dir: str, scheduler: str, instance: DagsterInstance) -> Any:
    """The run `run_index(input_dir=..., output_dir=...)` makes, on the Dask scheduler: the
    stale shards (all of them into a new output folder), then the tail."""
    from assets.shards import range_tags
    from pipeline.ingest.find_stale import stale_shards
    from resources import DocgraphConfig

    settings = DocgraphConfig(input_dir=input_dir, output_dir=output_dir).settings()
    stale = stale_shards(settings)
    assert stale, "a run of the tail alone: not what the test compares"
    job = build_reconstructable_job(
        __name__,
        dask_index_job.__name__,
        reconstructable_args=(input_dir, output_dir, scheduler),
        reconstructor_working_directory=str(Path(__file__).resolve().parent),
    )
    run_config: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
    return execute_job(job, instance=instance, run_config=run_config, tags=range_tags(stale))
