"""The one place that assembles dagster.Definitions (loaded by `dagster dev` via workspace.yaml)."""

from dagster import AssetSelection, Definitions, define_asset_job

from assets import index_assets, index_checks
from assets.automation import INDEX_JOB, index_nightly, input_folder_changed
from resources import build_resources

index_job = define_asset_job(
    INDEX_JOB,
    selection=AssetSelection.all(),
    description="Index the input folder end to end: documents to communities and vectors.",
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
