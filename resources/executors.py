"""Which Dagster executor runs the index job: in one process, or its steps in other processes.

`executor_for(name)` gives the executor definition for `in_process` (the default: one process,
the embedding model loaded once; Dagster's in-process executor with a side lane,
resources.side_lane), `multiprocess` (a child process per step) or `dask` (steps
on a Dask cluster: the scheduler at `DASK_SCHEDULER_ADDRESS`, or a local cluster). The name
comes from the argument, else `$DOCGRAPH_EXECUTOR`, else `in_process`.

The executors that run steps in other processes are wrapped by `hold_output_lock`: the run's
orchestrating process (the one that launches the steps and waits for them) takes the output
lock (pipeline.storage.lock) for the run before its first step and releases it when the run ends,
however it ends. So the run holds the output folder for its whole life, steps in any process
join it, and a worker process that lives on after the run (a Dask worker) holds nothing. A
Celery or Kubernetes executor is wrapped the same way: `hold_output_lock(k8s_job_executor)`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dagster import ExecutorDefinition, multiprocess_executor

from pipeline.storage import lock
from resources.side_lane import side_lane_executor

if TYPE_CHECKING:
    from dagster._core.execution.context.system import PlanOrchestrationContext
    from dagster._core.execution.plan.plan import ExecutionPlan
    from dagster._core.executor.base import Executor

ENV_EXECUTOR = "DOCGRAPH_EXECUTOR"  # in_process | multiprocess | dask
ENV_DASK_ADDRESS = "DASK_SCHEDULER_ADDRESS"  # Dask's own variable for its scheduler
OUTPUT_TAG = "docgraph/output"  # the job's run tag naming its output folder (definitions.py)
EXECUTORS = ("in_process", "multiprocess", "dask")
# executors whose steps all run in the run's own process: the job's default, and the one
# `materialize` / `execute_in_process` use
IN_PROCESS_EXECUTORS = ("in_process", "execute_in_process_executor")


def lock_owner(run: Any) -> str:
    """The owner a run takes the output lock as: what resources.output.run_dir passes."""
    return run.run_id


def output_root(job_def: Any, run_config: Mapping[str, Any], tags: Mapping[str, str]) -> str | None:
    """The output folder a run of `job_def` writes: its `docgraph` resource's settings with
    the run config's overrides (Launchpad, schedules), as its steps see them; else the job's
    output tag; None for a job that writes no index."""
    if "docgraph" in job_def.resource_defs:
        from dagster._core.system_config.objects import ResolvedRunConfig

        from resources.config import DocgraphConfig

        config = ResolvedRunConfig.build(job_def, run_config).resources["docgraph"].config or {}
        fields = ("config_path", "input_dir", "output_dir")
        return DocgraphConfig(**{k: config.get(k) for k in fields}).settings().output_dir
    return tags.get(OUTPUT_TAG)


class _HoldsOutputLock:
    """Mixed into an executor's own class (its `execute` type checks keep passing)."""

    _lock_wait_s: float = 0.0

    def execute(
        self, plan_context: PlanOrchestrationContext, execution_plan: ExecutionPlan
    ) -> Iterator[Any]:
        run = plan_context.dagster_run
        root = output_root(plan_context.job.get_definition(), run.run_config, run.tags or {})
        if not root:  # not the index job: nothing to hold
            yield from super().execute(plan_context, execution_plan)  # type: ignore[misc]
            return
        lock.acquire(root, lock_owner(run), self._lock_wait_s)
        try:
            yield from super().execute(plan_context, execution_plan)  # type: ignore[misc]
        finally:  # a run that failed before publishing held it too (as app.run does)
            lock.release(root)


_HOLDING: dict[type, type] = {}


def _holding(executor: Executor, wait_s: float) -> Executor:
    cls = type(executor)
    sub = _HOLDING.get(cls)
    if sub is None:
        sub = _HOLDING[cls] = type(f"OutputLock{cls.__name__}", (_HoldsOutputLock, cls), {})
    held = object.__new__(sub)
    held.__dict__.update(executor.__dict__)
    held._lock_wait_s = wait_s
    return held


def hold_output_lock(executor_def: ExecutorDefinition, wait_s: float = 0.0) -> ExecutorDefinition:
    """`executor_def` whose runs hold the output lock in their orchestrating process, waiting
    up to `wait_s` seconds for another run's (see the module docstring)."""
    create = executor_def.executor_creation_fn
    if create is None:
        raise ValueError(f"executor {executor_def.name} has no creation function")
    return ExecutorDefinition(
        name=executor_def.name,
        config_schema=executor_def.config_schema,
        requirements=executor_def.get_requirements,
        executor_creation_fn=lambda init_context: _holding(create(init_context), wait_s),
        description=executor_def.description,
    )


def dask_executor_def(address: str | None = None) -> ExecutorDefinition:
    """The dagster-dask executor: on the scheduler at `address`, else a local cluster (one
    thread per worker: Dagster steps are not thread-safe)."""
    from dagster_dask import dask_executor

    cluster = (
        {"existing": {"address": address}} if address else {"local": {"threads_per_worker": 1}}
    )
    return dask_executor.configured({"cluster": cluster}, name="dask")


def executor_for(
    name: str | None = None,
    *,
    dask_address: str | None = None,
    lock_wait_s: float = 0.0,
    environ: Mapping[str, str] | None = None,
) -> ExecutorDefinition:
    """The executor definition called `name` (else $DOCGRAPH_EXECUTOR, else in_process);
    a Dask one on `dask_address` (else $DASK_SCHEDULER_ADDRESS, else a local cluster)."""
    environ = os.environ if environ is None else environ
    name = (name or environ.get(ENV_EXECUTOR) or "in_process").strip().lower().replace("-", "_")
    if name == "in_process":  # its steps run in the run's process: they hold the lock
        return side_lane_executor
    if name == "multiprocess":
        return hold_output_lock(multiprocess_executor, lock_wait_s)
    if name == "dask":
        address = dask_address or environ.get(ENV_DASK_ADDRESS) or None
        return hold_output_lock(dask_executor_def(address), lock_wait_s)
    raise ValueError(f"unknown executor {name!r}: expected one of {', '.join(EXECUTORS)}")
