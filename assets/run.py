"""Run the index job in-process: what `docgraph index`, benchmarks and tests call.

It is the same `index_job` over the same assets that the Dagster UI, schedules and
sensors run (no second code path); only the resources get the caller's folders.
"""

import os

from dagster import DagsterInstance, ExecuteInProcessResult


def run_index(
    config_path: str | None = None,
    input_dir: str | None = None,
    output_dir: str | None = None,
    instance: DagsterInstance | None = None,
    raise_on_error: bool = True,
    log_level: str = "DEBUG",
) -> ExecuteInProcessResult:
    """Materialize every asset and run every check. Uses DAGSTER_HOME's instance if set,
    so CLI runs show up in the UI; otherwise an ephemeral one. `log_level` filters the
    console log only; the run's event log keeps everything."""
    from definitions import make_definitions

    if instance is None and os.environ.get("DAGSTER_HOME"):
        instance = DagsterInstance.get()
    from pipeline import lock
    from resources import DocgraphConfig

    defs = make_definitions(config_path, input_dir, output_dir)
    job = defs.resolve_job_def("index_job")
    try:
        return job.execute_in_process(
            run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
            instance=instance,
            raise_on_error=raise_on_error,
        )
    finally:  # a run that failed before publishing still held the output lock
        root = DocgraphConfig(config_path=config_path, output_dir=output_dir).settings().output_dir
        lock.release(root)
