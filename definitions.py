"""The one place that assembles dagster.Definitions (loaded by `dagster dev` via workspace.yaml)."""

from __future__ import annotations

from dagster import AssetSelection, Definitions, define_asset_job

from assets import index_assets, index_checks
from assets.run import build_resources

index_job = define_asset_job(
    "index_job",
    selection=AssetSelection.all(),
    description="Index the input folder end to end: documents to communities and vectors.",
)

defs = Definitions(
    assets=index_assets,
    asset_checks=index_checks,
    jobs=[index_job],
    resources=build_resources(),
)
