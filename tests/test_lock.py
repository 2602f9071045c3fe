"""The output lock (pipeline.storage.lock) across processes: the steps of one owner join it wherever
they run, another owner is refused with the holder named, a killed holder blocks nobody, a
release from any process of the owner frees it (long-lived workers included), and a record
left by an owner that ended without releasing is handed on as the orphan."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline.storage import lock

REPO = Path(__file__).resolve().parents[1]

# A process that does what it is told on stdin, one JSON command a line, answering each.
_SERVE = textwrap.dedent(
    """
    import json, sys
    from pipeline.storage import lock
    for line in sys.stdin:
        op, *args = json.loads(line)
        try:
            if op == "acquire":
                lock.acquire(*args)
                out = "ok"
            elif op == "release":
                lock.release(*args)
                out = "ok"
            elif op == "orphan":
                out = lock.take_orphan(*args)
            elif op == "holder":
                out = lock.holder(*args)
        except lock.OutputLocked as exc:
            out = {"locked": str(exc)}
        print(json.dumps(out), flush=True)
    """
)


class Proc:
    """A separate process working for the lock (a step, a worker, a CLI run)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVE],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = self.proc.pid

    def __call__(self, op: str, *args):
        self.proc.stdin.write(json.dumps([op, *args]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"lock process {self.pid} ended"
        return json.loads(line)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


@pytest.fixture()
def procs():
    started: list[Proc] = []

    def start() -> Proc:
        started.append(Proc())
        return started[-1]

    yield start
    for p in started:
        if p.proc.poll() is None:
            p.kill()


def _record(out: Path) -> dict:
    return json.loads(lock.lock_path(out).read_text())


def test_the_steps_of_one_owner_join_it_and_another_owner_is_refused(tmp_path, procs):
    out = str(tmp_path / "out")
    orchestrator, step_a, step_b, other = procs(), procs(), procs(), procs()
    assert orchestrator("acquire", out, "run-aaaa1111", 0) == "ok"
    assert step_a("acquire", out, "run-aaaa1111", 0) == "ok"
    assert step_b("acquire", out, "run-aaaa1111", 0) == "ok"
    assert step_a("acquire", out, "run-aaaa1111", 0) == "ok"  # re-entrant
    refused = other("acquire", out, "run-bbbb2222", 0)["locked"]
    assert f"pid {orchestrator.pid}" in refused and "run run-aaaa" in refused
    assert other("holder", out)["run_id"] == "run-aaaa1111"
    assert _record(Path(out))["pid"] == orchestrator.pid
    # the publish step, on a worker, releases; the workers of the run live on
    assert step_b("release", out) == "ok"
    assert not lock.lock_path(out).exists() and other("holder", out) is None
    assert other("acquire", out, "run-bbbb2222", 0) == "ok"
    assert other("orphan", out) is None  # released, not orphaned
    # a worker of the finished run, or its orchestrator, cannot release the new owner's lock
    assert step_a("release", out) == "ok" and orchestrator("release", out) == "ok"
    assert _record(Path(out))["run_id"] == "run-bbbb2222"
    assert "locked" in step_a("acquire", out, "run-cccc3333", 0)


def test_a_killed_holder_blocks_nobody_and_is_reported_once(tmp_path, procs):
    out = str(tmp_path / "out")
    killed, step, nxt, late = procs(), procs(), procs(), procs()
    assert killed("acquire", out, "run-dead0000", 0) == "ok"
    assert step("acquire", out, "run-dead0000", 0) == "ok"  # a worker of it lives on
    killed.kill()
    started = time.monotonic()
    assert nxt("acquire", out, "run-next1111", 0) == "ok"
    assert time.monotonic() - started < 5
    assert _record(Path(out))["run_id"] == "run-next1111"
    # the first step of the new owner, in any process, gets the orphan; then nobody
    assert late("acquire", out, "run-next1111", 0) == "ok"
    orphan = late("orphan", out)
    assert orphan["run_id"] == "run-dead0000" and orphan["pid"] == killed.pid
    assert nxt("orphan", out) is None and late("orphan", out) is None
    # a worker of the dead owner is refused now, naming the new one
    assert f"pid {nxt.pid}" in step("acquire", out, "run-dead0000", 0)["locked"]


def test_a_released_owner_leaves_no_hold_in_its_long_lived_workers(tmp_path, procs):
    """A worker that re-took the lock after the publish released it (a trailing check) keeps a
    descriptor of that record; the orchestrator's release at the end of the run frees it, and
    the next owner, killed in turn, blocks nobody."""
    out = str(tmp_path / "out")
    orchestrator, worker, nxt, after = procs(), procs(), procs(), procs()
    assert orchestrator("acquire", out, "run-aaaa", 0) == "ok"
    assert worker("acquire", out, "run-aaaa", 0) == "ok"
    assert worker("release", out) == "ok"
    assert worker("acquire", out, "run-aaaa", 0) == "ok"  # anchors a new record
    assert _record(Path(out))["pid"] == worker.pid
    assert orchestrator("release", out) == "ok"
    assert nxt("acquire", out, "run-bbbb", 0) == "ok"
    nxt.kill()
    assert after("acquire", out, "run-cccc", 0) == "ok"
    assert after("orphan", out)["run_id"] == "run-bbbb"
    assert worker("holder", out)["run_id"] == "run-cccc"


def test_steps_in_short_lived_processes_keep_their_owner(tmp_path, procs):
    """Each step in its own process that ends (no orchestrator holding the lock): the next
    step of the same owner takes the record over and is named in it; no orphan."""
    out = str(tmp_path / "out")
    first = procs()
    assert first("acquire", out, "run-aaaa", 0) == "ok"
    first.close()
    second, other = procs(), procs()
    assert second("acquire", out, "run-aaaa", 0) == "ok"
    assert second("orphan", out) is None
    assert f"pid {second.pid}" in other("acquire", out, "run-bbbb", 0)["locked"]


def test_in_one_process_the_lock_is_reentrant_and_handed_to_the_run(tmp_path, procs):
    """The CLI takes the lock as `docgraph-index`, then the run's steps ask with the run id."""
    out = tmp_path / "out"
    other = procs()
    lock.acquire(out, "docgraph-index")
    try:
        lock.acquire(out, "run-1234abcd")
        lock.acquire(out, "run-1234abcd")
        assert _record(out)["run_id"] == "run-1234abcd" and _record(out)["pid"] == os.getpid()
        assert "run run-1234" in other("acquire", str(out), "run-ffff", 0)["locked"]
        assert lock.holder(out)["run_id"] == "run-1234abcd"
    finally:
        lock.release(out)
    assert lock.holder(out) is None and not lock.lock_path(out).exists()
    lock.release(out)  # twice: a no-op
    assert other("acquire", str(out), "run-ffff", 0) == "ok"


def test_two_cli_runs_are_two_writers(tmp_path, procs):
    """`docgraph-index` names the command, not a run: a second CLI process is refused."""
    out = str(tmp_path / "out")
    first, second = procs(), procs()
    assert first("acquire", out, "docgraph-index", 0) == "ok"
    assert f"pid {first.pid}" in second("acquire", out, "docgraph-index", 0)["locked"]
    first.kill()
    assert second("acquire", out, "docgraph-index", 0) == "ok"
    assert second("orphan", out)["pid"] == first.pid


def test_a_waiting_owner_goes_ahead_when_the_holder_ends(tmp_path, procs):
    out = str(tmp_path / "out")
    holder = procs()
    assert holder("acquire", out, "run-aaaa", 0) == "ok"
    started = time.monotonic()
    with pytest.raises(lock.OutputLocked, match=r"waited 1 s"):
        lock.acquire(out, "run-bbbb", 1)
    assert time.monotonic() - started >= 1
    holder.close()  # ends without releasing
    lock.acquire(out, "run-bbbb", 5)
    try:
        assert lock.take_orphan(out)["run_id"] == "run-aaaa"
    finally:
        lock.release(out)


def test_an_old_empty_lock_file_is_free(tmp_path):
    """What an output folder written before this lock holds after a run: an empty file."""
    out = tmp_path / "out"
    out.mkdir()
    lock.lock_path(out).write_text("")
    lock.acquire(out, "run-aaaa")
    try:
        assert lock.take_orphan(out) is None
    finally:
        lock.release(out)
    assert not list(out.glob("*.tmp"))


def test_a_forked_child_does_not_hold_its_parents_lock(tmp_path, procs):
    out = tmp_path / "out"
    other = procs()
    lock.acquire(out, "run-parent")
    try:
        pid = os.fork()
        if pid == 0:  # the child: it joins as a step would, releases, and ends
            code = 1
            try:
                try:  # it is no holder that hands the lock on, as its parent is
                    lock.acquire(out, "run-other")
                except lock.OutputLocked:
                    lock.acquire(out, "run-parent")
                    lock.release(out)  # a step's release frees the owner, from any process
                    code = 0
            finally:
                os._exit(code)
        assert os.waitpid(pid, 0)[1] == 0
        assert not lock.lock_path(out).exists()
        assert other("acquire", str(out), "run-next", 0) == "ok"
    finally:
        lock.release(out)
    assert _record(out)["run_id"] == "run-next"  # the parent's release left it alone
