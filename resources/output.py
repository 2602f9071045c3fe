"""The folder a run writes: the output folder's staging version, under the writer lock.

Every step of the index job calls `run_dir` (through the IO manager, or directly where an
asset writes Lance tables or state files): the first call of a run takes the output lock,
clears what a killed run left (temp files; a run the Dagster instance still shows as
started is marked failed) and prepares the staging folder (see pipeline.storage.store). For an
object-store output (`s3://…`) the folder is its local mirror, which that first call brings
to the store's current version and caches first (pipeline.storage.remote.pull).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from pipeline.storage import lock, mirror, remote, store
from pipeline.storage.files import remove_stray_temps
from resources.config import DocgraphConfig

log = logging.getLogger(__name__)
EPHEMERAL_RUN = "EPHEMERAL"  # an asset invoked directly, outside any run
_UNFINISHED = ("STARTED", "STARTING", "NOT_STARTED", "CANCELING")
# One thread at a time prepares the staging folder: the first call of a run discards another
# run's and links the current version's files in, which a second step starting beside it
# must wait for, not do again over it.
_FIRST_CALL = threading.Lock()


def _run_of(context: Any):
    """The DagsterRun behind any execution, IO or check context (None outside a run)."""
    for attr in ("run", "dagster_run"):
        try:
            return getattr(context, attr)
        except Exception:  # noqa: BLE001 - direct invocation contexts raise here
            pass
    try:
        return context.step_context.dagster_run
    except Exception:  # noqa: BLE001
        return None


def _instance_of(context: Any):
    for get in (lambda: context.instance, lambda: context.step_context.instance):
        try:
            return get()
        except Exception:  # noqa: BLE001
            continue
    return None


def run_dir(docgraph: DocgraphConfig, context: Any = None) -> Path:
    """The staging folder of the run behind `context` (see the module docstring)."""
    settings = docgraph.settings()
    root = Path(settings.output_dir)
    run = _run_of(context) if context is not None else None
    run_id = run.run_id if run is not None else EPHEMERAL_RUN
    lock.acquire(root, run_id, settings.storage.lock_wait_s)
    with _FIRST_CALL:  # a run's first steps may start side by side (resources.side_lane)
        orphan = lock.take_orphan(root)
        if orphan and orphan.get("run_id") != run_id:
            _fail_orphan(_instance_of(context), orphan)
        if store.staging_owner(root) != run_id:
            for path in remove_stray_temps(root):
                log.warning("removed %s, left by a run that did not finish", path.relative_to(root))
            if mirror.url_of(root) is not None:  # an object-store output: its local mirror
                remote.pull(root, caches=True)
        return store.begin(root, run_id, run.parent_run_id if run is not None else None)


def _fail_orphan(instance: Any, stale: dict[str, Any]) -> None:
    """Mark the run that held the lock and ended without releasing it (killed or crashed)
    failed in the Dagster instance, where it would otherwise show as started forever."""
    if instance is None:
        return
    run = instance.get_run_by_id(str(stale.get("run_id")))
    if run is None or run.status.value not in _UNFINISHED:
        return
    instance.report_run_failed(
        run,
        message=f"orphaned: {lock.describe(stale)} ended without finishing (killed or crashed)",
    )
