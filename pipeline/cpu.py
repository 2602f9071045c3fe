"""How many CPUs this process may use: its CPU affinity, capped by its cgroup's CPU quota;
and how many another process is using (CpuMeter).

Why: in a container with a CPU limit (Kubernetes `resources.limits.cpu`, `docker --cpus`)
`os.cpu_count()` and the affinity still list every core of the node; a thread pool sized by
them (onnxruntime's, torch's, the PDF page workers) runs dozens of threads on a quota of two,
and the kernel throttles them all. loky and the JVM read the quota the same way.
"""

from __future__ import annotations

import math
import os
import threading
import time
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def usable_cpus(cgroup: Path = CGROUP) -> int:
    """CPUs for a thread or process pool: the affinity's, at most the quota (rounded up)."""
    affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere every core
    cpus = len(affinity(0)) if affinity else os.cpu_count() or 1
    quota = cgroup_quota(cgroup)
    return max(1, min(cpus, math.ceil(quota)) if quota else cpus)


def cgroup_quota(cgroup: Path = CGROUP) -> float | None:
    """CPUs the process's cgroup may use (v2 `cpu.max`, else v1 `cpu.cfs_quota_us` over
    `cpu.cfs_period_us`), or None when it sets no quota."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else _ratio(int(quota), int(period))
    except (OSError, ValueError):
        pass
    try:
        quota = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return _ratio(quota, period)


def _ratio(quota: int, period: int) -> float | None:
    return quota / period if quota > 0 and period > 0 else None  # v1 says -1 for none


class CpuMeter:
    """Cores process `pid` used since the last reading (Linux's /proc; 0 elsewhere or once it
    is gone), read at most every `interval` seconds. The embedding worker leaves its parent,
    the index process, the cores this says it uses (pipeline.vectors.embed_onnx)."""

    def __init__(self, pid: int, interval: float = 0.1):
        self.path, self.interval = Path(f"/proc/{pid}/stat"), interval
        self._lock = threading.Lock()
        self._seconds, self._at, self._cores = self._cpu_seconds(), time.monotonic(), 0.0

    def _cpu_seconds(self) -> float | None:
        try:  # fields 14 and 15 (utime, stime), counted after the ")" that ends the name
            fields = self.path.read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _TICKS
        except (OSError, IndexError, ValueError):
            return None

    def cores(self) -> float:
        with self._lock:
            now = time.monotonic()
            if now - self._at >= self.interval:
                seconds = self._cpu_seconds()
                used = None if seconds is None or self._seconds is None else seconds - self._seconds
                self._cores = 0.0 if used is None else used / (now - self._at)
                self._seconds, self._at = seconds, now
            return self._cores
