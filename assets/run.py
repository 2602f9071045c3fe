"""Run the index asset graph in-process: what `docgraph index`, benchmarks and tests call.

It is the same asset graph the Dagster UI, schedules and sensors run (no second code
path); only the resources are built from the caller's folders and config file.
"""

import os

from dagster import DagsterInstance, ExecuteInProcessResult, materialize

from assets import index_assets, index_checks
from resources import DocgraphConfig, EmbedderResource, ParquetIOManager


def build_resources(
    config_path: str | None = None, input_dir: str | None = None, output_dir: str | None = None
) -> dict[str, object]:
    config = DocgraphConfig(config_path=config_path, input_dir=input_dir, output_dir=output_dir)
    return {
        "docgraph": config,
        "io_manager": ParquetIOManager(config=config),
        "embedder": EmbedderResource(config=config),
    }


def run_index(
    config_path: str | None = None,
    input_dir: str | None = None,
    output_dir: str | None = None,
    instance: DagsterInstance | None = None,
    raise_on_error: bool = True,
) -> ExecuteInProcessResult:
    """Materialize every asset and run every check. Uses DAGSTER_HOME's instance if set,
    so CLI runs show up in the UI; otherwise an ephemeral one."""
    if instance is None and os.environ.get("DAGSTER_HOME"):
        instance = DagsterInstance.get()
    return materialize(
        [*index_assets, *index_checks],
        resources=build_resources(config_path, input_dir, output_dir),
        instance=instance,
        raise_on_error=raise_on_error,
    )
