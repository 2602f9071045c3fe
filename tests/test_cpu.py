"""Thread and process pools are sized by the CPUs a process may use, a cgroup quota included."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pipeline.cpu import CpuMeter, cgroup_quota, usable_cpus

ROOT = Path(__file__).resolve().parents[1]
AFFINITY = len(os.sched_getaffinity(0))


def _v2(root: Path, cpu_max: str) -> Path:
    root.mkdir(parents=True)
    (root / "cpu.max").write_text(cpu_max + "\n")
    return root


def _v1(root: Path, quota: int, period: int) -> Path:
    (root / "cpu").mkdir(parents=True)
    (root / "cpu" / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (root / "cpu" / "cpu.cfs_period_us").write_text(f"{period}\n")
    return root


def test_a_cgroup_v2_quota_caps_the_affinity(tmp_path):
    limited = _v2(tmp_path / "a", "150000 100000")  # docker --cpus 1.5
    assert cgroup_quota(limited) == 1.5
    assert usable_cpus(limited) == min(AFFINITY, 2)
    single = _v2(tmp_path / "b", "50000 100000")  # half a CPU still gets one thread
    assert usable_cpus(single) == 1
    unlimited = _v2(tmp_path / "c", "max 100000")
    assert cgroup_quota(unlimited) is None and usable_cpus(unlimited) == AFFINITY


def test_a_cgroup_v1_quota_caps_the_affinity_and_minus_one_is_none(tmp_path):
    assert cgroup_quota(_v1(tmp_path / "a", 100000, 100000)) == 1.0
    assert usable_cpus(tmp_path / "a") == 1
    assert cgroup_quota(_v1(tmp_path / "b", -1, 100000)) is None
    assert usable_cpus(tmp_path / "b") == AFFINITY


def test_no_cgroup_files_leave_the_affinity(tmp_path):
    assert cgroup_quota(tmp_path) is None
    assert usable_cpus(tmp_path) == AFFINITY
    assert 1 <= usable_cpus() <= AFFINITY  # this machine, whatever its cgroup says


def test_a_process_pinned_to_one_cpu_sizes_its_embedder_for_one(tmp_path):
    """Real affinity, not a fake file: a child pinned to one CPU sees one, and the index's
    ONNX embedder (when the model is exported) runs one stream there."""
    code = textwrap.dedent(
        """
        import os
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        from pipeline.config import EmbeddingSettings
        from pipeline.cpu import usable_cpus
        from pipeline.vectors.embed_onnx import OnnxEmbedder, index_embedder
        embedder = index_embedder(EmbeddingSettings())
        threads = embedder.streams
        print(usable_cpus(), isinstance(embedder, OnnxEmbedder), threads)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    cpus, onnx, threads = done.stdout.split()
    assert cpus == "1"
    if onnx == "True":  # exported on this machine (setup's index does it)
        assert threads == "1"


def test_the_meter_reads_a_busy_process_an_idle_one_and_a_gone_one():
    """Real processes: a busy loop uses about a core, a sleeping process none, and a process
    that exited reads as none (the worker then runs every stream)."""
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        meters = {"busy": CpuMeter(busy.pid, interval=0.2), "idle": CpuMeter(idle.pid, 0.2)}
        assert meters["busy"].cores() == 0.0  # nothing measured yet
        time.sleep(1.0)
        cores = {name: meter.cores() for name, meter in meters.items()}
        assert cores["busy"] > 0.5, cores
        assert cores["idle"] < 0.1, cores
        assert meters["busy"].cores() == cores["busy"]  # read again within the interval
    finally:
        busy.kill()
        idle.kill()
        busy.wait()
        idle.wait()
    time.sleep(0.3)
    assert meters["busy"].cores() == 0.0
