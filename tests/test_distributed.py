"""The index job on a distributed executor (dagster-dask): a Dask scheduler and two workers on
127.0.0.1, started here, run the steps; the published index equals the in-process run's."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import dagster_dask  # noqa: F401 - the `distributed` extra, installed by scripts/setup.sh
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipeline import schemas
from pipeline.storage import lock, store
from resources import executors

REPO = Path(__file__).resolve().parents[1]
WORKERS = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dask(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "dask", *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(procs: list[subprocess.Popen]) -> None:
    """Stop the Dask processes: SIGINT (they ignore SIGTERM at times), then SIGKILL."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 5  # a worker that ran steps may hang in exit (threads)
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@pytest.fixture()
def dask_cluster(tmp_path):
    """(scheduler address, {worker pid}) of a scheduler and WORKERS one-thread workers on
    127.0.0.1 that import the repository's modules like this process (the job's own module,
    tests/distributed_defs.py, comes with the job's working directory)."""
    from dask.distributed import Client

    logs = tmp_path / "dask"
    logs.mkdir()
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path.rstrip(os.pathsep)}
    address = f"tcp://127.0.0.1:{_free_port()}"
    procs = [
        _dask(
            ["scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1]]
            + ["--no-dashboard"],
            logs / "scheduler.log",
            env,
        )
    ]
    try:
        for n in range(WORKERS):
            procs.append(
                _dask(
                    ["worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-nanny"]
                    + ["--no-dashboard", "--name", f"w{n}", "--local-directory", str(logs)],
                    logs / f"worker{n}.log",
                    env,
                )
            )
        with Client(address, timeout=60) as client:
            client.wait_for_workers(WORKERS, timeout=120)
            pids = set(client.run(os.getpid).values())
        assert pids == {p.pid for p in procs[1:]}  # --no-nanny: the worker is the process
        yield address, pids
    except BaseException:
        for log in sorted(logs.glob("*.log")):
            print(f"--- {log.name}\n{log.read_text()[-3000:]}")
        raise
    finally:
        _stop(procs)


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    """The table's rows in an order that does not depend on its floats (embedding-derived
    weights differ in the 7th digit between processes with other torch thread counts)."""
    keys = (
        ["id"]
        if "id" in df.columns
        else [c for c, t in df.schema.items() if t == pl.Utf8 or t.is_integer()]
    )
    return df.sort(keys) if keys and df.height else df


def _lance_ids(out: Path) -> dict[str, list[str]]:
    db = store.lance_db(out)
    return {
        name: sorted(db.open_table(name).to_arrow().column("id").to_pylist())
        for name in db.list_tables().tables
    }


@pytest.mark.slow
def test_the_index_job_on_dask_workers_equals_the_in_process_run(
    tmp_path, dask_cluster, indexed_sample
):
    from dagster import DagsterInstance
    from distributed_defs import run_on_dask

    address, worker_pids = dask_cluster
    inp, local = indexed_sample  # the in-process run's
    dist = tmp_path / "dask_run"

    home = tmp_path / "dagster_home"  # Dask needs an instance the workers can open
    home.mkdir()
    with DagsterInstance.from_config(str(home)) as instance:
        result = run_on_dask(str(inp), str(dist), address, instance)
        assert result.success, [
            str(e.step_failure_data.error) for e in result.all_events if e.is_step_failure
        ]
        step_pids = {e.step_key: e.pid for e in result.all_events if e.is_step_start}

    # every step ran on a Dask worker, none in this (the orchestrating) process
    assert "published_index" in step_pids and len(step_pids) > 10
    assert set(step_pids.values()) <= worker_pids, (step_pids, worker_pids)
    assert os.getpid() not in step_pids.values()
    # both workers ran steps: the lock was joined by processes other than its holder's
    assert len(set(step_pids.values())) == WORKERS, step_pids

    # the lock was released, though the run's workers live on: the next owner takes it
    assert lock.holder(dist) is None and not lock.lock_path(dist).exists()
    lock.acquire(dist, "the-next-run")
    lock.release(dist)

    assert store.read_manifest(dist)["tables"] == store.read_manifest(local)["tables"]
    for name in schemas.TABLES:
        a, b = store.read_table(local, name), store.read_table(dist, name)
        assert a.schema == b.schema, name
        assert a.height == b.height, name
        assert_frame_equal(_sorted(a), _sorted(b), check_column_order=False, rel_tol=1e-5)
    lance = _lance_ids(local)
    assert lance and _lance_ids(dist) == lance


def test_executor_for_names_the_executors():
    from dagster import in_process_executor
    from dagster._core.executor.multiprocess import MultiprocessExecutor
    from dagster_dask.executor import DaskExecutor

    import definitions
    from resources.side_lane import side_lane_executor

    assert executors.OUTPUT_TAG == definitions.OUTPUT_TAG
    # Dagster's in-process executor with a side lane (resources.side_lane), under its name
    assert executors.executor_for(environ={}) is side_lane_executor
    assert executors.executor_for("in-process", environ={}) is side_lane_executor
    assert side_lane_executor.name == in_process_executor.name
    assert executors.executor_for(environ={"DOCGRAPH_EXECUTOR": "dask"}).name == "dask"
    with pytest.raises(ValueError, match="in_process, multiprocess, dask"):
        executors.executor_for("celery", environ={})

    def create(executor_def, config=None):
        # what Dagster does at launch: the definition's config, resolved, to its creation fn
        from dagster._config import process_config

        schema = executor_def.config_schema
        processed = process_config(schema.config_type, config or {})
        assert processed.success, processed.errors
        value = processed.value
        if hasattr(schema, "resolve_config"):  # a configured definition: its fixed config
            value = schema.resolve_config(value).value["config"]
        return executor_def.executor_creation_fn(SimpleNamespace(executor_config=value))

    multi = create(executors.executor_for("multiprocess", environ={}), {"max_concurrent": 3})
    assert isinstance(multi, MultiprocessExecutor) and multi._max_concurrent == 3
    dask = create(executors.executor_for("dask", environ={"DASK_SCHEDULER_ADDRESS": "tcp://h:1"}))
    assert isinstance(dask, DaskExecutor) and isinstance(dask, executors._HoldsOutputLock)
    assert (dask.cluster_type, dask.cluster_configuration) == ("existing", {"address": "tcp://h:1"})
    local = create(executors.executor_for("dask", environ={}))
    assert local.cluster_type == "local"


def test_the_orchestrator_locks_the_folder_the_steps_write(tmp_path):
    """A launch-time override of the output folder (run config) moves the orchestrator's
    lock with the steps' writes."""
    from definitions import make_definitions

    job = make_definitions(None, str(tmp_path / "in"), str(tmp_path / "out")).resolve_job_def(
        "index_job"
    )
    tags = dict(job.run_tags or {})
    assert executors.output_root(job, {}, tags) == str(tmp_path / "out")
    moved = {"resources": {"docgraph": {"config": {"output_dir": str(tmp_path / "moved")}}}}
    assert executors.output_root(job, moved, tags) == str(tmp_path / "moved")


def test_large_inputs_run_each_step_in_its_own_process(tmp_path, monkeypatch):
    """`docgraph index` over `storage.multiprocess_from_documents` files or more takes the
    multiprocess executor, one step at a time (unless $DOCGRAPH_EXECUTOR names one), with a
    persistent instance; a caller's ephemeral instance keeps one process. (A whole run this
    way costs a process start per step: checked by hand, 37 steps on two documents.)"""
    from dagster import DagsterInstance
    from dagster._core.executor.multiprocess import MultiprocessExecutor
    from dagster._core.system_config.objects import ResolvedRunConfig

    from app.run import executor_by_size, index_job, run_index
    from pipeline.config import load_settings
    from pipeline.ingest.find_stale import input_entries

    inp = tmp_path / "in"
    inp.mkdir()
    for i in range(3):
        (inp / f"d{i}.txt").write_text(f"Document {i} names Alice Smith.\n")
    (inp / ".hidden.txt").write_text("not a document\n")
    monkeypatch.delenv("DOCGRAPH_EXECUTOR", raising=False)

    def settings(limit: int):
        overrides = {"input_dir": str(inp), "output_dir": str(tmp_path / "out")}
        return load_settings(None, {**overrides, "storage": {"multiprocess_from_documents": limit}})

    entries = input_entries(settings(3))
    assert executor_by_size(settings(3), entries) == "multiprocess"
    assert executor_by_size(settings(4), entries) is None  # the hidden file does not count
    assert executor_by_size(settings(0), entries) is None  # 0: never
    monkeypatch.setenv("DOCGRAPH_EXECUTOR", "in_process")
    assert executor_by_size(settings(3), entries) is None  # the environment decides
    job = index_job(None, str(inp), str(tmp_path / "out"), "multiprocess")
    config = {"execution": {"config": {"max_concurrent": 1}}}
    resolved = ResolvedRunConfig.build(job, config)
    assert resolved.execution.execution_engine_name == "multiprocess"
    executor = job.executor_def.executor_creation_fn(
        type("Init", (), {"executor_config": resolved.execution.execution_engine_config})()
    )
    assert isinstance(executor, MultiprocessExecutor) and executor._max_concurrent == 1
    # a caller's ephemeral instance cannot coordinate processes: the run stays in this one
    monkeypatch.delenv("DOCGRAPH_EXECUTOR")
    config_file = tmp_path / "docgraph.yaml"
    config_file.write_text("storage:\n  multiprocess_from_documents: 1\n")
    result = run_index(
        str(config_file), str(inp), str(tmp_path / "out"), instance=DagsterInstance.ephemeral()
    )
    events = [e.event_type_value for e in result.all_events]
    assert result.success and "STEP_WORKER_STARTED" not in events


def test_one_large_file_runs_each_step_in_its_own_process(tmp_path, monkeypatch):
    """A file of `storage.multiprocess_from_file_mb` MB or more takes the multiprocess
    executor whatever the number of files: one file is one shard, and its steps' memory
    grows with it."""
    from app.run import executor_by_size
    from pipeline.config import load_settings
    from pipeline.ingest.find_stale import input_entries

    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "small.txt").write_text("A short note on Alice Smith.\n")
    (inp / "large.txt").write_text("Alice Smith met Bob Jones in Paris.\n\n" * 60_000)  # 2.2 MB
    monkeypatch.delenv("DOCGRAPH_EXECUTOR", raising=False)

    def settings(mb: int):
        storage = {"multiprocess_from_file_mb": mb}
        return load_settings(None, {"input_dir": str(inp), "storage": storage})

    entries = input_entries(settings(2))
    assert executor_by_size(settings(2), entries) == "multiprocess"
    assert executor_by_size(settings(3), entries) is None
    assert executor_by_size(settings(0), entries) is None  # 0: never


def test_a_nightly_run_of_few_changed_files_stays_in_one_process(tmp_path, monkeypatch):
    """The executor weighs the files a run must process (find_stale.files_to_run), not the
    corpus: an edit, an added file or a deleted one in a corpus over the limit is a small
    run in one process; new per-document settings re-run whole shards, counted whole."""
    from app.run import executor_by_size, run_index
    from pipeline.config import load_settings
    from pipeline.ingest.find_stale import files_to_run, input_entries, plan_run

    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    for i in range(5):
        (inp / f"d{i}.txt").write_text(f"Document {i} names Alice Smith and Bob Jones.\n")
    (inp / "d5.txt").write_text("Документ 5 называет Алису Смит и Боба Джонса.\n")
    monkeypatch.delenv("DOCGRAPH_EXECUTOR", raising=False)
    languages = []  # what each run's files would have the extractor read

    def sizes(chunking=None):
        storage = {"multiprocess_from_documents": 3, "shards": 2}
        folders = {"input_dir": str(inp), "output_dir": str(out)}
        settings = load_settings(None, {**folders, "storage": storage, **(chunking or {})})
        entries = input_entries(settings)
        stale = plan_run(settings, entries).shards
        to_run = files_to_run(settings, entries, stale)
        languages.append(to_run.languages)
        return stale, to_run.count, executor_by_size(settings, entries, to_run.count)

    assert sizes() == (["000", "001"], 6, "multiprocess")  # no index yet: every file
    config = tmp_path / "docgraph.yaml"
    config.write_text("storage:\n  shards: 2\n  multiprocess_from_documents: 0\n")
    assert run_index(str(config), str(inp), str(out)).success
    assert sizes()[1:] == (0, None)  # up to date
    (inp / "d1.txt").write_text("Document 1 now names Carol White.\n")
    (inp / "d9.txt").write_text("A new document on Dan Brown.\n")
    (inp / "d4.txt").unlink()
    stale, to_run, executor = sizes()
    assert stale and (to_run, executor) == (3, "multiprocess")
    # the edited file's language in the published version, the corpus' most common for a
    # new one (pipeline.extract.lexicon_preload loads their lexicons ahead)
    assert languages[-1] == {"en"}
    (inp / "d9.txt").unlink()
    assert sizes()[1:] == (2, None)
    (inp / "d5.txt").write_text("Документ 5 теперь называет Кэрол Уайт.\n")
    assert sizes()[1:] == (3, "multiprocess")
    assert languages[-1] == {"en", "ru"}
    # a per-document setting changed: every shard re-runs whole, every file counts
    assert sizes({"chunking": {"chunk_size": 200}}) == (["000", "001"], 5, "multiprocess")
