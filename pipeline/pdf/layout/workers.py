"""The layout model's pages spread over worker processes, one a usable CPU, each running
the model on one thread (on 2 CPUs, 1.7x one process running it on both): a long PDF's
pages are dealt out among them, and the documents step has the PDFs of a run's next shards
read together (`pipeline.pdf.once`), so that many short PDFs use every core too. Workers
are `python -m` processes (not multiprocessing: that re-runs the caller's main script, and
forking would copy the model's ONNX threads); pages a failed worker had are read by the
calling process. Nothing is module state: what was read is returned to the caller."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.cpu import usable_cpus
from pipeline.ids import sha256_hex

if TYPE_CHECKING:  # pymupdf and its layout model load only once a PDF is read (~0.6 s)
    import pymupdf

    from pipeline.pdf.layout.regions import Region

PAGES_PER_WORKER = 24  # fewer pages than this per process: starting one costs more

Pages = list[list["Region"] | None]  # regions of each page of a PDF; None: not read


def worker_count(n_pages: int, most: int = 0) -> int:
    """Processes for `n_pages`: one a usable CPU (at most `most`, if set), at least
    PAGES_PER_WORKER pages each."""
    cpus = min(usable_cpus(), most) if most else usable_cpus()
    return max(1, min(cpus, n_pages // PAGES_PER_WORKER))


def _run(jobs: list[list[tuple[str, list[int]]]]) -> list[list[tuple[str, Pages]] | None]:
    """For each worker's jobs (a PDF file, pages of it): per job, the file's sha256 and its
    pages' regions; None for a worker that failed."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="docgraph-pdf-") as tmp:
        procs = []
        for i, mine in enumerate(jobs):
            spec, out = Path(tmp) / f"{i}.jobs", Path(tmp) / f"{i}.out"
            spec.write_bytes(pickle.dumps(mine))
            proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(spec), str(out)],
                env={**os.environ, "PYTHONPATH": path},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            procs.append((proc, out))
        results: list[list[tuple[str, Pages]] | None] = []
        for proc, out in procs:
            proc.communicate()
            ok = proc.returncode == 0 and out.exists()
            results.append(pickle.loads(out.read_bytes()) if ok else None)
    return results


def read_pages(pdfs: list[tuple[str, int]], n: int) -> list[tuple[str, Pages] | None]:
    """For each PDF (file, page count): its sha256 and its regions by page, the pages read by
    `n` workers, every n-th page (counted across the PDFs) to one, so that dense chapters
    are shared. None for a PDF whose file changed while it was read."""
    flat = [(i, p) for i, (_, count) in enumerate(pdfs) for p in range(count)]
    dealt: list[dict[int, list[int]]] = []
    for w in range(n):
        mine: dict[int, list[int]] = {}
        for i, p in flat[w::n]:
            mine.setdefault(i, []).append(p)
        dealt.append(mine)
    got = _run([[(pdfs[i][0], pages) for i, pages in mine.items()] for mine in dealt])
    shas: list[set[str]] = [set() for _ in pdfs]
    pages: list[Pages] = [[None] * count for _, count in pdfs]
    for mine, results in zip(dealt, got, strict=True):
        for (i, pnos), (sha, regions) in zip(mine.items(), results or [], strict=False):
            shas[i].add(sha)
            for pno, rs in zip(pnos, regions, strict=True):
                pages[i][pno] = rs
    return [(next(iter(s)), ps) if len(s) == 1 else None for s, ps in zip(shas, pages, strict=True)]


def layout_regions(
    pdf: pymupdf.Document, data: bytes | None, workers: int = 0, ahead: Pages | None = None
) -> list[list[Region]]:
    """Regions of every page of `pdf` (whose bytes are `data`, if given), in reading order:
    `ahead` (read by worker processes before: `pipeline.pdf.once`), else by worker
    processes (at most `workers`, 0: one a CPU) when the PDF is long enough and its bytes
    are here, else here; pages no worker read are read here."""
    from pipeline.pdf.layout.regions import finish, regions_in_process

    count = pdf.page_count
    got = ahead
    n = worker_count(count, workers)
    if got is None and data is not None and n > 1:
        with tempfile.TemporaryDirectory(prefix="docgraph-pdf-") as tmp:
            (Path(tmp) / "doc.pdf").write_bytes(data)
            read = read_pages([(str(Path(tmp) / "doc.pdf"), count)], n)[0]
        got = read[1] if read else None
    pages = list(got) if got is not None and len(got) == count else [None] * count
    missing = [pno for pno, rs in enumerate(pages) if rs is None]
    for pno, rs in zip(missing, regions_in_process(pdf, missing), strict=True):
        pages[pno] = rs
    return finish(pdf, pages)  # type: ignore[arg-type]


if __name__ == "__main__":  # a worker: python -m pipeline.pdf.layout.workers JOBS OUT
    import pymupdf

    from pipeline.pdf.layout import regions as pdf_regions  # Region pickled under its module's name

    pdf_regions.use_model(threads=1)
    result: list[tuple[str, Pages]] = []
    for file, pnos in pickle.loads(Path(sys.argv[1]).read_bytes()):
        data = Path(file).read_bytes()
        with pymupdf.open(stream=data, filetype="pdf") as doc:
            result.append((sha256_hex(data), pdf_regions.regions_in_process(doc, pnos)))
    Path(sys.argv[2]).write_bytes(pickle.dumps(result))
