"""The index job's in-process executor, with a side lane: a step tagged SIDE_TAG runs in a
thread of its own beside the main steps.

Why: in a one-file edit at 40k documents `lexical_index` took 1.3-1.6 s, and only
`published_index` waits for it, while the steps of the critical path (graph, communities,
reports, vector tables) keep 1.1-1.4 of the machine's 2 cores busy (sampled from /proc, one
edit, session 29). Dagster's in-process executor runs one step at a time; its multiprocess
executor starts a process per step (seconds of imports each) and loses the run's shared
embedding worker and read cache.

Everything else is Dagster's in-process executor (`InProcessExecutor`, its config and
name, so `resources.embedder` still sees one process): the main steps run one at a time in
the run's main thread, where an interrupt stops them as before, in Dagster's order (the
ready step of the highest `dagster/priority` next). The side lane runs side steps one at a
time in a worker thread, in the same order. Dagster's bookkeeping of the run
(`ActiveExecution`: events handled, steps made ready, skips, hooks) is done under one lock
by the thread whose step made the event, so a side step that makes another ready starts it
at once, not when the main step in hand ends; the main thread yields every event (Dagster
logged each as it was made; the event log storage has its own lock). A side step cannot be
interrupted (Dagster raises interrupts in the main thread only); whatever way the run ends,
it waits for the side step to finish, so no step writes after the run (and its output lock)
ended. A side step's failure ends the run after the main step in hand, as the in-process
executor's raise would have.

A step belongs on the side lane when it is off the critical path, bounded in memory next to
the main steps it can overlap, needs nothing that is not safe from two threads, and reads no
table a step that may run beside it writes. Dependencies order only what they name: the
chunks step rewrites the `documents` shards (their `text_unit_ids`), so a side step reading
`documents` could start beside it and read a shard as it is replaced (most likely what
failed once, "dictionary page beyond the first page", when `structure_edges` and
`publications` were side steps: polars reading a new file at the old one's offsets). Today:
`chunk_embeddings` (it reads the chunks and waits for the embedding worker, whose client and
cache take concurrent callers); after the merge, beside communities and reports, the unit
vector tables, then `lexical_index` and `same_topic_edges` (text units, sections and
documents in; Lance tables, a BM25 folder and a small table out; priority -1: nothing waits
for them but the publish step); and the checks of side steps (assets.checks). What runs
beside the reports is bounded by the bound on a process's peak: the reports' step holds
~0.35 GB at 40k documents, each of these ~0.2-0.25 GB (the graph's vector tables were side
steps for a while: with them, a 40k edit's peak passed 1.9 GB).

Written against dagster 1.13.27, which pyproject pins: `ActiveExecution`,
`dagster_event_sequence_for_step` and the hook trigger are Dagster's private API
(tests/test_side_lane.py runs the job through it).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack

from dagster import ExecutorDefinition, in_process_executor
from dagster._core.events import DagsterEvent, EngineEventData
from dagster._core.execution.api import ExecuteRunWithPlanIterable
from dagster._core.execution.compute_logs import create_compute_log_file_key
from dagster._core.execution.context.system import PlanExecutionContext, PlanOrchestrationContext
from dagster._core.execution.context_creation_job import PlanExecutionContextManager
from dagster._core.execution.plan.active import ActiveExecution
from dagster._core.execution.plan.execute_plan import (
    _handle_compute_log_setup_error,
    _handle_compute_log_teardown_error,
    _trigger_hook,
    dagster_event_sequence_for_step,
)
from dagster._core.execution.plan.instance_concurrency_context import InstanceConcurrencyContext
from dagster._core.execution.plan.plan import ExecutionPlan
from dagster._core.execution.plan.step import ExecutionStep
from dagster._core.executor.in_process import InProcessExecutor
from dagster._core.storage.tags import PRIORITY_TAG

SIDE_TAG = "docgraph/side"  # op tag: "true" puts the step on the side lane
_WAIT_S = 0.2  # how long the main thread waits on the side lane at most before looking again


def is_side(step: ExecutionStep) -> bool:
    return step.tags.get(SIDE_TAG) == "true"


def _priority(step: ExecutionStep) -> int:
    """Dagster's order of ready steps (its default sort key): higher `dagster/priority` first."""
    return -int(step.tags.get(PRIORITY_TAG, 0))


class _SideLane:
    """Side steps one at a time in a worker thread. Dagster's bookkeeping of the run (its
    `ActiveExecution`) is done by the thread whose step made the event, under `lock`: a side
    step that ends makes the next one ready and starts it at once, while a main step runs.
    The main thread yields every event (`take`); Dagster logged each as it was made."""

    def __init__(self, job_context: PlanExecutionContext, active: ActiveExecution):
        self.job_context, self.active = job_context, active
        self.lock = threading.Condition()  # over every use of `active`; notified by the lane
        self.waiting: list[ExecutionStep] = []  # ready side steps, in the order they became so
        self.main: list[ExecutionStep] = []  # ready main steps, likewise
        self.out: list[DagsterEvent] = []  # handled side events, for the main thread to yield
        self.running = self.closed = False
        self.error: BaseException | None = None

    def collect(self) -> None:
        """Every step that became ready, to its lane (under the lock)."""
        for step in self.active.get_steps_to_execute():
            (self.waiting if is_side(step) else self.main).append(step)

    def start_next(self) -> None:
        """The ready side step of the highest priority started, if none runs (under the lock)."""
        if self.running or self.closed or not self.waiting or self.error is not None:
            return
        step = min(self.waiting, key=_priority)  # as on the main lane
        self.waiting.remove(step)
        step_context = self.job_context.for_step(step, self.active.get_known_state())
        self.running = True
        threading.Thread(
            target=self._run, args=(step_context,), name=f"side-{step.key}", daemon=True
        ).start()

    def _run(self, step_context) -> None:
        events: list[DagsterEvent] = []
        try:
            for event in dagster_event_sequence_for_step(step_context):
                with self.lock:
                    events.append(event)
                    self.out.append(event)
                    self.active.handle_event(event)
            with self.lock:
                self.active.verify_complete(self.job_context, step_context.step.key)
                self.out += _after_step(self.job_context, self.active, step_context, events)
        except BaseException as exc:  # raise_on_error: re-raised in the main thread
            with self.lock:
                self.error = exc
        finally:
            with self.lock:
                self.running = False
                self.collect()
                self.start_next()
                self.lock.notify_all()

    def take(self) -> list[DagsterEvent]:
        """The side steps' events handled since the last call."""
        with self.lock:
            events, self.out = self.out, []
        return events

    def wait(self) -> None:
        """Block until the side lane has news (or _WAIT_S passed)."""
        with self.lock:
            if self.running and not self.out:
                self.lock.wait(timeout=_WAIT_S)

    def close(self) -> None:
        """Wait for the side step in hand (it cannot be stopped); start no other."""
        with self.lock:
            self.closed = True
            while self.running:
                self.lock.wait()


def _after_step(job_context, active, step_context, events) -> list[DagsterEvent]:
    """What Dagster's in-process loop does after a step: skips it caused, then its hooks."""
    skips = list(active.plan_events_iterator(job_context))
    events += skips  # the hooks are given the step's events and these
    return skips + list(_trigger_hook(step_context, events))


def _main_step(
    job_context: PlanExecutionContext, active: ActiveExecution, lane: _SideLane, step
) -> Iterator[DagsterEvent]:
    with lane.lock:
        step_context = job_context.for_step(step, active.get_known_state())
    events: list[DagsterEvent] = []
    for event in dagster_event_sequence_for_step(step_context):
        events.append(event)
        yield event
        with lane.lock:
            active.handle_event(event)
        yield from lane.take()
    with lane.lock:
        active.verify_complete(job_context, step.key)
        after = _after_step(job_context, active, step_context, events)
    yield from after


def side_lane_iterator(
    job_context: PlanExecutionContext,
    execution_plan: ExecutionPlan,
    instance_concurrency_context: InstanceConcurrencyContext | None = None,
) -> Iterator[DagsterEvent]:
    """Dagster's `inner_plan_execution_iterator`, with side steps on the side lane."""
    compute_log_manager = job_context.instance.compute_log_manager
    step_keys = [step.key for step in execution_plan.get_steps_to_execute_in_topo_order()]
    with (
        InstanceConcurrencyContext(job_context.instance, job_context.dagster_run) as concurrency,
        execution_plan.start(
            retry_mode=job_context.retry_mode,
            instance_concurrency_context=concurrency,
            step_dependency_config=job_context.step_dependency_config,
        ) as active,
        ExitStack() as capture_stack,
    ):
        log_key = compute_log_manager.build_log_key_for_run(
            job_context.run_id, create_compute_log_file_key()
        )
        try:
            log_context = capture_stack.enter_context(compute_log_manager.capture_logs(log_key))
            yield DagsterEvent.capture_logs(job_context, step_keys, log_key, log_context)
        except Exception:
            yield from _handle_compute_log_setup_error(job_context, sys.exc_info())
        lane = _SideLane(job_context, active)
        try:
            yield from _lanes(job_context, active, lane)
        finally:
            lane.close()
        try:
            capture_stack.close()
        except Exception:
            yield from _handle_compute_log_teardown_error(job_context, sys.exc_info())


def _lanes(job_context, active: ActiveExecution, lane: _SideLane) -> Iterator[DagsterEvent]:
    """Main steps one at a time in this thread, side steps beside them, until all are done."""
    while True:
        with lane.lock:
            if active.is_complete:
                break
            lane.collect()
            events = list(active.concurrency_event_iterator(job_context))
            lane.start_next()
            step = min(lane.main, key=_priority, default=None)  # as Dagster picks its next
            if step is not None:
                lane.main.remove(step)
            side_runs = lane.running
        yield from events
        yield from lane.take()
        if lane.error is not None:
            raise lane.error
        if step is not None:
            yield from _main_step(job_context, active, lane, step)
        elif side_runs:
            lane.wait()
        else:
            active.sleep_til_ready()
    yield from lane.take()
    if lane.error is not None:  # the run may be complete: the failure was handled first
        raise lane.error


class SideLaneExecutor(InProcessExecutor):
    """Dagster's in-process executor whose steps tagged SIDE_TAG run beside the others."""

    def execute(
        self, plan_context: PlanOrchestrationContext, execution_plan: ExecutionPlan
    ) -> Iterator[DagsterEvent]:
        keys = execution_plan.step_keys_to_execute
        pid = os.getpid()
        yield DagsterEvent.engine_event(
            plan_context,
            f"Executing steps in process (pid: {pid}), side steps in a thread beside them",
            event_specific_data=EngineEventData.in_process(pid, keys),
        )
        yield from ExecuteRunWithPlanIterable(
            execution_plan=plan_context.execution_plan,
            iterator=side_lane_iterator,
            execution_context_manager=PlanExecutionContextManager(
                job=plan_context.job,
                retry_mode=plan_context.retry_mode,
                execution_plan=plan_context.execution_plan,
                run_config=plan_context.run_config,
                dagster_run=plan_context.dagster_run,
                instance=plan_context.instance,
                raise_on_error=plan_context.raise_on_error,
                output_capture=plan_context.output_capture,
                step_dependency_config=self.step_dependency_config,
            ),
        )
        yield DagsterEvent.engine_event(
            plan_context,
            f"Finished steps in process (pid: {pid})",
            event_specific_data=EngineEventData.in_process(pid, keys),
        )


def _create(init_context) -> SideLaneExecutor:
    stock = in_process_executor.executor_creation_fn(init_context)
    return SideLaneExecutor(stock.retries, stock.step_dependency_config, stock.marker_to_close)


side_lane_executor = ExecutorDefinition(
    name=in_process_executor.name,  # one process: what resources.embedder looks for
    config_schema=in_process_executor.config_schema,
    requirements=in_process_executor.get_requirements,
    executor_creation_fn=_create,
    description="Dagster's in-process executor; steps tagged docgraph/side run in a thread "
    "beside the others.",
)
