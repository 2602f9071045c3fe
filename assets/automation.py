"""When the index job runs by itself: nightly, and when the input folder changes.

Both start stopped (switch them on in the UI or with `dagster schedule/sensor start`):
a schedule that fires before anyone configured the input folder would index nothing.
"""

from dagster import (
    DefaultScheduleStatus,
    DefaultSensorStatus,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SkipReason,
    schedule,
    sensor,
)

from assets.shards import range_tags, tail_keys
from pipeline.ingest import (
    InputFolderError,
    check_input_folder,
    folder_fingerprint,
    own_folders,
)
from pipeline.ingest.find_stale import plan_run, stale_shards
from resources import DocgraphConfig

INDEX_JOB = "index_job"


@schedule(
    name="index_nightly",
    job_name=INDEX_JOB,
    cron_schedule="0 2 * * *",
    default_status=DefaultScheduleStatus.STOPPED,
    description="Every night at 02:00, bring the index up to date: a run of the shards whose "
    "files changed and the corpus-wide tail; the tail alone when only its settings changed or "
    "LLM failures wait for a retry; no run when the index is up to date.",
)
def index_nightly(context: ScheduleEvaluationContext, docgraph: DocgraphConfig):
    # a run of the job names its shards (a run with no partition range fails at its first
    # partitioned step), or selects the tail alone
    settings = docgraph.settings()
    try:
        check_input_folder(settings.input_dir, own_folders(settings.output_dir))
    except InputFolderError as exc:
        return SkipReason(str(exc))
    plan = plan_run(settings)
    if plan.up_to_date:
        return SkipReason(f"index up to date: {plan.reason}")
    return RunRequest(
        tags={**range_tags(plan.shards), "docgraph/plan": plan.reason},
        asset_selection=None if plan.shards else tail_keys(context.repository_def.asset_graph),
    )


@sensor(
    name="input_folder_changed",
    job_name=INDEX_JOB,
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.STOPPED,
    description="Index again when a file under the input folder is added, edited or deleted: "
    "a run of the changed document shards, then the corpus-wide tail.",
)
def input_folder_changed(context: SensorEvaluationContext, docgraph: DocgraphConfig):
    settings = docgraph.settings()
    own = own_folders(settings.output_dir)  # the run's own writes never trigger it
    try:
        check_input_folder(settings.input_dir, own)
    except InputFolderError as exc:
        return SkipReason(str(exc))
    # compared with the published version, not with the last request: a run that failed is
    # asked for again once the folder changes again (the run key stops exact repeats)
    stale = stale_shards(settings)
    if not stale:
        return SkipReason(f"input folder unchanged ({settings.storage.shards} shards)")
    fingerprint, n_files = folder_fingerprint(settings.input_dir, own)
    context.update_cursor(fingerprint)
    return RunRequest(
        run_key=fingerprint,
        tags={
            **range_tags(stale),
            "docgraph/input_files": str(n_files),
            "docgraph/changed_shards": ",".join(stale),
        },
    )
