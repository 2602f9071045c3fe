"""One writer per output folder: an advisory `flock` on `<output>/.docgraph.lock`.

Why flock: the kernel drops it when the holding process ends, however it ends (SIGKILL
included), so a crashed run never leaves a lock that someone must delete by hand. The
file also holds who took it (run id, pid, host, start time, command): a second writer's
error names the holder, and a record left behind by a holder that ended without
releasing is how the next run knows that run was orphaned (`take_orphan`).

The lock is taken per process and is re-entrant within it: the CLI takes it before it
starts the run, and every step of the run (the index job runs in one process) asks again.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.files import default_mode

LOCK_FILE = ".docgraph.lock"
_POLL_S = 0.5
_HELD: dict[str, int] = {}  # resolved lock path -> open fd holding the flock
_ORPHANS: dict[str, dict[str, Any]] = {}  # resolved lock path -> record found on acquiring


class OutputLocked(RuntimeError):
    """Another process writes this output folder; the message names it."""


def lock_path(root: str | Path) -> Path:
    return Path(root) / LOCK_FILE


def _read(fd: int) -> dict[str, Any]:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 65536)
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


def acquire(root: str | Path, run_id: str, wait_s: float = 0.0) -> None:
    """Take the output lock for `run_id`, waiting up to `wait_s` seconds; raise OutputLocked
    naming the holder when it stays taken. A record left by a holder that ended without
    releasing (killed or crashed) is kept for `take_orphan`."""
    path = lock_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = str(path.resolve())
    held = _HELD.get(key)
    if held is not None:  # this process holds it already (another step of the same run)
        if _read(held).get("run_id") != run_id:
            _write(held, _holder_info(run_id))
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, default_mode())
    deadline = time.monotonic() + max(0.0, wait_s)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                info = _read(fd)
                os.close(fd)
                waited = f" (waited {wait_s:g} s)" if wait_s > 0 else ""
                raise OutputLocked(
                    f"output folder {root} is being written by {describe(info)}{waited}: "
                    "wait for that run to finish (or pass --wait SECONDS)"
                ) from None
            time.sleep(_POLL_S)
    stale = _read(fd)
    if stale:
        _ORPHANS[key] = stale
    _write(fd, _holder_info(run_id))
    _HELD[key] = fd


def take_orphan(root: str | Path) -> dict[str, Any] | None:
    """The record of the holder before this process, if it ended without releasing (once)."""
    return _ORPHANS.pop(str(lock_path(root).resolve()), None)


def release(root: str | Path) -> None:
    """Give the lock back (a no-op when this process does not hold it); the record is
    cleared, so the next writer does not take this run for an orphan."""
    key = str(lock_path(root).resolve())
    fd = _HELD.pop(key, None)
    if fd is None:
        return
    try:
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def holder(root: str | Path) -> dict[str, Any] | None:
    """Who holds the lock now (a live process, possibly this one), or None when it is free."""
    path = lock_path(root)
    if not path.exists():
        return None
    key = str(path.resolve())
    if key in _HELD:
        return _read(_HELD[key])
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(fd) or {"run_id": "?"}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
