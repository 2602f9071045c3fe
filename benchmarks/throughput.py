"""Indexing throughput: per-stage wall time and peak memory, and the whole index time
against its floor — embedding the same text units alone with the embedder the index runs
(the model's ONNX export, made first if it is not yet, as the index's worker does), already
loaded, and again in a new worker process that loads it first (as the index does);
for reference, also with sentence-transformers (torch).

    python benchmarks/throughput.py [--corpus musique christmas_carol] [--work DIR] [--repeat N]

Each corpus is indexed into a fresh folder (empty embedding cache) by the real Dagster
asset graph, in a process of its own; a sampler thread reads the process RSS every 20 ms and
each sample is attributed to the step running at that moment (from the run's events).

It also counts CPU time: the index process's and its embedding worker's during the run,
the floor's; their sum over the usable cores is the fastest the index could be with every
core busy from its first second to its last, so the ratio's lower bound for this CPU.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def write_musique(target: Path) -> None:
    corpus = json.loads((SHARED / "musique" / "musique_train_corpus.json").read_text())
    target.mkdir(parents=True)
    for i, passage in enumerate(corpus):
        (target / f"{i:05d}.txt").write_text(passage["title"] + "\n" + passage["text"])


def write_christmas_carol(target: Path) -> None:
    target.mkdir(parents=True)
    shutil.copy(SHARED / "christmas_carol" / "mock_data.txt", target / "christmas_carol.txt")


CORPORA = {"musique": write_musique, "christmas_carol": write_christmas_carol}


class RssSampler(threading.Thread):
    def __init__(self, interval: float = 0.02):
        super().__init__(daemon=True)
        self.interval, self.samples, self._halt = interval, [], threading.Event()

    @staticmethod
    def rss_mb() -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def run(self) -> None:
        while not self._halt.is_set():
            self.samples.append((time.time(), self.rss_mb()))
            time.sleep(self.interval)

    def stop(self) -> list[tuple[float, float]]:
        self._halt.set()
        self.join()
        return self.samples


def step_intervals(instance, run_id: str) -> dict[str, tuple[float, float]]:
    """Step key -> (start, end) wall timestamps from the run's event log."""
    spans: dict[str, list[float]] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or event.step_key is None:
            continue
        span = spans.setdefault(event.step_key, [entry.timestamp, entry.timestamp])
        if event.event_type_value == "STEP_START":
            span[0] = entry.timestamp
        elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE"):
            span[1] = entry.timestamp
    return {k: (v[0], v[1]) for k, v in spans.items()}


def cpu_seconds() -> float:
    """This process's CPU time, every thread's."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def children_cpu_seconds() -> float:
    """CPU time of this process's live child processes (the index's embedding worker)."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:  # gone meanwhile
            continue
        total += times.user + times.system
    return total


def bench(name: str, work: Path) -> dict:
    from dagster import DagsterInstance

    from app.run import run_index
    from pipeline.config import load_settings
    from pipeline.cpu import usable_cpus
    from pipeline.storage import store
    from pipeline.vectors.embed import Embedder, get_embedder
    from pipeline.vectors.embed_onnx import index_embedder
    from pipeline.vectors.embed_worker import EmbeddingWorker

    inp, out = work / name / "input", work / name / "output"
    shutil.rmtree(work / name, ignore_errors=True)
    CORPORA[name](inp)
    # Load the model first so neither measurement includes it twice; the index still
    # embeds everything itself (its cache folder is new).
    settings = load_settings().embedding
    embedder = index_embedder(settings, export=True)
    embedder.embed(["warm up"])

    sampler = RssSampler()
    sampler.start()
    started, cpu_before, worker_before = time.time(), cpu_seconds(), children_cpu_seconds()
    instance = DagsterInstance.ephemeral()
    result = run_index(input_dir=str(inp), output_dir=str(out), instance=instance)
    total = time.time() - started
    index_cpu = cpu_seconds() - cpu_before
    worker_cpu = children_cpu_seconds() - worker_before  # before the cold floor's worker
    samples = sampler.stop()
    assert result.success

    stages = []
    spans = step_intervals(instance, result.run_id)
    for step, (t0, t1) in sorted(spans.items(), key=lambda kv: kv[1][0]):
        peak = max((mb for ts, mb in samples if t0 <= ts <= t1), default=float("nan"))
        stages.append((step, t1 - t0, peak))

    texts = store.read_table(out, "text_units")["text"].to_list()
    t0, cpu0 = time.perf_counter(), cpu_seconds()
    embedder.embed(texts)
    floor, floor_cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
    torch_floor = None
    if not isinstance(embedder, Embedder):
        torch_embedder = get_embedder(settings)
        torch_embedder.embed(["warm up"])
        t0 = time.perf_counter()
        torch_embedder.embed(texts)
        torch_floor = time.perf_counter() - t0
    # as the index pays it: a new worker process loads the model first
    worker = EmbeddingWorker(settings)
    t0 = time.perf_counter()
    worker.embed(texts)
    cold_floor = time.perf_counter() - t0
    worker.close()
    tokens = int(store.read_table(out, "text_units")["n_tokens"].sum())
    return {
        "corpus": name,
        "documents": store.read_table(out, "documents").height,
        "text_units": len(texts),
        "tokens": tokens,
        "entities": store.read_table(out, "entities").height,
        "relationships": store.read_table(out, "relationships").height,
        "communities": store.read_table(out, "communities").height,
        "stages": stages,
        "total_s": total,
        "floor_s": floor,
        "cold_floor_s": cold_floor,
        "embedder": type(embedder).__name__,
        "torch_floor_s": torch_floor,
        "peak_mb": max(mb for _, mb in samples),
        "index_cpu_s": index_cpu,
        "worker_cpu_s": worker_cpu,
        "floor_cpu_s": floor_cpu,
        "cores": usable_cpus(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--corpus", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    parser.add_argument("--work", default=None, help="scratch folder (default: a temp dir)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="index and measure the floor this many times (a fresh folder each), then print "
        "each run's ratio and their median: on a machine whose speed drifts, one floor "
        "measurement moves the ratio more than most changes do",
    )
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)  # a run's figures
    args = parser.parse_args()
    if not SHARED.is_dir():
        raise SystemExit(f"benchmarks need {SHARED}")
    work = Path(args.work or tempfile.mkdtemp(prefix="docgraph-throughput-"))
    if len(args.corpus) > 1:  # one process per corpus, so peak memory is its own
        for name in args.corpus:
            command = [sys.executable, __file__, "--corpus", name, "--work", str(work)]
            subprocess.run([*command, "--repeat", str(args.repeat)], check=True)
        return

    if args.repeat > 1:  # each run in a process of its own: nothing warm from the last
        ratios = []
        for i in range(args.repeat):
            result = work / f"run{i}.json"
            command = [sys.executable, __file__, "--corpus", *args.corpus, "--work", str(work)]
            subprocess.run([*command, "--result", str(result)], check=True)
            r = json.loads(result.read_text())
            ratios.append(r["total_s"] / r["floor_s"])
            bound = (r["index_cpu_s"] + r["worker_cpu_s"]) / r["cores"] / r["floor_s"]
            print(
                f"run {i + 1}: {r['total_s']:.2f} s / {r['floor_s']:.2f} s = {ratios[-1]:.2f}x "
                f"(CPU: index {r['index_cpu_s']:.1f} + worker {r['worker_cpu_s']:.1f} CPU-s, "
                f"at best {bound:.2f}x)"
            )
        print(f"median ratio of {args.repeat} runs: {statistics.median(ratios):.2f}x")
        return

    for name in args.corpus:
        r = bench(name, work)
        if args.result:
            Path(args.result).write_text(json.dumps(r))
        print(
            f"\n## {r['corpus']}: {r['documents']} documents, {r['text_units']} text units, "
            f"{r['tokens']} tokens -> {r['entities']} entities, {r['relationships']} "
            f"relationships, {r['communities']} communities"
        )
        print(f"| {'stage':<32} | {'wall s':>8} | {'peak RSS MB':>11} |")
        print(f"|{'-' * 34}|{'-' * 10}|{'-' * 13}|")
        for step, secs, peak in r["stages"]:
            print(f"| {step:<32} | {secs:>8.2f} | {peak:>11.0f} |")
        print(f"| {'whole index (wall)':<32} | {r['total_s']:>8.2f} | {r['peak_mb']:>11.0f} |")
        print(f"| {'floor: embed text units alone':<32} | {r['floor_s']:>8.2f} | {'':>11} |")
        print(f"| {'  the same, model load included':<32} | {r['cold_floor_s']:>8.2f} | {'':>11} |")
        if r["torch_floor_s"] is not None:
            label = "  with torch (model loaded)"
            print(f"| {label:<32} | {r['torch_floor_s']:>8.2f} | {'':>11} |")
        print(f"embedder: {r['embedder']}")
        print(
            f"ratio whole index / floor: {r['total_s'] / r['floor_s']:.2f}x (target <= 1.3x); "
            f"with the model's load in both: {r['total_s'] / r['cold_floor_s']:.2f}x"
        )
        best = (r["index_cpu_s"] + r["worker_cpu_s"]) / r["cores"]
        print(
            f"CPU: index process {r['index_cpu_s']:.1f} CPU-s, its embedding worker "
            f"{r['worker_cpu_s']:.1f} CPU-s (model load included), floor "
            f"{r['floor_cpu_s']:.1f} CPU-s; on {r['cores']} cores the index takes at least "
            f"{best:.1f} s: ratio >= {best / r['floor_s']:.2f}x with every core busy throughout"
        )


if __name__ == "__main__":
    main()
