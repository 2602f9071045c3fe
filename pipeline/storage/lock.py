"""One writer per output folder, shared by every process that works for it.

The writer is an *owner* (a run id, or a build id spanning runs), not a process: with a
distributed executor (multiprocess, dask, celery, k8s) every step of a run runs in another
process, and dask workers live on after their steps. So the lock is a record naming the
owner, and processes join it:

- `<output>/.docgraph.lock` is the record: the owner (`run_id`), and the pid, host, start time
  and command of the process that took it. Present: taken (or left by an owner that ended
  without releasing); absent or empty: free.
- `<output>/.docgraph.lock.guard` is flocked exclusively around every check-and-set of the
  record (a few file operations, never held across a step), so two owners cannot both see the
  lock free and take it.
- A process that takes the record for its owner *anchors* it: it holds a shared `flock` on
  the record's inode until it releases it or ends. The kernel drops that flock however the
  process ends (SIGKILL included), so an owner is alive exactly while some anchor of it is:
  a killed run never leaves a lock that someone must delete by hand or wait out.
- Another process asking for the same owner while an anchor is alive joins the owner without
  anchoring (a step on a dask worker); a process asking for another owner gets OutputLocked
  naming the holder. Finding the owner dead, it takes the lock over and keeps the dead owner's
  record in the new one, for `take_orphan` to hand to the first step that asks (any process).
- `release` from any process that joined the owner deletes the record. A new owner writes a
  new record (a new inode: temp file, flock, rename), so a long-lived worker that anchored the
  finished owner and still holds a descriptor of the old inode keeps nothing alive.

Why no heartbeat/lease: kernel locks say at once, and exactly, whether a holder lives. A lease
would make a killed run block the next one for the lease time (`storage.lock_wait_s` is 0 by
default, so the next run would fail), or expire under a step that runs longer than it. What a
lease would guard against, long-lived workers keeping a finished owner alive, cannot happen:
steps join an owner whose anchor lives without anchoring it themselves.

Who anchors: the first process to take the lock. In-process runs and the CLI: that process,
for the whole run (the CLI takes the lock as `docgraph-index` before Dagster names the run; a
process that anchors the lock hands it to the next owner it asks for). Distributed runs: the
run's orchestrating process, which `resources.executors` makes take the lock before it
launches any step and release it when the run ends; without it the first step's process would
anchor the run, and a long-lived worker would keep an unreleased run alive while it lives.

Locks are per open file (flock); on NFS, Linux emulates flock with POSIX locks, which a
process drops when it closes *any* descriptor of the file, so a process never opens a second
descriptor of a record it anchors.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.storage.files import TEMP_SUFFIX, default_mode

LOCK_FILE = ".docgraph.lock"
GUARD_FILE = ".docgraph.lock.guard"
_POLL_S = 0.5
ORPHAN_KEY = "orphan"  # the record of a dead owner this one took over from, until taken
# Owner ids that name a command, not one run: the CLI takes the lock as `docgraph-index`
# before Dagster names the run. Another process asking with the same id is another writer.
PROCESS_OWNERS = frozenset({"docgraph-index"})

_MUTEX = threading.RLock()  # the guard flock excludes processes; this, threads of one process
_MEMBER: dict[str, str] = {}  # resolved record path -> owner this process joined
_ANCHOR: dict[str, int] = {}  # resolved record path -> fd holding a shared flock on the record


def _forget_in_child() -> None:
    """A forked child shares its parent's anchors (the same open files): it forgets them, so
    only the parent's release or end lets the owner go."""
    global _MUTEX
    _MUTEX = threading.RLock()
    for fd in _ANCHOR.values():
        os.close(fd)  # the parent's descriptor keeps the flock
    _ANCHOR.clear()
    _MEMBER.clear()


os.register_at_fork(after_in_child=_forget_in_child)


class OutputLocked(RuntimeError):
    """Another owner writes this output folder; the message names it."""


def lock_path(root: str | Path) -> Path:
    """The record: who holds the output lock (JSON), absent when nobody does."""
    return Path(root) / LOCK_FILE


def _key(root: str | Path) -> str:
    return str(lock_path(root).resolve())


def _read(fd: int) -> dict[str, Any]:
    raw = os.pread(fd, 1 << 20, 0)
    try:
        info = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def _write(fd: int, info: dict[str, Any]) -> None:
    data = json.dumps(info, sort_keys=True).encode("utf-8")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


def describe(info: dict[str, Any]) -> str:
    """'run 1a2b3c4d (pid 42 on host, since 2026-11-22T02:00:00+00:00, `docgraph index`)'."""
    run = str(info.get("run_id") or "?")[:8]
    cmd = info.get("command")
    tail = f", `{cmd}`" if cmd else ""
    return (
        f"run {run} (pid {info.get('pid', '?')} on {info.get('host', '?')}, "
        f"since {info.get('started', '?')}{tail})"
    )


def _holder_info(run_id: str) -> dict[str, Any]:
    argv = [Path(sys.argv[0]).name, *sys.argv[1:2]] if sys.argv and sys.argv[0] else []
    return {
        "run_id": run_id,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(argv),
    }


@contextmanager
def _guarded(root: Path) -> Iterator[None]:
    """The check-and-set section: one process (and one thread of it) at a time."""
    with _MUTEX:
        fd = os.open(root / GUARD_FILE, os.O_RDWR | os.O_CREAT, default_mode())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # drops the flock


def _same_file(fd: int, st: os.stat_result) -> bool:
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (st.st_dev, st.st_ino)


class _Record:
    """The record as found under the guard: its content, and whether this process anchors it."""

    def __init__(self, path: Path, key: str):
        self.path = path
        try:
            self.stat: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            self.stat = None
        anchor = _ANCHOR.get(key)
        self.anchored = (
            anchor is not None and self.stat is not None and _same_file(anchor, self.stat)
        )
        if anchor is not None and not self.anchored:  # the owner it anchored was released
            del _ANCHOR[key]
            os.close(anchor)
        self.info: dict[str, Any] = {}
        if self.stat is None:
            return
        if self.anchored:  # never a second descriptor of an anchored record (see docstring)
            self.info = _read(_ANCHOR[key])
            return
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            self.stat = None
            return
        try:
            self.info = _read(fd)
        finally:
            os.close(fd)

    @property
    def owner(self) -> str | None:
        return str(self.info["run_id"]) if self.info.get("run_id") else None

    def alive(self) -> bool:
        """Whether some process anchors the record (holds its shared flock)."""
        if self.anchored:
            return True
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


def _anchor_new(root: Path, key: str, info: dict[str, Any]) -> None:
    """Write `info` as a new record (a new inode) and anchor it; drop any older anchor."""
    tmp = root / f"{LOCK_FILE}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, default_mode())
    try:
        _write(fd, info)
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        os.replace(tmp, lock_path(root))
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    old = _ANCHOR.pop(key, None)
    if old is not None:
        os.close(old)
    _ANCHOR[key] = fd
    _MEMBER[key] = str(info["run_id"])


def _anchor_current(rec: _Record, key: str, run_id: str) -> None:
    """Anchor the existing record of `run_id`, whose anchors all ended (its steps run in
    short-lived processes); it names this process from now on."""
    fd = os.open(rec.path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        info = {**rec.info, **_holder_info(run_id), "started": rec.info.get("started")}
        _write(fd, {k: v for k, v in info.items() if v is not None})
    except BaseException:
        os.close(fd)
        raise
    _ANCHOR[key] = fd
    _MEMBER[key] = run_id


def _try_acquire(root: Path, key: str, run_id: str) -> dict[str, Any] | None:
    """Take or join the lock for `run_id`: None when done, else the live holder's record."""
    with _guarded(root):
        rec = _Record(lock_path(root), key)
        owner = rec.owner
        if owner is None:  # free (absent, empty or unreadable)
            _anchor_new(root, key, _holder_info(run_id))
        elif owner == run_id and (rec.anchored or run_id not in PROCESS_OWNERS):
            # another step of the same owner
            if not rec.alive():
                _anchor_current(rec, key, run_id)
            _MEMBER[key] = run_id
        elif rec.anchored:  # this process holds it and now works for another owner (the CLI)
            info = _holder_info(run_id)
            if ORPHAN_KEY in rec.info:
                info[ORPHAN_KEY] = rec.info[ORPHAN_KEY]
            _anchor_new(root, key, info)
        elif rec.alive():
            return rec.info
        else:  # the owner ended without releasing: killed or crashed
            stale = {k: v for k, v in rec.info.items() if k != ORPHAN_KEY}
            _anchor_new(root, key, {**_holder_info(run_id), ORPHAN_KEY: stale})
    return None


def acquire(root: str | Path, run_id: str, wait_s: float = 0.0) -> None:
    """Take the output lock for owner `run_id`, or join it when `run_id` holds it already
    (another step of the same run, in this process or another one). While another owner
    holds it, wait up to `wait_s` seconds, then raise OutputLocked naming the holder. A
    record left by an owner that ended without releasing (killed or crashed) is kept for
    `take_orphan`."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    key = _key(root)
    deadline = time.monotonic() + max(0.0, wait_s)
    while True:
        info = _try_acquire(root, key, run_id)
        if info is None:
            return
        if time.monotonic() >= deadline:
            waited = f" (waited {wait_s:g} s)" if wait_s > 0 else ""
            raise OutputLocked(
                f"output folder {root} is being written by {describe(info)}{waited}: "
                "wait for that run to finish (or pass --wait SECONDS)"
            )
        time.sleep(_POLL_S)


def take_orphan(root: str | Path) -> dict[str, Any] | None:
    """The record of the owner before the current one, if that owner ended without
    releasing (once, to whichever process of the current owner asks first)."""
    root = Path(root)
    key = _key(root)
    if key not in _MEMBER or not lock_path(root).exists():
        return None
    with _guarded(root):
        rec = _Record(lock_path(root), key)
        if rec.owner != _MEMBER.get(key) or ORPHAN_KEY not in rec.info:
            return None
        info = dict(rec.info)
        orphan = info.pop(ORPHAN_KEY)
        if rec.anchored:
            _write(_ANCHOR[key], info)
        else:
            fd = os.open(rec.path, os.O_RDWR)
            try:
                _write(fd, info)
            finally:
                os.close(fd)
    return orphan if isinstance(orphan, dict) else None


def release(root: str | Path) -> None:
    """Give the lock back: from any process that joined the owner holding it, the record is
    deleted, so the next owner takes the lock at once and does not take this one for an
    orphan. A no-op in a process that joined no owner, or another owner than the holder."""
    root = Path(root)
    key = _key(root)
    with _MUTEX:
        if key not in _MEMBER and key not in _ANCHOR:
            return
        with _guarded(root):
            rec = _Record(lock_path(root), key)
            if rec.owner is not None and rec.owner == _MEMBER.get(key):
                rec.path.unlink(missing_ok=True)
            _MEMBER.pop(key, None)
            fd = _ANCHOR.pop(key, None)
            if fd is not None:
                os.close(fd)


def holder(root: str | Path) -> dict[str, Any] | None:
    """Who holds the lock now (a live owner, possibly this process's), or None when free."""
    root = Path(root)
    if not lock_path(root).exists():
        return None
    key = _key(root)
    with _guarded(root):
        rec = _Record(lock_path(root), key)
        if rec.owner is None:
            return None
        if rec.owner == _MEMBER.get(key) or rec.alive():
            return rec.info
    return None
