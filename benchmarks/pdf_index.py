"""Whole-index time of PDF corpora on each PDF path, in one run: the heuristic path (the
baseline), the layout model in the index process (`structure.pdf_workers: 1`), and the
layout model over worker processes (the default). Two corpora built from the shared PDFs
(../shared/data/pdfs and pdf-layout, 44 pages): `long`, one PDF of them all 7 times
(308 pages), and `many`, each of them 5 times with its metadata changed (45 files,
220 pages). Every run is `docgraph index` in a process of its own, into a new folder.

    python benchmarks/pdf_index.py [--work DIR] [--corpora long,many]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pymupdf

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
RUNS = {  # name -> settings as environment variables
    "heuristic": {"DOCGRAPH_STRUCTURE__PDF_STRUCTURE": "heuristic"},
    "layout, 1 process": {"DOCGRAPH_STRUCTURE__PDF_WORKERS": "1"},
    "layout, workers": {},
}


def shared_pdfs() -> list[Path]:
    found = sorted((DATA / "pdfs").glob("*.pdf")) + sorted((DATA / "pdf-layout").glob("*.pdf"))
    if not found:
        sys.exit(f"no PDFs under {DATA}: the shared data folder is needed")
    return found


def build(corpus: str, folder: Path) -> int:
    """Write the corpus into `folder`; its page count."""
    folder.mkdir(parents=True, exist_ok=True)
    pages = 0
    if corpus == "long":
        one = pymupdf.open()
        for path in shared_pdfs():
            with pymupdf.open(path) as pdf:
                one.insert_pdf(pdf)
        out = pymupdf.open()
        for _ in range(7):
            out.insert_pdf(one)
        out.save(folder / "long.pdf")
        return out.page_count
    for copy in range(5):
        for path in shared_pdfs():
            with pymupdf.open(path) as pdf:
                pdf.set_metadata({**(pdf.metadata or {}), "subject": f"copy {copy}"})
                pdf.save(folder / f"v{copy}_{path.name}")
                pages += pdf.page_count
    return pages


def index(inp: Path, out: Path, env: dict[str, str], code: Path = ROOT) -> float:
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "app.cli", "index", "--input", str(inp), "--output", str(out)]
    env = {**os.environ, **env, "PYTHONPATH": str(code)}
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr[-4000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--corpora", default="long,many")
    parser.add_argument("--before", default=None, help="git revision to time as well")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="docgraph-pdf-index-"))
    runs = {name: (env, ROOT) for name, env in RUNS.items()}
    before = work / "before"
    if args.before:
        shutil.rmtree(before, ignore_errors=True)
        git = ["git", "-C", str(ROOT), "worktree"]
        subprocess.run([*git, "add", "--detach", str(before), args.before], check=True)
        runs[f"before ({args.before})"] = ({}, before)
    try:
        report(work, args.corpora.split(","), runs)
    finally:
        if args.before:
            subprocess.run([*git, "remove", "--force", str(before)], check=True)


def report(work: Path, corpora: list[str], runs: dict[str, tuple[dict[str, str], Path]]) -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{cpus} CPUs; work folder {work}")
    ratios = ["heuristic"] + [name for name in runs if name.startswith("before")]
    head = " | ".join([*runs, *(f"workers vs {name}" for name in ratios)])
    print(f"| corpus | files | pages | {head} |")
    print("|---|---:|---:|" + "---:|" * (len(runs) + len(ratios)))
    for corpus in corpora:
        inp = work / corpus / "input"
        shutil.rmtree(inp, ignore_errors=True)
        pages = build(corpus, inp)
        out = work / corpus / "out"
        secs = {name: index(inp, out, env, code) for name, (env, code) in runs.items()}
        cells = [f"{s:.1f} s" for s in secs.values()]
        cells += [f"{secs['layout, workers'] / secs[name]:.2f}x" for name in ratios]
        print(f"| {corpus} | {len(list(inp.iterdir()))} | {pages} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
