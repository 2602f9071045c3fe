"""Load on the query page's endpoints (issue 48): concurrent clients ask, open a cited PDF
page and an entity, as the page does; p50 / p95 per endpoint against /health in the same run.

    python benchmarks/page_load.py                       # the sample corpus + a 2-page PDF
    python benchmarks/page_load.py --input DIR --output DIR [--clients 8] [--questions 25]

`docgraph serve` runs in its own process on 127.0.0.1. Each client (one kept-alive
connection) goes through the questions in its own order; per question it calls what a
person's click would: POST /query/<mode> (modes round-robin), GET /page/<doc>/<n>.png of a
cited PDF page (the first PDF document's page 1 when none is cited), GET /entity/<id> of the
result's first entity, and GET /health (the baseline: no search, no table read). Any status
but 200 is an error. Page rendering is also timed in this process, uncached (a fresh cache
per call) and cached.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUESTIONS = [
    "Who directed the Cavendish Laboratory?",
    "Who worked with Ernest Rutherford?",
    "Who attended the Solvay Conference in Brussels?",
    "What did Marie Curie discover?",
    "Where did Niels Bohr found his institute?",
    "Who split the atom in 1917?",
    "Which prizes did Marie Curie win?",
    "What is the gold foil experiment?",
    "Who was Albert Einstein?",
    "What did Werner Heisenberg work on in Copenhagen?",
    "Who founded the Solvay Conferences?",
    "Where was Ernest Rutherford born?",
    "What is the Nobel Prize in Physics?",
    "Who taught Niels Bohr?",
    "Which laureates knew one another?",
    "What happened at the University of Manchester?",
    "Who succeeded J. J. Thomson?",
    "What did Albert Einstein receive the Nobel Prize for?",
    "Who was Irène Joliot-Curie?",
    "What is radioactivity?",
    "Who brought Albert Einstein to Berlin?",
    "What was discussed at the 1927 Solvay Conference?",
    "Where is the Institute for Theoretical Physics?",
    "Who was Max Planck?",
    "What did Frederick Soddy show with Rutherford?",
]
MODES = ["local", "naive", "flow", "expand", "global"]


def build_sample(root: Path) -> tuple[Path, Path]:
    """The sample corpus plus the tests' two-page PDF, indexed into `root`."""
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import write_report_pdf

    from app.cli.demo import write_sample_corpus
    from app.run import run_index

    inp, out = root / "input", root / "output"
    write_sample_corpus(inp)
    write_report_pdf(inp / "laboratories.pdf")
    assert run_index(input_dir=str(inp), output_dir=str(out), log_level="ERROR").success
    return inp, out


def start_server(inp: Path, out: Path, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "app.cli", "serve", "--input", str(inp), "--output", str(out)]
    server = subprocess.Popen([*cmd, "--port", str(port)], cwd=ROOT, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        assert server.poll() is None, "docgraph serve exited"
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return server
        except OSError:
            pass
        assert time.monotonic() < deadline, "docgraph serve did not start"
        time.sleep(0.2)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client(port: int, offset: int, n: int, first_pdf: str) -> tuple[dict, int]:
    """One client's latencies (ms) per endpoint, and its errors."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    times: dict[str, list[float]] = {}
    errors = 0

    def call(kind: str, method: str, path: str, body: dict | None = None) -> bytes | None:
        nonlocal errors
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        start = time.perf_counter()
        conn.request(method, path, data, headers)
        resp = conn.getresponse()
        payload = resp.read()
        times.setdefault(kind, []).append((time.perf_counter() - start) * 1000)
        if resp.status != 200:
            errors += 1
            return None
        return payload

    for i in range(n):
        q = (offset + i) % len(QUESTIONS)
        mode = MODES[(offset + i) % len(MODES)]
        raw = call(f"POST /query/{mode}", "POST", f"/query/{mode}", {"query": QUESTIONS[q]})
        result = json.loads(raw) if raw else {"citations": [], "records": []}
        pdf = next(
            (
                (c["document_id"], (c.get("pages") or [1])[0])
                for c in result["citations"]
                if str(c.get("source_path", "")).lower().endswith(".pdf")
            ),
            (first_pdf, 1),
        )
        call("GET /page/<doc>/<n>.png", "GET", f"/page/{pdf[0]}/{pdf[1]}.png")
        entity = next((r["id"] for r in result["records"] if r["kind"] == "entity"), None)
        if entity:
            call("GET /entity/<id>", "GET", f"/entity/{entity}")
        call("GET /health (baseline)", "GET", "/health")
    return times, errors


def render_times(inp: Path, out: Path, reps: int = 20) -> dict[str, list[float]]:
    """In-process page rendering: uncached (a new cache each call) and cached, ms."""
    from app.serve.page_images import PageImages
    from pipeline.config import load_settings
    from pipeline.query import GraphIndex

    index = GraphIndex.open(
        out, load_settings(None, {"output_dir": str(out), "input_dir": str(inp)})
    )
    docs = index.table("documents", ["id", "mime_type", "n_pages"])
    pages = [
        (d, p)
        for d, m, n in docs.iter_rows()
        if m == "application/pdf"
        for p in range(1, (n or 0) + 1)
    ]
    timed: dict[str, list[float]] = {"render (uncached)": [], "render (cached)": []}
    cache = PageImages()
    for i in range(reps):
        doc, page = pages[i % len(pages)]
        start = time.perf_counter()
        PageImages().png(index, doc, page)
        timed["render (uncached)"].append((time.perf_counter() - start) * 1000)
        cache.png(index, doc, page)
        start = time.perf_counter()
        cache.png(index, doc, page)
        timed["render (cached)"].append((time.perf_counter() - start) * 1000)
    return timed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path)
    parser.add_argument("--output", type=Path)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--questions", type=int, default=25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = (args.input, args.output) if args.output else build_sample(Path(tmp))
        from pipeline.query import GraphIndex

        docs = GraphIndex.open(out).table("documents", ["id", "mime_type"])
        first_pdf = next(d for d, m in docs.iter_rows() if m == "application/pdf")
        port = free_port()
        server = start_server(inp, out, port)
        try:
            start = time.perf_counter()
            with ThreadPoolExecutor(args.clients) as pool:
                runs = list(
                    pool.map(
                        lambda c: client(port, c * 3, args.questions, first_pdf),
                        range(args.clients),
                    )
                )
            wall = time.perf_counter() - start
        finally:
            server.terminate()
            server.wait(30)
        timed: dict[str, list[float]] = {}
        for times, _ in runs:
            for kind, values in times.items():
                timed.setdefault(kind, []).extend(values)
        errors = sum(e for _, e in runs)
        timed.update(render_times(inp, out))
    print(f"{args.clients} clients x {args.questions} questions, {wall:.1f} s, {errors} errors")
    print("| endpoint | calls | p50 ms | p95 ms |")
    print("|---|---:|---:|---:|")
    for kind, values in timed.items():
        p50, p95 = statistics.median(values), pct(values, 0.95)
        print(f"| {kind} | {len(values)} | {p50:.1f} | {p95:.1f} |")
    if errors:
        raise SystemExit(f"{errors} requests failed")


if __name__ == "__main__":
    main()
