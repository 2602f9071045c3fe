"""Scale: how a full offline index grows with the corpus (2k, 10k, 40k documents).

    python benchmarks/scale.py [--sizes 2000 10000 40000] [--work DIR] [--keep]
    python benchmarks/scale.py --sizes 300 600        # a quick check
    python benchmarks/scale.py --sizes 40000 --work DIR --nightly-only   # on a kept index

For each size a corpus is written (see `write_corpus`) and indexed by `docgraph index`
(`python -m app.cli index`) in a child process into a fresh output folder. Measured:

- wall time of the whole command (model load, Dagster start-up and publish included), and
  its CPU time (user + sys of the command and its descendants);
- peak RSS: a sampler thread reads VmRSS from /proc/<pid>/status of the command and every
  descendant every 50 ms; reported are the largest single process and the largest sum over
  the tree at one sample;
- output size: disk blocks of the current version folder plus the cache folder (each inode
  counted once, like du: versions share files as hard links);
- rows of documents, text_units and entities from the Parquet footers (`<name>.parquet` or a
  folder of shards `<name>/*.parquet`);
- three incremental runs, the same command again on the same output folder after each
  change (a nightly run's): one file gets a sentence appended; 100 new documents are added
  (the next ones of the corpus); one document is deleted. Wall time, CPU time, peak RSS and
  the per-stage table of each.

Corpus: the MuSiQue passages first (as benchmarks/throughput.py writes them), then seeded
variations of them: sentences of 2-4 passages mixed and shuffled, titles and names swapped
between passages and sometimes recombined into new names, so every document's text is
distinct (no chunk or embedding cache hit makes a copy free) and the entity vocabulary keeps
growing. Document i is the same at every size (a 2k corpus is the first 2k documents of the
10k one). Files go 100 to a folder, as in a document store.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ui_launch import repo_instance_config  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
MUSIQUE = SHARED / "musique" / "musique_train_corpus.json"
PER_FOLDER = 100
SEED = 20240611
TABLES = ("documents", "text_units", "entities")
EDIT_SENTENCE = "\nThe scale benchmark appended this sentence to measure an incremental run."
ADDED = 100  # documents added by the second incremental run
# the incremental runs after the full index, in order, and what each does
INCREMENTAL = {"edit": "one-file edit", "add": f"{ADDED} documents added", "delete": "one deleted"}

# ------------------------------------------------------------------------------ corpus

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
# capitalised runs like "University of Copenhagen" or "Jan Philip Solovej"
_NAME = re.compile(r"\b[A-Z][\w'\-]+(?:\s+(?:of|the|de|van|von|and)?\s*[A-Z][\w'\-]+)+")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if len(s.strip()) > 20]


class CorpusMaker:
    """Document i of the benchmark corpus, deterministically (seeded by i)."""

    def __init__(self, passages: list[dict]):
        self.passages = passages
        self.sentences = [_sentences(p["text"]) or [p["text"]] for p in passages]
        names = {p["title"] for p in passages if 2 <= len(p["title"]) <= 60}
        for p in passages:
            names.update(m.group(0) for m in _NAME.finditer(p["text"]))
        self.names = sorted(n for n in names if 2 <= len(n) <= 60)
        self.seen: set[str] = set()
        self.n_real = len(passages)

    def _new_name(self, rng: random.Random) -> str:
        """An existing name, or (one time in three) one recombined from two names' words."""
        first = rng.choice(self.names)
        if rng.random() < 2 / 3:
            return first
        second = rng.choice(self.names).split()
        head = first.split()
        return " ".join(head[: max(1, len(head) // 2)] + second[len(second) // 2 :])

    def _synthetic(self, i: int, attempt: int) -> tuple[str, str]:
        rng = random.Random(f"{SEED}:{i}:{attempt}")
        sources = rng.sample(range(len(self.passages)), rng.randint(2, 4))
        picked: list[str] = []
        for k, src in enumerate(sources):
            sents = self.sentences[src]
            take = len(sents) if k == 0 else rng.randint(1, 2)
            picked.extend(rng.sample(sents, min(take, len(sents))))
        rng.shuffle(picked)
        text = " ".join(picked)
        # the sources' titles become other names (one consistent swap per document)
        swaps = {self.passages[s]["title"]: self._new_name(rng) for s in sources}
        # and a few other names in the text too
        found = sorted({m.group(0) for m in _NAME.finditer(text)} - set(swaps))
        for name in rng.sample(found, min(len(found), rng.randint(1, 3))):
            swaps[name] = self._new_name(rng)
        for old in sorted(swaps, key=len, reverse=True):
            if len(old) > 2:
                text = re.sub(rf"\b{re.escape(old)}\b", swaps[old], text)
        title = swaps[self.passages[sources[0]]["title"]]
        return title, text

    def document(self, i: int) -> str:
        """Title line + text; the text differs from every earlier document's (call in order)."""
        if i < self.n_real:
            title, text = self.passages[i]["title"], self.passages[i]["text"]
            if text in self.seen:  # the real passages may repeat one another
                text += f" (Document {i}.)"
        else:
            attempt = 0
            title, text = self._synthetic(i, attempt)
            while text in self.seen:
                attempt += 1
                title, text = self._synthetic(i, attempt)
        self.seen.add(text)
        return title + "\n" + text


def doc_path(root: Path, i: int) -> Path:
    return root / f"d{i // PER_FOLDER:04d}" / f"{i:06d}.txt"


def write_corpus(target: Path, size: int, real: int | None = None, start: int = 0) -> None:
    """Documents start..size-1 under `target`, PER_FOLDER to a sub-folder; all texts
    distinct (documents before `start` are made, not written: each depends on those before).
    The first `real` (default: all) MuSiQue passages are written as they are."""
    passages = json.loads(MUSIQUE.read_text())
    maker = CorpusMaker(passages)
    maker.n_real = len(passages) if real is None else min(real, len(passages))
    for i in range(size):
        text = maker.document(i)
        if i < start:
            continue
        path = doc_path(target, i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# ------------------------------------------------------------------------------ memory


# Whether the kernel lists each thread's children (CONFIG_PROC_CHILDREN): a few small reads
# per sample. Without it every process's stat is read, 20 times a second: ~5 % of a core,
# which the runs measured on a 2-core machine lost.
_HAS_CHILDREN = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists()


def _children(pid: int) -> list[int]:
    """The child processes of `pid`, from its threads' `children` files."""
    kids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            kids += [int(k) for k in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    except OSError:  # gone, or a thread gone while listed: the next sample sees it
        pass
    return kids


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def _rss_kb(pid: int) -> int:
    """VmRSS of `pid` in KB, from `statm` (one line: `status` is ~50 to parse)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE_KB
    except (OSError, IndexError, ValueError):
        return 0  # gone


def _command(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [Path(argv[0].decode(errors="replace")).name]
    words += [a.decode(errors="replace") for a in argv[1:3] if a]
    return " ".join(words)[:60]


class TreeRssSampler(threading.Thread):
    """Every `interval` s: VmRSS of `root` and all its descendants. Keeps the largest single
    process, the largest sum over the tree, and the command of every process seen."""

    def __init__(self, root: int, interval: float = 0.05):
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.max_one_kb = self.max_tree_kb = 0
        self.commands: dict[int, str] = {}  # pid -> its command, shortened
        # (wall clock, KB of the largest process that runs steps: the root, or a step's own
        # process under the multiprocess executor; the embedding worker left out)
        self.timeline: list[tuple[float, int]] = []
        self.peak_kb: dict[int, int] = {}  # pid -> its largest RSS
        self._halt = threading.Event()

    def sample(self) -> None:
        kids = None if _HAS_CHILDREN else _children_map()
        tree, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo.extend(_children(pid) if kids is None else kids.get(pid, ()))
        rss = [_rss_kb(pid) for pid in tree]
        for pid, kb in zip(tree, rss, strict=True):
            if kb and pid not in self.commands:
                self.commands[pid] = _command(pid)
            self.peak_kb[pid] = max(self.peak_kb.get(pid, 0), kb)
        self.max_one_kb = max(self.max_one_kb, *rss)
        steps = [kb for pid, kb in zip(tree, rss, strict=True) if not self._worker(pid)]
        self.timeline.append((time.time(), max(steps, default=0)))
        self.max_tree_kb = max(self.max_tree_kb, sum(rss))

    def _worker(self, pid: int) -> bool:
        return "embed_worker" in self.commands.get(pid, "")

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


# ------------------------------------------------------------------------------ index


def run_index(inp: Path, out: Path, log: Path) -> dict:
    """`docgraph index` in a child process: wall s, peak RSS (one process, tree) in MB."""
    cmd = [sys.executable, "-m", "app.cli", "index", "--input", str(inp)]
    cmd += ["--output", str(out), "--log-level", "WARNING"]
    env = dict(os.environ)
    # an instance of its own (not the user's), to read the run's step times from: the repo's
    # storage classes (its event log keeps its engines: resources/event_log_storage.py) in the
    # folders `storage: sqlite:` lays out under a home, and no stdout capture (no extra
    # processes)
    home = log.parent / "dagster_home"
    home.mkdir(exist_ok=True)
    repo = repo_instance_config(home)
    folders = {"run_storage": "history", "event_log_storage": "history/runs"}
    folders["schedule_storage"] = "schedules"
    config = {
        key: {**repo[key], "config": {"base_dir": str(home / sub)}} for key, sub in folders.items()
    }
    config["compute_logs"] = {
        "module": "dagster._core.storage.noop_compute_log_manager",
        "class": "NoOpComputeLogManager",
    }
    config["telemetry"] = {"enabled": False}
    (home / "dagster.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env["DAGSTER_HOME"] = str(home)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
        sampler = TreeRssSampler(proc.pid)
        sampler.start()
        rc = proc.wait()
        wall = time.perf_counter() - started
        sampler.stop()
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise SystemExit(f"docgraph index exited {rc} (log {log}):\n{tail}")
    return {
        "wall_s": wall,
        # user + sys of the command and the descendants it waited for: less sensitive than
        # wall time to other load on a shared machine
        "cpu_s": (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime),
        "one_mb": sampler.max_one_kb / 1024,
        "tree_mb": sampler.max_tree_kb / 1024,
        "peaks": ", ".join(
            f"{sampler.commands.get(pid, '?')} {kb / 1024:,.0f} MB"
            for pid, kb in sorted(sampler.peak_kb.items(), key=lambda kv: -kv[1])
            if kb
        ),
        "stages": stage_profile(home, sampler.timeline),
    }


def stage_profile(home: Path, timeline: list[tuple[float, int]]) -> dict[str, tuple[float, float]]:
    """Step key -> (wall s, peak RSS MB of the index process while it ran: the process that
    runs the steps, not the embedding worker) of the latest run in the instance at `home`;
    asset checks left out."""
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef

    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        run = instance.get_runs(limit=1)[0]
        stats = instance.get_run_step_stats(run.run_id)
    out = {}
    for st in sorted(stats, key=lambda st: st.start_time or 0):
        if st.start_time is None or st.end_time is None or st.step_key.endswith("_integrity"):
            continue
        kb = [k for t, k in timeline if st.start_time <= t <= st.end_time]
        out[st.step_key] = (st.end_time - st.start_time, max(kb, default=0) / 1024)
    return out


def current_version(out: Path) -> Path:
    manifest = out / "index.json"
    if manifest.exists():
        return out / "versions" / json.loads(manifest.read_text())["version"]
    return out


def table_rows(folder: Path, name: str) -> int:
    """Rows of table `name`: `<name>.parquet`, or the shards `<name>/*.parquet`."""
    single = folder / f"{name}.parquet"
    if single.exists():
        return pq.ParquetFile(single).metadata.num_rows
    return sum(
        pq.ParquetFile(p).metadata.num_rows for p in sorted(folder.glob(f"{name}/*.parquet"))
    )


def disk_bytes(*folders: Path) -> int:
    """Allocated bytes under `folders`, each inode once (hard links shared across versions)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder in folders:
        if not folder.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(folder):
            for name in dirnames + filenames:
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


def bench(size: int, work: Path, real: int | None = None, nightly_only: bool = False) -> dict:
    base = work / f"n{size}"
    inp, out, log = base / "input", base / "output", base / "index.log"
    if nightly_only:  # the corpus and index an earlier --keep run left
        if current_version(out) is None:
            raise SystemExit(f"--nightly-only: no index kept in {out}")
        write_s, full = 0.0, None
        # an edit first, not measured: the kept index may come from another docgraph, whose
        # sidecars (and whatever else it made otherwise) this one's first run makes again; a
        # run of an unchanged input would find the index up to date and run nothing
        present = sorted(int(p.stem) for p in inp.glob("*/*.txt"))
        with doc_path(inp, present[len(present) // 4]).open("a") as fh:
            fh.write(EDIT_SENTENCE)
        run_index(inp, out, log)
    else:
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        t0 = time.perf_counter()
        write_corpus(inp, size, real)
        write_s = time.perf_counter() - t0
        full = run_index(inp, out, log)
    version = current_version(out)
    rows = {name: table_rows(version, name) for name in TABLES}
    out_mb = disk_bytes(version, out / "cache") / 2**20

    # the nightly runs: one file edited, ADDED new files, one file deleted (each a run)
    present = sorted(int(p.stem) for p in inp.glob("*/*.txt"))
    edited = doc_path(inp, present[len(present) // 2])
    with edited.open("a") as fh:
        fh.write(EDIT_SENTENCE)
    edit = run_index(inp, out, log)
    write_corpus(inp, present[-1] + 1 + ADDED, real, start=present[-1] + 1)
    added = run_index(inp, out, log)
    doc_path(inp, present[len(present) // 3]).unlink()
    deleted = run_index(inp, out, log)
    after = current_version(out)
    rows_after = {name: table_rows(after, name) for name in TABLES}
    return {
        "size": size,
        "write_s": write_s,
        **rows,
        "full": full,
        "out_mb": out_mb,
        "edit": edit,
        "add": added,
        "delete": deleted,
        "rows_after": rows_after,
        "log": log,
    }


# ------------------------------------------------------------------------------ report

COLUMNS = (
    "docs",
    "text units",
    "entities",
    "wall s",
    "CPU s",
    "peak RSS one process MB",
    "tree RSS MB",
    "output MB",
    "one-file edit wall s",
    f"add {ADDED} wall s",
    "delete one wall s",
    "incremental peak MB",
)


def _cells(r: dict) -> list[float]:
    return [
        r["documents"],
        r["text_units"],
        r["entities"],
        *(
            (math.nan,) * 4
            if r["full"] is None  # --nightly-only
            else (r["full"][k] for k in ("wall_s", "cpu_s", "one_mb", "tree_mb"))
        ),
        r["out_mb"],
        r["edit"]["wall_s"],
        r["add"]["wall_s"],
        r["delete"]["wall_s"],
        max(r[run]["one_mb"] for run in INCREMENTAL),
    ]


def _fmt(x: float) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:,.1f}"


def table(results: list[dict]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---:" for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(_fmt(c) for c in _cells(r)) + " |" for r in results]
    if len(results) > 1:
        lines += ["", "Growth between consecutive sizes (ratio of each column):", ""]
        lines += [lines[0], lines[1]]
        for a, b in zip(results, results[1:], strict=False):
            ratios = [
                f"{y / x:.2f}x" if x else "-" for x, y in zip(_cells(a), _cells(b), strict=True)
            ]
            ratios[0] = f"{a['size']:,} -> {b['size']:,}"
            lines.append("| " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def stage_table(results: list[dict], run: str = "full") -> str:
    """Per stage of `run` (full, edit, add, delete): wall s and the index process's peak MB
    at each size."""
    steps = list(dict.fromkeys(k for r in results for k in r[run]["stages"]))
    head = ["stage"] + [f"{r['size']:,} docs: s / index process peak MB" for r in results]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * len(results)]
    for step in steps:
        cells = []
        for r in results:
            wall, mb = r[run]["stages"].get(step, (float("nan"), float("nan")))
            cells.append(f"{wall:,.1f} / {mb:,.0f}")
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# The per-document (partitioned) stages: they run per shard, so they scale out over workers.
SHARD_STAGES = ("documents", "document_structure", "chunks", "extracted_graph", "chunk_embeddings")
TARGETS = (1_000_000, 10_000_000)  # text units (chunks) to project to


def projection(results: list[dict], run: str = "full") -> str:
    """Arithmetic on the two largest measured sizes, nothing assumed: every stage's wall
    time and peak RSS in `run` (full, edit, add, delete) fitted as a * chunks^p,
    extrapolated to TARGETS chunks.

    A per-shard stage's time spreads over workers (divide by W); a corpus-wide stage runs
    in one process, so its time and memory are what one node must hold."""
    a, b = sorted(results, key=lambda r: r["text_units"])[-2:]
    na, nb = a["text_units"], b["text_units"]
    head = ["stage", "kind", "p (time)", "p (memory)"]
    head += [f"{t / 1e6:g}M chunks: s / peak GB" for t in TARGETS]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---:|---:|" + "---:|" * len(TARGETS)]
    for step, (tb, mb) in b[run]["stages"].items():
        ta, ma = a[run]["stages"].get(step, (0.0, 0.0))
        if min(ta, tb) < 0.5 or min(ma, mb) <= 0:  # too short to fit an exponent
            continue
        pt = math.log(tb / ta) / math.log(nb / na)
        pm = math.log(mb / ma) / math.log(nb / na)
        cells = [f"{tb * (n / nb) ** pt:,.0f} / {mb * (n / nb) ** pm / 1024:,.1f}" for n in TARGETS]
        kind = "per shard" if step in SHARD_STAGES else "corpus-wide"
        lines.append(f"| {step} | {kind} | {pt:.2f} | {pm:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sizes", nargs="+", type=int, default=[2000, 10000, 40000])
    parser.add_argument("--work", default=None, help="scratch folder (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep corpora and outputs")
    parser.add_argument(
        "--real",
        type=int,
        default=None,
        metavar="N",
        help="write only the first N MuSiQue passages as they are, the rest generated "
        "(default: all 1,890; --real 0 makes a small run all generated documents)",
    )
    parser.add_argument(
        "--nightly-only",
        action="store_true",
        help="no full index: the three nightly runs on the corpus and index an earlier "
        "--keep run left in --work (after one unmeasured edit run)",
    )
    args = parser.parse_args()
    if args.nightly_only and not args.work:
        raise SystemExit("--nightly-only needs --work: the folder a --keep run left")
    if not MUSIQUE.is_file():
        raise SystemExit(f"the scale benchmark needs {MUSIQUE}")
    if any(n < 2 for n in args.sizes):
        raise SystemExit("--sizes: each size must be at least 2 documents")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="docgraph-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"scratch folder: {work}", flush=True)
    results = []
    try:
        for size in sorted(args.sizes):
            r = bench(size, work, args.real, args.nightly_only)
            results.append(r)
            f = r["full"] or {"wall_s": math.nan, "cpu_s": math.nan, "peaks": "not run"}
            runs = "; ".join(
                f"{run} run {r[run]['wall_s']:.1f} s ({r[run]['cpu_s']:.1f} CPU s, peaks "
                f"{r[run]['peaks']})"
                for run in INCREMENTAL
            )
            print(
                f"{size:,} docs: corpus {r['write_s']:.1f} s; index {f['wall_s']:.1f} s "
                f"({f['cpu_s']:.1f} CPU s, peak RSS per process: {f['peaks']}); {runs}; "
                f"rows after them {r['rows_after']}",
                flush=True,
            )
    finally:
        if not args.keep and not args.nightly_only:
            for size in args.sizes:
                shutil.rmtree(work / f"n{size}", ignore_errors=True)
            if not args.work:
                shutil.rmtree(work, ignore_errors=True)
    print()
    print(table(results))
    if not args.nightly_only:
        print("\nPer stage of the full run (asset checks left out):\n")
        print(stage_table(results))
    for run, what in INCREMENTAL.items():
        print(f"\nPer stage of the {what} run:\n")
        print(stage_table(results, run))
    if len(results) > 1:
        if not args.nightly_only:
            print("\nProjection from the two largest sizes (a * chunks^p per stage):\n")
            print(projection(results))
        print("\nThe one-file edit run, projected the same way:\n")
        print(projection(results, "edit"))


if __name__ == "__main__":
    main()
