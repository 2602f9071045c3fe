"""The in-process executor's side lane (resources.side_lane): real Dagster runs of small jobs
on it, and the index job's lexical index beside the communities."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from dagster import (
    DagsterInstance,
    Definitions,
    asset,
    build_reconstructable_job,
    define_asset_job,
    execute_job,
)

from resources.side_lane import SIDE_TAG, side_lane_executor

HERE = Path(__file__).resolve().parent
# the side step and the main step each wait here for the other: both must run at once
MEET = threading.Barrier(2, timeout=30)
SEEN: dict[str, str] = {}  # what the steps saw: the thread each ran in, what they made


def lane_job(fails: str):
    """start -> side (on the side lane) and main -> after; `fails`: the step that raises."""

    @asset
    def start() -> int:
        return 1

    @asset(op_tags={SIDE_TAG: "true"})
    def side(start: int) -> int:
        SEEN["side"] = threading.current_thread().name
        MEET.wait()
        if fails == "side":
            raise ValueError("the side step failed")
        time.sleep(0.5 if fails == "main" else 0)
        SEEN["side_done"] = "yes"
        return start + 1

    @asset
    def main(start: int) -> int:
        SEEN["main"] = threading.current_thread().name
        MEET.wait()
        if fails == "main":
            raise ValueError("the main step failed")
        return start + 2

    @asset
    def after(side: int, main: int) -> int:
        SEEN["after"] = threading.current_thread().name
        SEEN["sum"] = str(side + main)
        return side + main

    job = define_asset_job("lanes", executor_def=side_lane_executor)
    defs = Definitions(assets=[start, side, main, after], jobs=[job])
    return defs.resolve_job_def("lanes")


def _run(fails: str, instance: DagsterInstance, raise_on_error: bool = False):
    MEET.reset()
    SEEN.clear()
    job = build_reconstructable_job(
        __name__,
        lane_job.__name__,
        reconstructable_args=(fails,),
        reconstructor_working_directory=str(HERE),
    )
    return execute_job(job, instance=instance, raise_on_error=raise_on_error)


def _materialized(instance: DagsterInstance, run_id: str) -> set[str]:
    records = instance.get_records_for_run(run_id).records
    events = [r.event_log_entry.dagster_event for r in records if r.event_log_entry.dagster_event]
    return {
        e.asset_key.to_user_string()
        for e in events
        if e.is_step_materialization and e.asset_key is not None
    }


def test_a_side_step_runs_beside_a_main_step_in_a_thread():
    with DagsterInstance.ephemeral() as instance:
        with _run("", instance) as result:
            assert result.success
            run_id = result.run_id
        assert _materialized(instance, run_id) == {"start", "side", "main", "after"}
    # the two met at the barrier: they ran at once; main steps stay in the main thread
    assert SEEN["main"] == SEEN["after"] == threading.main_thread().name
    assert SEEN["side"] == "side-side"
    assert SEEN["sum"] == "5"  # the side step's output reached the step after it


def test_a_failed_side_step_fails_the_run_and_keeps_the_main_steps_work():
    with DagsterInstance.ephemeral() as instance:
        with _run("side", instance) as result:
            assert not result.success
            failed = [e.step_key for e in result.all_events if e.is_step_failure]
            started = [e.step_key for e in result.all_events if e.is_step_start]
            run_id = result.run_id
        assert failed == ["side"] and "after" not in started and "after" not in SEEN
        assert _materialized(instance, run_id) == {"start", "main"}
        with pytest.raises(ValueError, match="the side step failed"):
            _run("side", instance, raise_on_error=True)
        assert "after" not in SEEN  # raised before the step after it ran


def test_a_run_that_fails_in_a_main_step_waits_for_the_side_step():
    """Nothing runs after the run ended (its output lock released): the side step in hand
    finishes before the run returns, however the run ends."""
    with DagsterInstance.ephemeral() as instance:
        with pytest.raises(ValueError, match="the main step failed"):
            _run("main", instance, raise_on_error=True)
        assert SEEN.get("side_done") == "yes"
        with _run("main", instance) as result:
            assert not result.success
        assert SEEN.get("side_done") == "yes" and "after" not in SEEN


ORDER: list[str] = []  # the side steps of chain_job, as they started


def chain_job():
    """start -> low, first, then second (all side steps; low of a lower priority) and a
    main step that waits at the barrier for `second`, which becomes ready only when `first`
    ends, while the main step runs."""

    @asset
    def start() -> int:
        return 1

    @asset(op_tags={SIDE_TAG: "true", "dagster/priority": "-1"})
    def low(start: int) -> int:
        ORDER.append("low")
        return start

    @asset(op_tags={SIDE_TAG: "true"})
    def first(start: int) -> int:
        ORDER.append("first")
        return start

    @asset(op_tags={SIDE_TAG: "true"})
    def second(first: int) -> int:
        ORDER.append("second")
        MEET.wait()
        return first

    @asset
    def main(start: int) -> int:
        MEET.wait()
        return start

    job = define_asset_job("chain", executor_def=side_lane_executor)
    defs = Definitions(assets=[start, low, first, second, main], jobs=[job])
    return defs.resolve_job_def("chain")


def test_a_side_step_made_ready_during_a_main_step_starts_at_once_by_priority():
    MEET.reset()
    ORDER.clear()
    job = build_reconstructable_job(
        __name__, chain_job.__name__, reconstructor_working_directory=str(HERE)
    )
    with (
        DagsterInstance.ephemeral() as instance,
        execute_job(job, instance=instance, raise_on_error=True) as result,
    ):
        assert result.success  # `second` met the main step: it did not wait for its end
    # low and first were ready at once: the higher priority first; second, of the higher
    # priority too, before low
    assert ORDER == ["first", "second", "low"]


def test_the_index_job_builds_the_vector_tables_beside_the_communities(tmp_path):
    from app.cli.demo import write_sample_corpus
    from app.run import run_index

    write_sample_corpus(tmp_path / "input")
    with DagsterInstance.ephemeral() as instance:
        result = run_index(
            input_dir=str(tmp_path / "input"),
            output_dir=str(tmp_path / "output"),
            log_level="ERROR",
            instance=instance,
        )
        assert result.success
        stats = {s.step_key: s for s in instance.get_run_step_stats(result.run_id)}
    units, communities = stats["unit_vector_tables"], stats["communities"]
    assert units.start_time < communities.end_time
    assert communities.start_time < units.end_time
    # the side lane by priority: the units' checks before the lexical index (priority -1)
    assert stats["unit_vector_tables_integrity"].end_time <= stats["lexical_index"].start_time
    side = ("lexical_index", "same_topic_edges", "unit_vector_tables_integrity")
    assert all(stats["published_index"].start_time >= stats[key].end_time for key in side)


def test_steps_starting_side_by_side_begin_the_staging_folder_once(indexed_sample, monkeypatch):
    """Two steps of one run calling run_dir at once (the side lane's first steps): one
    discards the last staging folder and links the published version in, the other waits
    for it and gets the same folder."""
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from pipeline.storage import lock, store
    from resources import DocgraphConfig
    from resources.output import run_dir

    inp, out = indexed_sample
    linked = []
    link_tree = store._link_tree

    def slow_link(src, dst, skip=frozenset()):
        linked.append(dst)
        time.sleep(0.3)  # the other thread arrives meanwhile
        link_tree(src, dst, skip)

    monkeypatch.setattr(store, "_link_tree", slow_link)
    config = DocgraphConfig(input_dir=str(inp), output_dir=str(out))
    step = SimpleNamespace(run=SimpleNamespace(run_id="side-by-side", parent_run_id=None))
    try:
        with ThreadPoolExecutor(2) as pool:
            folders = list(pool.map(lambda _: run_dir(config, step), range(2)))
    finally:
        lock.release(out)
    assert folders[0] == folders[1] == store.staging_dir(out)
    assert len(linked) == 1
    assert store.read_table(folders[0], "documents").height > 0
