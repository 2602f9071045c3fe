"""The one place that assembles dagster.Definitions (loaded by `dagster dev` via workspace.yaml)."""

from dagster import AssetSelection, Definitions, define_asset_job, in_process_executor

from assets import index_assets, index_checks
from assets.automation import INDEX_JOB, index_nightly, input_folder_changed
from resources import build_resources

# One process per run: the embedding model loads once, the LLM client's connection pool and
# concurrency bound are shared by every stage, and the output lock (pipeline.lock) is held
# by that process from the first step to the publish step.
index_job = define_asset_job(
    INDEX_JOB,
    selection=AssetSelection.all(),
    executor_def=in_process_executor,
    description="Index the input folder end to end: documents to communities and vectors, "
    "published as one new version of the output folder.",
)


def make_definitions(
    config_path: str | None = None, input_dir: str | None = None, output_dir: str | None = None
) -> Definitions:
    """Definitions whose resources read the given settings file and folders."""
    return Definitions(
        assets=index_assets,
        asset_checks=index_checks,
        jobs=[index_job],
        schedules=[index_nightly],
        sensors=[input_folder_changed],
        resources=build_resources(config_path, input_dir, output_dir),
    )


defs = make_definitions()
